//! Set-up shared by every mode: pick the Vulkan device (by CUDA's UUID) and
//! the producer, then build the interop objects: shared images, timelines,
//! and the producer that writes into them.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{anyhow, bail, Result};
use ash::vk;
use gpu_allocator::MemoryLocation;

use crate::base::kinds::{ProducerId, ProducerKind, Renders};
use crate::base::size::Size;
use crate::diagnostics::inject::Inject;
use crate::drive::child::parent::{ChildCommand, ChildProducer, ChildStart};
use crate::drive::child::wire::{CudaWire, Render};
use crate::drive::feed::device::FedCudaProducer;
use crate::drive::feed::host::FedProducer;
use crate::drive::feed::Feed;
use crate::drive::producer::cpu::CpuProducer;
use crate::drive::producer::cuda::{CudaProducer, HostWaits, KernelsToLoad, UserKernelToLoad};
use crate::drive::producer::staging::StagingProducer;
use crate::drive::producer::{Control, Job, Report};
use crate::error::usage::{Field, Message};
use crate::frames::consumer::Frames;
use crate::frames::gpu::{check_size, drawable_buffer, out_of_memory, unsupported_format, Gpu};
use crate::kernel::reload::ReloadLink;
use crate::kernel::user::KernelSpec;
use crate::scene::director::Director;
use crate::scene::kernels::{self, SceneKernels};
use vkcuda::cuda::{self};
use vkcuda::interop::{check_export, SharedFrames};
use vkcuda::sync::{FramePlan, SyncScheme};
use vkcuda::types::CudaSched;
use vkcuda::vk::device::Device;
use vkcuda::vk::frame::{image_barrier, record_image_barrier};
use vkcuda::vk::memory::Buffer;
use vkcuda::vk::shared_image::SharedImage;
use vkcuda::{FrameDesc, Layout};

/// What a run on an open device is made of, in separate parts; the frame
/// itself (a [`FrameDesc`]) comes with each session. Each front end fills
/// it in: the CLI from its arguments once the device is open, the Python
/// module for a fed run.
#[derive(Clone, Debug)]
pub struct RunSpec {
    /// The frame plan: scheme, shared frames, frame count.
    pub plan: PlanSpec,
    /// Who makes the frames.
    pub producer: ProducerSpec,
    /// How the consumer's loop runs.
    pub consumer: ConsumerSpec,
    /// Test only: the faults to inject.
    pub inject: Inject,
    /// The producer runs in a process of its own, this program
    /// ([`crate::drive::child`]): CUDA producers (a faulting kernel then
    /// costs the child, not the session) and the CPU reference.
    pub child: Option<ChildCommand>,
}

/// The frame plan's parts ([`FramePlan::new`] with the session's timeline base).
#[derive(Clone, Copy, Debug)]
pub struct PlanSpec {
    /// The synchronization scheme.
    pub sync: SyncScheme,
    /// Shared images (or buffers).
    pub buffers: usize,
    /// Frames to make.
    pub frames: u64,
}

/// How the consumer's loop runs.
#[derive(Clone, Copy, Debug)]
pub struct ConsumerSpec {
    /// Command buffers in flight.
    pub in_flight: usize,
    /// The producer starts frame g once frame g - 1 is on screen (`--latency low`).
    pub paced: bool,
    /// Each side waits on the host before it submits (a hand-over experiment).
    pub host_waits: bool,
}

/// How a CUDA producer runs.
#[derive(Clone, Debug)]
pub struct CudaOptions {
    /// Where compiled PTX is cached (`None`: the default folder).
    pub ptx_cache: Option<PathBuf>,
    /// How CUDA's host thread waits.
    pub sched: CudaSched,
    /// Create the CUDA stream with the highest priority.
    pub high_priority_stream: bool,
    /// Wait on the host for "released" before each frame is enqueued
    /// (default; `--gpu-waits-only` turns it off).
    pub host_waits: bool,
}

impl Default for CudaOptions {
    /// The CLI's defaults: the default PTX cache, CUDA's own scheduling, a
    /// normal stream, and host waits for "released".
    fn default() -> Self {
        Self { ptx_cache: None, sched: CudaSched::Auto, high_priority_stream: false, host_waits: true }
    }
}

