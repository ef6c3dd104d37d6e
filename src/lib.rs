//! vkcuda: CUDA renders into images that Vulkan presents.
//!
//! Exportable Vulkan images (or buffers) are imported into CUDA as arrays
//! (or linear memory); CUDA kernels write one through `surf2Dwrite` (or a
//! pointer) while Vulkan consumes another.
//! Exportable timeline semaphores, imported into CUDA, order the two sides on
//! the GPU; neither side waits for the other on the CPU.
//!
//! # In your engine, step by step
//!
//! `cargo add vkcuda` gives this core only (ash, cudarc's driver API,
//! gpu-allocator, log; typed errors, [`Error`]), for CUDA 13.0's driver API
//! headers; another CUDA is a feature: `default-features = false, features =
//! ["cuda-12080"]` (also `cuda-12000`, `cuda-11080`), the same your own cudarc
//! dependency names, if it names one. `examples/minimal.rs` does every step
//! below with its own device, context, stream and kernel.
//!
//! 1. Before creating your instance and device, enable what
//!    [`interop::requirements`] names: Vulkan 1.3, the device extensions, and
//!    the features through [`interop::Requirements::enable_features`].
//! 2. Pick the Vulkan device CUDA sees: its `deviceUUID`
//!    ([`vk::device::gpu_info`]) equals a CUDA device's `cuDeviceGetUuid_v2`
//!    ([`cuda::list_devices`]).
//! 3. Wrap your device and a queue: [`vk::device::Device::adopt`] (`unsafe`:
//!    its `# Safety` list is what vkcuda cannot check; the rest it checks).
//! 4. Choose a plan, [`sync::FramePlan::new`] (scheme, number of images), and
//!    what a frame is, a [`FrameDesc`] ([`Format`], extent, [`Layout`]: CUDA
//!    array or linear buffer), and create the shared frames and timelines:
//!    [`interop::SharedFrames::new`] (it asks the driver first whether the
//!    combination can be exported: [`Error::FormatUnsupported`] if not).
//! 5. Import them into your CUDA context (cudarc's, or a raw `CUcontext`
//!    through the `unsafe` [`cuda::Context::from_raw`]),
//!    for your stream: [`interop::CudaFrames::import`].
//! 6. Each frame `g`, on that stream: [`interop::CudaFrames::begin`]
//!    (enqueues the wait, gives the [`interop::CudaTarget`]: a surface, or a
//!    [`interop::LinearFrame`]: pointer, pitch and size, valid on that stream
//!    until `end`), your kernel, then [`interop::CudaFrames::end`]
//!    (enqueues the signal).
//! 7. Each frame `g`, in your command buffer: the barriers of
//!    [`interop::SharedFrames::vulkan_frame`] around your use of the image
//!    or buffer, and its wait and signal in your `vkQueueSubmit2`.
//! 8. Tear down: drop the [`interop::CudaFrames`] (it waits, bounded, until
//!    its stream is idle; it keeps the [`interop::SharedFrames`] alive, whose
//!    `Drop` waits for your queue), then vkcuda's `Arc<Device>` (the last
//!    clone frees vkcuda's allocations on your device), then destroy your
//!    device. After a failure, meet every wait in order before you stop:
//!    once the producer has stopped, [`interop::SharedFrames::stand_in`] for
//!    each pending consumer frame, oldest first (docs/sync.md, "Stopping
//!    after a failure").
//!
//! The same steps as code (compiled with the docs; it needs an NVIDIA GPU to
//! run, so it is not run here):
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use ash::vk;
//! # use vkcuda::{interop, sync, vk::device::Device, Format, FrameDesc, Layout};
//! # struct YourEngine { instance: ash::Instance, physical: vk::PhysicalDevice, device: ash::Device, family: u32 }
//! # fn your_engine() -> YourEngine { unimplemented!() }
//! # fn main() -> vkcuda::Result<()> {
//! // 1.-2. Your instance and device, made with what `requirements()` names,
//! //       on the physical device whose UUID CUDA device 0 has; `family`: a queue family of it.
//! let YourEngine { instance, physical, device: engine_device, family } = your_engine();
//! let needs = interop::requirements();
//! // 3. vkcuda's view of your device and queue 0 of `family`.
//! // SAFETY: the device was made from `physical` with `needs`' extensions (and maybe more) and
//! // features, has that queue, other threads submit to it only inside `device.queue_op`, and it
//! // is destroyed only after every vkcuda object (step 8).
//! let device =
//!     unsafe { Device::adopt(&instance, physical, &engine_device, &needs.device_extensions, family, 0) }?;
//! // 4. The plan (one timeline per signaller, 2 frames) and the shared frames: half-float
//! //    frames in linear memory (`Layout::Array` for a CUDA array).
//! let plan = sync::FramePlan::new(sync::SyncScheme::Split, 2, 0, 1000)?;
//! let extent = vk::Extent2D { width: 1920, height: 1080 };
//! let desc = FrameDesc::new(extent).format(Format::Rgba16f).layout(Layout::Buffer);
//! let shared = Arc::new(interop::SharedFrames::new(&device, plan, desc, true)?);
//! // 5. Into your CUDA context, for your stream.
//! let ctx = cudarc::driver::CudaContext::new(0)?;
//! let stream = ctx.new_stream()?;
//! let cuda = interop::CudaFrames::import(ctx.clone(), &shared, stream.clone())?;
//! let copy = (vk::PipelineStageFlags2::COPY, vk::AccessFlags2::TRANSFER_READ);
//! for g in 0..1000 {
//!     // 6. CUDA (on a thread of its own in a real engine): wait, your kernel, signal.
//!     let interop::CudaTarget::Buffer(linear) = cuda.begin(g)? else { unreachable!() };
//!     // Launch your kernel on `stream`: `linear.rows` rows of `linear.row_bytes` bytes,
//!     // `linear.pitch` apart from `linear.pointer` (valid between begin and end, on `stream`).
//!     let _ = (linear.pointer, linear.pitch, linear.rows, linear.row_bytes);
//!     cuda.end(g)?;
//!     // 7. Vulkan: record `acquire`, your commands (here a copy), `release` in one
//!     //    command buffer; submit it with `wait` and `signal` in its VkSubmitInfo2.
//!     let frame = shared.vulkan_frame(g, device.queue_family(), copy, copy);
//!     let _ = (frame.resource, frame.acquire, frame.release, frame.wait, frame.signal);
//! }
//! // 8. Teardown holds by construction: the imports wait for the stream, then the
//! //    shared frames (kept alive by them) wait for the queue. vkcuda's `Device` goes
//! //    before your `vkDestroyDevice`: its last clone frees vkcuda's allocations on it.
//! drop(cuda);
//! drop(shared);
//! drop(device);
//! // SAFETY: no vkcuda object is left on the device, and its queue is idle.
//! unsafe { engine_device.destroy_device(None) };
//! # Ok(()) }
//! ```
//!
//! Where to read: [`sync`] (the protocol as one pure type, and why), then
//! [`interop`], [`vk`] and [`cuda`]; [`platform`] is the one OS seam.
//!
//! The `vkcuda` binary (viewer, headless dump, bench) and the Python module
//! are packages of their own in the same workspace (`crates/`, `python/`),
//! built on the public API above alone.

#![deny(missing_docs)]

pub use error::{Error, Result};
pub use format::{Format, FrameDesc, Layout};

pub mod cuda;
pub mod error;
pub mod format;
pub mod interop;
pub mod platform;
pub mod sync;
pub mod types;
pub mod vk;
