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
//!   and gives what to write ([`CudaTarget`]: a surface, or a pointer and
//!   pitch), [`CudaFrames::end`] enqueues its signal.
//!
//! - [`ExportedFrames`]: the same, as handles another process (or another
//!   API) imports: [`SharedFrames::export`], then
//!   [`CudaFrames::import_exported`] on the other side.
//!
//! Frames are made from a [`FrameDesc`]: a [`crate::Format`], an extent and a
//! [`Layout`] (CUDA array or linear buffer); both layouts follow the same plan.
//!
//! Nothing here owns a thread, a window, a signal handler or a file, and
//! nothing waits on the host: both sides wait on their GPU queue.

use std::ffi::CStr;
use std::sync::Arc;

use crate::error::{Context as _, Error, Result};
use crate::format::{FrameDesc, Layout};
use ash::vk;
use cudarc::driver::sys;

use crate::cuda::external::{ExternalBuffer, ExternalImage, ExternalSemaphore};
use crate::cuda::{settle, stream_state, Context, SharedStream, Stream, StreamState};
use crate::platform;
use crate::sync::{FramePlan, TimelinePoint};
use crate::vk::device::Device;
use crate::vk::frame::{buffer_barrier, image_barrier, prepare_shared};
use crate::vk::shared_buffer::SharedBuffer;
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
///
/// ```
/// let needs = vkcuda::interop::requirements();
/// assert_eq!(needs.api_version, ash::vk::API_VERSION_1_3);
/// // On Linux: VK_KHR_external_memory_fd and VK_KHR_external_semaphore_fd.
/// let names: Vec<_> = needs.device_extensions.iter().map(|e| e.to_str().unwrap()).collect();
/// assert_eq!(names, ["VK_KHR_external_memory_fd", "VK_KHR_external_semaphore_fd"]);
/// ```
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

#[doc(inline)]
pub use crate::vk::frame::Use;

/// The shared images or buffers ([`FrameDesc::layout`]) and the timelines of one [`FramePlan`].
///
/// Ownership and ordering: the images stay in `GENERAL`; images and
/// buffers belong to `VK_QUEUE_FAMILY_EXTERNAL` between Vulkan uses (every
/// Vulkan frame acquires and releases them; see [`SharedFrames::vulkan_frame`]).
/// The [`CudaFrames`] imported from them keep them alive, so they go last;
/// their `Drop` waits (bounded) until the device's queue is idle
/// ([`Device::wait_idle`]) and leaks rather than destroys what a batch that
/// never finishes still uses. Its fields are private for that reason: an
/// image or timeline taken out of it would be destroyed without the wait.
pub struct SharedFrames {
    plan: FramePlan,
    desc: FrameDesc,
    images: Vec<SharedImage>,
    buffers: Vec<SharedBuffer>,
    timelines: Vec<Timeline>,
    device: Arc<Device>,
}

/// The Vulkan object that holds a shared frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    /// An image in `GENERAL` ([`Layout::Array`]).
    Image(vk::Image),
    /// A buffer of packed rows, [`FrameDesc::row_pitch`] bytes each ([`Layout::Buffer`]).
    Buffer(vk::Buffer),
}

