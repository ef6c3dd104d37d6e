//! vkcuda-run: the layer every front end of vkcuda stands on (the CLI's
//! viewer, headless dump and bench; the Python module). It holds what they
//! share (windows and both present paths, the draw, the consumer's frame
//! loop, the producers, sessions, the PNG/EXR writer pool) and is built on
//! the core's public API alone. No front end is imported here, and front ends
//! do not import each other: the compiler holds them apart, since each is a
//! package of its own.
//!
//! Floors, bottom to top, a folder per topic (an import only points down or
//! sideways; `tests/architecture.rs` holds these paragraphs to its own list):
//! 1. what a run is made of and measured by, with no device open: the
//!    [`scene`]s and their CPU reference, your [`kernel`] (NVRTC, its check,
//!    its reload), the run's [`error`]s and usage messages, its [`output`]
//!    files, [`metrics`] (clocks, statistics, the memory footprint),
//!    [`diagnostics`] (the logger, Xid reports, fault injection), [`cuda`]
//!    beyond the core (driver calls, pairing devices) and the run's
//!    vocabulary, [`base`] (kinds of run, sizes);
//! 2. [`frames`]: an open device and one frame on its Vulkan side (the
//!    consumer's frame loop, opening a device, the window system);
//! 3. [`present`]: what a consumer does with a frame (draw, present, copy,
//!    read back), on frames and the core alone: a new consumer (a browser
//!    view) reuses it without the floors above;
//! 4. [`drive`]: driving a run (its description, producers, the feed, the
//!    session that follows the producer and stops, a window's frame loop,
//!    the PNG writer pool, the consume loop to the end, which side of a
//!    failure is its cause).
//!
//! The front ends above it: `crates/cli` (the `vkcuda` binary) and
//! `python/` (the `vkcuda` Python module).

pub mod base;
pub mod cuda;
pub mod diagnostics;
pub mod drive;
pub mod error;
pub mod frames;
pub mod kernel;
pub mod metrics;
pub mod output;
pub mod present;
pub mod scene;

pub use error::usage::UsageError;

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
