//! A frame on the wire: a 32-byte [`Header`], then the image. The one
//! parser of it in Rust ([`Header::parse`]; the examples and tests use it);
//! the page's and the widget's is client.js's `vkcudaHeader`. The frame
//! kinds' names are [`Kind`]'s alone: client.js's `VKCUDA_KINDS` table is
//! checked against it (the tests below), the status's codec is a [`Kind`] and
//! the size a frame was sent at a [`Size`].

use anyhow::{anyhow, bail, Result};
use ash::vk;
use serde::{Deserialize, Serialize};

/// The header's length.
pub const HEADER: usize = 32;
/// The header's first bytes.
pub const MAGIC: &[u8; 4] = b"VKF2";

/// What a frame's image is: the header's byte, and its name (the status's
/// `codec`, the page's `kind`, Python's `frame_header`).
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

impl Kind {
    /// Every kind, in the order of its header byte (client.js's `VKCUDA_KINDS` is this table).
    pub const ALL: [Kind; 4] = [Kind::Raw, Kind::Jpeg, Kind::Vp8, Kind::Png];

    /// Its name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Raw => "raw",
            Kind::Jpeg => "jpeg",
            Kind::Vp8 => "vp8",
            Kind::Png => "png",
        }
    }

    /// The kind named `name`.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// The kind of header byte `b`.
    pub fn of_byte(b: u8) -> Result<Self> {
        Self::ALL.into_iter().find(|k| *k as u8 == b).ok_or_else(|| anyhow!("a frame of unknown kind {b}"))
    }
}

impl Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        let known = || Kind::ALL.map(Kind::name).join(", ");
        Self::named(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("a frame kind '{name}' (one of {})", known())))
    }
}

/// A size in pixels (a frame's as it was sent: the status says it), `[width, height]` in JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "[u32; 2]", into = "[u32; 2]")]
pub struct Size {
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
}

impl From<[u32; 2]> for Size {
    fn from([width, height]: [u32; 2]) -> Self {
        Self { width, height }
    }
}

impl From<Size> for [u32; 2] {
    fn from(s: Size) -> Self {
        [s.width, s.height]
    }
}

impl From<vk::Extent2D> for Size {
    fn from(e: vk::Extent2D) -> Self {
        Self { width: e.width, height: e.height }
    }
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
        let kind = Kind::of_byte(b[4])?;
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

    /// The names in client.js's `const VKCUDA_KINDS = [...]`, in order.
    fn client_js_kinds() -> Vec<String> {
        let js = include_str!("client.js");
        let start = js.find("const VKCUDA_KINDS = [").expect("client.js has its table of frame kinds");
        let table = &js[start..];
        let table = &table[table.find('[').unwrap() + 1..table.find(']').unwrap()];
        table.split(',').map(|n| n.trim().trim_matches('"').to_string()).collect()
    }

    #[test]
    fn the_page_names_the_kinds_as_the_header_numbers_them() {
        let rust: Vec<String> = Kind::ALL.iter().map(|k| k.name().to_string()).collect();
        assert_eq!(client_js_kinds(), rust, "client.js's VKCUDA_KINDS[byte] is Kind's name");
        for (byte, kind) in Kind::ALL.into_iter().enumerate() {
            assert_eq!(Kind::of_byte(byte as u8).unwrap(), kind);
        }
        assert!(Kind::of_byte(Kind::ALL.len() as u8).is_err());
    }

    #[test]
    fn a_kind_goes_by_its_name() {
        for kind in Kind::ALL {
            let text = serde_json::to_string(&kind).unwrap();
            assert_eq!(text, format!("\"{}\"", kind.name()));
            assert_eq!(serde_json::from_str::<Kind>(&text).unwrap(), kind);
        }
        let e = serde_json::from_str::<Kind>(r#""gif""#).unwrap_err().to_string();
        assert!(e.contains("a frame kind 'gif' (one of raw, jpeg, vp8, png)"), "{e}");
    }
}
