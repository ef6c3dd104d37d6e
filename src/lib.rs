//! vkcuda: CUDA renders into images that Vulkan presents.
//!
//! Two (or three) exportable Vulkan images are imported into CUDA as
//! mipmapped arrays; CUDA kernels write one through `surf2Dwrite` while
//! Vulkan consumes another. Exportable timeline semaphores, imported into
//! CUDA, order the two sides on the GPU; neither side waits for the other on
//! the CPU in steady state.
//!
//! Data flow, and where to read:
//! - [`sync`]: the frame plan, the whole protocol as one pure type;
//! - [`vk`]: instance, device picked by CUDA's UUID, shared images,
//!   timelines, and [`vk::frame`], one consumer frame top to bottom;
//! - [`cuda`]: loading CUDA without panics, the imports, the kernels;
//! - [`producer`]: the CUDA, CPU and staging-baseline producers, each on its own thread;
//! - [`present`]: consumers (headless offscreen copy, window);
//! - [`setup`], [`session`] and [`headless`]: wiring it together; [`sink`]: PNG output;
//! - [`bench`](mod@bench): the interop against the staging baseline, measured ([`clock`]; its
//!   data in [`bench::report`], drawn by [`bench::chart`]).

#![deny(missing_docs)]

pub mod bench;
pub mod cli;
pub mod clock;
pub mod cuda;
pub mod diagram;
pub mod director;
pub mod footprint;
pub mod headless;
pub mod platform;
pub mod present;
pub mod producer;
pub mod scene;
pub mod session;
pub mod setup;
pub mod sink;
pub mod stats;
pub mod sync;
pub mod viewer;
pub mod vk;

/// A problem with the command line or its values: exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}
