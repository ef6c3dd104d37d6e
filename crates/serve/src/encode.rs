//! A drawn frame on the wire: a 32-byte header, then a JPEG (libjpeg-turbo,
//! 4:2:0) or the raw RGBA rows (lossless: exact pixels, for inspection and tests).
//!
//! Header, little-endian: `b"VKF1"`, kind (0 raw RGBA, 1 JPEG), 3 bytes 0,
//! the run's frame number (u64), width and height (u32 each), and when the
//! consumer took the frame, in µs since the Unix epoch (u64).

use anyhow::{ensure, Result};
use bytes::Bytes;
use turbojpeg::{PixelFormat, Subsamp};

use vkcuda_run::present::readback::ReadFrame;

/// The header's length.
pub const HEADER: usize = 32;
/// The header's first bytes.
pub const MAGIC: &[u8; 4] = b"VKF1";

/// How a client's frames are encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// JPEG at this quality (1–100).
    Jpeg {
        /// 1–100.
        quality: u8,
    },
    /// The RGBA rows as drawn.
    Raw,
}

impl Mode {
    fn kind(self) -> u8 {
        match self {
            Mode::Raw => 0,
            Mode::Jpeg { .. } => 1,
        }
    }
}

/// The header of frame `frame` of `width`×`height`, taken at `stamp` (µs).
pub fn header(mode: Mode, frame: u64, (width, height): (u32, u32), stamp: u64) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[0..4].copy_from_slice(MAGIC);
    h[4] = mode.kind();
    h[8..16].copy_from_slice(&frame.to_le_bytes());
    h[16..20].copy_from_slice(&width.to_le_bytes());
    h[20..24].copy_from_slice(&height.to_le_bytes());
    h[24..32].copy_from_slice(&stamp.to_le_bytes());
    h
}

/// `frame` (drawn: RGBA8 rows) with its header, in `mode`.
pub fn encode(frame: &ReadFrame, mode: Mode, stamp: u64) -> Result<Bytes> {
    let (w, h) = (frame.shot.extent.width, frame.shot.extent.height);
    let pixels = (*frame.pixels).as_ref();
    ensure!(
        pixels.len() == w as usize * h as usize * 4,
        "frame {} has {} bytes, not {w}x{h} RGBA",
        frame.frame,
        pixels.len()
    );
    rgba(pixels, (w, h), mode, header(mode, frame.frame, (w, h), stamp))
}

/// `pixels` (`width`×`height` RGBA8) after `header`, in `mode`.
pub fn rgba(pixels: &[u8], (width, height): (u32, u32), mode: Mode, header: [u8; HEADER]) -> Result<Bytes> {
    let mut out = Vec::with_capacity(HEADER + pixels.len() / if mode == Mode::Raw { 1 } else { 8 });
    out.extend_from_slice(&header);
    match mode {
        Mode::Raw => out.extend_from_slice(pixels),
        Mode::Jpeg { quality } => {
            let (width, height) = (width as usize, height as usize);
            let image =
                turbojpeg::Image { pixels, width, pitch: width * 4, height, format: PixelFormat::RGBA };
            let jpeg = turbojpeg::compress(image, i32::from(quality.clamp(1, 100)), Subsamp::Sub2x2)?;
            out.extend_from_slice(&jpeg);
        }
    }
    Ok(Bytes::from(out))
}
