//! The integrator's side: your own Vulkan instance and device, CUDA context,
//! stream and kernel; vkcuda's core (the `vkcuda` package alone, its default CUDA 13.0
//! headers) only makes the shared frames and timelines and hands out each
//! frame's barriers, waits and signals.
//! Every frame is read back and compared with the kernel's CPU twin.
//!
//! Two layouts, one frame plan: `--layout array` (default): CUDA writes a surface object
//! over the image and reads every frame back through the texture object; `--layout buffer`:
//! a plain kernel writes linear memory through a pointer and a row pitch, as a tensor
//! library or most CUDA renderers would, and Vulkan copies the buffer to the host.
//!
//! Run:
//!
//!     cargo run --release -p vkcuda --features cudarc/nvrtc --example minimal \
//!         [-- --layout buffer] [--validate]
//! (needs an NVIDIA GPU, its driver (CUDA 13) and NVRTC; exits 1 and says so otherwise).

use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use ash::vk;
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig, PushKernelArg};
use gpu_allocator::MemoryLocation;
use vkcuda::interop::{requirements, CudaFrames, CudaTarget, Resource, SharedFrames, VulkanFrame};
use vkcuda::sync::{FramePlan, SyncScheme};
use vkcuda::vk::device::{gpus, Device};
use vkcuda::vk::frame::{buffer_barrier, copy_layers};
use vkcuda::vk::memory::Buffer;
use vkcuda::{FrameDesc, Layout};

#[path = "minimal/engine.rs"]
mod engine;
use engine::{Commands, Slot};

const FRAMES: u64 = 240;
const IMAGES: usize = 2;
const W: u32 = 640;
const H: u32 = 360;

/// Your kernels (`minimal/kernels.cu`), one per layout: what `CudaFrames::begin` hands
/// out for the frame is a surface (array) or a pointer and a row pitch (buffer).
const KERNEL: &str = include_str!("minimal/kernels.cu");

/// The kernel's CPU twin: pixel (x, y) of frame g.
fn expected(x: u32, y: u32, g: u32) -> [u8; 4] {
    [(x + g) as u8, (y + 2 * g) as u8, (x ^ y) as u8, 255]
}

fn main() -> Result<()> {
    let engine::Options { validate, layout } = engine::args()?;
    // 1. What vkcuda needs, enabled on your own instance and device (vkcuda makes neither).
    let needs = requirements();
    let engine = engine::EngineInstance::new(validate, &needs.instance_extensions)?;
    let instance = &engine.raw;
    let picked = pick_device(instance)?;
    let extensions: Vec<_> = needs.device_extensions.iter().map(|e| e.as_ptr()).collect();
    let (mut v12, mut v13) = Default::default();
    needs.enable_features(&mut v12, &mut v13);
    let queues =
        [vk::DeviceQueueCreateInfo::default().queue_family_index(picked.family).queue_priorities(&[1.0])];
    let info =
        vk::DeviceCreateInfo::default().queue_create_infos(&queues).enabled_extension_names(&extensions);
    let info = info.push_next(&mut v12).push_next(&mut v13);
    // SAFETY: every pointer in `info` points into locals that outlive the call.
    let device = unsafe { instance.create_device(picked.physical, &info, None) }.context("vkCreateDevice")?;
    let checked = with_device(instance, picked, &device, &needs.device_extensions, layout);
    // SAFETY: with_device dropped every object it made on the device and left its queue idle.
    unsafe { device.destroy_device(None) };
    let messages = engine.messages();
    let what = format!("{} frames ({layout} layout)", checked?);
    println!("minimal: {what} written by CUDA, read by Vulkan, equal to the CPU twin");
    println!("minimal: validation: {}", if validate { format!("{messages} messages") } else { "off".into() });
    (messages == 0).then_some(()).ok_or_else(|| anyhow!("validation: {messages} messages"))
}

/// 2. The Vulkan device CUDA sees (the same UUID), its CUDA ordinal, and a compute queue family.
fn pick_device(instance: &ash::Instance) -> Result<Picked> {
    vkcuda::cuda::load_driver()?;
    let cuda_devices = vkcuda::cuda::list_devices()?;
    let (physical, ordinal) = (gpus(instance)?.iter())
        .find_map(|g| cuda_devices.iter().find(|c| c.uuid == g.uuid).map(|c| (g.physical, c.ordinal)))
        .ok_or_else(|| anyhow!("no Vulkan device has the UUID of a CUDA device"))?;
    Ok(Picked { physical, ordinal, family: engine::compute_family(instance, physical)? })
}