/// A queue-family ownership transfer of a shared image or buffer.
#[derive(Clone, Copy, Debug)]
pub enum Barrier {
    /// For an image (it stays in `GENERAL`).
    Image(vk::ImageMemoryBarrier2<'static>),
    /// For a buffer (the whole of it).
    Buffer(vk::BufferMemoryBarrier2<'static>),
}

impl Barrier {
    /// Records the barrier alone into `cmd` (an engine that batches its
    /// barriers takes the struct out instead).
    pub fn record(&self, device: &ash::Device, cmd: vk::CommandBuffer) {
        let (images, buffers) = match self {
            Barrier::Image(b) => (std::slice::from_ref(b), &[][..]),
            Barrier::Buffer(b) => (&[][..], std::slice::from_ref(b)),
        };
        let dependency =
            vk::DependencyInfo::default().image_memory_barriers(images).buffer_memory_barriers(buffers);
        // SAFETY: `cmd` is recording on `device`; the barrier names a live shared image or buffer.
        unsafe { device.cmd_pipeline_barrier2(cmd, &dependency) };
    }
}

/// Frame `g` on the Vulkan side: record `acquire` before your first use of
/// `resource` and `release` after your last, in one command buffer; submit
/// it with `wait` (if any) and `signal` in its `VkSubmitInfo2`.
#[derive(Clone, Copy, Debug)]
pub struct VulkanFrame {
    /// Index of the shared image or buffer in [`SharedFrames::images`] or [`SharedFrames::buffers`].
    pub index: usize,
    /// The shared image or buffer.
    pub resource: Resource,
    /// Its format, size and layout.
    pub desc: FrameDesc,
    /// Acquire from `VK_QUEUE_FAMILY_EXTERNAL` (CUDA's side) for your first use.
    pub acquire: Barrier,
    /// Release to `VK_QUEUE_FAMILY_EXTERNAL` after your last use.
    pub release: Barrier,
    /// Wait for the producer's signal ("rendered").
    pub wait: Option<vk::SemaphoreSubmitInfo<'static>>,
    /// Signal "released" (split) or the next value (shared) once your commands finish.
    pub signal: vk::SemaphoreSubmitInfo<'static>,
}

impl SharedFrames {
    /// Creates the plan's images or buffers (as `desc` says) and timelines on
    /// `device`, exportable to CUDA when `export`, and prepares them (one
    /// submission to the device's queue, waited for). With `export`, the
    /// driver is asked first whether it can export the combination: if not,
    /// [`Error::FormatUnsupported`] says which.
    ///
    /// ```no_run
    /// # fn demo(device: &std::sync::Arc<vkcuda::vk::device::Device>) -> vkcuda::Result<()> {
    /// use ash::vk;
    /// use vkcuda::{interop::SharedFrames, sync::{FramePlan, SyncScheme}, FrameDesc};
    /// let plan = FramePlan::new(SyncScheme::Split, 3, 0, 1 << 40)?;
    /// let desc = FrameDesc::new(vk::Extent2D { width: 1280, height: 720 });
    /// let shared = SharedFrames::new(device, plan, desc, true)?;
    /// // One image per frame in rotation, and the plan's timelines.
    /// assert_eq!((shared.images().len(), shared.timelines().len()), (3, 2));
    /// # Ok(()) }
    /// ```
    pub fn new(device: &Arc<Device>, plan: FramePlan, desc: FrameDesc, export: bool) -> Result<Self> {
        Self::with_images(device, plan, desc, export, export)
    }

    /// [`SharedFrames::new`], with export chosen separately for the images
    /// or buffers and for the timelines (the application's CPU producer runs
    /// on exportable images with host-signalled timelines).
    pub fn with_images(
        device: &Arc<Device>,
        plan: FramePlan,
        desc: FrameDesc,
        export_images: bool,
        export_timelines: bool,
    ) -> Result<Self> {
        if export_images {
            check_export(device, &desc)?;
        }
        let (mut images, mut buffers) = (Vec::new(), Vec::new());
        for _ in 0..plan.images() {
            match desc.layout {
                Layout::Array => images.push(SharedImage::new(device.clone(), &desc, export_images)?),
                Layout::Buffer => buffers.push(SharedBuffer::new(device.clone(), &desc, export_images)?),
            }
        }
        prepare_shared(device, &images, &buffers)?;
        let timelines = plan
            .timeline_names()
            .iter()
            .map(|name| Timeline::new(device.clone(), name, plan.initial_value(), export_timelines))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { plan, desc, images, buffers, timelines, device: device.clone() })
    }

    /// New handles to every image or buffer and (when they were made
    /// exportable) every timeline: what another process imports
    /// ([`CudaFrames::import_exported`]). Each handle names the same memory
    /// or payload as these objects, which may go while an import lives (the
    /// import holds its own reference); the plan still says who signals what.
    pub fn export(&self) -> Result<ExportedFrames> {
        let memory = match self.desc.layout {
            Layout::Array => self.images.iter().map(SharedImage::export).collect::<Result<Vec<_>>>()?,
            Layout::Buffer => self.buffers.iter().map(SharedBuffer::export).collect::<Result<Vec<_>>>()?,
        };
        let timelines = match self.timelines.iter().all(Timeline::exportable) {
            true => self.timelines.iter().map(Timeline::export).collect::<Result<Vec<_>>>()?,
            false => Vec::new(),
        };
        let color = self.images.iter().any(|i| i.usage().contains(vk::ImageUsageFlags::COLOR_ATTACHMENT));
        Ok(ExportedFrames { plan: self.plan, desc: self.desc, memory, timelines, color })
    }

    /// The frame/value plan: the one source of truth for who waits for what.
    pub fn plan(&self) -> &FramePlan {
        &self.plan
    }

    /// What every frame is: format, extent, layout.
    pub fn desc(&self) -> &FrameDesc {
        &self.desc
    }

    /// The shared images, in plan order ([`Layout::Array`]; empty otherwise).
    pub fn images(&self) -> &[SharedImage] {
        &self.images
    }

    /// The shared buffers, in plan order ([`Layout::Buffer`]; empty otherwise).
    pub fn buffers(&self) -> &[SharedBuffer] {
        &self.buffers
    }

    /// The timelines, indexed as in the plan ([`TimelinePoint::timeline`]).
    pub fn timelines(&self) -> &[Timeline] {
        &self.timelines
    }

    /// The device they were made on.
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// Stands in from the host for the producer's signal that consumer
    /// frame `g` waits for, once the producer can signal nothing any more:
    /// the last step of stopping after a failure (docs/sync.md, "Stopping
    /// after a failure"). Call it for each consumer frame still pending,
    /// oldest first, and wait for that frame's batch before the next call.
    /// A timeline already at the value is left alone.
    ///
    /// ```no_run
    /// # fn demo(shared: &vkcuda::interop::SharedFrames, pending: std::ops::Range<u64>,
    /// #         wait_for_batch: impl Fn(u64) -> vkcuda::Result<()>) -> vkcuda::Result<()> {
    /// // The producer's thread has ended and its stream is idle (or failed).
    /// for g in pending {
    ///     // SAFETY: nothing but the host and this queue signals a timeline any more, and
    ///     // frames before g are finished: no pending signal is at or below g's wait.
    ///     unsafe { shared.stand_in(g) }?;
    ///     wait_for_batch(g)?;
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Safety
    /// - no CUDA stream or other producer will signal a timeline of these
    ///   frames any more (its thread has ended, its stream is idle or failed);
    /// - every consumer batch submitted for a frame before `g` has finished:
    ///   then no pending signal of the timeline is at or below the value
    ///   (VUID-VkSemaphoreSignalInfo-value-03259; `shared`: a batch's signal
    ///   is above its own wait). The value's rise (…-03258) is checked.
    pub unsafe fn stand_in(&self, g: u64) -> Result<()> {
        match self.plan.stand_in(g) {
            // SAFETY: the caller's promises are raise_to's.
            Some(w) => unsafe { self.timelines[w.timeline].raise_to(w.value) },
            None => Ok(()),
        }
    }

    /// The semaphore and value of a plan point, for a `VkSubmitInfo2`.
    pub fn submit_info(&self, point: TimelinePoint) -> vk::SemaphoreSubmitInfo<'static> {
        vk::SemaphoreSubmitInfo::default()
            .semaphore(self.timelines[point.timeline].raw())
            .value(point.value)
            .stage_mask(vk::PipelineStageFlags2::ALL_COMMANDS)
    }

