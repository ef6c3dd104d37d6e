//! A window and its presenter: the part of a window's frame loop that every
//! front end (the CLI's viewer, the Python module's windows) runs the same
//! way. It opens the window with its device on either present path, fitted
//! to the window; notes that the window changed; refits once the frames in
//! flight are done; and presents a session's next frame. What a front end
//! adds (keys, title, snapshots, pacing, stall reports, its event loop)
//! stays in the front end.

use std::sync::Arc;

use anyhow::{Context, Result};
use ash::vk;
use winit::event_loop::ActiveEventLoop;
use winit::window::{Window, WindowAttributes};

use crate::drive::session::Session;
use crate::error::usage::Message;
use crate::frames::consumer::Completed;
use crate::frames::consumer::ExtraSync;
use crate::frames::gpu::{DeviceChoice, Gpu};
use crate::present::open::{open, reopen, Opened, PresentSpec};
use crate::present::swapchain::SwapchainState;
use crate::present::window::{Acquired, Presenter};
use vkcuda::vk::device::Device;

/// A window and what presents into it.
pub struct Screen {
    // Field order is drop order: the presenter (which owns the surface) before the window.
    /// The presenter: the swapchain of the window's surface, or the CPU path.
    pub presenter: Presenter,
    /// The window.
    pub window: Arc<Window>,
    /// The presenter no longer fits the window: refit before the next frame.
    stale: bool,
}

impl Screen {
    /// Makes a window of `attributes` and opens its device and presenter as
    /// `spec` asks, fitted to the window; with a line saying which path.
    pub fn open(
        event_loop: &ActiveEventLoop,
        attributes: WindowAttributes,
        spec: &PresentSpec<'_>,
    ) -> Result<OpenedScreen> {
        let window = Arc::new(event_loop.create_window(attributes).context("creating the window")?);
        let Opened { gpu, mut presenter, line } = open(&window, spec)?;
        let px = window.inner_size();
        presenter.recreate(vk::Extent2D { width: px.width.max(1), height: px.height.max(1) })?;
        Ok(OpenedScreen { gpu, screen: Self { presenter, window, stale: false }, line })
    }

    /// Makes the window's Vulkan device again after `lost` was lost (its
    /// session ended): a device of `choice` on the same instance and
    /// surface ([`reopen`]), the presenter moved to it and fitted to the
    /// window (left stale while it is minimized).
    pub fn remake_device(&mut self, choice: &DeviceChoice, lost: &Device) -> Result<Gpu> {
        let gpu = reopen(&mut self.presenter, choice, lost)?;
        self.stale = true;
        self.fit_idle()?;
        Ok(gpu)
    }

    /// The window changed size, or the present mode changed: refit ([`Screen::fit`]) before the next frame.
    pub fn mark_stale(&mut self) {
        self.stale = true;
    }

    /// Whether the presenter must be refitted before the next frame.
    pub fn stale(&self) -> bool {
        self.stale
    }

    /// Whether the window is minimized (or has no pixels): nothing to draw into.
    pub fn minimized(&self) -> bool {
        let s = self.window.inner_size();
        s.width == 0 || s.height == 0 || self.window.is_minimized() == Some(true)
    }

    /// Refits the presenter to the window once every frame `run` submitted
    /// is done (returned, in order); `false` while the window is minimized,
    /// which leaves it stale.
    pub fn fit(&mut self, run: &mut Session) -> Result<Fitted> {
        let extent = self.extent();
        let fitted = refit(run, &mut self.presenter, extent)?;
        self.stale &= !fitted.fitted;
        Ok(fitted)
    }

    /// The window's size in pixels.
    fn extent(&self) -> vk::Extent2D {
        let px = self.window.inner_size();
        vk::Extent2D { width: px.width, height: px.height }
    }

