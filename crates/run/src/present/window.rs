//! The windowed consumer: the compute draw ([`super::compute_draw`]) into a
//! target copied into an acquired swapchain image
//! ([`super::to_swapchain`]), then the present; or, where the Vulkan device
//! cannot present to the window, into a buffer that the CPU puts in the
//! window ([`super::cpu`]). No graphics pipeline on either path: on NVIDIA
//! those stop finishing after a CUDA fault, and the window must still show
//! the fault over its last frame. The timelines are as in every mode
//! (`app::consumer`).

use std::sync::Arc;

use anyhow::Result;
use ash::vk;

use super::compute_draw::ComputeDraw;
use super::cpu::CpuOutput;
use super::readback::{Readable, Readback};
use super::swapchain::{Acquisition, Swapchain, SwapchainState};
use super::to_swapchain::SwapchainOutput;
use crate::base::kinds::PresentMode;
use crate::frames::consumer::{Consume, Frames, Source};
use vkcuda::interop::Use;
use vkcuda::vk::device::Device;

/// Where the drawn frame goes (the compute draw draws it).
enum Output {
    /// A swapchain of the window's Vulkan surface, the drawing copied in.
    Vulkan(Box<SwapchainOutput>),
    /// A buffer read back and put in the window by the CPU.
    Cpu(Box<CpuOutput>),
}

/// What a frame's submission waits for and signals for the window.
pub enum Acquired {
    /// The swapchain no longer fits the window: recreate it, skip the frame.
    Stale,
    /// Go on (with `state`); wait for `wait` at the copy in, signal `signal`
    /// for the present (both `None` on the CPU path).
    Ready {
        /// Whether to recreate after this frame.
        state: SwapchainState,
        /// The acquire semaphore.
        wait: Option<vk::Semaphore>,
        /// The present's semaphore.
        signal: Option<vk::Semaphore>,
    },
}

/// The output and its draw, and the snapshot ("S") readback.
pub struct Presenter {
    device: Arc<Device>,
    output: Output,
    draw: ComputeDraw,
    /// When set, the next frame is also read back and written as PNG.
    pub snapshot: Option<Readback>,
    snapshot_next: bool,
}

impl Presenter {
    /// Presents through a swapchain of `surface`; it follows with [`Presenter::recreate`].
    pub fn new(
        device: Arc<Device>,
        surface_fn: ash::khr::surface::Instance,
        surface: vk::SurfaceKHR,
        slots: usize,
        mode: PresentMode,
    ) -> Result<Self> {
        let swapchain = Swapchain::new(device.clone(), surface_fn, surface, slots, mode)?;
        let output = Output::Vulkan(Box::new(SwapchainOutput::new(device.clone(), swapchain, slots)));
        let draw = ComputeDraw::new(device.clone())?;
        Ok(Self { device, output, draw, snapshot: None, snapshot_next: false })
    }

    /// Presents through the CPU into `window`; the target follows with [`Presenter::recreate`].
    pub fn new_cpu(device: Arc<Device>, window: Arc<winit::window::Window>, slots: usize) -> Result<Self> {
        let output = Output::Cpu(Box::new(CpuOutput::new(device.clone(), window, slots)?));
        let draw = ComputeDraw::new(device.clone())?;
        Ok(Self { device, output, draw, snapshot: None, snapshot_next: false })
    }

    /// Whether frames reach the window through the CPU.
    pub fn through_cpu(&self) -> bool {
        matches!(self.output, Output::Cpu(..))
    }

    /// The CPU path's time from a consumed frame's buffer into the window (zero for a swapchain).
    pub fn put_time(&self) -> std::time::Duration {
        match &self.output {
            Output::Vulkan(..) => std::time::Duration::ZERO,
            Output::Cpu(c) => c.put_time,
        }
    }

    /// Multiplies the exposure by `factor` (kept between 1/64 and 64).
    pub fn change_exposure(&mut self, factor: f32) {
        self.draw.exposure = (self.draw.exposure * factor).clamp(1.0 / 64.0, 64.0);
    }

    /// The exposure the frames are shown with.
    pub fn exposure(&self) -> f32 {
        self.draw.exposure
    }

    /// Points the draw at a session's frames (after the interop is (re)built);
    /// frames go in the window again ([`Presenter::freeze`]).
    pub fn bind_shared(&mut self, frames: Frames<'_>) -> Result<()> {
        match &mut self.output {
            Output::Vulkan(s) => s.thaw(),
            Output::Cpu(cpu) => cpu.thaw(),
        }
        self.draw.bind_shared(frames)
    }

    /// The producer failed: frames consumed from now on (the run signals what
    /// it owed; their pixels are stale) stay out of the window, which keeps
    /// the last good frame.
    pub fn freeze(&mut self) {
        match &mut self.output {
            Output::Vulkan(s) => s.freeze(),
            Output::Cpu(cpu) => cpu.freeze(),
        }
    }

    /// The window's surface (`None` on the CPU path): a device made again
    /// must present to it.
    pub fn surface(&self) -> Option<(ash::khr::surface::Instance, vk::SurfaceKHR)> {
        match &self.output {
            Output::Vulkan(s) => Some(s.swapchain.surface()),
            Output::Cpu(..) => None,
        }
    }

