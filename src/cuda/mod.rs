//! The CUDA side: loading the driver without panicking (NVRTC is the
//! application's: the run layer loads it), finding
//! devices by UUID, the context imports live in ([`Context`]: cudarc's or a
//! raw `CUcontext`), and small safe wrappers (in `external`) over the interop
//! calls cudarc has no safe API for.

pub mod external;

use std::sync::Arc;

use crate::error::{Context as _, Error, Result};
use cudarc::driver::{sys, CudaContext, CudaStream};

use crate::types::CudaSched;
use crate::vk::device::{format_uuid, Uuid};

/// The CUDA context vkcuda's imports live in: cudarc's, or the integrator's
/// raw `CUcontext`. Every CUDA call vkcuda makes binds it first.
#[derive(Clone, Debug)]
pub enum Context {
    /// A cudarc context (kept alive by the imports).
    Cudarc(Arc<CudaContext>),
    /// A raw context the integrator owns: it must outlive every import.
    Raw(RawContext),
}

/// A raw `CUcontext` handle (made by [`Context::from_raw`]).
#[derive(Clone, Copy, Debug)]
pub struct RawContext(sys::CUcontext);

// SAFETY: a CUDA context may be made current on any thread (cuCtxSetCurrent).
unsafe impl Send for RawContext {}
// SAFETY: as above; the handle itself is never mutated.
unsafe impl Sync for RawContext {}

impl Context {
    /// Makes the context current on the calling thread.
    pub fn bind(&self) -> Result<()> {
        match self {
            Context::Cudarc(c) => c.bind_to_thread().context("binding the CUDA context"),
            // SAFETY: the integrator's context is live (it outlives every import).
            Context::Raw(c) => check(unsafe { sys::cuCtxSetCurrent(c.0) }, "cuCtxSetCurrent"),
        }
    }
}

/// A CUDA stream vkcuda enqueues waits and signals on: cudarc's
/// [`CudaStream`], or the integrator's raw `CUstream` ([`RawStream`]).
///
/// # Safety
/// [`Stream::raw`] returns a live stream (or null, the legacy default
/// stream) of the context the imports live in, live for as long as `self`
/// is: vkcuda's safe functions enqueue on it and query it.
pub unsafe trait Stream {
    /// The raw handle, live for as long as `self` is.
    fn raw(&self) -> sys::CUstream;
}

// SAFETY: cudarc's stream is live while the value is (its Drop destroys it).
unsafe impl Stream for CudaStream {
    fn raw(&self) -> sys::CUstream {
        self.cu_stream()
    }
}

// SAFETY: the `Arc` keeps the stream it points to alive.
unsafe impl<S: Stream + ?Sized> Stream for Arc<S> {
    fn raw(&self) -> sys::CUstream {
        (**self).raw()
    }
}

/// A stream the imports keep, to wait for its last use of them before they
/// are destroyed (see [`crate::interop::CudaFrames`]).
pub type SharedStream = Arc<dyn Stream + Send + Sync>;

/// How a stream's enqueued work stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamState {
    /// Everything enqueued has finished.
    Idle,
    /// Work is still running or waiting.
    Busy,
    /// The stream's context has failed with this error (a kernel fault is
    /// sticky): nothing enqueued will run any more.
    Failed(sys::CUresult),
}

/// `cuStreamQuery` on `stream`, with `ctx` current.
pub fn stream_state(ctx: &Context, stream: &dyn Stream) -> StreamState {
    if ctx.bind().is_err() {
        return StreamState::Failed(sys::CUresult::CUDA_ERROR_INVALID_CONTEXT);
    }
    // SAFETY: a live stream of `ctx` (the `Stream` contract).
    match unsafe { sys::cuStreamQuery(stream.raw()) } {
        sys::CUresult::CUDA_SUCCESS => StreamState::Idle,
        sys::CUresult::CUDA_ERROR_NOT_READY => StreamState::Busy,
        e => StreamState::Failed(e),
    }
}

/// Polls `stream` until it is not busy or `timeout` has passed, sleeping
/// between polls (a host thread that waits must not spin).
pub fn settle(ctx: &Context, stream: &dyn Stream, timeout: std::time::Duration) -> StreamState {
    settle_by(timeout, || stream_state(ctx, stream))
}

/// Polls `state` (a stream's, or an event's: the work before its record)
/// until it is not busy or `timeout` has passed, sleeping between polls.
pub fn settle_by(timeout: std::time::Duration, mut state: impl FnMut() -> StreamState) -> StreamState {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match state() {
            StreamState::Busy if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
            state => return state,
        }
    }
}

/// A raw `CUstream` of the context the imports live in.
#[derive(Clone, Copy, Debug)]
pub struct RawStream(sys::CUstream);

impl RawStream {
    /// Wraps `stream`.
    ///
    /// # Safety
    /// `stream` is a live stream (or null, the legacy default stream) of the
    /// context the imports live in, and stays live while this is used.
    pub unsafe fn new(stream: sys::CUstream) -> Self {
        Self(stream)
    }
}

