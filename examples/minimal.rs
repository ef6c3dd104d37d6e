//! The integrator's side: your own Vulkan device, CUDA context, stream and
//! kernel; vkcuda's core (no default features) only makes the shared frames
//! and timelines and hands out each frame's barriers, waits and signals.
//! Every frame is read back and compared with the kernel's CPU twin.
//!
//! Two layouts, one frame plan:
//! - `--layout array` (default): CUDA writes a surface object over the image
//!   and reads every frame back through the texture object;
//! - `--layout buffer`: a plain kernel writes linear memory through a pointer
//!   and a row pitch, as a tensor library or most CUDA renderers would, and
//!   Vulkan reads the buffer directly (here: copies it to the host).
//!
//! Run:
//!
//!     cargo run --release --no-default-features --features cudarc/cuda-13000,cudarc/nvrtc \
//!         --example minimal [-- --layout buffer] [--validate]
//! (needs an NVIDIA GPU, its driver (CUDA 13) and NVRTC; exits 1 and says so otherwise).

use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use ash::vk;
use cudarc::driver::{CudaContext, LaunchConfig, PushKernelArg};
use gpu_allocator::MemoryLocation;
use vkcuda::interop::{requirements, CudaFrames, CudaTarget, Resource, SharedFrames};
use vkcuda::sync::{FramePlan, SyncScheme};
use vkcuda::vk::device::{gpu_info, Device};
use vkcuda::vk::frame::{buffer_barrier, copy_layers};
use vkcuda::vk::instance::Instance;
use vkcuda::vk::memory::Buffer;
use vkcuda::{FrameDesc, Layout};

const FRAMES: u64 = 240;
const IMAGES: usize = 2;
const W: u32 = 640;
const H: u32 = 360;

/// Your kernels, one per layout: what `CudaFrames::begin` hands out for the
/// frame is a surface (array) or a pointer and a row pitch (buffer).
const KERNEL: &str = r#"
__device__ uchar4 pixel(int x, int y, unsigned int g) { return make_uchar4(x + g, y + 2 * g, x ^ y, 255); }

extern "C" __global__ void fill_surface(unsigned long long surface, int w, int h, unsigned int g) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    surf2Dwrite(pixel(x, y, g), surface, x * 4, y);
}

extern "C" __global__ void fill_linear(unsigned char *out, unsigned long long pitch, int w, int h, unsigned int g) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    ((uchar4 *)(out + y * pitch))[x] = pixel(x, y, g);
}

// Reads the frame back through the texture object (8-bit texels come back normalised to
// 0..1) and counts the texels that differ from what `fill_surface` wrote.
extern "C" __global__ void check_texture(unsigned long long texture, int w, int h, unsigned int g, unsigned int *wrong) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h) return;
    float4 t = tex2D<float4>(texture, x + 0.5f, y + 0.5f);
    uchar4 p = pixel(x, y, g);
    if (lrintf(t.x * 255) != p.x || lrintf(t.y * 255) != p.y || lrintf(t.z * 255) != p.z || lrintf(t.w * 255) != p.w)
        atomicAdd(wrong, 1u);
}"#;

/// The kernel's CPU twin: pixel (x, y) of frame g.
fn expected(x: u32, y: u32, g: u32) -> [u8; 4] {
    [(x + g) as u8, (y + 2 * g) as u8, (x ^ y) as u8, 255]
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let validate = args.iter().any(|a| a == "--validate");
    let layout =
        match args.iter().position(|a| a == "--layout").and_then(|i| args.get(i + 1)).map(|s| s.as_str()) {
            None | Some("array") => Layout::Array,
            Some("buffer") => Layout::Buffer,
            Some(other) => bail!("--layout {other}: array or buffer"),
        };
    // 1. What vkcuda needs, enabled on your instance and device. (vkcuda's `Instance` is only
    //    used here to count the validation layer's messages.)
    let needs = requirements();
    let instance = Instance::new(validate, &needs.instance_extensions)?;
    // 2. The Vulkan device CUDA sees: the same UUID.
    vkcuda::cuda::load_driver()?;
    let cuda_devices = vkcuda::cuda::list_devices()?;
    // SAFETY: plain query on a live instance.
    let physicals = unsafe { instance.raw.enumerate_physical_devices() }?;
    let (physical, ordinal) = (physicals.iter().enumerate())
        .find_map(|(i, &p)| {
            let info = gpu_info(&instance.raw, i, p).ok()?;
            cuda_devices.iter().find(|c| c.uuid == info.uuid).map(|c| (p, c.ordinal))
        })
        .ok_or_else(|| anyhow!("no Vulkan device has the UUID of a CUDA device"))?;
    // SAFETY: plain query on a live physical device.
    let families = unsafe { instance.raw.get_physical_device_queue_family_properties(physical) };
    let family = families.iter().position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE));
    let family = family.context("no compute queue family")? as u32;
    let extensions: Vec<_> = needs.device_extensions.iter().map(|e| e.as_ptr()).collect();
    let (mut v12, mut v13) = Default::default();
    needs.enable_features(&mut v12, &mut v13);
    let queues = [vk::DeviceQueueCreateInfo::default().queue_family_index(family).queue_priorities(&[1.0])];
    let info =
        vk::DeviceCreateInfo::default().queue_create_infos(&queues).enabled_extension_names(&extensions);
    let info = info.push_next(&mut v12).push_next(&mut v13);
    // SAFETY: every pointer in `info` points into locals that outlive the call.
    let device = unsafe { instance.raw.create_device(physical, &info, None) }.context("vkCreateDevice")?;
    let checked =
        with_device(&instance, physical, (&device, &needs.device_extensions), family, (ordinal, layout));
    // SAFETY: with_device dropped every object it made on the device and left its queue idle.
    unsafe { device.destroy_device(None) };
    let v = instance.validation().counts();
    println!(
        "minimal: {} frames ({layout} layout) written by CUDA, read by Vulkan, equal to the CPU twin",
        checked?
    );
    println!("minimal: validation: {}", if validate { v.to_string() } else { "off".into() });
    v.clean().then_some(()).ok_or_else(|| anyhow!("validation: {v}"))
}

