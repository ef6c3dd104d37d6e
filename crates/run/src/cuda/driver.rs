//! The CUDA driver calls the run layer and its front ends make beyond the
//! core's `vkcuda::cuda` (events, stream queries and waits, plain device
//! and pinned memory, copies, the packing kernel's launch, the current
//! context): each behind one function here that states its rule. No other
//! module above the core calls the driver (`tests/architecture.rs` checks),
//! so this file and the core's `cuda` module are the whole audit of raw
//! CUDA. Errors are cudarc's [`DriverError`] (or the [`sys::CUresult`]),
//! for the caller to name the call.

use std::ffi::c_void;

use cudarc::driver::{result, sys, DriverError, LaunchConfig};

/// An event for ordering streams and asking whether work has run (no
/// timing), destroyed when dropped.
pub struct Event(sys::CUevent);

impl Event {
    /// A new event in the calling thread's current context.
    pub fn new() -> Result<Self, DriverError> {
        create_event().map(Self)
    }

    /// The handle, for the functions below.
    pub fn raw(&self) -> sys::CUevent {
        self.0
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: created by `Event::new`, destroyed once; a recorded event may be destroyed
        // while its work runs (the driver frees it once that work is done).
        let _ = unsafe { result::event::destroy(self.0) };
    }
}

/// A new event (no timing) in the current context, as a raw handle its
/// owner destroys ([`destroy_event`]).
pub fn create_event() -> Result<sys::CUevent, DriverError> {
    result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING)
}

/// Destroys `event`.
///
/// # Safety
/// `event` is live, of the current context, and is never used again.
pub unsafe fn destroy_event(event: sys::CUevent) -> Result<(), DriverError> {
    // SAFETY: the caller's promise.
    unsafe { result::event::destroy(event) }
}

/// Records `event` on `stream`: it completes once everything enqueued there so far has run.
///
/// # Safety
/// `event` and `stream` are live and of the current context.
pub unsafe fn record(event: sys::CUevent, stream: sys::CUstream) -> Result<(), DriverError> {
    // SAFETY: the caller's promise.
    unsafe { result::event::record(event, stream) }
}

/// Whether the work `event` last recorded has run (an error or "not ready": `false`).
///
/// # Safety
/// `event` is live and of the current context.
pub unsafe fn has_run(event: sys::CUevent) -> bool {
    // SAFETY: the caller's promise.
    let state = unsafe { event_state(event) };
    state == sys::CUresult::CUDA_SUCCESS
}

/// `event`'s state: `CUDA_SUCCESS` (its work has run), `CUDA_ERROR_NOT_READY`,
/// or the error its context failed with.
///
/// # Safety
/// `event` is live and of the current context.
pub unsafe fn event_state(event: sys::CUevent) -> sys::CUresult {
    // SAFETY: the caller's promise.
    unsafe { sys::cuEventQuery(event) }
}

/// Blocks until the work `event` last recorded has run (a failed context answers at once).
///
/// # Safety
/// `event` is live and of the current context.
pub unsafe fn synchronize(event: sys::CUevent) -> Result<(), DriverError> {
    // SAFETY: the caller's promise.
    unsafe { result::event::synchronize(event) }
}

/// Makes the work enqueued on `stream` from now on wait for `event`'s work.
///
/// # Safety
/// `stream` and `event` are live and of the current context.
pub unsafe fn wait_event(stream: sys::CUstream, event: sys::CUevent) -> Result<(), DriverError> {
    // SAFETY: the caller's promise.
    unsafe { result::stream::wait_event(stream, event, sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT) }
}

/// `stream`'s state: `CUDA_SUCCESS` (idle), `CUDA_ERROR_NOT_READY` (busy),
/// or the error its context failed with (a kernel fault is sticky).
///
/// # Safety
/// `stream` is live and of the current context.
pub unsafe fn stream_state(stream: sys::CUstream) -> sys::CUresult {
    // SAFETY: the caller's promise.
    unsafe { sys::cuStreamQuery(stream) }
}

/// Whether a [`stream_state`] says the context has failed.
pub fn failed(state: sys::CUresult) -> bool {
    !matches!(state, sys::CUresult::CUDA_SUCCESS | sys::CUresult::CUDA_ERROR_NOT_READY)
}

/// Enqueues on `stream` a write of `value` to the 64-bit word at `address`.
///
/// # Safety
/// `stream` is live and of the current context; `address` is an 8-byte
/// aligned word of device memory of that context, live until the write runs.
pub unsafe fn write_value(stream: sys::CUstream, address: sys::CUdeviceptr, value: u64) -> sys::CUresult {
    // SAFETY: the caller's promise.
    unsafe { sys::cuStreamWriteValue64_v2(stream, address, value, 0) }
}

/// `bytes` of device memory in the current context, freed with [`free`].
///
/// # Safety
/// A context is current.
pub unsafe fn malloc(bytes: usize) -> Result<sys::CUdeviceptr, DriverError> {
    // SAFETY: the caller's promise.
    unsafe { result::malloc_sync(bytes) }
}

/// Frees device memory from [`malloc`].
///
/// # Safety
/// `pointer` came from [`malloc`] in the current context, is freed once,
/// and no work that uses it is still to run.
pub unsafe fn free(pointer: sys::CUdeviceptr) -> Result<(), DriverError> {
    // SAFETY: the caller's promise.
    unsafe { result::free_sync(pointer) }
}

