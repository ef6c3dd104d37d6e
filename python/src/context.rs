//! The caller's current CUDA context, kept across calls into the module.

use std::sync::atomic::{AtomicBool, Ordering};

use cudarc::driver::sys;
use vkcuda_run::cuda::driver;

/// Set once a viewer's device has a CUDA twin (the pairing loaded libcuda):
/// from then on a call may bind a context on the caller's thread. Before
/// that none does, and a call is not charged even a look at the context.
static IN_USE: AtomicBool = AtomicBool::new(false);

/// A viewer with a CUDA device exists: calls from now on keep the caller's context.
pub fn cuda_in_use() {
    IN_USE.store(true, Ordering::Relaxed);
}

/// The calling thread's CUDA context as it was before a call into the
/// module, put back when the call ends: the viewer binds its device's
/// context to the caller's thread for the pack and the frame's slots, and a
/// caller with two GPUs would otherwise find its current device changed
/// (cuda.core's `Device()`, the CUDA runtime and CuPy read it).
pub struct CallersContext {
    /// The context to put back (null: none); `None`: nothing to do.
    before: Option<sys::CUcontext>,
}

impl CallersContext {
    /// Notes the calling thread's context, once a viewer uses CUDA.
    pub fn note() -> Self {
        let before = match IN_USE.load(Ordering::Relaxed) {
            true => driver::current_context(),
            false => None,
        };
        Self { before }
    }
}

impl Drop for CallersContext {
    fn drop(&mut self) {
        let Some(before) = self.before else { return };
        let now = driver::current_context().unwrap_or(std::ptr::null_mut());
        if now != before {
            // SAFETY: `before` was this thread's current context at the call's start (or none),
            // and a context the caller had current stays alive through a call into this module.
            let _ = unsafe { driver::make_current(before) };
        }
    }
}
