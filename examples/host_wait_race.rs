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
    // SAFETY: the layer passes valid callback data with a NUL-terminated message for this call.
    let text = unsafe { (*data).message_as_c_str() }.map(|m| m.to_string_lossy().into_owned());
    if MESSAGES.fetch_add(1, Ordering::Relaxed) < 3 {
        eprintln!("layer: {}", text.unwrap_or_default());
    }
    vk::FALSE
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let barrier = std::env::args().any(|a| a == "--barrier");
    let lock = std::env::args().any(|a| a == "--lock");
    // --spawn N: the producer starts and joins N short-lived threads per frame (as a CPU
    // renderer that spawns its workers each frame does).
    let signal_first = std::env::args().any(|a| a == "--signal-first");
    let signalled = AtomicU64::new(0);
    let spawn: usize =
        std::env::args().skip_while(|a| a != "--spawn").nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
    let queue_ops = Mutex::new(());
    // With --lock, host signals and submissions never run at the same time.
    let serialized = |op: &mut dyn FnMut() -> Result<(), vk::Result>| {
        let _guard = lock.then(|| queue_ops.lock().unwrap_or_else(|p| p.into_inner()));
        op()
    };
    // SAFETY: loads the system's Vulkan loader.
    let entry = unsafe { ash::Entry::load() }?;
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
    let utils = ash::ext::debug_utils::Instance::new(&entry, &instance);
    let messenger_info = vk::DebugUtilsMessengerCreateInfoEXT::default()
        .message_severity(
            vk::DebugUtilsMessageSeverityFlagsEXT::WARNING | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
        )
        .message_type(
            vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION | vk::DebugUtilsMessageTypeFlagsEXT::GENERAL,
        )
        .pfn_user_callback(Some(on_message));
    // SAFETY: a live instance; the callback is a plain function.
    let messenger = unsafe { utils.create_debug_utils_messenger(&messenger_info, None) }?;
    // SAFETY: plain query.
    let physical = *unsafe { instance.enumerate_physical_devices() }?.first().ok_or("no Vulkan device")?;
    // Family 0 supports transfer on every device this runs on.
    let family = 0;
    let priorities = [1.0];
    let queues =
        [vk::DeviceQueueCreateInfo::default().queue_family_index(family).queue_priorities(&priorities)];
    let mut v12 = vk::PhysicalDeviceVulkan12Features::default().timeline_semaphore(true);
    let mut v13 = vk::PhysicalDeviceVulkan13Features::default().synchronization2(true);
    let create =
        vk::DeviceCreateInfo::default().queue_create_infos(&queues).push_next(&mut v12).push_next(&mut v13);
    // SAFETY: the create info points into locals.
    let device = unsafe { instance.create_device(physical, &create, None) }?;
    // SAFETY: the queue was requested above.
    let queue = unsafe { device.get_device_queue(family, 0) };
    // SAFETY: plain query.
    let memory = unsafe { instance.get_physical_device_memory_properties(physical) };
    let allocate = |req: vk::MemoryRequirements, flags: vk::MemoryPropertyFlags| {
        let index = (0..memory.memory_type_count)
            .find(|&i| {
                req.memory_type_bits & (1 << i) != 0
                    && memory.memory_types[i as usize].property_flags.contains(flags)
            })
            .ok_or("no memory type")?;
        let info = vk::MemoryAllocateInfo::default().allocation_size(req.size).memory_type_index(index);
        // SAFETY: valid allocate info.
        unsafe { device.allocate_memory(&info, None) }.map_err(|e| e.to_string())
    };

    let image_info = vk::ImageCreateInfo::default()
        .image_type(vk::ImageType::TYPE_2D)
        .format(vk::Format::R8G8B8A8_UNORM)
        .extent(vk::Extent3D { width: SIZE, height: SIZE, depth: 1 })
        .mip_levels(1)
        .array_layers(1)
        .samples(vk::SampleCountFlags::TYPE_1)
        .usage(vk::ImageUsageFlags::TRANSFER_SRC | vk::ImageUsageFlags::TRANSFER_DST);
    // SAFETY: valid create info; memory is bound right after.
    let image = unsafe { device.create_image(&image_info, None) }?;
    // SAFETY: a live image.
    let image_memory =
        allocate(unsafe { device.get_image_memory_requirements(image) }, vk::MemoryPropertyFlags::empty())?;
    // SAFETY: fresh memory of the required size.
    unsafe { device.bind_image_memory(image, image_memory, 0) }?;
    // The upload's source, then one readback buffer per slot (reused only after the slot's
    // fence, which this thread waits for: the layer sees that wait).
    let mut buffers = Vec::new();
    let usages =
        [vk::BufferUsageFlags::TRANSFER_SRC].into_iter().chain([vk::BufferUsageFlags::TRANSFER_DST; SLOTS]);
    for usage in usages {
        let info = vk::BufferCreateInfo::default().size(u64::from(SIZE * SIZE * 4)).usage(usage);
        // SAFETY: valid create info; memory is bound right after.
        let buffer = unsafe { device.create_buffer(&info, None) }?;
        // SAFETY: a live buffer.
        let mem = allocate(
            unsafe { device.get_buffer_memory_requirements(buffer) },
            vk::MemoryPropertyFlags::empty(),
        )?;
        // SAFETY: fresh memory of the required size.
        unsafe { device.bind_buffer_memory(buffer, mem, 0) }?;
        buffers.push((buffer, mem));
    }
    let mut kind = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE);
    // SAFETY: valid create info.
    let timeline =
        unsafe { device.create_semaphore(&vk::SemaphoreCreateInfo::default().push_next(&mut kind), None) }?;
    let pool_info = vk::CommandPoolCreateInfo::default()
        .queue_family_index(family)
        .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
    // SAFETY: valid create info.
    let pool = unsafe { device.create_command_pool(&pool_info, None) }?;
    let alloc =
        vk::CommandBufferAllocateInfo::default().command_pool(pool).command_buffer_count(SLOTS as u32);
    // SAFETY: a live pool.
    let cmds = unsafe { device.allocate_command_buffers(&alloc) }?;
    let fences: Vec<vk::Fence> = (0..SLOTS)
        // SAFETY: default create info.
        .map(|_| unsafe {
            device.create_fence(&vk::FenceCreateInfo::default().flags(vk::FenceCreateFlags::SIGNALED), None)
        })
        .collect::<Result<_, _>>()?;

    std::thread::scope(|scope| -> Result<(), Box<dyn std::error::Error>> {
        let producer = scope.spawn(|| -> Result<(), vk::Result> {
            for k in 0..FRAMES {
                let values = [2 * k];
                let semaphores = [timeline];
                let wait = vk::SemaphoreWaitInfo::default().semaphores(&semaphores).values(&values);
                // SAFETY: a live timeline; 10 s at most.
                unsafe { device.wait_semaphores(&wait, 10_000_000_000) }?;
                std::thread::scope(|s| {
                    for _ in 0..spawn {
                        s.spawn(|| std::hint::black_box((0..2000u64).sum::<u64>()));
                    }
                });
                let signal = vk::SemaphoreSignalInfo::default().semaphore(timeline).value(2 * k + 1);
                serialized(&mut || {
                    // SAFETY: a live timeline; values rise.
                    unsafe { device.signal_semaphore(&signal) }
                })?;
                signalled.store(k + 1, Ordering::Release);
            }
            Ok(())
        });
        let layers = vk::ImageSubresourceLayers {
            aspect_mask: vk::ImageAspectFlags::COLOR,
            mip_level: 0,
            base_array_layer: 0,
            layer_count: 1,
        };
        let region = [vk::BufferImageCopy::default().image_subresource(layers).image_extent(vk::Extent3D {
            width: SIZE,
            height: SIZE,
            depth: 1,
        })];
        let range = vk::ImageSubresourceRange {
            aspect_mask: vk::ImageAspectFlags::COLOR,
            level_count: 1,
            layer_count: 1,
            ..Default::default()
        };
        for k in 0..FRAMES {
            // With --signal-first, frame k is submitted only once the producer's signal for it
            // has returned: the layer then never sees the wait before the signal.
            while signal_first && signalled.load(Ordering::Acquire) <= k {
                std::thread::yield_now();
            }
            let slot = k as usize % SLOTS;
            let (cmd, fence) = (cmds[slot], [fences[slot]]);
            // SAFETY: the fence belongs to this slot's last submission; then the buffer is free.
            unsafe {
                device.wait_for_fences(&fence, true, 10_000_000_000)?;
                device.reset_fences(&fence)?;
                device.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default())?;
            }
            let to_general = vk::ImageMemoryBarrier2::default()
                .src_stage_mask(if barrier {
                    vk::PipelineStageFlags2::COPY
                } else {
                    vk::PipelineStageFlags2::NONE
                })
                .dst_stage_mask(vk::PipelineStageFlags2::COPY)
                .dst_access_mask(vk::AccessFlags2::TRANSFER_WRITE)
                .old_layout(if k == 0 { vk::ImageLayout::UNDEFINED } else { vk::ImageLayout::GENERAL })
                .new_layout(vk::ImageLayout::GENERAL)
                .image(image)
                .subresource_range(range);
            let written = vk::ImageMemoryBarrier2::default()
                .src_stage_mask(vk::PipelineStageFlags2::COPY)
                .src_access_mask(vk::AccessFlags2::TRANSFER_WRITE)
                .dst_stage_mask(vk::PipelineStageFlags2::COPY)
                .dst_access_mask(vk::AccessFlags2::TRANSFER_READ)
                .old_layout(vk::ImageLayout::GENERAL)
                .new_layout(vk::ImageLayout::GENERAL)
                .image(image)
                .subresource_range(range);
            // SAFETY: recording into a reset buffer; every object is live.
            unsafe {
                // Without --barrier the first scope is empty: only the host chain orders the upload.
                device.cmd_pipeline_barrier2(
                    cmd,
                    &vk::DependencyInfo::default().image_memory_barriers(&[to_general]),
                );
                device.cmd_copy_buffer_to_image(cmd, buffers[0].0, image, vk::ImageLayout::GENERAL, &region);
                device.cmd_pipeline_barrier2(
                    cmd,
                    &vk::DependencyInfo::default().image_memory_barriers(&[written]),
                );
                device.cmd_copy_image_to_buffer(
                    cmd,
                    image,
                    vk::ImageLayout::GENERAL,
                    buffers[1 + slot].0,
                    &region,
                );
                device.end_command_buffer(cmd)?;
            }
            let waits = [vk::SemaphoreSubmitInfo::default()
                .semaphore(timeline)
                .value(2 * k + 1)
                .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)];
            let signals = [vk::SemaphoreSubmitInfo::default()
                .semaphore(timeline)
                .value(2 * k + 2)
                .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)];
            let cmd_infos = [vk::CommandBufferSubmitInfo::default().command_buffer(cmd)];
            let submit = [vk::SubmitInfo2::default()
                .wait_semaphore_infos(&waits)
                .command_buffer_infos(&cmd_infos)
                .signal_semaphore_infos(&signals)];
            serialized(&mut || {
                // SAFETY: only this thread submits; everything referenced is live.
                unsafe { device.queue_submit2(queue, &submit, fence[0]) }
            })?;
        }
        producer.join().map_err(|_| "producer panicked")??;
        Ok(())
    })?;

    // SAFETY: teardown after the queue is idle; every object is ours.
    unsafe {
        device.device_wait_idle()?;
        fences.iter().for_each(|&f| device.destroy_fence(f, None));
        device.destroy_command_pool(pool, None);
        device.destroy_semaphore(timeline, None);
        for (b, m) in buffers {
            device.destroy_buffer(b, None);
            device.free_memory(m, None);
        }
        device.destroy_image(image, None);
        device.free_memory(image_memory, None);
        device.destroy_device(None);
        utils.destroy_debug_utils_messenger(messenger, None);
        instance.destroy_instance(None);
    }
    let n = MESSAGES.load(Ordering::Relaxed);
    println!(
        "host_wait_race: {FRAMES} frames, {} the barrier, {} the lock: {n} validation messages (layer {layer})",
        if barrier { "with" } else { "without" },
        if lock { "with" } else { "without" },
    );
    std::process::exit(i32::from(n > 0));
}
