//! A standalone reproduction, with no vkcuda code, of the false
//! `SYNC-HAZARD-WRITE-AFTER-READ` that the Khronos validation layer (1.4.309,
//! synchronization validation) reports for a host producer. See docs/sync.md,
//! "Host waits and host signals".
//!
//! One image, one timeline `T`, two threads:
//! - the host producer, for frame k: `vkWaitSemaphores(T ≥ 2k)` (the consumer
//!   finished frame k − 1), then `vkSignalSemaphore(T = 2k + 1)`;
//! - the consumer, for frame k: one submission that waits `T ≥ 2k + 1`,
//!   uploads into the image (`vkCmdCopyBufferToImage`), reads it
//!   (`vkCmdCopyImageToBuffer`), and signals `T = 2k + 2`.
//!
//! By the spec frame k's upload is ordered after frame k − 1's read: signal
//! 2k → host wait → host signal 2k + 1 → the GPU wait. The layer records a
//! submission's signals only after the driver ran it, so when the producer's
//! wait falls in between, the layer loses it and reports the upload. With
//! `--barrier`, an execution barrier (COPY → COPY) before the upload states
//! the order on the queue, and the reports stop.
//!
//! A second layer bug shows in the same program: up to 1.4.346 the layer's
//! `vkSignalSemaphore` updates its queue state without its queue lock, so a
//! host signal concurrent with `vkQueueSubmit2` can corrupt its memory (glibc
//! "double free", abort; seen on the H100). With `--lock`, the program
//! serializes its host signals and submissions itself, as vkcuda does
//! (`Device::queue_op`).
//!
//! ```text
//! cargo run --release --example host_wait_race                      # hazards; now and then an abort (layer 1.4.309)
//! cargo run --release --example host_wait_race -- --barrier --lock  # 0 messages
//! ```
//!
//! And one of layer 1.3.239: it records a host signal in two steps around
//! the driver's call, and when the queue's wait for that value was recorded
//! first, its timeline tracking can stall for 10 s and report
//! `UNASSIGNED-VkSemaphore-state-timeout` and `VkFence-state-timeout` ("most
//! likely a validation bug"). `--spawn 16` (the producer starts and joins 16
//! short-lived threads per frame) makes that window wide enough to hit: on
//! the H100, 3 of 6 runs. With `--signal-first` the consumer submits frame k
//! only after the producer's `vkSignalSemaphore` for it has returned, as
//! vkcuda does for its host producers (`Session::submit`): 0 of 6.
//!
//! Exit code: 0 when the layer reported nothing, 1 otherwise.

use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ash::vk;

type Error = Box<dyn std::error::Error>;

const FRAMES: u64 = 3000;
const SIZE: u32 = 64;
const SLOTS: usize = 3;

static MESSAGES: AtomicU64 = AtomicU64::new(0);

unsafe extern "system" fn on_message(
    _: vk::DebugUtilsMessageSeverityFlagsEXT,
    _: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: the layer passes valid callback data for this call.
    let data = unsafe { &*data };
    // SAFETY: its message is NUL-terminated.
    let text = unsafe { data.message_as_c_str() }.map(|m| m.to_string_lossy().into_owned());
    if MESSAGES.fetch_add(1, Ordering::Relaxed) < 3 {
        eprintln!("layer: {}", text.unwrap_or_default());
    }
    vk::FALSE
}

/// The command line.
struct Options {
    barrier: bool,
    lock: bool,
    signal_first: bool,
    /// The producer starts and joins this many short-lived threads per frame (as a CPU
    /// renderer that spawns its workers each frame does).
    spawn: usize,
}

impl Options {
    fn parse() -> Self {
        let has = |flag: &str| std::env::args().any(|a| a == flag);
        let spawn = std::env::args().skip_while(|a| a != "--spawn").nth(1).and_then(|n| n.parse().ok());
        Options {
            barrier: has("--barrier"),
            lock: has("--lock"),
            signal_first: has("--signal-first"),
            spawn: spawn.unwrap_or(0),
        }
    }
}

