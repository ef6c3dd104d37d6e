//! The integrator's API: shared frames on the integrator's own Vulkan device
//! and CUDA context, and the pieces of one frame for each side.
//!
//! - [`requirements`]: what to enable before creating the device;
//! - [`SharedFrames`]: the exportable images and timelines, made on a
//!   [`Device`] (yours, through [`Device::adopt`]), following a [`FramePlan`];
//! - [`SharedFrames::vulkan_frame`]: frame `g`'s barriers (acquire and
//!   release, with the queue-family transfers) for your command buffer, and
//!   its semaphore wait and signal for your `vkQueueSubmit2`;
//! - [`CudaFrames`]: the same images and timelines imported into your CUDA
//!   context; [`CudaFrames::begin`] enqueues frame `g`'s wait on your stream
//!   and gives the surface to write, [`CudaFrames::end`] enqueues its signal.
//!
//! Nothing here owns a thread, a window, a signal handler or a file, and
//! nothing waits on the host: both sides wait on their GPU queue.

use std::ffi::CStr;
use std::sync::Arc;

use crate::error::{Context as _, Error, Result};
use ash::vk;
use cudarc::driver::sys;

use crate::cuda::external::{ExternalImage, ExternalSemaphore};
use crate::cuda::{settle, stream_state, Context, SharedStream, Stream, StreamState};
use crate::platform;
use crate::sync::{FramePlan, TimelinePoint};
use crate::vk::device::Device;
use crate::vk::frame::{image_barrier, prepare_shared_images};
use crate::vk::shared_image::SharedImage;
use crate::vk::timeline::Timeline;
use crate::vk::WAIT_TIMEOUT;

/// What the integrator's instance and device must have for vkcuda.
#[derive(Clone, Debug)]
pub struct Requirements {
    /// The Vulkan API version to create the instance with (timeline
    /// semaphores and synchronization2 are core in 1.3).
    pub api_version: u32,
    /// Instance extensions (none beyond Vulkan 1.3).
    pub instance_extensions: Vec<&'static CStr>,
    /// Device extensions: the platform's memory and semaphore export.
    pub device_extensions: Vec<&'static CStr>,
}

/// What vkcuda needs; call it before creating your instance and device.
pub fn requirements() -> Requirements {
    Requirements {
        api_version: vk::API_VERSION_1_3,
        instance_extensions: Vec::new(),
        device_extensions: vec![platform::MEMORY_EXTENSION, platform::SEMAPHORE_EXTENSION],
    }
}

impl Requirements {
    /// Turns on the device features vkcuda needs in your feature structs
    /// (chain them into `VkDeviceCreateInfo`).
    pub fn enable_features(
        &self,
        v12: &mut vk::PhysicalDeviceVulkan12Features<'_>,
        v13: &mut vk::PhysicalDeviceVulkan13Features<'_>,
    ) {
        crate::vk::enable_required_features(v12, v13);
    }
}

/// A stage and the access in it.
pub type Use = (vk::PipelineStageFlags2, vk::AccessFlags2);

/// The shared images and timelines of one [`FramePlan`].
///
/// Ownership and ordering: the images stay in `GENERAL` and belong to
/// `VK_QUEUE_FAMILY_EXTERNAL` between Vulkan uses (every Vulkan frame
/// acquires and releases them; see [`SharedFrames::vulkan_frame`]). The
/// [`CudaFrames`] imported from them keep them alive, so they go last; their
/// `Drop` waits (bounded) until the device's queue is idle
/// ([`Device::wait_idle`]) and leaks rather than destroys what a batch that
/// never finishes still uses.
pub struct SharedFrames {
    /// The frame/value plan: the one source of truth for who waits for what.
    pub plan: FramePlan,
    /// The shared images, in plan order.
    pub images: Vec<SharedImage>,
    /// The timelines, indexed as in the plan.
    pub timelines: Vec<Timeline>,
    device: Arc<Device>,
}

/// Frame `g` on the Vulkan side: record `acquire` before your first use of
/// `image` and `release` after your last, in one command buffer; submit it
/// with `wait` (if any) and `signal` in its `VkSubmitInfo2`.
#[derive(Clone, Copy, Debug)]
pub struct VulkanFrame {
    /// Index of the shared image in [`SharedFrames::images`].
    pub index: usize,
    /// The shared image (in `GENERAL`).
    pub image: vk::Image,
    /// Its size.
    pub extent: vk::Extent2D,
    /// Acquire from `VK_QUEUE_FAMILY_EXTERNAL` (CUDA's side) for your first use.
    pub acquire: vk::ImageMemoryBarrier2<'static>,
    /// Release to `VK_QUEUE_FAMILY_EXTERNAL` after your last use.
    pub release: vk::ImageMemoryBarrier2<'static>,
    /// Wait for the producer's signal ("rendered").
    pub wait: Option<vk::SemaphoreSubmitInfo<'static>>,
    /// Signal "released" (split) or the next value (shared) once your commands finish.
    pub signal: vk::SemaphoreSubmitInfo<'static>,
}