// SAFETY: a CUDA stream may be used from any thread that makes its context
// current; `RawStream::new`'s caller promised the handle stays live.
unsafe impl Send for RawStream {}
// SAFETY: as above; the handle itself is never mutated.
unsafe impl Sync for RawStream {}

// SAFETY: `RawStream::new`'s caller promised the stream is live while this is used.
unsafe impl Stream for RawStream {
    fn raw(&self) -> sys::CUstream {
        self.0
    }
}

impl From<Arc<CudaContext>> for Context {
    fn from(c: Arc<CudaContext>) -> Self {
        Context::Cudarc(c)
    }
}

impl Context {
    /// The integrator's raw context.
    ///
    /// # Safety
    /// `ctx` is a live CUDA context, and stays live while any import made in
    /// it exists (their `Drop` binds it).
    pub unsafe fn from_raw(ctx: sys::CUcontext) -> Self {
        Context::Raw(RawContext(ctx))
    }
}

/// Turns a raw driver result into an error that names the call.
pub fn check(result: sys::CUresult, call: &str) -> Result<()> {
    result.result().map_err(|e| Error::cuda(e.0).context(call))
}

/// Makes sure libcuda can be loaded and initialised. cudarc panics when a
/// library is missing, so this runs before any other CUDA call.
pub fn load_driver() -> Result<()> {
    // SAFETY: only tries to dlopen the library under its usual names.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::Library {
            context: "libcuda.so (the NVIDIA driver's CUDA library) was not found: install the NVIDIA driver"
                .into(),
        });
    }
    // SAFETY: cuInit may be called any number of times.
    check(unsafe { sys::cuInit(0) }, "cuInit (is an NVIDIA GPU present and the driver loaded?)")
}

/// A CUDA device and the UUID Vulkan reports for the same GPU.
#[derive(Clone, Debug)]
pub struct CudaDevice {
    /// CUDA ordinal.
    pub ordinal: usize,
    /// Device name.
    pub name: String,
    /// `cuDeviceGetUuid_v2` (the `_v2` call reports the MIG instance, not its parent GPU).
    pub uuid: Uuid,
}

impl std::fmt::Display for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CUDA device {}: {} (UUID {})", self.ordinal, self.name, format_uuid(&self.uuid))
    }
}

/// Lists the CUDA devices. Call [`load_driver`] first.
pub fn list_devices() -> Result<Vec<CudaDevice>> {
    let count = CudaContext::device_count().context("cuDeviceGetCount")?;
    let mut out = Vec::new();
    for ordinal in 0..count {
        let mut dev = 0;
        // SAFETY: out-pointer to a local; ordinal is in range.
        check(unsafe { sys::cuDeviceGet(&mut dev, ordinal) }, "cuDeviceGet")?;
        let mut uuid = sys::CUuuid { bytes: [0; 16] };
        // SAFETY: out-pointer to a local.
        check(unsafe { sys::cuDeviceGetUuid_v2(&mut uuid, dev) }, "cuDeviceGetUuid_v2")?;
        let name = cudarc::driver::result::device::get_name(dev).unwrap_or_else(|_| "?".into());
        out.push(CudaDevice { ordinal: ordinal as usize, name, uuid: uuid.bytes.map(|b| b as u8) });
    }
    Ok(out)
}

/// Retains the primary context of `device`, with the host-wait behaviour `sched`
/// (which applies only if the context is not active yet).
pub fn context(device: &CudaDevice, sched: CudaSched) -> Result<Arc<CudaContext>> {
    let flags = match sched {
        CudaSched::Auto => sys::CUctx_flags::CU_CTX_SCHED_AUTO,
        CudaSched::Spin => sys::CUctx_flags::CU_CTX_SCHED_SPIN,
        CudaSched::Yield => sys::CUctx_flags::CU_CTX_SCHED_YIELD,
        CudaSched::Blocking => sys::CUctx_flags::CU_CTX_SCHED_BLOCKING_SYNC,
    };
    let mut dev = 0;
    // SAFETY: out-pointer to a local; the ordinal came from cuDeviceGetCount.
    check(unsafe { sys::cuDeviceGet(&mut dev, device.ordinal as i32) }, "cuDeviceGet")?;
    let mut current = 0;
    let mut active = 0;
    // SAFETY: out-pointers to locals.
    let state = unsafe { sys::cuDevicePrimaryCtxGetState(dev, &mut current, &mut active) };
    check(state, "cuDevicePrimaryCtxGetState")?;
    if active == 0 {
        // SAFETY: a valid device and scheduling flag, before the primary context is active.
        let set = unsafe { sys::cuDevicePrimaryCtxSetFlags_v2(dev, flags as u32) };
        check(set, "cuDevicePrimaryCtxSetFlags")?;
    }
    CudaContext::new(device.ordinal).with_context(|| format!("creating a CUDA context on {device}"))
}

/// The CUDA version the driver supports, e.g. "13.0" (call [`load_driver`] first).
pub fn driver_version() -> Result<String> {
    let mut v = 0;
    // SAFETY: out-pointer to a local.
    check(unsafe { sys::cuDriverGetVersion(&mut v) }, "cuDriverGetVersion")?;
    Ok(format!("{}.{}", v / 1000, (v % 1000) / 10))
}
