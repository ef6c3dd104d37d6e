//! What a window keeps of its frames so that a notice can be written over
//! the last good one after a kernel's fault, on either path ([`super::cpu`],
//! [`super::to_swapchain`]): one buffer more than frame slots, taken in turn
//! ([`Turns`]), the one the window shows not written until another is
//! shown; and the frame under a notice on the host ([`Still`]), scaled to
//! the window when it changes size.

use anyhow::{Context, Result};

use super::notice::{self, Area};

/// Which of `slots + 1` buffers each frame slot's frame went to, and which
/// one holds the frame the window shows.
pub struct Turns {
    /// Per slot: the frame recorded, and its buffer.
    pending: Vec<Option<(u64, usize)>>,
    shown: Option<usize>,
}

impl Turns {
    /// Turns for `slots` frame slots.
    pub fn new(slots: usize) -> Self {
        Self { pending: vec![None; slots], shown: None }
    }

    /// How many buffers the turns take: one more than slots.
    pub fn buffers(&self) -> usize {
        self.pending.len() + 1
    }

    /// The buffer for frame `frame` in slot `slot`: neither shown nor waiting
    /// for another slot's frame. Of slots + 1 buffers at most slots − 1 wait
    /// (this slot's last frame was consumed) and one is shown.
    pub fn take(&mut self, slot: usize, frame: u64) -> Result<usize> {
        let taken = |b: usize| self.shown == Some(b) || self.pending.iter().flatten().any(|&(_, p)| p == b);
        let buffer = (0..self.buffers()).find(|&b| !taken(b)).context("no free buffer for the frame")?;
        *self.pending.get_mut(slot).context("a frame slot past the turns'")? = Some((frame, buffer));
        Ok(buffer)
    }

    /// Frame `frame` in slot `slot` was consumed: its buffer, if it took one.
    pub fn done(&mut self, slot: usize, frame: u64) -> Option<usize> {
        let pending = self.pending.get_mut(slot)?;
        let (_, buffer) = pending.filter(|&(f, _)| f == frame)?;
        *pending = None;
        Some(buffer)
    }

    /// `buffer` holds the frame the window shows now.
    pub fn show(&mut self, buffer: usize) {
        self.shown = Some(buffer);
    }

    /// The buffer of the frame the window shows, if one was shown.
    pub fn shown(&self) -> Option<usize> {
        self.shown
    }

    /// Frames recorded and never consumed (a session that ended) hold no buffer.
    pub fn forget_pending(&mut self) {
        self.pending.iter_mut().for_each(|p| *p = None);
    }

    /// The buffers went (a resize, a device made again): none holds anything.
    pub fn forget(&mut self) {
        self.forget_pending();
        self.shown = None;
    }
}

/// The frame under a notice, on the host: 0RGB words, rows top to bottom.
pub struct Still {
    pixels: Vec<u32>,
    size: Area,
}

impl Still {
    /// The window's last frame, `rgba` (packed RGBA8 rows, or BGRA8 where
    /// `bgra`) of `size`; black where there is none.
    pub fn new(rgba: Option<&[u8]>, size: Area, bgra: bool) -> Self {
        let mut pixels = vec![0; size.pixels()];
        if let Some(rgba) = rgba {
            to_0rgb(rgba, &mut pixels, bgra);
        }
        Self { pixels, size }
    }

    /// The still scaled to `size` with `lines` written over it
    /// ([`notice::write`]), into `out`.
    pub fn noticed(&self, out: &mut [u32], size: Area, lines: &[String]) {
        scale_into(&self.pixels, self.size, out, size);
        notice::write(out, size.width, size.height, lines);
    }
}

/// Packed RGBA8 (or BGRA8 where `bgra`) rows as softbuffer's pixels: 0RGB in a u32.
pub fn to_0rgb(rgba: &[u8], out: &mut [u32], bgra: bool) {
    let (r, b) = if bgra { (2, 0) } else { (0, 2) };
    for (dst, px) in out.iter_mut().zip(rgba.chunks_exact(4)) {
        *dst = u32::from(px[r]) << 16 | u32::from(px[1]) << 8 | u32::from(px[b]);
    }
}

/// 0RGB words as packed opaque RGBA8 (or BGRA8 where `bgra`) rows.
pub fn from_0rgb(words: &[u32], out: &mut [u8], bgra: bool) {
    for (px, &w) in out.chunks_exact_mut(4).zip(words) {
        let [_, r, g, b] = w.to_be_bytes();
        px.copy_from_slice(&if bgra { [b, g, r, 255] } else { [r, g, b, 255] });
    }
}

/// `src` (of size `from`) into `dst` (of size `to`), nearest pixel.
fn scale_into(src: &[u32], from: Area, dst: &mut [u32], to: Area) {
    if from.width == 0 || from.height == 0 || to.width == 0 {
        return;
    }
    for (y, row) in dst.chunks_exact_mut(to.width).take(to.height).enumerate() {
        let sy = y * from.height / to.height;
        for (x, px) in row.iter_mut().enumerate() {
            *px = src.get(sy * from.width + x * from.width / to.width).copied().unwrap_or(0);
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
        let area = |width, height| Area { width, height };
        scale_into(&src, area(2, 1), &mut dst, area(4, 2));
        assert_eq!(dst, [0xff0000, 0xff0000, 0xff, 0xff, 0xff0000, 0xff0000, 0xff, 0xff]);
        let mut one = [7];
        scale_into(&src, area(2, 1), &mut one, area(1, 1));
        assert_eq!(one, [0xff0000]);
    }

    #[test]
    fn pixels_go_to_0rgb_and_back_in_either_byte_order() {
        let mut word = [0];
        to_0rgb(&[1, 2, 3, 4], &mut word, false);
        assert_eq!(word, [0x010203]);
        to_0rgb(&[1, 2, 3, 4], &mut word, true);
        assert_eq!(word, [0x030201]);
        let mut px = [0; 4];
        from_0rgb(&[0x010203], &mut px, false);
        assert_eq!(px, [1, 2, 3, 255]);
        from_0rgb(&[0x010203], &mut px, true);
        assert_eq!(px, [3, 2, 1, 255]);
    }

    #[test]
    fn the_shown_buffer_and_those_waiting_are_never_taken() {
        let mut turns = Turns::new(2);
        assert_eq!(turns.buffers(), 3);
        let a = turns.take(0, 10).unwrap();
        let b = turns.take(1, 11).unwrap();
        assert_ne!(a, b);
        assert_eq!(turns.done(0, 9), None, "not that slot's frame");
        assert_eq!(turns.done(0, 10), Some(a));
        turns.show(a);
        // Slot 0 again while 11 waits and `a` is shown: the third buffer.
        let c = turns.take(0, 12).unwrap();
        assert!(c != a && c != b);
        assert_eq!(turns.shown(), Some(a));
        turns.forget();
        assert_eq!((turns.shown(), turns.done(1, 11)), (None, None));
        assert!(turns.take(5, 13).is_err(), "a slot the turns were not made for");
    }
}
