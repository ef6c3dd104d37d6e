//! Physical-device discovery (with the UUIDs CUDA matches against) and the
//! logical device: one queue, the extension loaders and the allocator.

use std::ffi::CStr;
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::error::{bail, Context as _, Error, Result};
use ash::vk;
use gpu_allocator::vulkan::{Allocator, AllocatorCreateDesc};

use super::instance::{Instance, ValidationCounts};
use crate::platform;
use crate::types::QueueKind;

/// A 16-byte device UUID, as Vulkan (`deviceUUID`) and CUDA (`cuDeviceGetUuid_v2`) report it.
pub type Uuid = [u8; 16];

/// Formats a UUID the usual 8-4-4-4-12 way.
pub fn format_uuid(u: &Uuid) -> String {
    let h: Vec<String> = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        h[0..4].concat(),
        h[4..6].concat(),
        h[6..8].concat(),
        h[8..10].concat(),
        h[10..].concat()
    )
}

/// What vkcuda needs to know of a physical device.
#[derive(Clone, Debug)]
pub struct GpuInfo {
    /// Position in `vkEnumeratePhysicalDevices`.
    pub index: usize,
    /// The handle.
    pub physical: vk::PhysicalDevice,
    /// `deviceName`.
    pub name: String,
    /// `VkPhysicalDeviceIDProperties::deviceUUID`.
    pub uuid: Uuid,
    /// `maxImageDimension2D`.
    pub max_image_dimension: u32,
    /// Nanoseconds per timestamp tick.
    pub timestamp_period: f32,
    /// Whether the platform's memory and semaphore export extensions are there
    /// ([`crate::platform::MEMORY_EXTENSION`], [`crate::platform::SEMAPHORE_EXTENSION`]).
    pub external: (bool, bool),
    /// Whether the device supports Vulkan 1.3.
    pub vulkan_1_3: bool,
    /// Whether `VK_EXT_calibrated_timestamps` is there.
    pub calibrated_timestamps: bool,
    /// The driver's name and version (`VkPhysicalDeviceDriverProperties`).
    pub driver: String,
}

impl std::fmt::Display for GpuInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Vulkan device {}: {} (UUID {})", self.index, self.name, format_uuid(&self.uuid))
    }
}

/// Lists every physical device of vkcuda's instance with its UUID.
pub fn list_gpus(instance: &Instance) -> Result<Vec<GpuInfo>> {
    gpus(instance.raw())
}

/// Lists every physical device of `instance` (an engine's own, or
/// vkcuda's) with its UUID: the one whose UUID is a CUDA device's is the
/// one to share frames on.
pub fn gpus(instance: &ash::Instance) -> Result<Vec<GpuInfo>> {
    // SAFETY: plain query on a live instance (`&ash::Instance` is one until it is destroyed).
    let physicals = unsafe { instance.enumerate_physical_devices() }.context("vkEnumeratePhysicalDevices")?;
    physicals.into_iter().enumerate().map(|(index, physical)| gpu_info(instance, index, physical)).collect()
}

/// What vkcuda needs to know of `physical`, the `index`-th device of `instance`.
pub fn gpu_info(instance: &ash::Instance, index: usize, physical: vk::PhysicalDevice) -> Result<GpuInfo> {
    let mut id = vk::PhysicalDeviceIDProperties::default();
    let mut driver = vk::PhysicalDeviceDriverProperties::default();
    let mut props = vk::PhysicalDeviceProperties2::default().push_next(&mut id).push_next(&mut driver);
    // SAFETY: `physical` comes from this instance; `props` chains a valid struct.
    unsafe { instance.get_physical_device_properties2(physical, &mut props) };
    let p = props.properties;
    // SAFETY: plain query on a live physical device.
    let exts = unsafe { instance.enumerate_device_extension_properties(physical) }?;
    let has = |name: &CStr| exts.iter().any(|e| e.extension_name_as_c_str() == Ok(name));
    let text = |c: Result<&CStr, _>| c.map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Ok(GpuInfo {
        index,
        physical,
        name: text(p.device_name_as_c_str()),
        uuid: id.device_uuid,
        max_image_dimension: p.limits.max_image_dimension2_d,
        timestamp_period: p.limits.timestamp_period,
        external: (has(platform::MEMORY_EXTENSION), has(platform::SEMAPHORE_EXTENSION)),
        vulkan_1_3: p.api_version >= vk::API_VERSION_1_3,
        calibrated_timestamps: has(ash::ext::calibrated_timestamps::NAME),
        driver: format!("{} {}", text(driver.driver_name_as_c_str()), text(driver.driver_info_as_c_str())),
    })
}

