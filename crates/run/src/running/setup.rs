//! Set-up shared by every mode: pick the Vulkan device (by CUDA's UUID) and
//! the producer, then build the interop objects: shared images, timelines,
//! and the producer that writes into them.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use ash::vk;
use gpu_allocator::MemoryLocation;

use crate::base::inject::Inject;
use crate::base::kernels::{self, SceneKernels};
use crate::base::kinds::ProducerKind;
use crate::base::reload::ReloadLink;
use crate::base::size::Size;
use crate::base::usage::{Field, Message};
use crate::base::userkernel::KernelSpec;
use crate::frames::consumer::Frames;
use crate::frames::gpu::{check_size, drawable_buffer, out_of_memory, unsupported_format, Gpu};
use crate::running::feed::device::FedCudaProducer;
use crate::running::feed::host::FedProducer;
use crate::running::feed::Feed;
use crate::running::producer::cpu::CpuProducer;
use crate::running::producer::cuda::CudaProducer;
use crate::running::producer::staging::StagingProducer;
use crate::running::producer::{Control, Job, Report};
use vkcuda::cuda::{self};
use vkcuda::interop::{check_export, SharedFrames};
use vkcuda::sync::{FramePlan, SyncScheme};
use vkcuda::types::CudaSched;
use vkcuda::vk::device::Device;
use vkcuda::vk::frame::{image_barrier, record_image_barrier};
use vkcuda::vk::memory::Buffer;
use vkcuda::vk::shared_image::SharedImage;
use vkcuda::{Format, FrameDesc, Layout};

/// What a run on an open device is made of: each front end fills it in (the
/// CLI from its arguments, the Python module from a viewer's options and the
/// first frame).
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// Who renders.
    pub producer: ProducerKind,
    /// The synchronization scheme.
    pub sync: SyncScheme,
    /// Shared images (or buffers).
    pub buffers: usize,
    /// The shared frames' format.
    pub format: Format,
    /// The shared frames' layout: CUDA arrays or linear buffers.
    pub layout: Layout,
    /// Frames to render.
    pub frames: u64,
    /// Consumer command buffers in flight.
    pub in_flight: usize,
    /// The producer starts frame g once frame g - 1 is on screen (`--latency low`).
    pub paced: bool,
    /// Where compiled PTX is cached (`None`: the default folder).
    pub ptx_cache: Option<PathBuf>,
    /// How CUDA's host thread waits.
    pub cuda_sched: CudaSched,
    /// Create the CUDA stream with the highest priority.
    pub high_priority_stream: bool,
    /// Each side waits on the host before it submits (a hand-over experiment).
    pub host_waits: bool,
    /// The CUDA producer waits on the host for "released" before it enqueues a
    /// frame (default; `--gpu-waits-only` turns it off).
    pub producer_host_waits: bool,
    /// Your kernel instead of the scene (CUDA producer).
    pub kernel: Option<KernelSpec>,
    /// The viewer's hot reload of that kernel.
    pub reload: Option<ReloadLink>,
    /// Test only: the faults to inject.
    pub inject: Inject,
    /// Frames handed in by the caller instead of rendered (the Python
    /// module): a fed producer takes them from here.
    pub feed: Option<Feed>,
}

/// The interop objects: the core's shared frames (plan, images or buffers,
/// timelines), for a host producer the staging buffers the consumer uploads
/// from, and for buffers too large for the draw pass to read as storage
/// buffers the images the consumer copies each buffer into when it draws.
pub struct Interop {
    /// Plan, shared images and timelines; shared with a host producer's thread.
    pub shared: Arc<SharedFrames>,
    /// CPU and staging producers only: the staging buffers the consumer uploads from.
    pub staging: Option<Arc<Vec<Buffer>>>,
    /// Buffers beyond the device's storage-buffer range only: one image per
    /// shared buffer (Vulkan's own, in `GENERAL`).
    pub views: Option<Arc<Vec<SharedImage>>>,
}

impl Interop {
    /// What the draw pass binds: the shared images, the shared buffers, or
    /// (too large to read as storage buffers) the buffers' view images.
    pub fn frames(&self) -> Frames<'_> {
        match (&self.views, self.shared.desc().layout) {
            (Some(views), _) => Frames::Images(views),
            (None, Layout::Buffer) => Frames::Buffers(self.shared.buffers()),
            (None, Layout::Array) => Frames::Images(self.shared.images()),
        }
    }
}

/// A producer ready to be moved onto its thread.
pub enum Producer {
    /// CUDA kernels.
    Cuda(Box<CudaProducer>),
    /// CPU threads.
    Cpu(CpuProducer),
    /// The staging baseline (CUDA into device memory, copied through the host).
    Staging(Box<StagingProducer>),
    /// Frames the caller hands in (host memory).
    Fed(FedProducer),
    /// Frames the caller hands in (GPU memory).
    FedCuda(Box<FedCudaProducer>),
}

impl Producer {
    /// Short name for logs and summaries.
    pub fn name(&self) -> &'static str {
        match self {
            Producer::Cuda(_) => "cuda",
            Producer::Cpu(_) => "cpu",
            Producer::Staging(_) => "staging",
            Producer::Fed(_) => "fed",
            Producer::FedCuda(_) => "fed-cuda",
        }
    }

    /// Runs the producer on its own thread. On error it marks the run failed,
    /// so the consumer stops waiting for it.
    pub fn spawn(self, job: Job) -> Result<std::thread::JoinHandle<Result<Report>>> {
        let thread = std::thread::Builder::new().name(format!("{} producer", self.name()));
        Ok(thread.spawn(move || {
            // A panic unwinds past the check below: the guard marks the run failed then.
            let _guard = FailOnPanic(job.control.clone());
            let result = match self {
                Producer::Cuda(p) => p.run(&job),
                Producer::Cpu(p) => p.run(&job),
                Producer::Staging(p) => p.run(&job),
                Producer::Fed(p) => p.run(&job),
                Producer::FedCuda(p) => p.run(&job),
            };
            if result.is_err() {
                job.control.fail();
            }
            result
        })?)
    }
}