fn main() -> Result<(), Error> {
    let options = Options::parse();
    // SAFETY: loads the system's Vulkan loader.
    let entry = unsafe { ash::Entry::load() }?;
    let Validated { instance, utils, messenger, layer } = validated_instance(&entry)?;
    let gpu = Gpu::new(&instance)?;
    let serialized = QueueOps { lock: options.lock, ops: Mutex::new(()) };
    let signalled = AtomicU64::new(0);
    std::thread::scope(|scope| -> Result<(), Error> {
        let producer = scope.spawn(|| produce(&gpu, options.spawn, &serialized, &signalled));
        for k in 0..FRAMES {
            // With --signal-first, frame k is submitted only once the producer's signal for it
            // has returned: the layer then never sees the wait before the signal.
            while options.signal_first && signalled.load(Ordering::Acquire) <= k {
                std::thread::yield_now();
            }
            gpu.consume(k, options.barrier, &serialized)?;
        }
        producer.join().map_err(|_| "producer panicked")??;
        Ok(())
    })?;
    gpu.destroy()?;
    // SAFETY: the device is gone; nothing uses the messenger or the instance any more.
    unsafe { utils.destroy_debug_utils_messenger(messenger, None) };
    // SAFETY: as above; its messenger is gone.
    unsafe { instance.destroy_instance(None) };
    let n = MESSAGES.load(Ordering::Relaxed);
    println!(
        "host_wait_race: {FRAMES} frames, {} the barrier, {} the lock: {n} validation messages (layer {layer})",
        if options.barrier { "with" } else { "without" },
        if options.lock { "with" } else { "without" },
    );
    std::process::exit(i32::from(n > 0));
}

/// An instance with the validation layer, and what counts the layer's messages.
struct Validated {
    instance: ash::Instance,
    utils: ash::ext::debug_utils::Instance,
    /// Counts the messages ([`on_message`]).
    messenger: vk::DebugUtilsMessengerEXT,
    /// The layer's version, for people.
    layer: String,
}

/// An instance with the Khronos validation layer, synchronization validation on, and a
/// messenger that counts its messages; with the layer's version.
fn validated_instance(entry: &ash::Entry) -> Result<Validated, Error> {
    const LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";
    // SAFETY: plain query.
    let layer = unsafe { entry.enumerate_instance_layer_properties() }?
        .iter()
        .find(|l| l.layer_name_as_c_str() == Ok(LAYER))
        .map(|l| {
            let v = l.spec_version;
            format!("{}.{}.{}", vk::api_version_major(v), vk::api_version_minor(v), vk::api_version_patch(v))
        })
        .ok_or("the Khronos validation layer is not installed")?;
    let layers = [LAYER.as_ptr()];
    let extensions = [ash::ext::debug_utils::NAME.as_ptr()];
    let enables = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
    let mut features = vk::ValidationFeaturesEXT::default().enabled_validation_features(&enables);
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
    let info = vk::InstanceCreateInfo::default()
        .application_info(&app)
        .enabled_layer_names(&layers)
        .enabled_extension_names(&extensions)
        .push_next(&mut features);
    // SAFETY: the create info points into locals.
    let instance = unsafe { entry.create_instance(&info, None) }?;
    let utils = ash::ext::debug_utils::Instance::new(entry, &instance);
    use vk::DebugUtilsMessageSeverityFlagsEXT as Severity;
    use vk::DebugUtilsMessageTypeFlagsEXT as Kind;
    let messenger_info = vk::DebugUtilsMessengerCreateInfoEXT::default()
        .message_severity(Severity::WARNING | Severity::ERROR)
        .message_type(Kind::VALIDATION | Kind::GENERAL)
        .pfn_user_callback(Some(on_message));
    // SAFETY: a live instance; the callback is a plain function.
    let messenger = unsafe { utils.create_debug_utils_messenger(&messenger_info, None) }?;
    Ok(Validated { instance, utils, messenger, layer })
}

/// Host signals and submissions: with --lock, never at the same time.
struct QueueOps {
    lock: bool,
    ops: Mutex<()>,
}

impl QueueOps {
    fn run(&self, op: impl FnOnce() -> Result<(), vk::Result>) -> Result<(), vk::Result> {
        let _guard = self.lock.then(|| self.ops.lock().unwrap_or_else(|p| p.into_inner()));
        op()
    }
}