    /// Refits the presenter to the window while no session runs (nothing in
    /// flight: the last one ended); `false` while the window is minimized.
    pub fn fit_idle(&mut self) -> Result<bool> {
        let extent = self.extent();
        let fitted = fit_to(&mut self.presenter, extent)?;
        self.stale &= !fitted;
        Ok(fitted)
    }

    /// Presents `run`'s next frame, which its producer must have submitted;
    /// a target that no longer fits the window leaves the screen stale.
    pub fn present(&mut self, run: &mut Session) -> Result<Presented> {
        let presented = present_next(run, &mut self.presenter)?;
        self.stale |= presented.stale;
        Ok(presented)
    }
}

/// A window opened ([`Screen::open`]).
pub struct OpenedScreen {
    /// Its device.
    pub gpu: Gpu,
    /// The window and what presents into it.
    pub screen: Screen,
    /// Which device and present path, and why, for people.
    pub line: Message,
}

/// What [`Screen::fit`] did.
pub struct Fitted {
    /// The frames that finished meanwhile, in order.
    pub done: Vec<Completed>,
    /// The presenter fits the window now; `false` while it is minimized.
    pub fitted: bool,
}

/// What [`Screen::present`] did.
pub struct Presented {
    /// The frames that finished meanwhile, in order (on screen now).
    pub done: Vec<Completed>,
    /// The swapchain no longer fits the window: refit it ([`Screen::fit`]).
    pub stale: bool,
    /// The frame submitted; `None` when the swapchain was stale before it.
    pub frame: Option<u64>,
}

/// One frame into the window: paces the frame's slot (the slot must be free
/// before its acquire semaphore is reused), acquires a swapchain image
/// (nothing to acquire on the CPU path), submits the frame (waits: the
/// acquire and the frame's "rendered"; signals: the present's semaphore and
/// "released") and presents it. The producer must have submitted the frame
/// (a present must not wait on a signal not yet submitted).
fn present_next(run: &mut Session, presenter: &mut Presenter) -> Result<Presented> {
    let g = run.next();
    let slot = (g % run.slots() as u64) as usize;
    let mut done: Vec<Completed> = run.pace(presenter)?.into_iter().collect();
    let Acquired::Ready { state, wait, signal } = presenter.acquire(slot)? else {
        return Ok(Presented { done, stale: true, frame: None });
    };
    let at = |s: vk::Semaphore, stage| vk::SemaphoreSubmitInfo::default().semaphore(s).stage_mask(stage);
    let waits: Vec<_> = wait.map(|s| at(s, vk::PipelineStageFlags2::COPY)).into_iter().collect();
    let signals: Vec<_> = signal.map(|s| at(s, vk::PipelineStageFlags2::ALL_COMMANDS)).into_iter().collect();
    done.extend(run.submit(presenter, ExtraSync { wait: &waits, signal: &signals })?);
    // Frames that have finished go on screen now, not when their slots come round again.
    done.extend(run.show_finished(presenter, std::time::Duration::ZERO)?);
    let presented = presenter.present()?;
    if !presenter.through_cpu() {
        run.shown(g);
    }
    let stale = presented == SwapchainState::Stale || state == SwapchainState::Stale;
    Ok(Presented { done, stale, frame: Some(g) })
}

/// Fits the presenter to the window's size `px` once every submitted frame
/// is done (returned) and the queue is idle; not while the window is
/// minimized (nothing to fit: stay stale).
fn refit(run: &mut Session, presenter: &mut Presenter, px: vk::Extent2D) -> Result<Fitted> {
    let done = run.drain(presenter)?;
    run.wait_idle()?;
    Ok(Fitted { done, fitted: fit_to(presenter, px)? })
}

/// Recreates `presenter` for a window of `px` pixels (nothing in flight);
/// `false` when it has none (minimized).
fn fit_to(presenter: &mut Presenter, px: vk::Extent2D) -> Result<bool> {
    if px.width == 0 || px.height == 0 {
        return Ok(false);
    }
    presenter.recreate(px)?;
    Ok(true)
}
