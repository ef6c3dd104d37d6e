//! Set-up shared by every mode: pick the Vulkan device (by CUDA's UUID) and
//! the producer, then build the interop objects: shared images, timelines,
//! and the producer that writes into them.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Result};
use ash::vk;
use gpu_allocator::MemoryLocation;

use crate::consumer::Frames;
use crate::feed::device::FedCudaProducer;
use crate::feed::host::FedProducer;
use crate::feed::Feed;
use crate::inject::Inject;
use crate::kernels::{self, SceneKernels};
use crate::kinds::ProducerKind;
use crate::pairing::Pairing;
use crate::producer::cpu::CpuProducer;
use crate::producer::cuda::CudaProducer;
use crate::producer::staging::StagingProducer;
use crate::producer::{Control, Job, Report};
use crate::reload::ReloadLink;
use crate::size::Size;
use crate::usage::{Field, Message};
use crate::userkernel::KernelSpec;
use crate::UsageError;
use vkcuda::cuda::{self, CudaDevice};
use vkcuda::interop::{check_export, SharedFrames};
use vkcuda::sync::{FramePlan, SyncScheme};
use vkcuda::types::CudaSched;
use vkcuda::vk::device::{Device, Extras, GpuInfo, Queue};
use vkcuda::vk::frame::{image_barrier, record_image_barrier};
use vkcuda::vk::instance::Instance;
use vkcuda::vk::memory::Buffer;
use vkcuda::vk::shared_image::SharedImage;
use vkcuda::{Format, FrameDesc, Layout};

/// Which device to open, and whether CUDA is wanted there: all that
/// [`open_gpu`] takes (no frame, no run).
#[derive(Clone, Debug)]
pub struct DeviceChoice {
    /// Vulkan device: index or UUID prefix; `None`: the first one CUDA
    /// matches (the first, for the CPU producer).
    pub gpu: Option<String>,
    /// Who renders: whether a CUDA twin is looked for, and needed.
    pub producer: ProducerKind,
    /// Say which NVIDIA devices CUDA cannot see (once per run: not for each GPU of all of them).
    pub announce: bool,
}

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

/// The chosen device and producer.
pub struct Gpu {
    /// The Vulkan device.
    pub device: Arc<Device>,
    /// The matching CUDA device, when CUDA produces.
    pub cuda: Option<CudaDevice>,
    /// Why this producer was chosen (logged).
    pub why: Message,
}

/// A Vulkan instance for the application: the loader `VKCUDA_LIBVULKAN`
/// names (which also lets the tests check the error for a missing one), else
/// the system's.
pub fn vulkan_instance(validate: bool, extensions: &[&std::ffi::CStr]) -> Result<Arc<Instance>> {
    let loader = std::env::var_os("VKCUDA_LIBVULKAN").map(PathBuf::from);
    Ok(Instance::with_loader(loader.as_deref(), validate, extensions)?)
}