    /// Shared image or buffer `i`.
    pub fn resource(&self, i: usize) -> Resource {
        match self.desc.layout {
            Layout::Array => Resource::Image(self.images[i].image()),
            Layout::Buffer => Resource::Buffer(self.buffers[i].buffer()),
        }
    }

    /// Frame `g`'s Vulkan side for a queue of `queue_family` whose commands
    /// first use the image or buffer as `first` and last as `last`.
    pub fn vulkan_frame(&self, g: u64, queue_family: u32, first: Use, last: Use) -> VulkanFrame {
        let step = self.plan.consumer(g);
        let (acquire, release) = self.ownership_transfer(step.image, queue_family, first, last);
        VulkanFrame {
            index: step.image,
            resource: self.resource(step.image),
            desc: self.desc,
            acquire,
            release,
            wait: step.wait.map(|p| self.submit_info(p)),
            signal: self.submit_info(step.signal),
        }
    }

    /// The queue-family ownership transfer of image or buffer `i` from
    /// `VK_QUEUE_FAMILY_EXTERNAL` to `queue_family` before a use that begins
    /// with `first`, and back after one that ends with `last` (what
    /// [`SharedFrames::vulkan_frame`] returns, for any frame and hand-over).
    pub fn ownership_transfer(
        &self,
        i: usize,
        queue_family: u32,
        first: Use,
        last: Use,
    ) -> (Barrier, Barrier) {
        let none = (vk::PipelineStageFlags2::NONE, vk::AccessFlags2::NONE);
        let external = vk::QUEUE_FAMILY_EXTERNAL;
        // Acquire: the source scope is CUDA's, outside Vulkan: only the destination counts.
        // Release: the destination scope is CUDA's; the semaphore signal orders the rest.
        match self.resource(i) {
            Resource::Image(image) => (
                Barrier::Image(
                    image_barrier(image, none, first)
                        .src_queue_family_index(external)
                        .dst_queue_family_index(queue_family),
                ),
                Barrier::Image(
                    image_barrier(image, last, none)
                        .src_queue_family_index(queue_family)
                        .dst_queue_family_index(external),
                ),
            ),
            Resource::Buffer(buffer) => (
                Barrier::Buffer(
                    buffer_barrier(buffer, none, first)
                        .src_queue_family_index(external)
                        .dst_queue_family_index(queue_family),
                ),
                Barrier::Buffer(
                    buffer_barrier(buffer, last, none)
                        .src_queue_family_index(queue_family)
                        .dst_queue_family_index(external),
                ),
            ),
        }
    }
}

