//! The CPU-present path: for windows the Vulkan device cannot present to
//! (NVIDIA under Xvfb, VNC or X forwarding). The compute draw writes a
//! window-sized buffer on the GPU (no graphics pipeline: it still finishes
//! after a CUDA fault on the GPU); each frame is copied into a host-visible
//! buffer, and once the frame is consumed, softbuffer puts it in the window.
//! There is one buffer more than slots, and the one the window shows is not
//! written until another is shown: after a fault, the last good frame is still
//! there for the notice written over it. Everything before the draw is the
//! same as for a swapchain.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use ash::vk;
use gpu_allocator::MemoryLocation;
use winit::window::Window;

use super::compute_draw::{ComputeDraw, ComputeTarget};
use super::notice;
use super::readback::{copy_to_host, Pixels};
use crate::frames::consumer::Source;
use vkcuda::vk::device::Device;
use vkcuda::vk::memory::Buffer;
use vkcuda::FrameDesc;

/// The window-sized target, one readback buffer per frame slot, and the window's softbuffer surface.
pub struct CpuOutput {
    device: Arc<Device>,
    // Field order is drop order: the Vulkan objects before the window.
    target: Option<ComputeTarget>,
    buffers: Vec<Buffer>,
    /// Per slot: the frame recorded, and the buffer that will hold its pixels once consumed.
    pending: Vec<Option<(u64, usize)>>,
    surface: softbuffer::Surface<Arc<Window>, Arc<Window>>,
    _context: softbuffer::Context<Arc<Window>>,
    /// How long the last frame took from its mapped buffer into the window.
    pub put_time: Duration,
    /// The buffer that holds the frame the window shows (no frame records into it).
    shown: Option<usize>,
    /// The frame under a notice (0RGB, its width and height), once one is shown.
    still: Option<(Vec<u32>, usize, usize)>,
    /// Consumed frames are not put in the window (their producer failed).
    frozen: bool,
}

impl CpuOutput {
    /// A softbuffer surface on `window`, with `slots` + 1 readback buffers (made by [`CpuOutput::recreate`]).
    pub fn new(device: Arc<Device>, window: Arc<Window>, slots: usize) -> Result<Self> {
        let context = softbuffer::Context::new(window.clone())
            .map_err(|e| anyhow!("softbuffer cannot use this display: {e}"))?;
        let surface = softbuffer::Surface::new(&context, window)
            .map_err(|e| anyhow!("softbuffer cannot draw into this window: {e}"))?;
        Ok(Self {
            device,
            target: None,
            buffers: Vec::new(),
            pending: vec![None; slots],
            surface,
            _context: context,
            put_time: Duration::ZERO,
            shown: None,
            still: None,
            frozen: false,
        })
    }

    /// The target (of `pass`) and buffers for a window of `extent` pixels (queue idle).
    pub fn recreate(&mut self, pass: &ComputeDraw, extent: vk::Extent2D) -> Result<()> {
        let (Some(w), Some(h)) = (NonZeroU32::new(extent.width), NonZeroU32::new(extent.height)) else {
            anyhow::bail!("cannot draw into a minimized window");
        };
        // The old target goes first: both are large.
        self.target = None;
        self.target = Some(ComputeTarget::new(pass, "CPU-present target", extent, Pixels::Rgba8)?);
        let usage = vk::BufferUsageFlags::TRANSFER_DST;
        let buffers = self.pending.len() + 1;
        let bytes = FrameDesc::new(extent).bytes();
        self.buffers = Buffer::frames(
            &self.device,
            "CPU-present readback",
            buffers,
            bytes,
            usage,
            MemoryLocation::GpuToCpu,
        )?;
        self.pending.iter_mut().for_each(|p| *p = None);
        self.shown = None;
        self.surface.resize(w, h).map_err(|e| anyhow!("softbuffer resize: {e}"))?;
        Ok(())
    }

    /// The target's size.
    pub fn extent(&self) -> vk::Extent2D {
        self.target.as_ref().map(|t| t.extent).unwrap_or_default()
    }

    /// Records frame `frame` in slot `slot`: the compute draw into the target,
    /// then the target into the slot's buffer, visible to the host.
    pub fn record(
        &mut self,
        cmd: vk::CommandBuffer,
        (slot, frame): (usize, u64),
        pass: &ComputeDraw,
        shown: Source<'_>,
    ) -> Result<()> {
        let target = self.target.as_ref().context("no target")?;
        // A buffer neither shown nor waiting for another slot's frame: of slots + 1
        // buffers, at most slots − 1 wait (this slot's last frame was consumed) and one is shown.
        let taken = |b: usize| self.shown == Some(b) || self.pending.iter().flatten().any(|&(_, p)| p == b);
        let buffer = (0..self.buffers.len()).find(|&b| !taken(b)).context("no free readback buffer")?;
        pass.record(cmd, shown, target)?;
        copy_to_host(self.device.raw(), cmd, target.readable(), &self.buffers[buffer], target.extent);
        self.pending[slot] = Some((frame, buffer));
        Ok(())
    }