/// Sets `bytes` bytes at `pointer` to `value` (synchronously).
///
/// # Safety
/// `pointer` holds `bytes` bytes of device memory of the current context.
pub unsafe fn memset(pointer: sys::CUdeviceptr, value: u8, bytes: usize) -> Result<(), DriverError> {
    // SAFETY: the caller's promise.
    unsafe { result::memset_d8_sync(pointer, value, bytes) }
}

/// `bytes` of page-locked host memory, freed with [`free_host`].
///
/// # Safety
/// A context is current.
pub unsafe fn malloc_host(bytes: usize) -> Result<*mut u8, DriverError> {
    // SAFETY: the caller's promise.
    unsafe { result::malloc_host(bytes, 0) }.map(|p| p.cast())
}

/// Frees host memory from [`malloc_host`].
///
/// # Safety
/// `pointer` came from [`malloc_host`], is freed once, and no copy into it is still to run.
pub unsafe fn free_host(pointer: *mut u8) -> Result<(), DriverError> {
    // SAFETY: the caller's promise.
    unsafe { result::free_host(pointer.cast()) }
}

/// Enqueues on `stream` a copy of `dst.len()` bytes from device memory `src`.
///
/// # Safety
/// `stream` is of the current context; `src` holds `dst.len()` bytes; both
/// stay live, and `dst` untouched, until the copy has run.
pub unsafe fn copy_to_host(
    dst: &mut [u8],
    src: sys::CUdeviceptr,
    stream: sys::CUstream,
) -> Result<(), DriverError> {
    // SAFETY: the caller's promise.
    unsafe { result::memcpy_dtoh_async(dst, src, stream) }
}

/// Enqueues on `stream` a copy of `bytes` bytes between device memory.
///
/// # Safety
/// `stream` is of the current context; both hold `bytes` bytes and stay
/// live until the copy has run.
pub unsafe fn copy(
    dst: sys::CUdeviceptr,
    src: sys::CUdeviceptr,
    bytes: usize,
    stream: sys::CUstream,
) -> Result<(), DriverError> {
    // SAFETY: the caller's promise.
    unsafe { result::memcpy_dtod_async(dst, src, bytes, stream) }
}

/// Enqueues `function` on `stream` over `config`'s grid of blocks (with
/// its dynamic shared memory).
///
/// # Safety
/// `params` match `function`'s parameters (each points at a value of its
/// type); `stream` and `function` are of the current context; the memory
/// the parameters name stays live until the kernel has run.
pub unsafe fn launch(
    function: sys::CUfunction,
    config: LaunchConfig,
    stream: sys::CUstream,
    params: &mut [*mut c_void],
) -> Result<(), DriverError> {
    let LaunchConfig { grid_dim, block_dim, shared_mem_bytes } = config;
    // SAFETY: the caller's promise.
    unsafe { result::launch_kernel(function, grid_dim, block_dim, shared_mem_bytes, stream, params) }
}

/// A context's device memory, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Not allocated.
    pub free: usize,
    /// All of it.
    pub total: usize,
}

/// The current context's device memory; `None` without one.
pub fn memory_info() -> Option<MemoryInfo> {
    result::mem_get_info().ok().map(|(free, total)| MemoryInfo { free, total })
}

/// The range of a context's stream priorities (a lower number is a higher
/// priority: `greatest` is at most `least`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamPriorities {
    /// The lowest priority (the default streams').
    pub least: i32,
    /// The highest priority.
    pub greatest: i32,
}

/// The current context's stream priorities.
pub fn stream_priorities() -> Result<StreamPriorities, sys::CUresult> {
    let (mut least, mut greatest) = (0, 0);
    // SAFETY: two out-pointers to locals of the right type.
    match unsafe { sys::cuCtxGetStreamPriorityRange(&mut least, &mut greatest) } {
        sys::CUresult::CUDA_SUCCESS => Ok(StreamPriorities { least, greatest }),
        e => Err(e),
    }
}

/// The CUDA device whose memory `pointer` is in (any value may be asked about).
pub fn pointer_device(pointer: u64) -> Result<usize, sys::CUresult> {
    let mut ordinal: i32 = -1;
    // SAFETY: an out-pointer to a local of the attribute's type (int).
    let r = unsafe {
        sys::cuPointerGetAttribute(
            (&mut ordinal as *mut i32).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            pointer,
        )
    };
    match r {
        sys::CUresult::CUDA_SUCCESS if ordinal >= 0 => Ok(ordinal as usize),
        sys::CUresult::CUDA_SUCCESS => Err(sys::CUresult::CUDA_ERROR_INVALID_VALUE),
        e => Err(e),
    }
}

/// The calling thread's current context (null: none); `None` if CUDA cannot say.
pub fn current_context() -> Option<sys::CUcontext> {
    result::ctx::get_current().ok().map(|c| c.unwrap_or(std::ptr::null_mut()))
}

/// Makes `context` (null: none) the calling thread's current context.
///
/// # Safety
/// `context` is null or a live context.
pub unsafe fn make_current(context: sys::CUcontext) -> Result<(), DriverError> {
    // SAFETY: the caller's promise.
    unsafe { result::ctx::set_current(context) }
}

/// The CUDA driver's version, "major.minor" (`cuDriverGetVersion`: 13000 is 13.0), once
/// the driver is loaded (`vkcuda::cuda::load_driver`).
pub fn driver_version() -> Result<String, sys::CUresult> {
    let mut version = 0;
    // SAFETY: an out-pointer to a local of the right type.
    match unsafe { sys::cuDriverGetVersion(&mut version) } {
        sys::CUresult::CUDA_SUCCESS => Ok(format!("{}.{}", version / 1000, version % 1000 / 10)),
        e => Err(e),
    }
}