/// The queue the device is created with: its kind and, for a window, the
/// surface it must be able to present to.
pub struct Queue {
    /// Which family to prefer.
    pub kind: QueueKind,
    /// The surface loader and the window's surface, when presenting.
    pub present: Option<(ash::khr::surface::Instance, vk::SurfaceKHR)>,
}

/// What the caller's own work needs of a device [`Device::new`] creates,
/// beyond the interop (which needs neither).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extras {
    /// Dynamic rendering: drawing without render pass objects.
    pub dynamic_rendering: bool,
    /// GPU timestamps: the queue's family must write them; host query reset
    /// is enabled (a transfer-only queue may write timestamps but not reset
    /// queries), and calibrated timestamps where the device reads its clock
    /// together with `CLOCK_MONOTONIC` ([`Device::calibrated_timestamps`]).
    pub timestamps: bool,
}

/// The extensions [`Device::new`] enables, and whether calibrated
/// timestamps are among them.
struct DeviceExtensions {
    /// Their names, for `VkDeviceCreateInfo`.
    names: Vec<*const std::ffi::c_char>,
    /// `VK_EXT_calibrated_timestamps` is there, and the device reads both clocks.
    calibrated: bool,
}

/// The logical device and what hangs off it. Every Vulkan object of vkcuda
/// holds an `Arc<Device>`, so the device is destroyed after all of them.
/// Its fields are private (getters give them out): `Drop` destroys the
/// device vkcuda made, and every object made on it trusts its queue and
/// loaders, so none may be replaced.
///
/// Made by [`Device::new`] (vkcuda creates the device, and destroys it last)
/// or by [`Device::adopt`] (the integrator's device: never destroyed here).
pub struct Device {
    instance: ash::Instance,
    /// The instance vkcuda created, kept alive by the device; `None` for an
    /// adopted device, whose instance and device the integrator owns.
    owner: Option<Arc<Instance>>,
    info: GpuInfo,
    raw: ash::Device,
    queue: vk::Queue,
    queue_family: u32,
    memory_export: Option<platform::MemoryExport>,
    semaphore_export: Option<platform::SemaphoreExport>,
    /// `VK_EXT_calibrated_timestamps`, when the device can read its clock and
    /// `CLOCK_MONOTONIC` together.
    calibrated: Option<ash::ext::calibrated_timestamps::Device>,
    allocator: ManuallyDrop<Mutex<Allocator>>,
    /// Serializes host signals with queue submissions and presents; see [`Device::queue_op`].
    queue_ops: Mutex<()>,
}