/// Opens Vulkan, finds CUDA if wanted, and picks the device and producer.
pub fn open_gpu(args: &DeviceChoice, instance: Arc<Instance>, queue: Queue) -> Result<Gpu> {
    let pairing = Pairing::new(&instance, args.producer)?;
    if pairing.gpus.is_empty() {
        bail!(
            "no Vulkan device found: install a Vulkan driver (NVIDIA's, or Mesa's lavapipe: \
             apt install mesa-vulkan-drivers)"
        );
    }
    if args.announce {
        if let Some(line) = pairing.unpaired() {
            eprintln!("vkcuda: {line}");
        }
    }
    let gpus = &pairing.gpus;
    let chosen: &GpuInfo = match &args.gpu {
        Some(sel) => pairing.select(sel)?,
        None => match args.producer {
            ProducerKind::Cpu => &gpus[0],
            _ => gpus.iter().find(|g| pairing.twin(g).is_some()).unwrap_or(&gpus[0]),
        },
    };
    let matched = pairing.twin(chosen).cloned();
    let (cuda, why) = match (args.producer, matched) {
        (ProducerKind::Cpu, _) => {
            (None, Message::new().text("cpu producer: asked for with ").field(Field::Producer, "cpu"))
        }
        (_, Some(c)) => {
            let name = if args.producer == ProducerKind::Staging { "staging (baseline)" } else { "cuda" };
            let why = format!("{name} producer: {c} matches {chosen}");
            (Some(c), Message::from(why))
        }
        (ProducerKind::Cuda | ProducerKind::Staging, None) => {
            let why = format!(": no CUDA device has the UUID of {chosen}; devices:\n{}", pairing.listing());
            return Err(Message::new().field(Field::Producer, args.producer).text(why).into());
        }
        (_, None) => {
            let reason = match &pairing.cuda {
                Err(e) => e.clone(),
                Ok(_) => format!("no CUDA device has the UUID of {chosen}"),
            };
            (None, Message::from(format!("cpu producer: {reason}")))
        }
    };
    // The consumers draw (dynamic rendering) and time their frames (timestamps).
    let extras = Extras { dynamic_rendering: true, timestamps: true };
    let device = Device::new(instance, chosen.clone(), cuda.is_some(), queue, extras)?;
    Ok(Gpu { device, cuda, why })
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

/// The most bytes one storage-buffer binding may span on `device` (`maxStorageBufferRange`).
pub fn storage_buffer_range(device: &Device) -> u64 {
    // SAFETY: the physical device belongs to the device's instance.
    let limits = unsafe { device.instance().get_physical_device_properties(device.info().physical) }.limits;
    u64::from(limits.max_storage_buffer_range)
}

/// Whether the draw pass can read a shared buffer of `desc` as a storage
/// buffer (the frame fits the device's [`storage_buffer_range`]).
pub fn drawable_buffer(device: &Device, desc: &FrameDesc) -> bool {
    let range = storage_buffer_range(device);
    let fits = desc.bytes() <= range;
    if !fits {
        log::info!(
            "a {desc} frame is {} bytes, beyond this device's storage-buffer range ({range} bytes): the draw \
             pass reads each buffer through an image it is copied into",
            desc.bytes(),
        );
    }
    fits
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

/// Refuses a size the device cannot make images of (a usage error: exit 2);
/// `field` names which size it is (the frames', the draw target's).
pub fn check_size(gpu: &Gpu, size: Size, field: Field) -> Result<(), UsageError> {
    let max = gpu.device.info().max_image_dimension;
    if size.width > max || size.height > max {
        let why = format!(" exceeds the device's limit of {max} pixels a side (maxImageDimension2D)");
        return Err(UsageError::new(Message::new().field(field, size).text(why)));
    }
    Ok(())
}

/// The memory a run's frames take: device-local (shared images, the
/// consumer's target) and host-visible (staging, readback buffers), in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryNeed {
    /// Device-local bytes.
    pub device: u64,
    /// Host-visible bytes.
    pub host: u64,
}

impl MemoryNeed {
    /// `count` frames of `size` and `format` in device-local memory. Tiled
    /// images are padded (NVIDIA: 1080p RGBA8 needs 8,847,360 bytes, not
    /// 8,294,400), so each is counted with 1/8 more and 64 KiB of alignment.
    pub fn images(count: u64, size: Size, format: Format) -> Self {
        let bytes = frame_bytes(size, format);
        Self { device: count * (bytes + bytes / 8 + (64 << 10)), host: 0 }
    }

    /// `count` host-visible buffers of one frame of `size` and `format` each.
    pub fn buffers(count: u64, size: Size, format: Format) -> Self {
        Self { device: 0, host: count * frame_bytes(size, format) }
    }
}

impl std::ops::Add for MemoryNeed {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        Self { device: self.device + o.device, host: self.host + o.host }
    }
}

/// A packed frame's bytes.
fn frame_bytes(size: Size, format: Format) -> u64 {
    u64::from(size.width) * u64::from(size.height) * u64::from(format.bytes_per_pixel())
}

/// Refuses a run whose frames cannot fit the device's memory heaps (a usage
/// error: exit 2), before anything is allocated or written. `what` names the
/// sizes in the message.
pub fn check_memory(gpu: &Gpu, need: MemoryNeed, what: &Message) -> Result<(), UsageError> {
    check_heaps(&gpu.device.memory_heaps(), need, what)
}

/// [`check_memory`] against heaps given as (size, device-local, host-visible).
pub fn check_heaps(heaps: &[(u64, bool, bool)], need: MemoryNeed, what: &Message) -> Result<(), UsageError> {
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    let largest = |pick: fn(&(u64, bool, bool)) -> bool| {
        heaps.iter().enumerate().filter(|(_, h)| pick(h)).max_by_key(|(_, h)| h.0).map(|(i, h)| (i, h.0))
    };
    let device = largest(|h| h.1).or_else(|| largest(|_| true));
    let host = largest(|h| h.2).or(device);
    let refuse = |kind: &str, bytes: u64, heap: u64| {
        let why = format!(
            " needs about {:.2} GiB of {kind} memory; the device's largest such heap holds {:.2} GiB: use a \
             smaller size or fewer ",
            gib(bytes),
            gib(heap)
        );
        UsageError::new(what.clone().text(why).field(Field::Buffers, ""))
    };
    let (Some((di, dsize)), Some((hi, hsize))) = (device, host) else { return Ok(()) };
    if di == hi && need.device + need.host > dsize {
        return Err(refuse("GPU", need.device + need.host, dsize));
    }
    if need.device > dsize {
        return Err(refuse("GPU", need.device, dsize));
    }
    if need.host > hsize {
        return Err(refuse("host-visible", need.host, hsize));
    }
    Ok(())
}