struct Picked {
    physical: vk::PhysicalDevice,
    ordinal: usize,
    family: u32,
}

fn with_device(
    instance: &ash::Instance,
    Picked { physical, ordinal, family }: Picked,
    raw: &ash::Device,
    extensions: &[&std::ffi::CStr],
    layout: Layout,
) -> Result<u64> {
    // 3. vkcuda wraps your device; 4. the plan and the shared frames on it.
    // SAFETY: `raw` was created just above from `physical` of this instance, with `extensions`
    // and vkcuda's features, has queue 0 of `family`, only this thread submits to it, and it
    // is destroyed only after this function has dropped every vkcuda object.
    let device = unsafe { Device::adopt(instance, physical, raw, extensions, family, 0) }?;
    let plan = FramePlan::new(SyncScheme::Split, IMAGES, 0, FRAMES).map_err(|e| anyhow!(e))?;
    // RGBA8 frames of W × H in `layout` (a `FrameDesc` also names the format: float ones too).
    let desc = FrameDesc::new(vk::Extent2D { width: W, height: H }).layout(layout);
    let shared = Arc::new(SharedFrames::new(&device, plan, desc, true)?);
    // 5. Your CUDA context and stream; the shared frames imported into the context. The
    //    imports keep the stream: dropping them waits (bounded) until it is idle.
    let ctx = CudaContext::new(ordinal)?;
    let stream = ctx.new_stream()?;
    let cuda = CudaFrames::import(ctx.clone(), &shared, stream.clone())?;
    // Your kernels, compiled before anything is submitted: a missing NVRTC (cudarc panics on
    // it: asked first) or a compile error then leaves no GPU wait that nobody would signal.
    let kernels = engine::kernels(&ctx, KERNEL, ["fill_surface", "fill_linear", "check_texture"])?;
    // Your Vulkan objects: per image a command buffer, a fence and a readback buffer.
    let commands = Commands::new(raw, family, IMAGES)?;
    let usage = vk::BufferUsageFlags::TRANSFER_DST;
    let readback =
        Buffer::frames(&device, "readback", IMAGES, desc.bytes(), usage, MemoryLocation::GpuToCpu)?;
    let checked = std::thread::scope(|s| {
        // 6. CUDA on its own thread: a call after a GPU wait may block it.
        let producer = s.spawn(move || produce(&ctx, &stream, &cuda, &kernels));
        // 7. Vulkan's side, in your command buffers and submissions. A wrong frame does not
        //    stop the loop: every frame is still consumed, so every wait either side enqueued
        //    is met by its own signaller, in order (a host signal may not jump a timeline past
        //    values the GPU will still signal: docs/sync.md, "Stopping after a failure").
        let mut first_wrong = None;
        let consumed = (0..FRAMES + IMAGES as u64).try_for_each(|g| {
            let slot = (g % IMAGES as u64) as usize;
            if let Some(f) = g.checked_sub(IMAGES as u64) {
                // Frame f (this slot's last) is done when its fence is: compare its pixels.
                commands.wait(raw, slot).with_context(|| format!("frame {f}"))?;
                let want: Vec<u8> = (0..W * H).flat_map(|i| expected(i % W, i / W, f as u32)).collect();
                if readback[slot].mapped()? != want.as_slice() {
                    first_wrong.get_or_insert(f);
                }
            }
            if g >= FRAMES {
                return Ok(());
            }
            let copy = (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_READ);
            // The frame's pieces: acquire, release, wait and signal, for a copy on this queue.
            let frame = shared.vulkan_frame(g, device.queue_family(), copy, copy);
            submit(raw, device.queue(), commands.slot(slot), &frame, readback[slot].raw(), desc.bytes())
        });
        producer.join().map_err(|_| anyhow!("the CUDA thread panicked"))??;
        consumed?;
        first_wrong.map_or(Ok(FRAMES), |f| Err(anyhow!("frame {f} differs from the CPU twin")))
    });
    // 8. Teardown: CUDA let go first (its thread ended), then your queue idles, then Vulkan
    //    (`shared`, dropped last, waits for the queue itself too).
    // SAFETY: only this thread uses the queue.
    unsafe { raw.queue_wait_idle(device.queue()) }?;
    commands.destroy(raw);
    checked
}