    /// Frame `frame` in slot `slot` is consumed: put its pixels in the window.
    pub fn completed(&mut self, slot: usize, frame: u64) -> Result<()> {
        let Some((_, buffer)) = self.pending[slot].filter(|&(f, _)| f == frame) else { return Ok(()) };
        self.pending[slot] = None;
        if self.frozen {
            return Ok(());
        }
        let started = Instant::now();
        let pixels = self.buffers[buffer].mapped()?;
        let mut out = self.surface.buffer_mut().map_err(|e| anyhow!("softbuffer: {e}"))?;
        to_0rgb(pixels, &mut out);
        out.present().map_err(|e| anyhow!("softbuffer present: {e}"))?;
        self.put_time = started.elapsed();
        (self.shown, self.still) = (Some(buffer), None);
        Ok(())
    }

    /// Frames consumed from now on stay out of the window (their producer
    /// failed: the run signals what it owed, and their pixels are whatever
    /// the slot held), until [`CpuOutput::thaw`].
    pub fn freeze(&mut self) {
        self.frozen = true;
    }

    /// Moves to `device`, made again after this one's was lost (its queue
    /// idle): the target and buffers go; [`CpuOutput::recreate`] makes them
    /// on `device`. The window keeps what it shows.
    pub fn move_to(&mut self, device: Arc<Device>) {
        (self.target, self.shown) = (None, None);
        self.buffers.clear();
        self.pending.iter_mut().for_each(|p| *p = None);
        self.device = device;
    }

    /// A new session: its frames go in the window, no notice; the last
    /// one's frames that were recorded and never consumed hold no buffer.
    pub fn thaw(&mut self) {
        (self.frozen, self.still) = (false, None);
        self.pending.iter_mut().for_each(|p| *p = None);
    }

    /// Writes `lines` ([`notice::write`]) over the frame the window shows
    /// (none yet: black) and puts it in the window; again after the window
    /// changed size, over that frame scaled to it. Nothing of the GPU's: the
    /// frame is in its host-visible buffer, which nothing records into while
    /// it is shown.
    pub fn notice(&mut self, lines: &[String]) -> Result<()> {
        let e = self.extent();
        let (w, h) = (e.width as usize, e.height as usize);
        if self.still.is_none() {
            let mut still = vec![0; w * h];
            if let Some(buffer) = self.shown {
                to_0rgb(self.buffers[buffer].mapped()?, &mut still);
            }
            self.still = Some((still, w, h));
        }
        let mut out = self.surface.buffer_mut().map_err(|e| anyhow!("softbuffer: {e}"))?;
        if let Some((still, sw, sh)) = &self.still {
            scale_into(still, (*sw, *sh), &mut out, (w, h));
        }
        notice::write(&mut out, w, h, lines);
        out.present().map_err(|e| anyhow!("softbuffer present: {e}"))
    }
}

/// RGBA bytes as softbuffer's pixels: 0RGB in a u32.
fn to_0rgb(rgba: &[u8], out: &mut [u32]) {
    for (dst, px) in out.iter_mut().zip(rgba.chunks_exact(4)) {
        *dst = u32::from(px[0]) << 16 | u32::from(px[1]) << 8 | u32::from(px[2]);
    }
}

/// `src` (`from`: width, height) into `dst` (`to`), nearest pixel.
fn scale_into(src: &[u32], from: (usize, usize), dst: &mut [u32], to: (usize, usize)) {
    if from.0 == 0 || from.1 == 0 || to.0 == 0 {
        return;
    }
    for (y, row) in dst.chunks_exact_mut(to.0).take(to.1).enumerate() {
        let sy = y * from.1 / to.1;
        for (x, px) in row.iter_mut().enumerate() {
            *px = src.get(sy * from.0 + x * from.0 / to.0).copied().unwrap_or(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_still_scales_to_a_resized_window_by_the_nearest_pixel() {
        // 2x1 (left red, right blue) into 4x2 and into 1x1.
        let src = [0x00ff_0000, 0x0000_00ff];
        let mut dst = [7; 8];
        scale_into(&src, (2, 1), &mut dst, (4, 2));
        assert_eq!(dst, [0xff0000, 0xff0000, 0xff, 0xff, 0xff0000, 0xff0000, 0xff, 0xff]);
        let mut one = [7];
        scale_into(&src, (2, 1), &mut one, (1, 1));
        assert_eq!(one, [0xff0000]);
        to_0rgb(&[1, 2, 3, 4], &mut one);
        assert_eq!(one, [0x010203]);
    }
}
