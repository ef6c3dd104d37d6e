//! A frame's or window's size as the front ends take it (`WIDTHxHEIGHT`).
//! The core speaks Vulkan's `Extent2D`; this is the run layer's word for it.

use std::fmt;

/// An image size in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

impl std::str::FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (w, h) =
            s.split_once(['x', 'X']).ok_or_else(|| format!("'{s}' is not WIDTHxHEIGHT (e.g. 1920x1080)"))?;
        let parse = |v: &str, what: &str| {
            v.trim().parse::<u32>().map_err(|_| format!("{what} '{v}' in '{s}' is not a whole number"))
        };
        let size = Size { width: parse(w, "width")?, height: parse(h, "height")? };
        if size.width == 0 || size.height == 0 {
            return Err(format!("size '{s}' has a zero side"));
        }
        Ok(size)
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}