impl SharedFrames {
    /// Creates the plan's images (`extent`, RGBA8) and timelines on `device`,
    /// exportable to CUDA when `export`, and prepares the images (one
    /// submission to the device's queue, waited for).
    pub fn new(device: &Arc<Device>, plan: FramePlan, extent: vk::Extent2D, export: bool) -> Result<Self> {
        Self::with_images(device, plan, extent, export, export)
    }

    /// [`SharedFrames::new`], with export chosen separately for the images
    /// and the timelines (the application's CPU producer runs on exportable
    /// images with host-signalled timelines).
    pub fn with_images(
        device: &Arc<Device>,
        plan: FramePlan,
        extent: vk::Extent2D,
        export_images: bool,
        export_timelines: bool,
    ) -> Result<Self> {
        let images = (0..plan.images())
            .map(|_| SharedImage::new(device.clone(), extent, export_images))
            .collect::<Result<Vec<_>>>()?;
        prepare_shared_images(device, &images)?;
        let timelines = plan
            .timeline_names()
            .iter()
            .map(|name| Timeline::new(device.clone(), name, plan.initial_value(), export_timelines))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { plan, images, timelines, device: device.clone() })
    }

    /// The semaphore and value of a plan point, for a `VkSubmitInfo2`.
    pub fn submit_info(&self, point: TimelinePoint) -> vk::SemaphoreSubmitInfo<'static> {
        vk::SemaphoreSubmitInfo::default()
            .semaphore(self.timelines[point.timeline].raw)
            .value(point.value)
            .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)
    }

    /// Frame `g`'s Vulkan side for a queue of `queue_family` whose commands
    /// first use the image as `first` and last as `last`.
    pub fn vulkan_frame(&self, g: u64, queue_family: u32, first: Use, last: Use) -> VulkanFrame {
        let step = self.plan.consumer(g);
        let image = &self.images[step.image];
        let (acquire, release) = self.ownership_transfer(step.image, queue_family, first, last);
        VulkanFrame {
            index: step.image,
            image: image.image,
            extent: image.extent,
            acquire,
            release,
            wait: step.wait.map(|p| self.submit_info(p)),
            signal: self.submit_info(step.signal),
        }
    }

    /// The queue-family ownership transfer of image `i` from
    /// `VK_QUEUE_FAMILY_EXTERNAL` to `queue_family` before a use that begins
    /// with `first`, and back after one that ends with `last` (what
    /// [`SharedFrames::vulkan_frame`] returns, for any image and hand-over).
    pub fn ownership_transfer(
        &self,
        i: usize,
        queue_family: u32,
        first: Use,
        last: Use,
    ) -> (vk::ImageMemoryBarrier2<'static>, vk::ImageMemoryBarrier2<'static>) {
        let image = self.images[i].image;
        let none = (vk::PipelineStageFlags2::NONE, vk::AccessFlags2::NONE);
        // Acquire: the source scope is CUDA's, outside Vulkan: only the destination counts.
        let acquire = image_barrier(image, none, first)
            .src_queue_family_index(vk::QUEUE_FAMILY_EXTERNAL)
            .dst_queue_family_index(queue_family);
        // Release: the destination scope is CUDA's; the semaphore signal orders the rest.
        let release = image_barrier(image, last, none)
            .src_queue_family_index(queue_family)
            .dst_queue_family_index(vk::QUEUE_FAMILY_EXTERNAL);
        (acquire, release)
    }
}

/// The shared frames as CUDA sees them: surfaces to write and imported timelines.
///
/// Teardown holds by construction: it keeps the [`SharedFrames`] it came
/// from (an `Arc`), so the Vulkan images and timelines outlive their
/// imports, and the stream its waits and signals go to, so its `Drop` first
/// waits (bounded, [`crate::vk::WAIT_TIMEOUT`]) until that stream is idle:
/// no import is destroyed while enqueued work may still use it. A stream
/// that stays busy past the bound (a wait nobody will ever signal) gets its
/// imports leaked, with an error logged: a leak, never undefined behaviour.
pub struct CudaFrames {
    images: Vec<ExternalImage>,
    semaphores: Vec<ExternalSemaphore>,
    ctx: Context,
    stream: SharedStream,
    shared: Arc<SharedFrames>,
}

