//! The `vkcuda` application (feature `app`): command line, viewer, headless
//! dump and bench, on top of the core's public API only.
//!
//! Floors, bottom to top (an import only points down or sideways):
//! 1. content and measurement: [`scene`] and its [`kernels`], [`director`],
//!    [`clock`], [`stats`], [`footprint`], [`diagram`], [`outfile`];
//! 2. the running interop: [`producer`] (CUDA, CPU, staging threads),
//!    [`consumer`] (the consumer's frame loop), [`present`] (what a consumer
//!    does with a frame), [`sink`] (PNG output), [`setup`] and [`session`],
//!    [`peers`] (the hand-over patterns vkcuda is compared with), [`measure`]
//!    (a consumer loop's span and clock),
//!    [`display`] (is there a window system to open a window on);
//! 3. [`cli`]: the command line, converted into the domain types;
//! 4. the modes: [`headless`], [`viewer`], [`bench`](mod@bench).

pub mod bench;
pub mod cli;
pub mod clock;
pub mod consumer;
pub mod diagram;
pub mod director;
pub mod display;
pub mod footprint;
pub mod headless;
pub mod inject;
pub mod kernels;
pub mod logger;
pub mod measure;
pub mod outfile;
pub mod peers;
pub mod present;
pub mod producer;
pub mod scene;
pub mod session;
pub mod setup;
pub mod sink;
pub mod stats;
pub mod viewer;

/// A problem with the command line or its values: exit code 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}
