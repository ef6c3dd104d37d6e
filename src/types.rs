//! Domain types of the core, at the bottom of the house: image size, queue
//! choice, CUDA scheduling. No clap here: the application's CLI gives them
//! their command-line names and help.

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

/// Which queue family the consumer submits to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize), serde(rename_all = "lowercase"))]
pub enum QueueKind {
    /// Graphics and compute (what a presenter needs).
    Graphics,
    /// Compute, preferably a family without graphics.
    Compute,
    /// Transfer only (copy engines), if the device has such a family.
    Transfer,
}

impl fmt::Display for QueueKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            QueueKind::Graphics => "graphics",
            QueueKind::Compute => "compute",
            QueueKind::Transfer => "transfer",
        })
    }
}

/// How a CUDA host thread waits for the GPU (the primary context's scheduling flag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CudaSched {
    /// The driver decides (spins while there are fewer busy threads than cores).
    Auto,
    /// Spin: lowest wake-up latency, one core busy.
    Spin,
    /// Spin but yield the core.
    Yield,
    /// Sleep on an OS primitive until the GPU is done.
    Blocking,
}

impl fmt::Display for CudaSched {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            CudaSched::Auto => "auto",
            CudaSched::Spin => "spin",
            CudaSched::Yield => "yield",
            CudaSched::Blocking => "blocking",
        })
    }
}