/// Whether `device` can share frames of `desc` with CUDA: for the array
/// layout the driver's answer to `vkGetPhysicalDeviceImageFormatProperties2`
/// (with the export's handle type and the images' usage), for the buffer
/// layout to `vkGetPhysicalDeviceExternalBufferProperties`; an
/// [`Error::FormatUnsupported`] names the combination and the reason.
///
/// ```no_run
/// # fn demo(device: &vkcuda::vk::device::Device) {
/// use ash::vk;
/// use vkcuda::{interop, Error, Format, FrameDesc, Layout};
/// let desc = FrameDesc::new(vk::Extent2D { width: 1920, height: 1080 }).format(Format::Rgba8Srgb);
/// match interop::check_export(device, &desc) {
///     Ok(()) => println!("{desc}: CUDA can share it"),
///     Err(Error::FormatUnsupported { format, layout, context }) => {
///         println!("{format} {layout}: {context}; try the other layout");
///         let _ = interop::check_export(device, &desc.layout(Layout::Buffer));
///     }
///     Err(e) => println!("{e}"),
/// }
/// # }
/// ```
pub fn check_export(device: &Device, desc: &FrameDesc) -> Result<()> {
    match desc.layout {
        Layout::Array => crate::vk::shared_image::check_export(device, desc),
        Layout::Buffer => crate::vk::shared_buffer::check_export(device, desc),
    }
}

/// What CUDA writes frame `g` through ([`CudaFrames::begin`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CudaTarget {
    /// [`Layout::Array`]: a surface object to write (`surf2Dwrite`, x in
    /// bytes) and a texture object over the same array to read.
    Array {
        /// The surface object.
        surface: sys::CUsurfObject,
        /// The texture object (point sampling, clamped, unnormalized coordinates).
        texture: sys::CUtexObject,
    },
    /// [`Layout::Buffer`]: linear device memory, rows `pitch` bytes apart.
    Buffer(LinearFrame),
}

