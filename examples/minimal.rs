//! The whole headless pattern in one file, top to bottom: CUDA renders into
//! exportable Vulkan images while Vulkan consumes them, ordered on the GPU by
//! two timeline semaphores (docs/sync.md). Every frame is read back and
//! compared with the CPU reference.
//!
//!     cargo run --release --example minimal [-- --validate]
//!
//! Needs an NVIDIA GPU, its driver (CUDA 13) and NVRTC; exits 1 and says so otherwise.

use anyhow::{anyhow, bail, Context, Result};
use ash::vk;
use gpu_allocator::MemoryLocation;
use vkcuda::cli::CudaSched;
use vkcuda::cuda::external::{ExternalImage, ExternalSemaphore};
use vkcuda::cuda::kernels::{default_cache_dir, SceneKernels, Target};
use vkcuda::scene::{render_cpu, Diff, FrameArgs, Scene, SceneKind};
use vkcuda::sync::{FramePlan, SyncScheme};
use vkcuda::vk::device::{list_gpus, Device, Queue, QueueKind};
use vkcuda::vk::frame::{copy_layers, image_barrier, prepare_shared_images};
use vkcuda::vk::instance::Instance;
use vkcuda::vk::memory::Buffer;
use vkcuda::vk::shared_image::SharedImage;
use vkcuda::vk::timeline::Timeline;
use vkcuda::vk::WAIT_TIMEOUT;

const FRAMES: u64 = 240;
const IMAGES: usize = 2;