impl Device {
    /// Creates the device with one queue of kind `queue` (presenting to its
    /// surface, if it names one: the swapchain extension is enabled then).
    /// `export_semaphores` asks for semaphore export (needed to hand timelines
    /// to CUDA); external memory is enabled whenever present; `extras` is what
    /// the caller's own work needs besides.
    ///
    /// ```no_run
    /// use vkcuda::types::QueueKind;
    /// use vkcuda::vk::{device::{self, Device, Queue}, instance::Instance};
    /// let instance = Instance::new(false, &[])?;
    /// let gpu = device::list_gpus(&instance)?.into_iter().next().expect("a Vulkan device");
    /// // A transfer queue (copy engines) if the device has one; no window, so no surface.
    /// let queue = Queue { kind: QueueKind::Transfer, present: None };
    /// let device = Device::new(instance, gpu, true, queue, Default::default())?;
    /// println!("queue family {} of {}", device.queue_family(), device.info());
    /// # Ok::<(), vkcuda::Error>(())
    /// ```
    pub fn new(
        instance: Arc<Instance>,
        info: GpuInfo,
        export_semaphores: bool,
        queue: Queue,
        extras: Extras,
    ) -> Result<Arc<Self>> {
        if !info.vulkan_1_3 {
            bail!(
                "{info} supports Vulkan below 1.3; vkcuda needs 1.3 (timeline semaphores, synchronization2)"
            );
        }
        let queue_family = Self::pick_queue_family(&instance, &info, &queue, extras.timestamps)?;
        let DeviceExtensions { names: extensions, calibrated: calibrates } =
            Self::device_extensions(&instance, &info, export_semaphores, extras, &queue)?;
        let priorities = [1.0];
        let queues = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(queue_family)
            .queue_priorities(&priorities)];
        // What the core needs (timeline semaphores, synchronization2), and the caller's extras.
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default().host_query_reset(extras.timestamps);
        let mut v13 =
            vk::PhysicalDeviceVulkan13Features::default().dynamic_rendering(extras.dynamic_rendering);
        super::enable_required_features(&mut v12, &mut v13);
        let create = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .enabled_extension_names(&extensions)
            .push_next(&mut v12)
            .push_next(&mut v13);
        // SAFETY: every pointer in `create` points into locals that outlive the call.
        let raw = unsafe { instance.raw().create_device(info.physical, &create, None) }
            .with_context(|| format!("vkCreateDevice on {info}"))?;
        // SAFETY: the family and index were requested in `create`.
        let queue = unsafe { raw.get_device_queue(queue_family, 0) };
        let memory_export = info.external.0.then(|| platform::MemoryExport::new(instance.raw(), &raw));
        let semaphore_export =
            export_semaphores.then(|| platform::SemaphoreExport::new(instance.raw(), &raw));
        let calibrated =
            calibrates.then(|| ash::ext::calibrated_timestamps::Device::new(instance.raw(), &raw));
        let allocator = allocator(instance.raw(), &raw, info.physical)?;
        Ok(Arc::new(Self {
            instance: instance.raw().clone(),
            owner: Some(instance),
            info,
            raw,
            queue,
            queue_family,
            memory_export,
            semaphore_export,
            calibrated,
            allocator,
            queue_ops: Mutex::new(()),
        }))
    }

    /// The queue family `queue` asks for on `info`'s device (one that can present
    /// to its surface, if it names one), which must write `timestamps` if asked.
    fn pick_queue_family(
        instance: &Instance,
        info: &GpuInfo,
        queue: &Queue,
        timestamps: bool,
    ) -> Result<u32> {
        // SAFETY: plain query on a live physical device.
        let families = unsafe { instance.raw().get_physical_device_queue_family_properties(info.physical) };
        let has = |i: &usize, f: vk::QueueFlags| families[*i].queue_flags.contains(f);
        let (g, c, t) = (vk::QueueFlags::GRAPHICS, vk::QueueFlags::COMPUTE, vk::QueueFlags::TRANSFER);
        let all = 0..families.len();
        let presents = |i: &usize| match &queue.present {
            None => true,
            Some((loader, surface)) => {
                // SAFETY: plain query with a live surface of this instance.
                let r =
                    unsafe { loader.get_physical_device_surface_support(info.physical, *i as u32, *surface) };
                r.unwrap_or(false)
            }
        };
        let all = all.filter(|i| presents(i));
        let found = match queue.kind {
            QueueKind::Graphics => all.clone().find(|i| has(i, g | c)),
            // A family without graphics runs on every SM; on GPUs with few graphics units
            // (H100) the graphics family's copies are many times slower.
            QueueKind::Compute => {
                all.clone().find(|i| has(i, c) && !has(i, g)).or_else(|| all.clone().find(|i| has(i, c)))
            }
            QueueKind::Transfer => {
                all.clone().find(|i| has(i, t) && !has(i, c | g)).or_else(|| all.clone().find(|i| has(i, t)))
            }
        };
        let queue_family = found.ok_or_else(|| {
            let what = if queue.present.is_some() { " that can present to the window" } else { "" };
            Error::unsupported(format!("{info} has no {:?} queue family{what}", queue.kind))
        })? as u32;
        if timestamps && families[queue_family as usize].timestamp_valid_bits == 0 {
            bail!("{info}: its {:?} queue cannot write timestamps", queue.kind);
        }
        Ok(queue_family)
    }

    /// The device extensions to enable: the swapchain when `queue` presents,
    /// memory export, semaphore export when asked, and with `extras`'
    /// timestamps calibrated ones where the device has both clocks.
    fn device_extensions(
        instance: &Instance,
        info: &GpuInfo,
        export_semaphores: bool,
        extras: Extras,
        queue: &Queue,
    ) -> Result<DeviceExtensions> {
        let mut extensions = Vec::new();
        if queue.present.is_some() {
            extensions.push(ash::khr::swapchain::NAME.as_ptr());
        }
        if info.external.0 {
            extensions.push(platform::MEMORY_EXTENSION.as_ptr());
        }
        if export_semaphores {
            if !info.external.1 {
                return Err(Error::MissingExtension {
                    extension: platform::SEMAPHORE_EXTENSION.to_string_lossy().into_owned(),
                    context: format!("{info}, exporting semaphores to CUDA"),
                });
            }
            extensions.push(platform::SEMAPHORE_EXTENSION.as_ptr());
        }
        let calibrates = extras.timestamps && info.calibrated_timestamps && {
            let loader = ash::ext::calibrated_timestamps::Instance::new(instance.entry(), instance.raw());
            // SAFETY: plain query on a live physical device that has the extension.
            let domains = unsafe { loader.get_physical_device_calibrateable_time_domains(info.physical) };
            let domains = domains.unwrap_or_default();
            [vk::TimeDomainEXT::DEVICE, vk::TimeDomainEXT::CLOCK_MONOTONIC]
                .iter()
                .all(|d| domains.contains(d))
        };
        if calibrates {
            extensions.push(ash::ext::calibrated_timestamps::NAME.as_ptr());
        }
        Ok(DeviceExtensions { names: extensions, calibrated: calibrates })
    }

    /// Wraps the integrator's device, created with [`crate::interop::requirements`]
    /// (Vulkan 1.3, the export extensions, timeline semaphores and
    /// synchronization2), and its queue `queue_index` of family `queue_family`.
    /// Nothing here destroys the device or the instance.
    ///
    /// Checked, each an error: `physical` is one of `instance`'s devices and
    /// supports Vulkan 1.3, timeline semaphores and synchronization2;
    /// `enabled_extensions` holds memory export
    /// ([`crate::platform::MEMORY_EXTENSION`]; ash would otherwise panic on
    /// the first call of a missing one); the queue family exists. Semaphore
    /// export ([`crate::platform::SEMAPHORE_EXTENSION`]) is needed only for
    /// timelines made exportable (CUDA imports them): without it in
    /// `enabled_extensions`, making one is an error, and frames whose
    /// timelines the host signals still work.
    ///
    /// Where vkcuda submits to the queue (each call serialized with the
    /// others through [`Device::queue_op`]): [`crate::interop::SharedFrames::new`]
    /// (one batch that prepares the frames, waited for), [`Device::run_once`],
    /// [`Device::wait_idle`] (which `SharedFrames`' drop calls: an empty batch
    /// with a fence) and the host signals of
    /// [`crate::vk::timeline::Timeline::signal`] and
    /// [`crate::interop::SharedFrames::stand_in`]. Every frame's batch is the
    /// engine's own submission.
    ///
    /// # Safety
    /// - `instance` and `device` are live, `device` was created from
    ///   `physical` of `instance`, and every extension in
    ///   `enabled_extensions` was enabled on it (it may have more: a
    ///   swapchain, the engine's own), with the features of
    ///   [`crate::interop::Requirements::enable_features`] enabled;
    /// - `device` has queue `queue_index` in family `queue_family`;
    /// - the queue is externally synchronized (`vkQueueSubmit`,
    ///   `vkQueuePresentKHR`, `vkQueueWaitIdle`): no other thread uses it
    ///   while vkcuda does (above). An engine that submits from other
    ///   threads wraps its own submits and presents in [`Device::queue_op`],
    ///   which serializes them with vkcuda's (validation layers before
    ///   1.4.347 also need its host signals serialized with every submit of
    ///   the device, whichever queue);
    /// - `device` and `instance` outlive every vkcuda object made with the
    ///   returned device: drop the returned `Arc<Device>`, and every object
    ///   holding a clone of it ([`crate::interop::SharedFrames`],
    ///   [`crate::interop::CudaFrames`] through it, timelines, buffers), before
    ///   `vkDestroyDevice`; the last clone's drop frees vkcuda's
    ///   gpu-allocator memory on `device`.
    pub unsafe fn adopt(
        instance: &ash::Instance,
        physical: vk::PhysicalDevice,
        device: &ash::Device,
        enabled_extensions: &[&CStr],
        queue_family: u32,
        queue_index: u32,
    ) -> Result<Arc<Self>> {
        // SAFETY: plain query on a live instance (the caller's promise).
        let physicals =
            unsafe { instance.enumerate_physical_devices() }.context("vkEnumeratePhysicalDevices")?;
        let index = physicals.iter().position(|p| *p == physical).ok_or_else(|| {
            Error::unsupported(format!(
                "Device::adopt: the physical device is not one of this instance's {} devices",
                physicals.len()
            ))
        })?;
        let info = gpu_info(instance, index, physical)?;
        if !info.vulkan_1_3 {
            bail!(
                "Device::adopt: {info} does not support Vulkan 1.3 (timeline semaphores, synchronization2)"
            );
        }
        if !enabled_extensions.contains(&platform::MEMORY_EXTENSION) {
            let missing = platform::MEMORY_EXTENSION;
            return Err(Error::MissingExtension {
                extension: missing.to_string_lossy().into_owned(),
                context: "Device::adopt: the device was created without it (enable what interop::requirements() lists)"
                    .into(),
            });
        }
        // SAFETY: plain query on a live physical device.
        let families = unsafe { instance.get_physical_device_queue_family_properties(physical) };
        if families.get(queue_family as usize).is_none_or(|f| queue_index >= f.queue_count) {
            bail!("Device::adopt: {info} has no queue {queue_index} in family {queue_family}");
        }
        // SAFETY: the integrator created the device with this queue.
        let queue = unsafe { device.get_device_queue(queue_family, queue_index) };
        let allocator = allocator(instance, device, physical)?;
        Ok(Arc::new(Self {
            instance: instance.clone(),
            owner: None,
            info,
            raw: device.clone(),
            queue,
            queue_family,
            memory_export: Some(platform::MemoryExport::new(instance, device)),
            semaphore_export: enabled_extensions
                .contains(&platform::SEMAPHORE_EXTENSION)
                .then(|| platform::SemaphoreExport::new(instance, device)),
            calibrated: None,
            allocator,
            queue_ops: Mutex::new(()),
        }))
    }

    /// The instance's entry points.
    pub fn instance(&self) -> &ash::Instance {
        &self.instance
    }

    /// The physical device.
    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    /// The logical device's entry points.
    pub fn raw(&self) -> &ash::Device {
        &self.raw
    }

    /// The one queue vkcuda submits to (set-up, and the application's consumer).
    pub fn queue(&self) -> vk::Queue {
        self.queue
    }

    /// The queue's family.
    pub fn queue_family(&self) -> u32 {
        self.queue_family
    }

    /// Memory export ([`crate::platform::MEMORY_EXTENSION`]), when enabled.
    pub fn memory_export(&self) -> Option<&platform::MemoryExport> {
        self.memory_export.as_ref()
    }

    /// Semaphore export ([`crate::platform::SEMAPHORE_EXTENSION`]), when enabled.
    pub fn semaphore_export(&self) -> Option<&platform::SemaphoreExport> {
        self.semaphore_export.as_ref()
    }

    /// The instance vkcuda created and this device keeps alive (`None` for an
    /// adopted device): a device made again after this one was lost is made
    /// on it, so the window's surface and the validation counts carry over.
    pub fn owner(&self) -> Option<&Arc<Instance>> {
        self.owner.as_ref()
    }

    /// The validation messages counted so far by the instance vkcuda created
    /// (all zero without validation, and for an adopted device).
    pub fn validation(&self) -> ValidationCounts {
        self.owner.as_ref().map(|i| i.validation().counts()).unwrap_or_default()
    }

    /// Runs `op`, a `vkSignalSemaphore`, `vkQueueSubmit2` or `vkQueuePresentKHR`,
    /// never at the same time as another of them on this device.
    ///
    /// The spec allows a host signal on one thread while another submits, and
    /// vkcuda does that (a host producer signals "rendered" while the consumer
    /// submits). The Khronos validation layer before 1.4.347 does not: its
    /// synchronization validation updates its queue state from
    /// `vkSignalSemaphore` without its queue lock, and can corrupt its own
    /// memory (docs/sync.md, "Host waits and host signals";
    /// `examples/host_wait_race.rs` without `--lock`). Serializing the calls
    /// is correct by the spec with any layer, and cheap: none of the three blocks.
    pub fn queue_op<T>(&self, op: impl FnOnce() -> T) -> T {
        let _serialized = self.queue_ops.lock().unwrap_or_else(|p| p.into_inner());
        op()
    }

    /// The allocator that serves every allocation except the exportable images.
    pub fn allocator(&self) -> MutexGuard<'_, Allocator> {
        // A panic while allocating leaves nothing half-done worth refusing.
        self.allocator.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The index of a memory type allowed by `type_bits` that has `flags`.
    pub fn memory_type(&self, type_bits: u32, flags: vk::MemoryPropertyFlags) -> Result<u32> {
        // SAFETY: plain query on a live physical device.
        let props = unsafe { self.instance.get_physical_device_memory_properties(self.info.physical) };
        (0..props.memory_type_count)
            .find(|&i| {
                type_bits & (1 << i) != 0 && props.memory_types[i as usize].property_flags.contains(flags)
            })
            .ok_or_else(|| {
                Error::unsupported(format!("no memory type with {flags:?} among bits {type_bits:#b}"))
            })
    }

    /// Records commands with `record`, submits them, and waits (set-up and teardown only).
    pub fn run_once(&self, what: &str, record: impl FnOnce(vk::CommandBuffer)) -> Result<()> {
        let pool_info = vk::CommandPoolCreateInfo::default()
            .queue_family_index(self.queue_family)
            .flags(vk::CommandPoolCreateFlags::TRANSIENT);
        // SAFETY: valid create info; the pool is destroyed below.
        let pool = unsafe { self.raw.create_command_pool(&pool_info, None) }?;
        let result = (|| -> Result<()> {
            let alloc = vk::CommandBufferAllocateInfo::default().command_pool(pool).command_buffer_count(1);
            // SAFETY: `pool` is live; one primary buffer.
            let cmd = unsafe { self.raw.allocate_command_buffers(&alloc) }?[0];
            let begin =
                vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
            // SAFETY: a fresh command buffer from `pool`.
            unsafe { self.raw.begin_command_buffer(cmd, &begin) }?;
            record(cmd);
            // SAFETY: recording was begun above.
            unsafe { self.raw.end_command_buffer(cmd) }?;
            // SAFETY: default fence create info.
            let fence = unsafe { self.raw.create_fence(&vk::FenceCreateInfo::default(), None) }?;
            let cmds = [vk::CommandBufferSubmitInfo::default().command_buffer(cmd)];
            let submit = [vk::SubmitInfo2::default().command_buffer_infos(&cmds)];
            let waited = self.queue_op(|| {
                // SAFETY: the queue is only used from this thread at set-up/teardown; `cmd` is executable.
                unsafe { self.raw.queue_submit2(self.queue, &submit, fence) }
            });
            let waited = waited.and_then(|_| {
                // SAFETY: `fence` was just submitted.
                unsafe { self.raw.wait_for_fences(&[fence], true, super::WAIT_TIMEOUT.as_nanos() as u64) }
            });
            // SAFETY: the fence is signalled or the wait failed; either way the GPU is done with it
            // or the device is lost.
            unsafe { self.raw.destroy_fence(fence, None) };
            waited.with_context(|| format!("{what} (waited up to {:?})", super::WAIT_TIMEOUT))
        })();
        // SAFETY: the submission finished (or failed to start); nothing uses the pool now.
        unsafe { self.raw.destroy_command_pool(pool, None) };
        result
    }

    /// Waits until everything submitted to the queue so far has finished, for
    /// at most [`super::WAIT_TIMEOUT`] (teardown waits here before it destroys
    /// what the queue may use). `vkQueueWaitIdle` cannot be bounded: this
    /// submits no batch but a fence, which signals once all earlier
    /// submissions to the queue have completed, and waits for that. A lost
    /// device counts as idle (nothing on it runs any more).
    pub fn wait_idle(&self) -> Result<()> {
        // SAFETY: default create info; destroyed below, or leaked if still pending.
        let fence = unsafe { self.raw.create_fence(&vk::FenceCreateInfo::default(), None) }
            .context("vkCreateFence")?;
        let submitted = self.queue_op(|| {
            // SAFETY: submissions to the queue are serialized by `queue_op`; no batch, only the fence.
            unsafe { self.raw.queue_submit2(self.queue, &[], fence) }
        });
        let waited = submitted.and_then(|()| {
            // SAFETY: the fence was just submitted.
            unsafe { self.raw.wait_for_fences(&[fence], true, super::WAIT_TIMEOUT.as_nanos() as u64) }
        });
        match waited {
            Err(vk::Result::TIMEOUT) => {
                // Still pending: destroying the fence now would be invalid.
                Err(Error::TimedOut {
                    what: "the queue to finish its work".into(),
                    after: super::WAIT_TIMEOUT,
                })
            }
            other => {
                // SAFETY: the fence was never submitted, or has signalled.
                unsafe { self.raw.destroy_fence(fence, None) };
                match other {
                    Ok(()) | Err(vk::Result::ERROR_DEVICE_LOST) => Ok(()),
                    Err(e) => Err(e).context("waiting for the queue to finish its work"),
                }
            }
        }
    }

    /// The device's timestamp clock and the host's `CLOCK_MONOTONIC`, read at
    /// once by `vkGetCalibratedTimestampsEXT`, or `None` when the device
    /// cannot do that.
    pub fn calibrated_timestamps(&self) -> Option<CalibratedTimestamps> {
        let loader = self.calibrated.as_ref()?;
        let info = [
            vk::CalibratedTimestampInfoEXT::default().time_domain(vk::TimeDomainEXT::DEVICE),
            vk::CalibratedTimestampInfoEXT::default().time_domain(vk::TimeDomainEXT::CLOCK_MONOTONIC),
        ];
        // SAFETY: the extension is enabled and both domains are supported (checked at creation).
        let (stamps, _deviation) = unsafe { loader.get_calibrated_timestamps(&info) }.ok()?;
        Some(CalibratedTimestamps { device_ticks: stamps[0], host_ns: stamps[1] })
    }

    /// The memory heaps, in the device's order.
    pub fn memory_heaps(&self) -> Vec<MemoryHeap> {
        // SAFETY: plain query on a live physical device.
        let props = unsafe { self.instance.get_physical_device_memory_properties(self.info.physical) };
        let types = &props.memory_types[..props.memory_type_count as usize];
        (0..props.memory_heap_count as usize)
            .map(|i| {
                let heap = props.memory_heaps[i];
                let host = types.iter().any(|t| {
                    t.heap_index as usize == i
                        && t.property_flags.contains(vk::MemoryPropertyFlags::HOST_VISIBLE)
                });
                MemoryHeap {
                    size: heap.size,
                    device_local: heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL),
                    host_visible: host,
                }
            })
            .collect()
    }

    /// Nanoseconds per timestamp tick, as a duration.
    pub fn timestamp_period(&self) -> Duration {
        Duration::from_secs_f64(f64::from(self.info.timestamp_period) * 1e-9)
    }
}