/// A shared buffer as CUDA writes it ([`Layout::Buffer`]): `rows` rows of
/// `row_bytes` bytes each, `pitch` bytes apart, from `pointer`; `size` bytes
/// in all.
///
/// Where and when it is valid: the pointer stays mapped as long as the
/// [`CudaFrames`] that gave it lives. Its bytes are CUDA's to write only
/// on that `CudaFrames`' stream ([`CudaFrames::stream`]), in the work
/// enqueued after [`CudaFrames::begin`]`(g)` returned it and before
/// [`CudaFrames::end`]`(g)`: outside that span Vulkan may be reading them
/// (work on another stream must first wait for an event recorded after
/// `begin`, and `end` must come after it on this stream).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinearFrame {
    /// The first row.
    pub pointer: sys::CUdeviceptr,
    /// Bytes from one row to the next.
    pub pitch: u64,
    /// Bytes of pixels in a row (width × bytes per pixel; at most `pitch`).
    pub row_bytes: u64,
    /// Rows (the frame's height).
    pub rows: u64,
    /// Bytes mapped at `pointer`: what a kernel may write (`pitch` × `rows`).
    pub size: u64,
}

/// Shared frames as handles ([`SharedFrames::export`]): what crosses a
/// process boundary (over a Unix socket, `SCM_RIGHTS`) for the other side to
/// import ([`CudaFrames::import_exported`]).
#[derive(Debug)]
pub struct ExportedFrames {
    /// The frame plan the frames follow.
    pub plan: FramePlan,
    /// What each frame is.
    pub desc: FrameDesc,
    /// One dedicated allocation per image or buffer, in the plan's order.
    pub memory: Vec<platform::ExportedMemory>,
    /// One handle per timeline, in the plan's order
    /// ([`FramePlan::timeline_names`]); empty when the timelines were not
    /// made exportable (the exporter then signals on the other side's behalf).
    pub timelines: Vec<platform::Handle>,
    /// The images have `COLOR_ATTACHMENT` usage (CUDA must be told).
    pub color: bool,
}

/// The shared frames as CUDA sees them: surfaces or pointers to write, and imported timelines.
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
    buffers: Vec<ExternalBuffer>,
    semaphores: Vec<ExternalSemaphore>,
    ctx: Context,
    stream: SharedStream,
    plan: FramePlan,
    desc: FrameDesc,
    /// The frames imported, when they are this process's: kept alive.
    _shared: Option<Arc<SharedFrames>>,
}

impl CudaFrames {
    /// Imports every image or buffer and timeline of `frames` (made
    /// exportable) into `ctx`, for use on `stream` (cudarc's
    /// `Arc<CudaStream>`, or a [`crate::cuda::RawStream`]): the stream
    /// [`CudaFrames::begin`] and [`CudaFrames::end`] enqueue on, and the one
    /// dropping this waits for.
    pub fn import(ctx: impl Into<Context>, frames: &Arc<SharedFrames>, stream: SharedStream) -> Result<Self> {
        let exported = frames.export()?;
        // SAFETY: the handles were just exported from `frames`, which the import keeps alive.
        let mut this = unsafe { Self::import_exported(ctx, exported, stream) }?;
        this._shared = Some(frames.clone());
        Ok(this)
    }