fn main() -> std::process::ExitCode {
    match run(std::env::args().any(|a| a == "--validate")) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("minimal: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(validate: bool) -> Result<()> {
    // 1. One GPU seen by both APIs: the Vulkan device whose UUID a CUDA device reports.
    let instance = Instance::new(validate, &[])?;
    vkcuda::cuda::load_driver()?;
    let cuda_devices = vkcuda::cuda::list_devices()?;
    let (gpu, cuda) = list_gpus(&instance)?
        .into_iter()
        .find_map(|g| cuda_devices.iter().find(|c| c.uuid == g.uuid).map(|c| (g, c.clone())))
        .ok_or_else(|| anyhow!("no Vulkan device has the UUID of a CUDA device"))?;
    println!("minimal: {gpu} = {cuda}");
    let queue = Queue { kind: QueueKind::Transfer, present: None };
    let device = Device::new(instance.clone(), gpu, true, queue)?;

    // 2. The plan: frame g uses image g mod 2; "rendered" is signalled by CUDA only,
    //    "released" by Vulkan only (the split scheme).
    let plan = FramePlan::new(SyncScheme::Split, IMAGES, 0, FRAMES).map_err(|e| anyhow!(e))?;
    let scene = Scene { kind: SceneKind::Gradient, width: 640, height: 360, cost: 1 };
    let extent = vk::Extent2D { width: scene.width, height: scene.height };

    // 3. Exportable images (dedicated memory, GENERAL layout, owned by the external
    //    queue family between uses) and exportable timeline semaphores.
    let images: Vec<SharedImage> =
        (0..IMAGES).map(|_| SharedImage::new(device.clone(), extent, true)).collect::<Result<_>>()?;
    prepare_shared_images(&device, &images)?;
    let timelines: Vec<Timeline> = plan
        .timeline_names()
        .iter()
        .map(|name| Timeline::new(device.clone(), name, plan.initial_value(), true))
        .collect::<Result<_>>()?;

    // 4. Import both into CUDA: memory → mipmapped array → surface; semaphores.
    let ctx = vkcuda::cuda::context(&cuda, CudaSched::Auto)?;
    let kernels = SceneKernels::load(&ctx, &default_cache_dir())?;
    let surfaces: Vec<ExternalImage> = images
        .iter()
        .map(|i| {
            ExternalImage::import(ctx.clone(), i.export()?, i.allocation_size, extent.width, extent.height)
        })
        .collect::<Result<_>>()?;
    let semaphores: Vec<ExternalSemaphore> = timelines
        .iter()
        .map(|t| ExternalSemaphore::import(ctx.clone(), t.export()?, t.name))
        .collect::<Result<_>>()?;
    let stream = ctx.new_stream()?;

    // 5. Vulkan's side: per image, a command buffer, a fence, and a readback buffer.
    let dev = &device.raw;
    let pool_info = vk::CommandPoolCreateInfo::default()
        .queue_family_index(device.queue_family)
        .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
    // SAFETY: valid create info; destroyed at the end, after the queue is idle.
    let pool = unsafe { dev.create_command_pool(&pool_info, None) }?;
    let alloc =
        vk::CommandBufferAllocateInfo::default().command_pool(pool).command_buffer_count(IMAGES as u32);
    // SAFETY: `pool` is live.
    let cmds = unsafe { dev.allocate_command_buffers(&alloc) }?;
    // SAFETY: default create infos; destroyed at the end.
    let fences: Vec<vk::Fence> = (0..IMAGES)
        .map(|_| unsafe { dev.create_fence(&vk::FenceCreateInfo::default(), None) })
        .collect::<Result<_, _>>()?;
    let usage = vk::BufferUsageFlags::TRANSFER_DST;
    let readback = Buffer::frames(&device, "readback", IMAGES, extent, usage, MemoryLocation::GpuToCpu)?;

    let checked = std::thread::scope(|s| -> Result<u64> {
        // 6. The producer: its own thread (a CUDA call after a wait on an unreached value
        //    blocks its thread). Per frame: wait "released" (image free) → kernel → signal "rendered".
        //    The thread owns the CUDA objects and drops them when it ends, after its stream is
        //    synchronised: CUDA lets go of the Vulkan objects before Vulkan destroys them.
        let producer = s.spawn(move || -> Result<()> {
            ctx.bind_to_thread()?;
            for g in 0..FRAMES {
                let step = plan.producer(g);
                if let Some(w) = step.wait {
                    semaphores[w.timeline].wait(&stream, w.value)?;
                }
                let target = Target::Surface(surfaces[step.image].surface());
                kernels.launch(&stream, &scene, &FrameArgs::new(&scene, g as u32), target)?;
                semaphores[step.signal.timeline].signal(&stream, step.signal.value)?;
            }
            stream.synchronize().context("CUDA stream (a kernel fault shows here)")
        });

        // 7. The consumer: per frame, record acquire → copy → release, and submit it
        //    waiting "rendered" and signalling "released"; the CPU never waits for CUDA.
        let consumed = consume(&device, &plan, &scene, (&images, &timelines), (&cmds, &fences, &readback));
        if consumed.is_err() {
            // Let a producer waiting for "released" finish, so the thread can be joined.
            let end = plan.past_end(FRAMES);
            timelines.iter().for_each(|t| drop(t.raise_to(end)));
        }
        producer.join().map_err(|_| anyhow!("the producer thread panicked"))??;
        consumed
    });

    // 8. Teardown: CUDA let go first (the producer thread ended), then Vulkan.
    let idle = device.wait_idle();
    // SAFETY: the queue is idle (or the device lost); nothing uses these any more.
    unsafe {
        fences.iter().for_each(|f| dev.destroy_fence(*f, None));
        dev.destroy_command_pool(pool, None);
    }
    let checked = checked?;
    idle?;
    let v = instance.validation().counts();
    println!("minimal: {checked} frames rendered by CUDA, consumed by Vulkan, equal to the CPU reference");
    if validate {
        println!("minimal: validation: {v}");
    }
    match v.clean() {
        true => Ok(()),
        false => Err(anyhow!("validation: {v}")),
    }
}

/// The consumer loop of step 7; returns the number of frames checked.
fn consume(
    device: &Device,
    plan: &FramePlan,
    scene: &Scene,
    (images, timelines): (&[SharedImage], &[Timeline]),
    (cmds, fences, readback): (&[vk::CommandBuffer], &[vk::Fence], &[Buffer]),
) -> Result<u64> {
    let dev = &device.raw;
    let extent = images[0].extent;
    let mut checked = 0;
    let copy = (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_READ);
    let none = (vk::PipelineStageFlags2::NONE, vk::AccessFlags2::NONE);
    for g in 0..FRAMES + IMAGES as u64 {
        let slot = (g % IMAGES as u64) as usize;
        // Retire frame g - 2 (the slot's last frame): wait for its fence, check its pixels.
        if g >= IMAGES as u64 {
            let f = g - IMAGES as u64;
            // SAFETY: the fence was submitted with frame f.
            unsafe { dev.wait_for_fences(&[fences[slot]], true, WAIT_TIMEOUT.as_nanos() as u64) }
                .with_context(|| format!("waiting for frame {f}"))?;
            // SAFETY: signalled, no longer in use.
            unsafe { dev.reset_fences(&[fences[slot]]) }?;
            let mut want = vec![0u8; readback[slot].size as usize];
            render_cpu(scene, &FrameArgs::new(scene, f as u32), &mut want, 4);
            let diff = Diff::between(readback[slot].mapped()?, &want);
            if !diff.within_tolerance() {
                bail!("frame {f}: {} pixels differ from the CPU reference", diff.differing);
            }
            checked += 1;
        }
        if g >= FRAMES {
            continue;
        }
        let step = plan.consumer(g);
        let (image, cmd) = (&images[step.image], cmds[slot]);
        let begin = vk::CommandBufferBeginInfo::default().flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT);
        // Acquire from CUDA's queue family (VK_QUEUE_FAMILY_EXTERNAL); the layout stays GENERAL.
        let acquire = [image_barrier(image.image, none, copy)
            .src_queue_family_index(vk::QUEUE_FAMILY_EXTERNAL)
            .dst_queue_family_index(device.queue_family)];
        let release = [image_barrier(image.image, copy, none)
            .src_queue_family_index(device.queue_family)
            .dst_queue_family_index(vk::QUEUE_FAMILY_EXTERNAL)];
        // The copy's writes must be visible to the host that reads the buffer after the fence.
        let to_host = [vkcuda::vk::frame::buffer_barrier(
            readback[slot].raw,
            (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_WRITE),
            (vk::PipelineStageFlags2::HOST, vk::AccessFlags2::HOST_READ),
        )];
        let region = [vk::BufferImageCopy::default()
            .image_subresource(copy_layers())
            .image_extent(vk::Extent3D { width: extent.width, height: extent.height, depth: 1 })];
        // SAFETY: the slot's previous submission finished (its fence was waited above);
        // every handle is live; the image is in GENERAL.
        unsafe {
            dev.begin_command_buffer(cmd, &begin)?;
            dev.cmd_pipeline_barrier2(cmd, &vk::DependencyInfo::default().image_memory_barriers(&acquire));
            dev.cmd_copy_image_to_buffer(
                cmd,
                image.image,
                vk::ImageLayout::GENERAL,
                readback[slot].raw,
                &region,
            );
            dev.cmd_pipeline_barrier2(
                cmd,
                &vk::DependencyInfo::default()
                    .image_memory_barriers(&release)
                    .buffer_memory_barriers(&to_host),
            );
            dev.end_command_buffer(cmd)?;
        }
        let point = |p: vkcuda::sync::TimelinePoint| {
            vk::SemaphoreSubmitInfo::default()
                .semaphore(timelines[p.timeline].raw)
                .value(p.value)
                .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)
        };
        let waits: Vec<_> = step.wait.map(point).into_iter().collect();
        let signals = [point(step.signal)];
        let cmd_info = [vk::CommandBufferSubmitInfo::default().command_buffer(cmd)];
        let submit = [vk::SubmitInfo2::default()
            .wait_semaphore_infos(&waits)
            .command_buffer_infos(&cmd_info)
            .signal_semaphore_infos(&signals)];
        // SAFETY: only this thread submits; everything referenced outlives the submission.
        unsafe { dev.queue_submit2(device.queue, &submit, fences[slot]) }?;
    }
    Ok(checked)
}
