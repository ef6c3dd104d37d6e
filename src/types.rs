//! Domain types of the core, at the bottom of the house: queue choice,
//! CUDA scheduling. No clap here: the application's CLI gives them
//! their command-line names and help.

use std::fmt;

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
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(rename_all = "lowercase"))]
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
