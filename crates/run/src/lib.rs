//! vkcuda-run: the layer every front end of vkcuda stands on (the CLI's
//! viewer, headless dump and bench; the Python module). It holds what they
//! share (windows and both present paths, the draw, the consumer's frame
//! loop, the producers, sessions, the PNG/EXR writer pool) and is built on
//! the core's public API alone. No front end is imported here, and front ends
//! do not import each other: the compiler holds them apart, since each is a
//! package of its own.
//!
//! Floors, bottom to top (an import only points down or sideways;
//! `tests/architecture.rs` holds these paragraphs to its own list):
//! 1. content and measurement: [`scene`] and its [`kernels`], [`nvrtc`],
//!    [`userkernel`] (your own kernel) and its [`reload`], [`director`],
//!    [`clock`], [`stats`], [`footprint`], `diagram` (tests), [`outfile`], [`encode`],
//!    [`inject`] (test-only fault injection), [`kinds`] (the kinds of run),
//!    [`pairing`] (which CUDA device is which Vulkan device), [`logger`],
//!    [`size`] (a frame's or window's size as the front ends take it),
//!    [`usage`] (messages that name a run's fields, worded by each front end);
//! 2. the running interop: [`producer`] (CUDA, CPU and staging threads), [`feed`]
//!    (frames a caller hands in, and the producers that take them),
//!    [`consumer`] (the consumer's frame loop), [`present`] (what a consumer
//!    does with a frame), [`sink`] (PNG output) and [`dumpdir`] (a dump
//!    folder's frames), [`setup`] and [`session`], [`measure`]
//!    (a consumer loop's span and clock),
//!    [`display`] (is there a window system to open a window on);
//! 3. driving a run to its end: [`drive`] (a session's consume loop, the
//!    summary, signals, the output folder, which side of a failure is its cause).
//!
//! The front ends above it: `crates/cli` (the `vkcuda` binary) and
//! `python/` (the `vkcuda` Python module).

pub mod clock;
pub mod consumer;
#[cfg(test)]
pub mod diagram;
pub mod director;
pub mod display;
pub mod drive;
pub mod dumpdir;
pub mod encode;
pub mod feed;
pub mod footprint;
pub mod inject;
pub mod kernels;
pub mod kinds;
pub mod logger;
pub mod measure;
pub mod nvrtc;
pub mod outfile;
pub mod pairing;
pub mod present;
pub mod producer;
pub mod reload;
pub mod scene;
pub mod session;
pub mod setup;
pub mod sink;
pub mod size;
pub mod stats;
pub mod usage;
pub mod userkernel;

pub use usage::UsageError;

/// An error message as a person should read it: without the source
/// locations some dependencies put in their errors (winit's X11 error reads
/// "os error at <the cargo registry's folder>/winit-…/mod.rs:788: Failed to
/// open connection to X server"), which say nothing to a user.
pub fn for_people(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find(" at ") {
        let after = &rest[at + 4..];
        // " at PATH.rs:LINE:" (and an optional ":COLUMN") up to the next ": ".
        let located = after.split_once(": ").filter(|(loc, _)| {
            let mut parts = loc.rsplit(':');
            let digits =
                |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
            let (last, prev) = (parts.next(), parts.next());
            let rs = |p: Option<&str>| p.is_some_and(|p| p.ends_with(".rs"));
            // PATH.rs:LINE, or PATH.rs:LINE:COLUMN.
            digits(last) && (rs(prev) || (digits(prev) && rs(parts.next())))
        });
        match located {
            Some((_, tail)) => {
                out.push_str(&rest[..at]);
                out.push_str(": ");
                rest = tail;
            }
            None => {
                out.push_str(&rest[..at + 4]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::for_people;

    #[test]
    fn source_locations_leave_messages() {
        let winit =
            "cannot open a window: os error at /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/\
                     winit-0.30.13/src/platform_impl/linux/mod.rs:788: Failed to open connection to X server";
        assert_eq!(
            for_people(winit),
            "cannot open a window: os error: Failed to open connection to X server"
        );
        let column = "failed at src/x.rs:12:5: boom";
        assert_eq!(for_people(column), "failed: boom");
        // Words that only look alike stay.
        let plain = "waiting at frame 3: timed out at 10s: done at home.rs";
        assert_eq!(for_people(plain), plain);
    }
}