/// The host producer, for frame k: wait until the consumer finished frame k − 1 (`T ≥ 2k`),
/// then signal `T = 2k + 1`.
fn produce(gpu: &Gpu, spawn: usize, serialized: &QueueOps, signalled: &AtomicU64) -> Result<(), vk::Result> {
    for k in 0..FRAMES {
        let (values, semaphores) = ([2 * k], [gpu.timeline]);
        let wait = vk::SemaphoreWaitInfo::default().semaphores(&semaphores).values(&values);
        // SAFETY: a live timeline; 10 s at most.
        unsafe { gpu.device.wait_semaphores(&wait, 10_000_000_000) }?;
        std::thread::scope(|s| {
            for _ in 0..spawn {
                s.spawn(|| std::hint::black_box((0..2000u64).sum::<u64>()));
            }
        });
        let signal = vk::SemaphoreSignalInfo::default().semaphore(gpu.timeline).value(2 * k + 1);
        serialized.run(|| {
            // SAFETY: a live timeline; values rise.
            unsafe { gpu.device.signal_semaphore(&signal) }
        })?;
        signalled.store(k + 1, Ordering::Release);
    }
    Ok(())
}

/// The device and every object the two threads use: one image, an upload buffer, a
/// readback buffer per slot, the timeline, and per slot a command buffer and a fence.
struct Gpu {
    device: ash::Device,
    queue: vk::Queue,
    memory: vk::PhysicalDeviceMemoryProperties,
    image: WithMemory<vk::Image>,
    /// The upload's source, then one readback buffer per slot (reused only after the
    /// slot's fence, which the consumer waits for: the layer sees that wait).
    buffers: Vec<WithMemory<vk::Buffer>>,
    timeline: vk::Semaphore,
    pool: vk::CommandPool,
    cmds: Vec<vk::CommandBuffer>,
    fences: Vec<vk::Fence>,
}

/// An image or buffer and the memory bound to it.
#[derive(Clone, Copy)]
struct WithMemory<T> {
    object: T,
    memory: vk::DeviceMemory,
}