fn with_device(
    instance: &Instance,
    physical: vk::PhysicalDevice,
    (raw, extensions): (&ash::Device, &[&std::ffi::CStr]),
    family: u32,
    (ordinal, layout): (usize, Layout),
) -> Result<u64> {
    // 3. vkcuda wraps your device; 4. the plan and the shared frames on it.
    // SAFETY: `raw` was created just above from `physical` of this instance, with exactly
    // `extensions` and vkcuda's features, has queue 0 of `family`, only this thread submits
    // to it, and it is destroyed only after this function has dropped every vkcuda object.
    let device = unsafe { Device::adopt(&instance.raw, physical, raw, extensions, family, 0) }?;
    let plan = FramePlan::new(SyncScheme::Split, IMAGES, 0, FRAMES).map_err(|e| anyhow!(e))?;
    // RGBA8 frames of W × H in `layout` (a `FrameDesc` also names the format: float ones too).
    let desc = FrameDesc::new(vk::Extent2D { width: W, height: H }).layout(layout);
    let shared = Arc::new(SharedFrames::new(&device, plan, desc, true)?);
    // 5. Your CUDA context, stream and kernels; the shared frames imported into the context.
    let ctx = CudaContext::new(ordinal)?;
    let stream = ctx.new_stream()?;
    let module = ctx.load_module(cudarc::nvrtc::compile_ptx(KERNEL)?)?;
    let (fill_surface, fill_linear) =
        (module.load_function("fill_surface")?, module.load_function("fill_linear")?);
    let check_texture = module.load_function("check_texture")?;
    // Texels that read back wrong through the texture object, summed over all frames.
    let mut wrong_texels = stream.alloc_zeros::<u32>(1)?;
    // The imports keep the stream: dropping them waits (bounded) until it is idle.
    let cuda = CudaFrames::import(ctx.clone(), &shared, stream.clone())?;
    // Your Vulkan objects: per image a command buffer, a fence and a readback buffer.
    let pool_info = vk::CommandPoolCreateInfo::default()
        .queue_family_index(family)
        .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
    // SAFETY: valid create info; destroyed below, after the queue is idle.
    let pool = unsafe { raw.create_command_pool(&pool_info, None) }?;
    let alloc =
        vk::CommandBufferAllocateInfo::default().command_pool(pool).command_buffer_count(IMAGES as u32);
    // SAFETY: `pool` is live. Default fence create infos; destroyed below.
    let (cmds, fences) = unsafe {
        let fences = (0..IMAGES).map(|_| raw.create_fence(&Default::default(), None));
        (raw.allocate_command_buffers(&alloc)?, fences.collect::<Result<Vec<_>, _>>()?)
    };
    let usage = vk::BufferUsageFlags::TRANSFER_DST;
    let readback =
        Buffer::frames(&device, "readback", IMAGES, desc.bytes(), usage, MemoryLocation::GpuToCpu)?;

    let cfg = LaunchConfig {
        grid_dim: (W.div_ceil(16), H.div_ceil(16), 1),
        block_dim: (16, 16, 1),
        shared_mem_bytes: 0,
    };
    let checked = std::thread::scope(|s| {
        // 6. CUDA on its own thread (a call after a GPU wait may block it): begin (the wait;
        //    the surface, or pointer and pitch) → your kernel → end (the signal). Dropping the
        //    imports waits until the stream is idle; they keep the Vulkan objects alive.
        let producer = s.spawn(move || -> Result<()> {
            ctx.bind_to_thread()?;
            let (w, h) = (W as i32, H as i32);
            for g in 0..FRAMES {
                let frame = g as u32;
                match cuda.begin(g)? {
                    CudaTarget::Array { surface, texture } => {
                        let mut launch = stream.launch_builder(&fill_surface);
                        launch.arg(&surface).arg(&w).arg(&h).arg(&frame);
                        // SAFETY: the arguments match `fill_surface`; the surface covers W × H texels.
                        unsafe { launch.launch(cfg) }?;
                        // The same frame read through the texture object, in a later launch
                        // (the texture cache is not coherent with surface writes of one launch).
                        let mut launch = stream.launch_builder(&check_texture);
                        launch.arg(&texture).arg(&w).arg(&h).arg(&frame).arg(&mut wrong_texels);
                        // SAFETY: the arguments match `check_texture`; `wrong_texels` holds one u32.
                        unsafe { launch.launch(cfg) }?;
                    }
                    CudaTarget::Buffer { pointer, pitch } => {
                        let mut launch = stream.launch_builder(&fill_linear);
                        launch.arg(&pointer).arg(&pitch).arg(&w).arg(&h).arg(&frame);
                        // SAFETY: the arguments match `fill_linear`; the buffer holds H rows of `pitch`
                        // bytes, each at least W × 4.
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
        });
        // 7. Vulkan's side, in your command buffers and submissions. A wrong frame does not
        //    stop the loop: every frame is still consumed, so every wait either side enqueued
        //    is met by its own signaller, in order (a host signal may not jump a timeline past
        //    values the GPU will still signal: docs/sync.md, "Stopping after a failure").
        let mut first_wrong = None;
        let consumed = (|| -> Result<u64> {
            let copy = (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_READ);
            for g in 0..FRAMES + IMAGES as u64 {
                let slot = (g % IMAGES as u64) as usize;
                if let Some(f) = g.checked_sub(IMAGES as u64) {
                    // Frame f (this slot's last) is done when its fence is: compare its pixels.
                    // SAFETY: the fence was submitted with frame f; reset once signalled.
                    unsafe { raw.wait_for_fences(&fences[slot..=slot], true, 10_000_000_000) }
                        .with_context(|| format!("frame {f}"))?;
                    // SAFETY: as above.
                    unsafe { raw.reset_fences(&fences[slot..=slot]) }?;
                    let want: Vec<u8> = (0..W * H).flat_map(|i| expected(i % W, i / W, f as u32)).collect();
                    if readback[slot].mapped()? != want.as_slice() {
                        first_wrong.get_or_insert(f);
                    }
                }
                if g >= FRAMES {
                    continue;
                }
                // The frame's pieces: acquire, release, wait and signal, for a copy on this queue.
                let frame = shared.vulkan_frame(g, device.queue_family, copy, copy);
                let cmd = cmds[slot];
                let to_host = [buffer_barrier(
                    readback[slot].raw,
                    (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_WRITE),
                    (vk::PipelineStageFlags2::HOST, vk::AccessFlags2::HOST_READ),
                )];
                let region = [vk::BufferImageCopy::default()
                    .image_subresource(copy_layers())
                    .image_extent(vk::Extent3D { width: W, height: H, depth: 1 })];
                let whole = [vk::BufferCopy::default().size(desc.bytes())];
                // SAFETY: the slot's last submission finished (its fence, above); every handle is live.
                unsafe {
                    raw.begin_command_buffer(cmd, &vk::CommandBufferBeginInfo::default())?;
                    frame.acquire.record(raw, cmd);
                    let readback = readback[slot].raw;
                    match frame.resource {
                        Resource::Image(image) => {
                            let general = vk::ImageLayout::GENERAL;
                            raw.cmd_copy_image_to_buffer(cmd, image, general, readback, &region)
                        }
                        // The buffer's rows are packed (pitch = W × 4): one plain copy.
                        Resource::Buffer(buffer) => raw.cmd_copy_buffer(cmd, buffer, readback, &whole),
                    }
                    frame.release.record(raw, cmd);
                    raw.cmd_pipeline_barrier2(
                        cmd,
                        &vk::DependencyInfo::default().buffer_memory_barriers(&to_host),
                    );
                    raw.end_command_buffer(cmd)?;
                }
                let (waits, signals) = (Vec::from_iter(frame.wait), [frame.signal]);
                let cmd_info = [vk::CommandBufferSubmitInfo::default().command_buffer(cmd)];
                let submit = vk::SubmitInfo2::default().wait_semaphore_infos(&waits);
                let submit = submit.command_buffer_infos(&cmd_info).signal_semaphore_infos(&signals);
                // SAFETY: only this thread submits; everything referenced outlives the submission.
                unsafe { raw.queue_submit2(device.queue, &[submit], fences[slot]) }?;
            }
            Ok(FRAMES)
        })();
        producer.join().map_err(|_| anyhow!("the CUDA thread panicked"))??;
        match first_wrong {
            Some(f) => bail!("frame {f} differs from the CPU twin"),
            None => consumed,
        }
    });
    // 8. Teardown: CUDA let go first (its thread ended), then your queue idles, then Vulkan
    //    (`shared`, dropped last, waits for the queue itself too).
    // SAFETY: only this thread uses the queue; nothing uses the pool or fences afterwards.
    unsafe {
        raw.queue_wait_idle(device.queue)?;
        fences.iter().for_each(|f| raw.destroy_fence(*f, None));
        raw.destroy_command_pool(pool, None);
    }
    checked
}
