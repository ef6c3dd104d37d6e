//! A frame on the wire: a 32-byte [`Header`], then the image. The one
//! parser of it in Rust ([`Header::parse`]; the examples and tests use it);
//! the page's and the widget's is client.js's `vkcudaHeader`.

use anyhow::{bail, Result};

/// The header's length.
pub const HEADER: usize = 32;
/// The header's first bytes.
pub const MAGIC: &[u8; 4] = b"VKF2";

/// What a frame's image is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// RGBA rows, `width` × `height` × 4 bytes.
    Raw = 0,
    /// A JPEG file.
    Jpeg = 1,
    /// A VP8 frame (key or inter).
    Vp8 = 2,
    /// A PNG file (lossless).
    Png = 3,
}

/// A frame's header, 32 bytes little-endian: `b"VKF2"`, [`Kind`], flags
/// (bit 0: a key frame), quality (JPEG's, or VP8's quantizer 0–63), one
/// byte 0, the run's frame number (u64), the image's width and height
/// (u32 each: the size it was sent at, which the page scales to its
/// canvas), and when the consumer took the frame, in µs since the Unix
/// epoch (u64).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// What follows.
    pub kind: Kind,
    /// A key frame: decodable alone (every JPEG, PNG and raw frame is).
    pub key: bool,
    /// JPEG's quality, VP8's quantizer, 100 for lossless.
    pub quality: u8,
    /// The run's frame.
    pub frame: u64,
    /// The image's size.
    pub width: u32,
    /// The image's size.
    pub height: u32,
    /// When the consumer took the frame (µs since the Unix epoch).
    pub stamp: u64,
}

impl Header {
    /// The 32 bytes.
    pub fn write(&self) -> [u8; HEADER] {
        let mut h = [0u8; HEADER];
        h[0..4].copy_from_slice(MAGIC);
        h[4] = self.kind as u8;
        h[5] = u8::from(self.key);
        h[6] = self.quality;
        h[8..16].copy_from_slice(&self.frame.to_le_bytes());
        h[16..20].copy_from_slice(&self.width.to_le_bytes());
        h[20..24].copy_from_slice(&self.height.to_le_bytes());
        h[24..32].copy_from_slice(&self.stamp.to_le_bytes());
        h
    }

    /// The header at the start of a frame message.
    pub fn parse(b: &[u8]) -> Result<Self> {
        if b.len() < HEADER || &b[0..4] != MAGIC {
            bail!("not a frame: {} bytes, starting {:?}", b.len(), &b[..b.len().min(4)]);
        }
        let kind = match b[4] {
            0 => Kind::Raw,
            1 => Kind::Jpeg,
            2 => Kind::Vp8,
            3 => Kind::Png,
            k => bail!("a frame of unknown kind {k}"),
        };
        let u64_at = |i: usize| {
            u64::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3], b[i + 4], b[i + 5], b[i + 6], b[i + 7]])
        };
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Ok(Self {
            kind,
            key: b[5] & 1 != 0,
            quality: b[6],
            frame: u64_at(8),
            width: u32_at(16),
            height: u32_at(20),
            stamp: u64_at(24),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_reads_back_as_written() {
        let h = Header {
            kind: Kind::Vp8,
            key: true,
            quality: 41,
            frame: 1 << 40,
            width: 333,
            height: 187,
            stamp: 17,
        };
        assert_eq!(Header::parse(&h.write()).unwrap(), h);
        assert!(Header::parse(b"VKF1").is_err());
        let mut bad = h.write();
        bad[4] = 9;
        assert!(Header::parse(&bad).is_err());
    }
}