impl CudaOptions {
    /// The PTX cache's folder.
    pub fn cache(&self) -> PathBuf {
        self.ptx_cache.clone().unwrap_or_else(kernels::default_cache_dir)
    }
}

/// Who makes a run's frames. A producer that renders is told what each
/// frame shows by a [`Director`] (the viewer's keys change it; the readback
/// asks it what a frame showed).
#[derive(Clone)]
pub enum ProducerSpec {
    /// CUDA kernels render the built-in scenes.
    Scene {
        /// What each frame shows.
        director: Arc<Director>,
        /// How CUDA runs.
        cuda: CudaOptions,
    },
    /// Your kernel renders them (CUDA), with the viewer's hot reload if any.
    Kernel {
        /// What each frame shows (its size, tick and pointer).
        director: Arc<Director>,
        /// The kernel.
        kernel: KernelSpec,
        /// Its hot reload.
        reload: Option<ReloadLink>,
        /// How CUDA runs it.
        cuda: CudaOptions,
    },
    /// CPU threads render the scenes into staging buffers.
    Cpu(Arc<Director>),
    /// The baseline without sharing: CUDA renders, copies through the host.
    Staging {
        /// What each frame shows.
        director: Arc<Director>,
        /// How CUDA runs.
        cuda: CudaOptions,
    },
    /// The caller hands frames in.
    Fed(Feed),
}

impl std::fmt::Debug for ProducerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self {
            ProducerSpec::Scene { .. } => "Scene",
            ProducerSpec::Kernel { .. } => "Kernel",
            ProducerSpec::Cpu(_) => "Cpu",
            ProducerSpec::Staging { .. } => "Staging",
            ProducerSpec::Fed(_) => "Fed",
        };
        f.debug_struct(name).field("cuda", &self.cuda()).finish_non_exhaustive()
    }
}

impl ProducerSpec {
    /// What renders what `director` says on `gpu`, as `kind` asks: `Auto`
    /// is CUDA when the device has a CUDA twin, else the CPU; `kernel` is
    /// rendered by CUDA; a CUDA producer runs as `cuda` says.
    pub fn rendered(
        kind: ProducerKind,
        kernel: Option<KernelSpec>,
        cuda: CudaOptions,
        director: Arc<Director>,
        gpu: &Gpu,
    ) -> Result<Self> {
        let twin = gpu.cuda.is_some();
        match (kind, kernel) {
            (ProducerKind::Staging, _) if !twin => {
                Err(Message::new().field(Field::Producer, "staging").text(" needs a CUDA device").into())
            }
            (ProducerKind::Staging, _) => Ok(ProducerSpec::Staging { director, cuda }),
            (_, Some(_)) if !twin => {
                let why = format!(
                    " runs your kernel with CUDA, and no CUDA device matches {} (`vkcuda check-kernel FILE` \
                     compiles it without a GPU)",
                    gpu.device.info()
                );
                Err(Message::new().field(Field::Kernel, "").text(why).into())
            }
            (ProducerKind::Cpu, _) => Ok(ProducerSpec::Cpu(director)),
            (_, Some(kernel)) => Ok(ProducerSpec::Kernel { director, kernel, reload: None, cuda }),
            (_, None) if twin => Ok(ProducerSpec::Scene { director, cuda }),
            (_, None) => Ok(ProducerSpec::Cpu(director)),
        }
    }

    /// How CUDA runs, for a CUDA producer.
    pub fn cuda(&self) -> Option<&CudaOptions> {
        match self {
            ProducerSpec::Scene { cuda, .. }
            | ProducerSpec::Staging { cuda, .. }
            | ProducerSpec::Kernel { cuda, .. } => Some(cuda),
            ProducerSpec::Cpu(_) | ProducerSpec::Fed(_) => None,
        }
    }

    /// What each frame shows, for a producer that renders (none for frames handed in).
    pub fn director(&self) -> Option<&Arc<Director>> {
        match self {
            ProducerSpec::Scene { director, .. }
            | ProducerSpec::Staging { director, .. }
            | ProducerSpec::Kernel { director, .. }
            | ProducerSpec::Cpu(director) => Some(director),
            ProducerSpec::Fed(_) => None,
        }
    }
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
    /// The producer signals "rendered" from the host (CPU and staging
    /// producers; a child without timeline handles): the consumer submits a
    /// frame only once it is signalled.
    pub host_signals: bool,
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
    /// A producer in a child process, and what it renders.
    Child(Box<ChildProducer>, Renders),
}