    /// Moves the output to `device`, a device made again after the one
    /// before was lost (every frame of that one's session ended): the draw,
    /// the swapchain on the same surface or the CPU path's buffers; fit it
    /// with [`Presenter::recreate`] next. A snapshot under way is dropped.
    pub fn move_to(&mut self, device: Arc<Device>) -> Result<()> {
        // A lost device counts as idle: nothing of it runs any more.
        self.device.wait_idle()?;
        (self.snapshot, self.snapshot_next) = (None, false);
        match &mut self.output {
            Output::Vulkan(s) => s.move_to(device.clone())?,
            Output::Cpu(cpu) => cpu.move_to(device.clone()),
        }
        self.draw = ComputeDraw::new(device.clone())?;
        self.device = device;
        Ok(())
    }

    /// (Re)creates the swapchain or the CPU path's target for the window's size (queue idle).
    pub fn recreate(&mut self, window: vk::Extent2D) -> Result<()> {
        match &mut self.output {
            Output::Vulkan(s) => s.recreate(&self.draw, window),
            Output::Cpu(c) => c.recreate(&self.draw, window),
        }
    }

    /// Acquires the next swapchain image with slot `slot`'s semaphore (nothing to acquire on the CPU path).
    pub fn acquire(&mut self, slot: usize) -> Result<Acquired> {
        let Output::Vulkan(s) = &mut self.output else {
            return Ok(Acquired::Ready { state: SwapchainState::Ok, wait: None, signal: None });
        };
        let s = &mut s.swapchain;
        match s.acquire(slot)? {
            Acquisition::OutOfDate => Ok(Acquired::Stale),
            Acquisition::Image { state, wait } => {
                Ok(Acquired::Ready { state, wait: Some(wait), signal: Some(s.present_semaphore()?) })
            }
        }
    }

    /// Presents the current image once the frame's submission is done (the
    /// CPU path puts a frame in the window when it is consumed instead).
    pub fn present(&mut self) -> Result<SwapchainState> {
        match &mut self.output {
            Output::Vulkan(s) => s.swapchain.present(),
            Output::Cpu(..) => Ok(SwapchainState::Ok),
        }
    }

    /// Writes `why` (its lines) and then `cure` over the frame the window
    /// shows (its last good one after [`Presenter::freeze`]) and puts it in
    /// the window, until the next frame goes in. Nothing of a graphics
    /// pipeline: it must work after a CUDA fault on NVIDIA.
    pub fn show_notice(&mut self, why: &str, cure: &str) -> Result<()> {
        let lines: Vec<String> = why.lines().chain([cure]).map(str::to_owned).collect();
        match &mut self.output {
            Output::Vulkan(s) => s.notice(&lines),
            Output::Cpu(cpu) => cpu.notice(&lines),
        }
    }

    /// Asks for the next frame to be read back and written as PNG.
    pub fn request_snapshot(&mut self) {
        self.snapshot_next = self.snapshot.is_some();
    }

    /// Switches to the next supported present mode; see [`Swapchain::cycle_mode`].
    pub fn cycle_mode(&mut self) -> &'static str {
        match &mut self.output {
            Output::Vulkan(s) => s.swapchain.cycle_mode(),
            Output::Cpu(..) => "cpu",
        }
    }

    /// The present mode in use ("cpu" on the CPU path).
    pub fn mode(&self) -> &'static str {
        match &self.output {
            Output::Vulkan(s) => s.swapchain.mode(),
            Output::Cpu(..) => "cpu",
        }
    }

    /// The drawn image's size: the swapchain's or the CPU path's target.
    pub fn extent(&self) -> vk::Extent2D {
        match &self.output {
            Output::Vulkan(s) => s.swapchain.extent(),
            Output::Cpu(c) => c.extent(),
        }
    }
}

impl Consume for Presenter {
    fn image_use(&self) -> Use {
        // Read by the draw; copied when a snapshot is taken.
        let (stage, access) = self.draw.frame_use();
        (stage | vk::PipelineStageFlags2::COPY, access | vk::AccessFlags2::TRANSFER_READ)
    }

    fn takes_buffers(&self) -> bool {
        self.draw.reads_buffers()
    }

    fn record(&mut self, cmd: vk::CommandBuffer, slot: usize, frame: u64, source: Source<'_>) -> Result<()> {
        match &mut self.output {
            Output::Vulkan(s) => s.record(cmd, slot, frame, &self.draw, source)?,
            Output::Cpu(cpu) => cpu.record(cmd, slot, frame, &self.draw, source)?,
        }
        if std::mem::take(&mut self.snapshot_next) {
            if let Some(r) = self.snapshot.as_mut() {
                r.record(cmd, slot, frame, readable(source))?;
            }
        }
        Ok(())
    }

    fn completed(&mut self, slot: usize, frame: u64) -> Result<()> {
        match &mut self.output {
            Output::Vulkan(s) => s.completed(slot, frame),
            Output::Cpu(cpu) => cpu.completed(slot, frame)?,
        }
        self.snapshot.as_mut().map_or(Ok(()), |r| r.completed(slot, frame))
    }
}

/// A shared frame as a readback copies it.
pub fn readable(source: Source<'_>) -> Readable {
    match source {
        Source::Image(image) => Readable::Image(image.image()),
        Source::Buffer(buffer) => Readable::Buffer(buffer.buffer(), buffer.size()),
    }
}

impl Drop for Presenter {
    fn drop(&mut self) {
        // SAFETY: nothing else submits now; the parts destroy their objects after this.
        let _ = unsafe { self.device.raw().queue_wait_idle(self.device.queue()) };
    }
}
