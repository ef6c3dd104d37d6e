//! Opening a device: which one (by CUDA's UUID, or the caller's choice),
//! whether CUDA renders there, and what the device can hold (image sizes,
//! memory, storage-buffer range), checked before anything is made.

use std::sync::Arc;

use anyhow::{anyhow, bail, Result};
use ash::vk;

use crate::base::kinds::ProducerKind;
use crate::base::size::Size;
use crate::cuda::pairing::Pairing;
use crate::error::usage::{Field, Message};
use crate::frames::{loader, machine};
use crate::UsageError;
use vkcuda::cuda::CudaDevice;
use vkcuda::vk::device::{Device, Extras, GpuInfo, MemoryHeap, Queue};
use vkcuda::vk::instance::Instance;
use vkcuda::{Format, FrameDesc};

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

/// The chosen device and producer.
pub struct Gpu {
    /// The Vulkan device.
    pub device: Arc<Device>,
    /// The matching CUDA device, when CUDA produces.
    pub cuda: Option<CudaDevice>,
    /// Why this producer was chosen (logged).
    pub why: Message,
}

/// A Vulkan instance for the application, on the process's [`loader::libraries`]:
/// the loader `VKCUDA_LIBVULKAN` names (which also lets the tests check the
/// error for a missing one), else the system's, else the one bundled with
/// vkcuda. Where no loader or driver starts, the error says what this
/// machine lacks and its cure ([`machine::cure_for_vulkan`]).
pub fn vulkan_instance(validate: bool, extensions: &[&std::ffi::CStr]) -> Result<Arc<Instance>> {
    let libraries = loader::libraries();
    let no_layer = || machine::entry(libraries).is_some_and(|e| machine::validation_layer(&e).is_none());
    if validate && no_layer() {
        bail!(
            "validation needs the Khronos validation layer (VK_LAYER_KHRONOS_validation), which is not \
             installed: {}; {}",
            machine::cure_for_layer(),
            machine::SEE_DOCTOR
        );
    }
    Instance::with_loader(libraries.loader_path(), validate, extensions).map_err(|e| {
        let no_vulkan = match &e {
            vkcuda::Error::Library { .. } => true,
            vkcuda::Error::Vulkan { result, .. } => {
                [vk::Result::ERROR_INCOMPATIBLE_DRIVER, vk::Result::ERROR_INITIALIZATION_FAILED]
                    .contains(result)
            }
            _ => false,
        };
        if no_vulkan {
            anyhow!("{e}: {}", machine::cure_for_vulkan(libraries))
        } else {
            e.into()
        }
    })
}

/// Opens Vulkan, finds CUDA if wanted, and picks the device and producer.
pub fn open_gpu(args: &DeviceChoice, instance: Arc<Instance>, queue: Queue) -> Result<Gpu> {
    let pairing = Pairing::new(&instance, args.producer)?;
    if pairing.gpus.is_empty() {
        bail!("no Vulkan device found: {}", machine::cure_for_vulkan(loader::libraries()));
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

/// [`check_memory`] against `heaps`.
pub fn check_heaps(heaps: &[MemoryHeap], need: MemoryNeed, what: &Message) -> Result<(), UsageError> {
    let gib = |b: u64| b as f64 / f64::from(1u32 << 30);
    let largest = |pick: fn(&MemoryHeap) -> bool| {
        heaps
            .iter()
            .enumerate()
            .filter(|(_, h)| pick(h))
            .max_by_key(|(_, h)| h.size)
            .map(|(i, h)| (i, h.size))
    };
    let device = largest(|h| h.device_local).or_else(|| largest(|_| true));
    let host = largest(|h| h.host_visible).or(device);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::usage::Flags;
    use vkcuda::Layout;

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
        let heap = |size, device_local, host_visible| MemoryHeap { size, device_local, host_visible };
        let discrete = [heap(80 * GIB, true, false), heap(94 * GIB, false, true)];
        assert!(check_heaps(&discrete, need, &what).is_ok());
        let too_much = MemoryNeed::buffers(400, frame, RGBA8);
        let e = check_heaps(&discrete, too_much, &what).unwrap_err().0.worded(&Flags);
        assert!(e.contains("100.00 GiB of host-visible memory") && e.contains("94.00 GiB"), "{e}");
        // One heap for both (lavapipe, integrated GPUs): counted together.
        let unified = [heap(3 * GIB, true, true)];
        let e = check_heaps(&unified, need, &what).unwrap_err().0.worded(&Flags);
        assert!(e.starts_with("--size 8192x8192 needs about 3.") && e.contains("GPU memory"), "{e}");
        assert!(check_heaps(&unified, MemoryNeed::buffers(4, frame, RGBA8), &what).is_ok());
        // Bytes per pixel count: 100 RGBA32F frames are 400 RGBA8 ones.
        assert_eq!(MemoryNeed::buffers(100, frame, Format::Rgba32f), too_much);
    }
}
