//! The caller's current CUDA context, kept across calls into the module.

use cudarc::driver::{result, sys};

/// The calling thread's CUDA context as it was before a call into the
/// module, put back when the call ends: the viewer binds its device's
/// context to the caller's thread for the pack and the frame's slots, and a
/// caller with two GPUs would otherwise find its current device changed
/// (cuda.core's `Device()`, the CUDA runtime and CuPy read it).
pub struct CallersContext {
    before: Option<sys::CUcontext>,
}

impl CallersContext {
    /// Notes the calling thread's context (none where libcuda is not loaded: nothing bound one).
    pub fn note() -> Self {
        let before = match cuda_loaded() {
            true => result::ctx::get_current().ok().map(|c| c.unwrap_or(std::ptr::null_mut())),
            false => Some(std::ptr::null_mut()),
        };
        Self { before }
    }
}

impl Drop for CallersContext {
    fn drop(&mut self) {
        let Some(before) = self.before else { return };
        if !cuda_loaded() {
            return;
        }
        let now = result::ctx::get_current().ok().flatten().unwrap_or(std::ptr::null_mut());
        if now != before {
            // SAFETY: `before` was this thread's current context at the call's start (or none),
            // and a context the caller had current stays alive through a call into this module.
            let _ = unsafe { result::ctx::set_current(before) };
        }
    }
}

/// Whether libcuda is loaded in this process (by this module or another):
/// then the thread may have a current context. Once loaded, it stays.
fn cuda_loaded() -> bool {
    static LOADED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if LOADED.load(std::sync::atomic::Ordering::Relaxed) {
        return true;
    }
    let loaded = ["libcuda.so.1", "libcuda.so"].iter().any(|name| {
        let name = std::ffi::CString::new(*name).unwrap_or_default();
        // SAFETY: RTLD_NOLOAD only looks a loaded library up (no initialiser runs); closed below.
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
        if !handle.is_null() {
            // SAFETY: a handle dlopen just returned.
            unsafe { libc::dlclose(handle) };
        }
        !handle.is_null()
    });
    LOADED.store(loaded, std::sync::atomic::Ordering::Relaxed);
    loaded
}
