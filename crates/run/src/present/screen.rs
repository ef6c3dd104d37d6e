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

use super::open::{open, PresentSpec};
use super::window::{present_next, refit, Presented, Presenter};
use crate::consumer::Completed;
use crate::session::Session;
use crate::setup::Gpu;
use crate::usage::Message;

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
    ) -> Result<(Gpu, Self, Message)> {
        let window = Arc::new(event_loop.create_window(attributes).context("creating the window")?);
        let (gpu, mut presenter, line) = open(&window, spec)?;
        let px = window.inner_size();
        presenter.recreate(vk::Extent2D { width: px.width.max(1), height: px.height.max(1) })?;
        Ok((gpu, Self { presenter, window, stale: false }, line))
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
    pub fn fit(&mut self, run: &mut Session) -> Result<(Vec<Completed>, bool)> {
        let px = self.window.inner_size();
        let (done, fitted) = refit(run, &mut self.presenter, (px.width, px.height))?;
        self.stale &= !fitted;
        Ok((done, fitted))
    }

    /// Presents `run`'s next frame, which its producer must have submitted;
    /// a target that no longer fits the window leaves the screen stale.
    pub fn present(&mut self, run: &mut Session) -> Result<Presented> {
        let presented = present_next(run, &mut self.presenter)?;
        self.stale |= presented.stale;
        Ok(presented)
    }
}