/// Marks the run failed if its thread unwinds (the consumer then stops waiting at once).
struct FailOnPanic(Arc<Control>);

impl Drop for FailOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.fail();
        }
    }
}

/// The frame a run's shared frames hold: `size`, in the spec's format and layout.
pub fn frame_desc(args: &RunSpec, size: Size) -> FrameDesc {
    let extent = vk::Extent2D { width: size.width, height: size.height };
    FrameDesc::new(extent).format(args.format).layout(args.layout)
}

/// Checks the size against the device and builds the interop objects.
pub fn build(gpu: &Gpu, args: &RunSpec, plan: FramePlan, size: Size) -> Result<(Interop, Producer)> {
    check_size(gpu, size, Field::Size)?;
    build_checked(gpu, args, plan, size)
        .map_err(|e| unsupported_format(out_of_memory(e, &Message::new().field(Field::Size, size))))
}

fn build_checked(gpu: &Gpu, args: &RunSpec, plan: FramePlan, size: Size) -> Result<(Interop, Producer)> {
    let device = &gpu.device;
    let desc = frame_desc(args, size);
    // Images exportable whenever the device can: the CPU path then runs the very same images.
    let export_images = gpu.cuda.is_some() || check_export(device, &desc).is_ok();
    let shared = SharedFrames::with_images(device, plan, desc, export_images, gpu.cuda.is_some())?;
    let shared = Arc::new(shared);
    let views = match desc.layout == Layout::Buffer && !drawable_buffer(device, &desc) {
        true => Some(Arc::new(view_images(device, &desc, plan.images())?)),
        false => None,
    };
    let staging_buffers = || -> Result<Arc<Vec<Buffer>>> {
        let usage = vk::BufferUsageFlags::TRANSFER_SRC;
        let (count, bytes) = (plan.images(), desc.bytes());
        let staging = Buffer::frames(device, "staging", count, bytes, usage, MemoryLocation::CpuToGpu)?;
        Ok(Arc::new(staging))
    };
    let cache = args.ptx_cache.clone().unwrap_or_else(kernels::default_cache_dir);
    if let (Some(_), None) = (&args.kernel, &gpu.cuda) {
        let why = format!(
            " runs your kernel with CUDA, and no CUDA device matches {} (`vkcuda check-kernel FILE` \
             compiles it without a GPU)",
            gpu.device.info()
        );
        return Err(Message::new().field(Field::Kernel, "").text(why).into());
    }
    match &args.feed {
        Some(Feed::Host(mailbox)) => {
            let staging = staging_buffers()?;
            let fed = FedProducer::new(shared.clone(), staging.clone(), mailbox.clone());
            return Ok((Interop { shared, staging: Some(staging), views }, Producer::Fed(fed)));
        }
        Some(Feed::Device { mailbox, staging, line }) => {
            let fed = FedCudaProducer::new(&shared, staging.clone(), mailbox.clone(), line.clone())?;
            return Ok((Interop { shared, staging: None, views }, Producer::FedCuda(Box::new(fed))));
        }
        None => {}
    }
    let (staging, producer) = match (args.producer, &gpu.cuda) {
        (ProducerKind::Cpu, _) | (ProducerKind::Auto | ProducerKind::Cuda, None) => {
            let staging = staging_buffers()?;
            (Some(staging.clone()), Producer::Cpu(CpuProducer::new(shared.clone(), staging)))
        }
        (ProducerKind::Auto | ProducerKind::Cuda, Some(c)) => {
            let ctx = cuda::context(c, args.cuda_sched)?;
            let kernel = args.kernel.as_ref().map(|k| (k, args.reload.clone()));
            let mut p = CudaProducer::new(ctx, &shared, (&cache, kernel), args.high_priority_stream)?;
            p.host_waits = args.producer_host_waits.then(|| shared.clone());
            (None, Producer::Cuda(Box::new(p)))
        }
        (ProducerKind::Staging, Some(c)) => {
            let ctx = cuda::context(c, args.cuda_sched)?;
            let kernels = SceneKernels::load(&ctx, &cache)?;
            let staging = staging_buffers()?;
            let bytes = desc.bytes() as usize;
            let p = StagingProducer::new(ctx, kernels, bytes, shared.clone(), staging.clone())?;
            (Some(staging), Producer::Staging(Box::new(p)))
        }
        (ProducerKind::Staging, None) => {
            return Err(Message::new().field(Field::Producer, "staging").text(" needs a CUDA device").into())
        }
    };
    Ok((Interop { shared, staging, views }, producer))
}

/// `count` images of `desc` that only Vulkan uses, moved to `GENERAL`: what
/// the consumer copies a shared buffer into for a reader of images.
fn view_images(device: &Arc<Device>, desc: &FrameDesc, count: usize) -> Result<Vec<SharedImage>> {
    let views =
        (0..count).map(|_| SharedImage::new(device.clone(), desc, false)).collect::<Result<Vec<_>, _>>()?;
    device.run_once("preparing the buffers' view images", |cmd| {
        let none = (vk::PipelineStageFlags2::NONE, vk::AccessFlags2::NONE);
        for v in &views {
            let b = image_barrier(v.image(), none, none).old_layout(vk::ImageLayout::UNDEFINED);
            record_image_barrier(device.raw(), cmd, b);
        }
    })?;
    Ok(views)
}