impl CudaFrames {
    /// Imports every image and timeline of `frames` (made exportable) into
    /// `ctx`, for use on `stream` (cudarc's `Arc<CudaStream>`, or a
    /// [`crate::cuda::RawStream`]): the stream [`CudaFrames::begin`] and
    /// [`CudaFrames::end`] enqueue on, and the one dropping this waits for.
    pub fn import(ctx: impl Into<Context>, frames: &Arc<SharedFrames>, stream: SharedStream) -> Result<Self> {
        let ctx = ctx.into();
        let mut this =
            Self { images: Vec::new(), semaphores: Vec::new(), ctx, stream, shared: frames.clone() };
        for (i, img) in frames.images.iter().enumerate() {
            let (w, h) = (img.extent.width, img.extent.height);
            let ext = ExternalImage::import(this.ctx.clone(), img.export()?, img.allocation_size, w, h)
                .with_context(|| format!("importing shared image {i} into CUDA"))?;
            this.images.push(ext);
        }
        for t in &frames.timelines {
            let sem = ExternalSemaphore::import(this.ctx.clone(), t.export()?, t.name)
                .with_context(|| format!("importing timeline '{}' into CUDA", t.name))?;
            this.semaphores.push(sem);
        }
        Ok(this)
    }

    /// Enqueues on the stream frame `g`'s wait (the image is free again) and
    /// returns the surface object the frame's kernels write (`surf2Dwrite`).
    ///
    /// The call returns at once, but a later CUDA call on this stream may
    /// block its thread until the wait is over: drive CUDA from its own thread.
    pub fn begin(&self, g: u64) -> Result<sys::CUsurfObject> {
        let step = self.shared.plan.producer(g);
        if let Some(w) = step.wait {
            self.semaphores[w.timeline].wait(&*self.stream, w.value)?;
        }
        Ok(self.images[step.image].surface())
    }

    /// The surface object of shared image `i` (for hand-overs other than the
    /// plan's, such as the patterns `vkcuda bench` compares with).
    pub fn surface(&self, i: usize) -> sys::CUsurfObject {
        self.images[i].surface()
    }

    /// The imported timeline `t` (index into the plan's timeline names), for
    /// waits and signals other than the plan's, on this frames' stream.
    pub fn timeline(&self, t: usize) -> &ExternalSemaphore {
        &self.semaphores[t]
    }

    /// The stream this enqueues on (and waits for before it is dropped).
    pub fn stream(&self) -> &dyn Stream {
        &*self.stream
    }

    /// How the stream stands now, without waiting: idle, busy, or failed (a
    /// kernel fault), e.g. to stop a host wait that a dead stream would never end.
    pub fn stream_state(&self) -> StreamState {
        stream_state(&self.ctx, &*self.stream)
    }

    /// Enqueues on the stream, after the frame's kernels, frame `g`'s signal ("rendered").
    pub fn end(&self, g: u64) -> Result<()> {
        let s = self.shared.plan.producer(g).signal;
        self.semaphores[s.timeline].signal(&*self.stream, s.value)
    }

    /// Waits until the stream has finished everything enqueued, for at most
    /// [`WAIT_TIMEOUT`]: the stream's error if it failed (a kernel fault shows
    /// here), or an error naming the wait if it is still busy (a wait on a
    /// value nobody signals). Dropping this waits the same way.
    pub fn synchronize(&self) -> Result<()> {
        match settle(&self.ctx, &*self.stream, WAIT_TIMEOUT) {
            StreamState::Idle => Ok(()),
            StreamState::Failed(e) => crate::cuda::check(e, "a kernel or operation on the CUDA stream"),
            StreamState::Busy => {
                Err(Error::TimedOut { what: "the CUDA stream to finish".into(), after: WAIT_TIMEOUT })
            }
        }
    }
}

impl Drop for CudaFrames {
    fn drop(&mut self) {
        // A failed context runs nothing more: destroying is safe then (and fails quietly).
        if settle(&self.ctx, &*self.stream, WAIT_TIMEOUT) != StreamState::Busy {
            return;
        }
        log::error!(
            "the CUDA stream was still busy {WAIT_TIMEOUT:?} after the last frame: leaking its {} image and \
             {} semaphore imports rather than destroying them in use",
            self.images.len(),
            self.semaphores.len()
        );
        std::mem::forget(std::mem::take(&mut self.images));
        std::mem::forget(std::mem::take(&mut self.semaphores));
    }
}

impl Drop for SharedFrames {
    fn drop(&mut self) {
        // Destroying an image or semaphore a pending batch uses is undefined: wait first (bounded).
        if let Err(e) = self.device.wait_idle() {
            log::error!(
                "{e:#}: leaking {} shared images and {} timelines rather than destroying them in use",
                self.images.len(),
                self.timelines.len()
            );
            std::mem::forget(std::mem::take(&mut self.images));
            std::mem::forget(std::mem::take(&mut self.timelines));
        }
    }
}