/// 6. Each frame: begin (the GPU wait; the surface, or pointer and pitch) → your kernel →
///    end (the signal); an array frame is also read back through its texture object.
fn produce(
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    cuda: &CudaFrames,
    [fill_surface, fill_linear, check_texture]: &[CudaFunction; 3],
) -> Result<()> {
    ctx.bind_to_thread()?;
    // Texels that read back wrong through the texture object, summed over all frames.
    let mut wrong_texels = stream.alloc_zeros::<u32>(1)?;
    let grid_dim = (W.div_ceil(16), H.div_ceil(16), 1);
    let cfg = LaunchConfig { grid_dim, block_dim: (16, 16, 1), shared_mem_bytes: 0 };
    let (w, h) = (W as i32, H as i32);
    for g in 0..FRAMES {
        let frame = g as u32;
        match cuda.begin(g)? {
            CudaTarget::Array { surface, texture } => {
                let mut launch = stream.launch_builder(fill_surface);
                launch.arg(&surface).arg(&w).arg(&h).arg(&frame);
                // SAFETY: the arguments match `fill_surface`; the surface covers W × H texels.
                unsafe { launch.launch(cfg) }?;
                // The same frame read through the texture object, in a later launch (the
                // texture cache is not coherent with surface writes of one launch).
                let mut launch = stream.launch_builder(check_texture);
                launch.arg(&texture).arg(&w).arg(&h).arg(&frame).arg(&mut wrong_texels);
                // SAFETY: the arguments match `check_texture`; `wrong_texels` holds one u32.
                unsafe { launch.launch(cfg) }?;
            }
            CudaTarget::Buffer(linear) => {
                debug_assert_eq!((linear.rows, linear.row_bytes), (u64::from(H), u64::from(W) * 4));
                let (pointer, pitch) = (linear.pointer, linear.pitch);
                let mut launch = stream.launch_builder(fill_linear);
                launch.arg(&pointer).arg(&pitch).arg(&w).arg(&h).arg(&frame);
                // SAFETY: the arguments match `fill_linear`; `linear` holds H rows of `pitch` bytes,
                // each W × 4 long, written on this stream between begin and end.
                unsafe { launch.launch(cfg) }?;
            }
        }
        cuda.end(g)?;
    }
    cuda.synchronize()?;
    match stream.clone_dtoh(&wrong_texels)?[0] {
        0 => Ok(()),
        n => bail!("{n} texels read through the texture object differ from the CPU twin"),
    }
}

/// Records `frame` (a copy of it into `readback`, `bytes` long) into the slot and submits it to `queue`.
fn submit(
    raw: &ash::Device,
    queue: vk::Queue,
    Slot { cmd, fence }: Slot,
    frame: &VulkanFrame,
    readback: vk::Buffer,
    bytes: u64,
) -> Result<()> {
    let to_host = [buffer_barrier(
        readback,
        (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_WRITE),
        (vk::PipelineStageFlags2::HOST, vk::AccessFlags2::HOST_READ),
    )];
    let extent = vk::Extent3D { width: W, height: H, depth: 1 };
    let region = [vk::BufferImageCopy::default().image_subresource(copy_layers()).image_extent(extent)];
    // Recording: the slot's last submission finished (its fence); every handle is live.
    // SAFETY: as above.
    unsafe { raw.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default()) }?;
    frame.acquire.record(raw, cmd);
    match frame.resource {
        // SAFETY: as above; the image is in GENERAL.
        Resource::Image(image) => unsafe {
            raw.cmd_copy_image_to_buffer(cmd, image, vk::ImageLayout::GENERAL, readback, &region)
        },
        // The buffer's rows are packed (pitch = W × 4): one plain copy.
        // SAFETY: as above.
        Resource::Buffer(buffer) => unsafe {
            raw.cmd_copy_buffer(cmd, buffer, readback, &[vk::BufferCopy::default().size(bytes)])
        },
    }
    frame.release.record(raw, cmd);
    let to_host = vk::DependencyInfo::default().buffer_memory_barriers(&to_host);
    // SAFETY: as above.
    unsafe { raw.cmd_pipeline_barrier2(cmd, &to_host) };
    // SAFETY: as above.
    unsafe { raw.end_command_buffer(cmd) }?;
    let (waits, signals) = (Vec::from_iter(frame.wait), [frame.signal]);
    let cmd_info = [vk::CommandBufferSubmitInfo::default().command_buffer(cmd)];
    let submit = vk::SubmitInfo2::default().wait_semaphore_infos(&waits);
    let submit = submit.command_buffer_infos(&cmd_info).signal_semaphore_infos(&signals);
    // SAFETY: only this thread submits; everything referenced outlives the submission.
    Ok(unsafe { raw.queue_submit2(queue, &[submit], fence) }?)
}