/// One reading of two clocks at the same moment ([`Device::calibrated_timestamps`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CalibratedTimestamps {
    /// The device's timestamp clock, in ticks ([`Device::timestamp_period`] each).
    pub device_ticks: u64,
    /// The host's `CLOCK_MONOTONIC`, in nanoseconds.
    pub host_ns: u64,
}

/// One memory heap of a device ([`Device::memory_heaps`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryHeap {
    /// Its size in bytes.
    pub size: u64,
    /// It is device-local.
    pub device_local: bool,
    /// A host-visible memory type is in it.
    pub host_visible: bool,
}

/// The allocator for everything but the exportable images.
fn allocator(
    instance: &ash::Instance,
    device: &ash::Device,
    physical: vk::PhysicalDevice,
) -> Result<ManuallyDrop<Mutex<Allocator>>> {
    let allocator = Allocator::new(&AllocatorCreateDesc {
        instance: instance.clone(),
        device: device.clone(),
        physical_device: physical,
        debug_settings: Default::default(),
        buffer_device_address: false,
        allocation_sizes: Default::default(),
    })
    .context("creating the memory allocator")?;
    Ok(ManuallyDrop::new(Mutex::new(allocator)))
}

impl Drop for Device {
    fn drop(&mut self) {
        let owned = self.owner.is_some();
        if owned {
            // SAFETY: no other thread uses the device any more (all holders of the Arc are gone).
            unsafe { self.raw.device_wait_idle() }.ok();
        }
        // SAFETY: the allocator is dropped once, before the device it allocates from.
        unsafe { ManuallyDrop::drop(&mut self.allocator) };
        if owned {
            // SAFETY: we created the device; every child object held an Arc<Device>; none is left.
            unsafe { self.raw.destroy_device(None) };
        }
    }
}