    /// Imports frames another process exported ([`SharedFrames::export`]):
    /// the other side of a process boundary. Checked: one allocation per
    /// frame of the plan, each large enough, and one handle per timeline
    /// ([`crate::Error::Invalid`] if not).
    ///
    /// # Safety
    /// - every handle came from [`SharedFrames::export`] (or an export that
    ///   keeps its promises: dedicated allocations of `frames.desc`'s frames,
    ///   timelines of the plan's names) on a Vulkan device that is
    ///   `ctx`'s device (the same `deviceUUID`);
    /// - the exporting side follows `frames.plan` as this side does.
    pub unsafe fn import_exported(
        ctx: impl Into<Context>,
        frames: ExportedFrames,
        stream: SharedStream,
    ) -> Result<Self> {
        let ExportedFrames { plan, desc, memory, timelines, color } = frames;
        let names = plan.timeline_names();
        if memory.len() != plan.images() || timelines.len() != names.len() {
            return Err(Error::invalid(format!(
                "importing {} allocations and {} timelines for a plan of {} frames and {} timelines",
                memory.len(),
                timelines.len(),
                plan.images(),
                names.len()
            )));
        }
        let ctx = ctx.into();
        let mut this = Self {
            images: Vec::new(),
            buffers: Vec::new(),
            semaphores: Vec::new(),
            ctx,
            stream,
            plan,
            desc,
            _shared: None,
        };
        for (i, m) in memory.into_iter().enumerate() {
            match desc.layout {
                Layout::Array => this.images.push(
                    ExternalImage::import(this.ctx.clone(), m, &desc, color)
                        .with_context(|| format!("importing shared image {i} ({desc}) into CUDA"))?,
                ),
                Layout::Buffer => this.buffers.push(
                    ExternalBuffer::import(this.ctx.clone(), m, &desc)
                        .with_context(|| format!("importing shared buffer {i} ({desc}) into CUDA"))?,
                ),
            }
        }
        for (handle, name) in timelines.into_iter().zip(names) {
            let sem = ExternalSemaphore::import(this.ctx.clone(), handle, name)
                .with_context(|| format!("importing timeline '{name}' into CUDA"))?;
            this.semaphores.push(sem);
        }
        Ok(this)
    }

    /// What each frame is.
    pub fn desc(&self) -> &FrameDesc {
        &self.desc
    }

    /// Enqueues on the stream frame `g`'s wait (the image or buffer is free
    /// again) and returns what the frame's kernels write.
    ///
    /// The call returns at once, but a later CUDA call on this stream may
    /// block its thread until the wait is over: drive CUDA from its own thread.
    pub fn begin(&self, g: u64) -> Result<CudaTarget> {
        let step = self.plan.producer(g);
        if let Some(w) = step.wait {
            self.semaphores[w.timeline].wait(&*self.stream, w.value)?;
        }
        Ok(self.target(step.image))
    }

    /// What kernels write shared image or buffer `i` through (for hand-overs
    /// other than the plan's, such as the patterns `vkcuda bench` compares with).
    pub fn target(&self, i: usize) -> CudaTarget {
        match self.desc.layout {
            Layout::Array => {
                CudaTarget::Array { surface: self.images[i].surface(), texture: self.images[i].texture() }
            }
            Layout::Buffer => {
                let (buffer, desc) = (&self.buffers[i], &self.desc);
                CudaTarget::Buffer(LinearFrame {
                    pointer: buffer.pointer(),
                    pitch: buffer.pitch(),
                    row_bytes: desc.row_pitch(),
                    rows: u64::from(desc.extent.height),
                    size: buffer.size(),
                })
            }
        }
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
        let s = self.plan.producer(g).signal;
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
            "the CUDA stream was still busy {WAIT_TIMEOUT:?} after the last frame: leaking its {} image, {} \
             buffer and {} semaphore imports rather than destroying them in use",
            self.images.len(),
            self.buffers.len(),
            self.semaphores.len()
        );
        std::mem::forget(std::mem::take(&mut self.images));
        std::mem::forget(std::mem::take(&mut self.buffers));
        std::mem::forget(std::mem::take(&mut self.semaphores));
    }
}

impl Drop for SharedFrames {
    fn drop(&mut self) {
        // Destroying an image or semaphore a pending batch uses is undefined: wait first (bounded).
        if let Err(e) = self.device.wait_idle() {
            log::error!(
                "{e:#}: leaking {} shared images, {} buffers and {} timelines rather than destroying them in use",
                self.images.len(),
                self.buffers.len(),
                self.timelines.len()
            );
            std::mem::forget(std::mem::take(&mut self.images));
            std::mem::forget(std::mem::take(&mut self.buffers));
            std::mem::forget(std::mem::take(&mut self.timelines));
        }
    }
}