/// Turns an allocation that failed for want of memory into a usage error
/// (exit 2) that says so; other errors pass unchanged.
pub fn out_of_memory(e: anyhow::Error, what: &Message) -> anyhow::Error {
    let oom = e
        .chain()
        .any(|c| matches!(c.downcast_ref::<vkcuda::Error>(), Some(vkcuda::Error::OutOfMemory { .. })));
    match oom {
        true => {
            let why = format!(" does not fit in the device's memory ({e:#}): use a smaller size");
            UsageError::new(what.clone().text(why)).into()
        }
        false => e,
    }
}

/// The frame a run's shared frames hold: `size`, in the spec's format and layout.
pub fn frame_desc(args: &RunSpec, size: Size) -> FrameDesc {
    let extent = vk::Extent2D { width: size.width, height: size.height };
    FrameDesc::new(extent).format(args.format).layout(args.layout)
}

/// Turns a format or layout the device cannot share into a usage error
/// (exit 2) that names it; other errors pass unchanged.
pub fn unsupported_format(e: anyhow::Error) -> anyhow::Error {
    let unsupported = e.chain().find_map(|c| match c.downcast_ref::<vkcuda::Error>() {
        Some(vkcuda::Error::FormatUnsupported { format, layout, .. }) => Some((*format, *layout)),
        _ => None,
    });
    match unsupported {
        Some((format, layout)) => {
            let both = Message::new().field(Field::Format, format).text(" ").field(Field::Layout, layout);
            UsageError::new(both.text(format!(": {e:#}; try another format or layout"))).into()
        }
        None => e,
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usage::Flags;

    const GIB: u64 = 1 << 30;
    const RGBA8: Format = Format::Rgba8;

    #[test]
    fn an_unsupported_format_is_a_usage_error_naming_it() {
        let e = vkcuda::Error::FormatUnsupported {
            format: Format::Rgba8Srgb,
            layout: Layout::Array,
            context: "the driver says images of this format are not exportable".into(),
        };
        let e = unsupported_format(anyhow::Error::new(e).context("building the interop"));
        let usage = e.downcast_ref::<UsageError>().expect("a usage error (exit 2)").0.worded(&Flags);
        assert!(usage.starts_with("--format rgba8-srgb --layout array: building the interop: "), "{usage}");
        assert!(usage.contains("cannot share rgba8-srgb frames in the array layout"), "{usage}");
        let other = unsupported_format(anyhow::anyhow!("something else"));
        assert!(other.downcast_ref::<UsageError>().is_none());
    }

    #[test]
    fn memory_is_checked_per_heap_and_once_for_a_shared_heap() {
        let frame = Size { width: 8192, height: 8192 }; // 256 MiB a frame
        let what = Message::new().field(Field::Size, frame);
        let need = MemoryNeed::images(3, frame, RGBA8) + MemoryNeed::buffers(10, frame, RGBA8);
        assert!(need.device > 3 * 256 * (1 << 20) && need.host == 10 * 256 * (1 << 20));
        // Discrete: an 80 GiB device heap, a 94 GiB host heap.
        let discrete = [(80 * GIB, true, false), (94 * GIB, false, true)];
        assert!(check_heaps(&discrete, need, &what).is_ok());
        let too_much = MemoryNeed::buffers(400, frame, RGBA8);
        let e = check_heaps(&discrete, too_much, &what).unwrap_err().0.worded(&Flags);
        assert!(e.contains("100.00 GiB of host-visible memory") && e.contains("94.00 GiB"), "{e}");
        // One heap for both (lavapipe, integrated GPUs): counted together.
        let unified = [(3 * GIB, true, true)];
        let e = check_heaps(&unified, need, &what).unwrap_err().0.worded(&Flags);
        assert!(e.starts_with("--size 8192x8192 needs about 3.") && e.contains("GPU memory"), "{e}");
        assert!(check_heaps(&unified, MemoryNeed::buffers(4, frame, RGBA8), &what).is_ok());
        // Bytes per pixel count: 100 RGBA32F frames are 400 RGBA8 ones.
        assert_eq!(MemoryNeed::buffers(100, frame, Format::Rgba32f), too_much);
    }
}