impl Gpu {
    fn new(instance: &ash::Instance) -> Result<Self, Error> {
        // SAFETY: plain query.
        let physical =
            *unsafe { instance.enumerate_physical_devices() }?.first().ok_or("no Vulkan device")?;
        // Family 0 supports transfer on every device this runs on.
        let priorities = [1.0];
        let queues =
            [vk::DeviceQueueCreateInfo::default().queue_family_index(0).queue_priorities(&priorities)];
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(true);
        let mut v13 = vk::PhysicalDeviceVulkan13Features::default().synchronization2(true);
        let create = vk::DeviceCreateInfo::default()
            .queue_create_infos(&queues)
            .push_next(&mut v12)
            .push_next(&mut v13);
        // SAFETY: the create info points into locals.
        let device = unsafe { instance.create_device(physical, &create, None) }?;
        // SAFETY: the queue was requested above.
        let queue = unsafe { device.get_device_queue(0, 0) };
        // SAFETY: plain query.
        let memory = unsafe { instance.get_physical_device_memory_properties(physical) };
        let mut kind = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE);
        let info = vk::SemaphoreCreateInfo::default().push_next(&mut kind);
        // SAFETY: valid create info.
        let timeline = unsafe { device.create_semaphore(&info, None) }?;
        let flags = vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER;
        let pool_info = vk::CommandPoolCreateInfo::default().queue_family_index(0).flags(flags);
        // SAFETY: valid create info.
        let pool = unsafe { device.create_command_pool(&pool_info, None) }?;
        let alloc =
            vk::CommandBufferAllocateInfo::default().command_pool(pool).command_buffer_count(SLOTS as u32);
        // SAFETY: a live pool.
        let cmds = unsafe { device.allocate_command_buffers(&alloc) }?;
        let signalled = vk::FenceCreateInfo::default().flags(vk::FenceCreateFlags::SIGNALED);
        // SAFETY: valid create info.
        let fences = (0..SLOTS).map(|_| unsafe { device.create_fence(&signalled, None) });
        let fences = fences.collect::<Result<_, _>>()?;
        let none = WithMemory { object: vk::Image::null(), memory: vk::DeviceMemory::null() };
        let mut gpu =
            Gpu { device, queue, memory, image: none, buffers: Vec::new(), timeline, pool, cmds, fences };
        gpu.image = gpu.image()?;
        let usages = [vk::BufferUsageFlags::TRANSFER_SRC]
            .into_iter()
            .chain([vk::BufferUsageFlags::TRANSFER_DST; SLOTS]);
        for usage in usages {
            let buffer = gpu.buffer(usage)?;
            gpu.buffers.push(buffer);
        }
        Ok(gpu)
    }

    /// Device memory for `req`.
    fn allocate(&self, req: vk::MemoryRequirements) -> Result<vk::DeviceMemory, Error> {
        let index = (0..self.memory.memory_type_count)
            .find(|&i| req.memory_type_bits & (1 << i) != 0)
            .ok_or("no memory type")?;
        let info = vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(index);
        // SAFETY: valid allocate info.
        Ok(unsafe { self.device.allocate_memory(&info, None) }?)
    }

    /// The image, SIZE × SIZE RGBA8, with its memory.
    fn image(&self) -> Result<WithMemory<vk::Image>, Error> {
        let image_info = vk::ImageCreateInfo::default()
            .image_type(vk::ImageType::TYPE_2D)
            .format(vk::Format::R8G8B8A8_UNORM)
            .extent(vk::Extent3D { width: SIZE, height: SIZE, depth: 1 })
            .mip_levels(1)
            .array_layers(1)
            .samples(vk::SampleCountFlags::TYPE_1)
            .usage(vk::ImageUsageFlags::TRANSFER_SRC | vk::ImageUsageFlags::TRANSFER_DST);
        // SAFETY: valid create info; memory is bound right after.
        let image = unsafe { self.device.create_image(&image_info, None) }?;
        // SAFETY: a live image.
        let memory = self.allocate(unsafe { self.device.get_image_memory_requirements(image) })?;
        // SAFETY: fresh memory of the required size.
        unsafe { self.device.bind_image_memory(image, memory, 0) }?;
        Ok(WithMemory { object: image, memory })
    }

    /// A buffer of one image's bytes, with its memory.
    fn buffer(&self, usage: vk::BufferUsageFlags) -> Result<WithMemory<vk::Buffer>, Error> {
        let info = vk::BufferCreateInfo::default().size(u64::from(SIZE * SIZE * 4)).usage(usage);
        // SAFETY: valid create info; memory is bound right after.
        let buffer = unsafe { self.device.create_buffer(&info, None) }?;
        // SAFETY: a live buffer.
        let memory = self.allocate(unsafe { self.device.get_buffer_memory_requirements(buffer) })?;
        // SAFETY: fresh memory of the required size.
        unsafe { self.device.bind_buffer_memory(buffer, memory, 0) }?;
        Ok(WithMemory { object: buffer, memory })
    }

    /// The consumer, for frame k: one submission that waits `T ≥ 2k + 1`, uploads into the
    /// image, reads it back, and signals `T = 2k + 2`.
    fn consume(&self, k: u64, barrier: bool, serialized: &QueueOps) -> Result<(), Error> {
        let slot = k as usize % SLOTS;
        let (cmd, fence) = (self.cmds[slot], [self.fences[slot]]);
        // SAFETY: the fence belongs to this slot's last submission; then its objects are free.
        unsafe { self.device.wait_for_fences(&fence, true, 10_000_000_000) }?;
        // SAFETY: signalled, so no submission uses it.
        unsafe { self.device.reset_fences(&fence) }?;
        self.record(cmd, k, slot, barrier)?;
        let at = |value| {
            vk::SemaphoreSubmitInfo::default()
                .semaphore(self.timeline)
                .value(value)
                .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)
        };
        let (waits, signals) = ([at(2 * k + 1)], [at(2 * k + 2)]);
        let cmd_infos = [vk::CommandBufferSubmitInfo::default().command_buffer(cmd)];
        let submit = [vk::SubmitInfo2::default()
            .wait_semaphore_infos(&waits)
            .command_buffer_infos(&cmd_infos)
            .signal_semaphore_infos(&signals)];
        serialized.run(|| {
            // SAFETY: only this thread submits; everything referenced is live.
            unsafe { self.device.queue_submit2(self.queue, &submit, fence[0]) }
        })?;
        Ok(())
    }

    /// Frame k's commands: the upload (after an execution barrier only with `barrier`),
    /// then the readback into slot `slot`'s buffer.
    fn record(&self, cmd: vk::CommandBuffer, k: u64, slot: usize, barrier: bool) -> Result<(), Error> {
        let layers =
            vk::ImageSubresourceLayers::default().aspect_mask(vk::ImageAspectFlags::COLOR).layer_count(1);
        let extent = vk::Extent3D { width: SIZE, height: SIZE, depth: 1 };
        let region = [vk::BufferImageCopy::default().image_subresource(layers).image_extent(extent)];
        let range = vk::ImageSubresourceRange::default()
            .aspect_mask(vk::ImageAspectFlags::COLOR)
            .level_count(1)
            .layer_count(1);
        let general = vk::ImageLayout::GENERAL;
        let copy = vk::PipelineStageFlags2::COPY;
        // Without --barrier the first scope is empty: only the host chain orders the upload.
        let to_general = [vk::ImageMemoryBarrier2::default()
            .src_stage_mask(if barrier { copy } else { vk::PipelineStageFlags2::NONE })
            .dst_stage_mask(copy)
            .dst_access_mask(vk::AccessFlags2::TRANSFER_WRITE)
            .old_layout(if k == 0 { vk::ImageLayout::UNDEFINED } else { general })
            .new_layout(general)
            .image(self.image.object)
            .subresource_range(range)];
        let written = [vk::ImageMemoryBarrier2::default()
            .src_stage_mask(copy)
            .src_access_mask(vk::AccessFlags2::TRANSFER_WRITE)
            .dst_stage_mask(copy)
            .dst_access_mask(vk::AccessFlags2::TRANSFER_READ)
            .old_layout(general)
            .new_layout(general)
            .image(self.image.object)
            .subresource_range(range)];
        let (to_general, written) = (
            vk::DependencyInfo::default().image_memory_barriers(&to_general),
            vk::DependencyInfo::default().image_memory_barriers(&written),
        );
        let (upload, readback) = (self.buffers[0].object, self.buffers[1 + slot].object);
        // Recording into a reset buffer; every object is live.
        // SAFETY: as above.
        unsafe { self.device.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default()) }?;
        // SAFETY: as above.
        unsafe { self.device.cmd_pipeline_barrier2(cmd, &to_general) };
        // SAFETY: as above.
        unsafe { self.device.cmd_copy_buffer_to_image(cmd, upload, self.image.object, general, &region) };
        // SAFETY: as above.
        unsafe { self.device.cmd_pipeline_barrier2(cmd, &written) };
        // SAFETY: as above.
        unsafe { self.device.cmd_copy_image_to_buffer(cmd, self.image.object, general, readback, &region) };
        // SAFETY: as above.
        Ok(unsafe { self.device.end_command_buffer(cmd) }?)
    }

    /// Teardown once the queue is idle: every object is ours, destroyed once.
    fn destroy(self) -> Result<(), Error> {
        let device = &self.device;
        // SAFETY: only this thread uses the device now.
        unsafe { device.device_wait_idle() }?;
        for f in self.fences {
            // SAFETY: as above.
            unsafe { device.destroy_fence(f, None) };
        }
        // SAFETY: as above; its command buffers go with it.
        unsafe { device.destroy_command_pool(self.pool, None) };
        // SAFETY: as above.
        unsafe { device.destroy_semaphore(self.timeline, None) };
        for WithMemory { object: buffer, memory } in self.buffers {
            // SAFETY: as above; the buffer before its memory.
            unsafe { device.destroy_buffer(buffer, None) };
            // SAFETY: as above.
            unsafe { device.free_memory(memory, None) };
        }
        // SAFETY: as above; the image before its memory.
        unsafe { device.destroy_image(self.image.object, None) };
        // SAFETY: as above.
        unsafe { device.free_memory(self.image.memory, None) };
        // SAFETY: every object made on it is gone.
        unsafe { device.destroy_device(None) };
        Ok(())
    }
}