impl Producer {
    /// What renders, and where.
    pub fn id(&self) -> ProducerId {
        match self {
            Producer::Cuda(_) => ProducerId::in_process(Renders::Cuda),
            Producer::Cpu(_) => ProducerId::in_process(Renders::Cpu),
            Producer::Staging(_) => ProducerId::in_process(Renders::Staging),
            Producer::Fed(_) => ProducerId::in_process(Renders::Fed),
            Producer::FedCuda(_) => ProducerId::in_process(Renders::FedFromCuda),
            Producer::Child(_, renders) => ProducerId::child(*renders),
        }
    }

    /// Runs the producer on its own thread. On error it marks the run failed,
    /// so the consumer stops waiting for it.
    pub fn spawn(self, job: Job) -> Result<std::thread::JoinHandle<Result<Report>>> {
        let thread = std::thread::Builder::new().name(format!("{} producer", self.id()));
        Ok(thread.spawn(move || {
            // A panic unwinds past the check below: the guard marks the run failed then.
            let _guard = FailOnPanic(job.control.clone());
            let result = match self {
                Producer::Cuda(p) => p.run(&job),
                Producer::Cpu(p) => p.run(&job),
                Producer::Staging(p) => p.run(&job),
                Producer::Fed(p) => p.run(&job),
                Producer::FedCuda(p) => p.run(&job),
                Producer::Child(p, _) => p.run(&job),
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

/// What [`build`] makes: the interop objects, and the producer that renders into them.
pub struct Built {
    /// The shared frames, and what the consumer needs besides.
    pub interop: Interop,
    /// The producer, ready for its thread.
    pub producer: Producer,
}

/// Checks the frame's size against the device and builds the interop objects.
pub fn build(gpu: &Gpu, spec: &RunSpec, plan: FramePlan, desc: FrameDesc) -> Result<Built> {
    let size = Size { width: desc.extent.width, height: desc.extent.height };
    check_size(gpu, size, Field::Size)?;
    let built = match &spec.child {
        Some(command) => build_child(gpu, spec, command, plan, desc),
        None => build_checked(gpu, &spec.producer, plan, desc),
    };
    built.map_err(|e| unsupported_format(out_of_memory(e, &Message::new().field(Field::Size, size))))
}

fn build_checked(gpu: &Gpu, producer: &ProducerSpec, plan: FramePlan, desc: FrameDesc) -> Result<Built> {
    let device = &gpu.device;
    // Images exportable whenever the device can: the CPU path then runs the very same images.
    let export_images = gpu.cuda.is_some() || check_export(device, &desc).is_ok();
    let shared = SharedFrames::with_images(device, plan, desc, export_images, gpu.cuda.is_some())?;
    let shared = Arc::new(shared);
    let views = buffer_views(device, &desc, plan)?;
    let staging_buffers = || -> Result<Arc<Vec<Buffer>>> {
        let usage = vk::BufferUsageFlags::TRANSFER_SRC;
        let (count, bytes) = (plan.images(), desc.bytes());
        let staging = Buffer::frames(device, "staging", count, bytes, usage, MemoryLocation::CpuToGpu)?;
        Ok(Arc::new(staging))
    };
    let twin = || gpu.cuda.as_ref().ok_or_else(|| anyhow!("the CUDA producer needs a CUDA device"));
    let (staging, producer) = match producer {
        ProducerSpec::Fed(Feed::Host(mailbox)) => {
            let staging = staging_buffers()?;
            let fed = FedProducer::new(shared.clone(), staging.clone(), mailbox.clone());
            (Some(staging), Producer::Fed(fed))
        }
        ProducerSpec::Fed(Feed::Device { mailbox, staging, line }) => {
            let fed = FedCudaProducer::new(&shared, staging.clone(), mailbox.clone(), line.clone())?;
            (None, Producer::FedCuda(Box::new(fed)))
        }
        ProducerSpec::Cpu(director) => {
            let staging = staging_buffers()?;
            let cpu = CpuProducer::new(shared.clone(), staging.clone(), director.clone());
            (Some(staging), Producer::Cpu(cpu))
        }
        ProducerSpec::Scene { director, cuda: opts } | ProducerSpec::Kernel { director, cuda: opts, .. } => {
            let ctx = cuda::context(twin()?, opts.sched)?;
            let user = match producer {
                ProducerSpec::Kernel { kernel, reload, .. } => {
                    Some(UserKernelToLoad { spec: kernel, reload: reload.clone() })
                }
                _ => None,
            };
            let to_load = KernelsToLoad { ptx_cache: &opts.cache(), user };
            let mut p =
                CudaProducer::new(ctx, &shared, director.clone(), to_load, opts.high_priority_stream)?;
            p.host_waits = opts.host_waits.then(|| HostWaits::Shared(shared.clone()));
            (None, Producer::Cuda(Box::new(p)))
        }
        ProducerSpec::Staging { director, cuda: opts } => {
            let ctx = cuda::context(twin()?, opts.sched)?;
            let kernels = SceneKernels::load(&ctx, &opts.cache())?;
            let staging = staging_buffers()?;
            let bytes = desc.bytes() as usize;
            let p =
                StagingProducer::new(ctx, kernels, bytes, shared.clone(), staging.clone(), director.clone())?;
            (Some(staging), Producer::Staging(Box::new(p)))
        }
    };
    let host_signals = staging.is_some();
    Ok(Built { interop: Interop { shared, staging, views, host_signals }, producer })
}

/// For buffers too large for the draw pass to read as storage buffers: the images it draws from.
fn buffer_views(
    device: &Arc<Device>,
    desc: &FrameDesc,
    plan: FramePlan,
) -> Result<Option<Arc<Vec<SharedImage>>>> {
    Ok(match desc.layout == Layout::Buffer && !drawable_buffer(device, desc) {
        true => Some(Arc::new(view_images(device, desc, plan.images())?)),
        false => None,
    })
}

/// The interop of a producer in a child process: frames exported to it
/// (timelines too, to a CUDA child; a reference child's are signalled here).
fn build_child(
    gpu: &Gpu,
    spec: &RunSpec,
    command: &ChildCommand,
    plan: FramePlan,
    desc: FrameDesc,
) -> Result<Built> {
    let wire_cuda = |c: &CudaOptions| CudaWire {
        ptx_cache: c.cache(),
        sched: c.sched,
        high_priority: c.high_priority_stream,
        host_waits: c.host_waits,
    };
    let (render, director, link, renders) = match &spec.producer {
        ProducerSpec::Scene { director, cuda } => {
            (Render::Scene(wire_cuda(cuda)), director, None, Renders::Cuda)
        }
        ProducerSpec::Kernel { director, kernel, reload, cuda } => {
            let program = reload.as_ref().and_then(ReloadLink::last_good);
            let render = Render::Kernel { kernel: kernel.clone(), program, cuda: wire_cuda(cuda) };
            (render, director, reload.clone(), Renders::Cuda)
        }
        ProducerSpec::Cpu(director) => (Render::Reference, director, None, Renders::Cpu),
        ProducerSpec::Staging { .. } | ProducerSpec::Fed(_) => {
            bail!("only the CUDA producers and the CPU reference run in a child process")
        }
    };
    let cuda = !matches!(render, Render::Reference);
    if cuda && gpu.cuda.is_none() {
        bail!("the CUDA producer needs a CUDA device");
    }
    let shared = Arc::new(SharedFrames::with_images(&gpu.device, plan, desc, true, cuda)?);
    let views = buffer_views(&gpu.device, &desc, plan)?;
    let inject = spec.inject.0.iter().map(ToString::to_string).collect();
    let uuid = gpu.device.info().uuid;
    let start = ChildStart {
        shared: &shared,
        uuid,
        render,
        director: director.clone(),
        link,
        inject,
        total: spec.plan.frames,
    };
    let child = ChildProducer::start(command, start)?;
    let interop = Interop { shared, staging: None, views, host_signals: !cuda };
    Ok(Built { interop, producer: Producer::Child(Box::new(child), renders) })
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
