//! `vkcuda._native`: the Python module's native half, a front end on the run
//! layer (`vkcuda-run`) and the core's public API, as the CLI is. The Python
//! package around it (`python/vkcuda`) adds the context manager, the clean-up
//! at interpreter exit and the docs.
//!
//! A `Viewer` owns a Vulkan device and one run at a time (`run.rs`
//! headless, `window.rs` in a window). A host array's pixels are converted
//! into the shared frames' format and put in the run's mailbox, which the
//! fed host producer copies into a staging buffer before it signals
//! "rendered"; a GPU tensor is packed on the caller's stream straight into
//! the exported buffer once Vulkan has released it (or into a slot the fed
//! CUDA producer copies in, newest wins), and `frame()` hands out that
//! buffer to write in place (`state.rs`, `export.rs`; the feed's protocol is the run layer's `feed::client`). The
//! consumer thread draws or copies each frame on the GPU and, when writing,
//! reads it back for the writer pool.

mod array;
mod context;
mod doctor;
mod export;
mod run;
mod serve;
mod spec;
mod state;
mod tensor;
mod window;
mod words;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use array::{Dtype, Layout};
use export::Target;
use run::Run;
use state::State;
use tensor::{device_array, stream_handle, DeviceArray};
use vkcuda_run::base::size::Size;
use vkcuda_run::drive::feed::client::Held;
use vkcuda_run::drive::feed::line::Made;
use vkcuda_run::drive::feed::run::Output;
use vkcuda_run::drive::feed::{Mailbox, Put};
use vkcuda_run::present::watch::Watchers;

/// How long a blocked `show` waits between looks at Ctrl+C.
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// Shows arrays: writes every frame to a folder (headless), counting what it
/// consumed; see the Python package's `vkcuda.Viewer`.
#[pyclass(module = "vkcuda._native")]
struct Viewer {
    state: Mutex<State>,
    /// Its watchers (`serve=`'s browser view, notebook widgets), once it has any.
    view: Mutex<Option<serve::View>>,
    /// Whether the views were told of an error that no frame has cleared since.
    told: AtomicBool,
}

impl Viewer {
    /// Tells the pages, widgets and window how the caller's last frame went: a
    /// runtime error (a CUDA fault in the caller's kernels: its context is
    /// spoilt for good; the run stopped) is said over their last frame until
    /// a frame goes through again. A wrong argument is the caller's alone.
    fn tell_views<T>(&self, py: Python<'_>, result: PyResult<T>) -> PyResult<T> {
        let fault = match &result {
            // The frame path: nothing to take back, nothing locked.
            Ok(_) if !self.told.load(Ordering::Relaxed) => return result,
            Ok(_) => None,
            Err(e) if e.is_instance_of::<PyRuntimeError>(py) => Some(e.value(py).to_string()),
            Err(_) => return result,
        };
        self.told.store(fault.is_some(), Ordering::Relaxed);
        if let Some(why) = &fault {
            if let Some(id) = self.lock(py).window.as_ref().map(|w| w.id) {
                // Over the window's last frame, until the next frame is put in it.
                let _ = window::send(window::Command::Say { id, why: why.clone() });
            }
        }
        if let Some(view) = lock(&self.view).as_ref() {
            view.input.set_fault(fault);
        }
        result
    }

    /// The state, taken without holding the GIL while another thread has it:
    /// that thread may be waiting, without the GIL, for the GIL back.
    fn lock(&self, py: Python<'_>) -> MutexGuard<'_, State> {
        loop {
            match self.state.try_lock() {
                Ok(state) => return state,
                Err(std::sync::TryLockError::Poisoned(p)) => return p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    py.detach(|| std::thread::sleep(Duration::from_micros(200)))
                }
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A Rust panic or error as a Python `RuntimeError` (no panic crosses into Python).
fn guarded<T>(what: &str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    // The caller's current CUDA context is its own again when the call returns.
    let _context = context::CallersContext::note();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("unknown");
            Err(PyRuntimeError::new_err(format!("vkcuda: internal error in {what}: {message}")))
        }
    }
}

pub(crate) fn runtime(e: anyhow::Error) -> PyErr {
    PyRuntimeError::new_err(format!("vkcuda: {}", words::said(&e)))
}

/// An array's memory as `__array_interface__` (v3) describes it.
struct HostArray {
    data: usize,
    layout: Layout,
}

fn host_array(x: &Bound<'_, PyAny>, channels_first: bool) -> PyResult<HostArray> {
    let interface = match x.getattr("__array_interface__") {
        Ok(i) => {
            i.cast_into::<PyDict>().map_err(|_| PyTypeError::new_err("__array_interface__ is not a dict"))?
        }
        Err(_) => {
            let kind = x.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
            return Err(PyTypeError::new_err(format!(
                "show() takes a GPU tensor (__dlpack__, __cuda_array_interface__) or host memory \
                 (__array_interface__, or __dlpack__ on the CPU), not {kind}"
            )));
        }
    };
    let item = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        interface
            .get_item(key)?
            .ok_or_else(|| PyTypeError::new_err(format!("__array_interface__ has no {key}")))
    };
    let typestr: String = item("typestr")?.extract()?;
    let dtype = Dtype::from_typestr(&typestr).map_err(PyTypeError::new_err)?;
    let shape: Vec<usize> = item("shape")?.extract()?;
    let strides: Option<Vec<isize>> =
        interface.get_item("strides")?.filter(|s| !s.is_none()).map(|s| s.extract()).transpose()?;
    let data = item("data")?;
    let data = data.cast::<PyTuple>().map_err(|_| {
        PyTypeError::new_err("show() needs an array whose __array_interface__ gives a data pointer")
    })?;
    let pointer: usize = data.get_item(0)?.extract()?;
    let layout =
        Layout::new(dtype, &shape, strides.as_deref(), channels_first).map_err(PyValueError::new_err)?;
    Ok(HostArray { data: pointer, layout })
}

#[pymethods]
impl Viewer {
    /// `out`: the folder every frame is written to (made if missing); `every_frame`:
    /// `show` waits rather than replace a frame not yet consumed; `validate`: the
    /// Khronos validation layer; `gpu`: a Vulkan device index or UUID prefix.
    #[new]
    #[pyo3(signature = (out=None, every_frame=false, validate=false, gpu=None, workers=None, window=None, title="vkcuda", serve=None))]
    #[allow(clippy::too_many_arguments)] // Python's keyword arguments
    fn new(
        py: Python<'_>,
        out: Option<PathBuf>,
        every_frame: bool,
        validate: bool,
        gpu: Option<String>,
        workers: Option<usize>,
        window: Option<(u32, u32)>,
        title: &str,
        serve: Option<String>,
    ) -> PyResult<Self> {
        guarded("Viewer()", || {
            if window.is_some() && out.is_some() {
                return Err(PyValueError::new_err(
                    "out= writes frames headless; a window shows them: pass one",
                ));
            }
            if window.is_some() && serve.is_some() {
                return Err(PyValueError::new_err(
                    "serve= shows frames in a browser, headless: not with a window",
                ));
            }
            // The address first: a port in use is the first error, before the GPU is opened.
            let bound = serve.as_deref().map(serve::bind).transpose()?;
            if let Some(dir) = &out {
                std::fs::create_dir_all(dir)
                    .map_err(|e| PyValueError::new_err(format!("out={}: {e}", dir.display())))?;
            }
            let workers =
                workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let view = match bound {
                Some(b) => {
                    let mut view = serve::View::new(workers.clamp(1, 8));
                    view.serve(b).map_err(runtime)?;
                    Some(view)
                }
                None => None,
            };
            let watchers = view.as_ref().map(|v| v.shared.hub.clone() as Arc<dyn Watchers>);
            let output = Output { dir: out, workers: workers.max(1), watchers };
            let state = match window {
                None => {
                    State::new(py.detach(|| spec::open(validate, gpu)).map_err(runtime)?, output, every_frame)
                }
                Some((width, height)) => {
                    // Python's (width, height), named here.
                    let size = Size { width, height };
                    if width == 0 || height == 0 {
                        return Err(PyValueError::new_err(format!("a window of {size} pixels has none")));
                    }
                    let title = title.to_string();
                    let opened = py
                        .detach(|| {
                            window::ask(|reply| window::Command::Open { size, title, validate, gpu, reply })
                        })
                        .map_err(runtime)?;
                    State::in_window(opened, output, every_frame)
                }
            };
            if state.gpu.as_ref().is_some_and(|g| g.cuda.is_some()) {
                context::cuda_in_use();
            }
            Ok(Self { state: Mutex::new(state), view: Mutex::new(view), told: AtomicBool::new(false) })
        })
    }

    /// Shows `x`: its pixels as its stream has them now. Returns once the
    /// copy is enqueued (GPU tensors) or done (host arrays); the frame is
    /// consumed (and written) on the viewer's threads.
    #[pyo3(signature = (x, channels_first=false, block=None, stream=None))]
    fn show(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        channels_first: bool,
        block: Option<bool>,
        stream: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let shown = guarded("show()", || {
            let named = stream.map(stream_handle).transpose()?;
            let mut state = self.lock(py);
            let every = block.unwrap_or(state.every);
            // The viewer's own stream orders a tensor's data when the caller names no stream.
            let mut own = |device: usize| -> PyResult<u64> {
                Ok(state.cuda_for(device).map_err(runtime)?.own_stream())
            };
            match device_array(x, named, channels_first, &mut own)? {
                Some(array) if !array.host => show_device(py, &mut state, &array, every),
                // A host DLPack tensor (PyTorch on the CPU): read from its capsule, alive till here.
                Some(array) => {
                    let host = HostArray { data: array.pointer as usize, layout: array.layout };
                    show_host(py, &mut state, &host, every)
                }
                None => show_host(py, &mut state, &host_array(x, channels_first)?, every),
            }
        });
        self.tell_views(py, shown)
    }

    /// A frame of `height` x `width` RGBA `dtype` to write in place: the
    /// device memory it is shown from (the exported buffer itself once Vulkan
    /// has released it), as a DLPack / CUDA-array-interface tensor. Writes
    /// are ordered on `stream` (default: the legacy default stream), or on the
    /// stream a DLPack consumer names. Every frame (`block`, else the
    /// viewer's mode) waits for the buffer.
    #[pyo3(signature = (height, width, dtype="uint8", stream=None, block=None))]
    fn begin_frame(
        &self,
        py: Python<'_>,
        height: usize,
        width: usize,
        dtype: &str,
        stream: Option<&Bound<'_, PyAny>>,
        block: Option<bool>,
    ) -> PyResult<export::FrameSlot> {
        let begun = guarded("frame()", || {
            let dtype = Dtype::from_name(dtype).map_err(PyTypeError::new_err)?;
            let layout =
                Layout::new(dtype, &[height, width, 4], None, false).map_err(PyValueError::new_err)?;
            // DLPack's 0 is no CUDA stream: the legacy default stream is 1.
            let stream = stream.map(stream_handle).transpose()?.map_or(1, |s| if s == 0 { 1 } else { s });
            let mut state = self.lock(py);
            check_size(&state, &layout)?;
            let every = block.unwrap_or(state.every);
            let state: &mut State = &mut state;
            loop {
                let until = Instant::now() + SIGNAL_CHECK;
                let give_up = || Instant::now() >= until;
                match py.detach(|| state.begin_frame(&layout, stream, every, &give_up)) {
                    Ok(Some(frame)) => return Ok(frame),
                    Ok(None) => py.check_signals()?,
                    Err(e) => return Err(stopped_or(state, runtime(e))),
                }
            }
        });
        self.tell_views(py, begun)
    }

    /// Shows a frame written in place ([`Viewer::begin_frame`]) once its writes are done on the GPU.
    #[pyo3(signature = (frame, block=None))]
    fn end_frame(&self, py: Python<'_>, frame: &export::FrameSlot, block: Option<bool>) -> PyResult<()> {
        let ended = guarded("frame()", || {
            if !frame.take() {
                return Err(PyRuntimeError::new_err("vkcuda: this frame was already shown"));
            }
            if let Err(e) = frame.finish_writes() {
                frame.give_back();
                return Err(runtime(e));
            }
            let mut state = self.lock(py);
            let every = block.unwrap_or(state.every);
            let (line, reserved) = match &frame.target {
                Target::Slot(slot) => {
                    let held =
                        Held { mailbox: frame.mailbox.clone(), staging: frame.staging.clone(), slot: *slot };
                    return put_slot(py, &mut state, held, every);
                }
                Target::Buffer { line, reserved } => (line, reserved),
            };
            // SAFETY: the frame's stream is a live stream of the line's context.
            match unsafe { line.commit(reserved.g, frame.stream as _, &frame.mailbox) } {
                Ok(replaced) => {
                    replaced.into_iter().for_each(|s| frame.staging.drop_frame(s));
                    state.wake();
                    Ok(())
                }
                Err(e) => {
                    frame.give_back();
                    Err(stopped_or(&mut state, runtime(e)))
                }
            }
        });
        self.tell_views(py, ended)
    }

    /// Waits until every frame shown so far is consumed and written.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        guarded("flush()", || {
            let mut state = self.lock(py);
            let state: &mut State = &mut state;
            py.detach(|| state.finish_run()).map_err(runtime)
        })
    }

    /// What the viewer has done so far (frames of finished runs, and the current run's counts).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let state = self.lock(py);
        let counts = state.counts();
        let dict = PyDict::new(py);
        dict.set_item("shown", counts.put)?;
        dict.set_item("replaced", counts.replaced)?;
        dict.set_item("consumed", counts.consumed)?;
        dict.set_item("written", counts.written)?;
        let validation = state.validation();
        dict.set_item("validation_errors", validation.errors)?;
        dict.set_item("validation_warnings", validation.warnings)?;
        if let Some(gpu) = &state.gpu {
            dict.set_item("device", gpu.device.info().to_string())?;
        }
        dict.set_item("window", state.window_state())?;
        dict.set_item("present", state.window.as_ref().map(|w| w.present))?;
        // The run's producer as users read it ("fed", "fed-cuda"); None between runs.
        dict.set_item("producer", state.run.as_ref().map(|r| r.feed.producer().to_string()))?;
        Ok(dict)
    }

    /// Consumes and writes what was shown, then lets the device go. Later calls do nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        guarded("close()", || {
            let mut state = self.lock(py);
            let state: &mut State = &mut state;
            let finished = py.detach(|| {
                let finished = state.finish_run();
                state.close();
                if let Some(mut view) = lock(&self.view).take() {
                    view.shared.stop();
                }
                finished
            });
            match finished {
                // The caller's last call raised already: the run's own end of that fault (its
                // producer saw it later than the call did) is not raised a second time.
                Err(e) if self.told.load(Ordering::Relaxed) => {
                    log::warn!("vkcuda: the run ended with: {}", words::said(&e));
                    Ok(())
                }
                finished => finished.map_err(runtime),
            }
        })
    }

    /// The browser view's URL (`serve=`), else `None`.
    #[getter]
    fn url(&self) -> Option<String> {
        lock(&self.view).as_ref().and_then(|v| v.shared.url()).map(str::to_string)
    }

    /// The browser view's token (`serve=`; a URL another server forwards carries it), else `None`.
    #[getter]
    fn token(&self) -> Option<String> {
        lock(&self.view).as_ref().and_then(|v| v.shared.token()).map(str::to_string)
    }

    /// Whether a page or widget waits for a frame that does not come (nothing
    /// new was shown lately, and it has no frame at its size yet, or not the
    /// exact one): the last frame wants showing again. Waits at most `timeout`
    /// seconds, without the GIL; `False` without watchers.
    fn wait_stale(&self, py: Python<'_>, timeout: f64) -> bool {
        let Some(hub) = lock(&self.view).as_ref().map(|v| v.shared.hub.clone()) else { return false };
        let wait = std::time::Duration::from_secs_f64(timeout.clamp(0.0, 60.0));
        py.detach(|| hub.wait_stale(wait))
    }

    /// The frame pixel under the browser's pointer and the buttons held,
    /// `(x, y, buttons)` for the frames shown now; `None` when the pointer is
    /// not over the frame (or there is no browser view).
    fn pointer(&self, py: Python<'_>) -> Option<(u32, u32, u32)> {
        let frame = self.lock(py).run.as_ref().map(|r| r.desc.extent)?;
        let p = lock(&self.view).as_ref()?.input.pointer(frame)?;
        Some((p.at.x, p.at.y, p.buttons))
    }

    /// The keys pressed in the browser since the last call (`KeyboardEvent.key` names), oldest first.
    fn keys(&self) -> Vec<String> {
        lock(&self.view).as_ref().map_or_else(Vec::new, |v| v.input.keys())
    }

    /// A notebook widget's connection: frames drawn at its size from the
    /// next frame shown on (the run now ends, its frames consumed, when this
    /// viewer had no watchers yet: the next one draws for them).
    fn watch(&self, py: Python<'_>) -> PyResult<serve::WatchClient> {
        guarded("watch()", || {
            let mut state = self.lock(py);
            if state.gpu.is_none() {
                return Err(PyRuntimeError::new_err("vkcuda: the viewer is closed"));
            }
            let mut view = lock(&self.view);
            if view.is_none() {
                let made = serve::View::new(2);
                state.output.watchers = Some(made.shared.hub.clone() as Arc<dyn Watchers>);
                let state: &mut State = &mut state;
                py.detach(|| state.finish_run()).map_err(runtime)?;
                *view = Some(made);
            }
            let view = view.as_ref().ok_or_else(|| PyRuntimeError::new_err("vkcuda: no view"))?;
            serve::WatchClient::join(view)
                .ok_or_else(|| PyRuntimeError::new_err("vkcuda: too many widgets watch this viewer"))
        })
    }

    /// Whether [`Viewer::close`] was called.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        self.lock(py).gpu.is_none()
    }
}

/// Refuses an image larger than the device's largest.
fn check_size(state: &State, layout: &Layout) -> PyResult<()> {
    let gpu = state.gpu().map_err(runtime)?;
    let max = gpu.device.info().max_image_dimension as usize;
    if layout.width > max || layout.height > max {
        return Err(PyValueError::new_err(format!(
            "an image of {}x{} is larger than this device's largest, {max}x{max}",
            layout.width, layout.height
        )));
    }
    Ok(())
}

/// A host array: converted here, into the run's staging on the producer's thread.
fn show_host(py: Python<'_>, state: &mut State, array: &HostArray, every: bool) -> PyResult<()> {
    let layout = array.layout;
    check_size(state, &layout)?;
    let mailbox = state.host_feed(&layout).map_err(runtime)?;
    let mut pixels = vec![0u8; layout.frame_bytes()];
    let first = array.data;
    // SAFETY: `x` (held by the caller for this call) describes `layout.span()` bytes
    // around its data pointer as its own memory; the conversion only reads them.
    py.detach(|| unsafe { layout.convert(first as *const u8, &mut pixels) });
    let put = put(py, &mailbox, pixels, every).map(drop).map_err(|not| stopped_or(state, not.error));
    state.wake();
    put
}

/// A GPU tensor: packed on its stream straight into the shared buffer once
/// Vulkan has released it (every frame: waiting for that); newest wins while
/// it is still Vulkan's and a slot is ready: into the slot, copied in by the
/// producer once the buffer is free.
fn show_device(py: Python<'_>, state: &mut State, array: &DeviceArray, every: bool) -> PyResult<()> {
    check_size(state, &array.layout)?;
    // The tensor's GPU must be the viewer's; the CUDA side is made at the first tensor.
    let own = state.cuda_for(array.device).map_err(runtime)?.own_stream();
    let stream = array.stream.unwrap_or(own);
    loop {
        let until = Instant::now() + SIGNAL_CHECK;
        let give_up = || Instant::now() >= until;
        // Without the GIL: the call may wait for the buffer.
        let made = py.detach(|| state.make(array, stream, every, &give_up));
        match made.map_err(|e| stopped_or(state, runtime(e)))? {
            Made::Made => {
                state.wake();
                return Ok(());
            }
            Made::NotNow => break,
            Made::GaveUp => py.check_signals()?,
        }
    }
    // Without the GIL where the pack may wait (for a free slot, or the caller's earlier packs).
    let held = match state.pack_if_ready(array, stream) {
        Some(packed) => packed,
        None => py.detach(|| state.pack(array, stream)),
    };
    let held = held.map_err(runtime)?;
    put_slot(py, state, held, every)
}

/// Puts a packed or written slot in its run's mailbox; the slot it replaced,
/// or this one if it was not put, goes back to the free list.
fn put_slot(py: Python<'_>, state: &mut State, held: Held, every: bool) -> PyResult<()> {
    let put = put(py, &held.mailbox, held.slot, every);
    state.wake();
    match put {
        Ok(replaced) => {
            replaced.into_iter().for_each(|s| held.staging.drop_frame(s));
            Ok(())
        }
        Err(NotPut { error, frame: back }) => {
            back.into_iter().for_each(|s| held.staging.drop_frame(s));
            Err(stopped_or(state, error))
        }
    }
}

/// Why a call failed once the run stopped or is stopping: the window was closed,
/// or the run's own error; else `e`.
fn stopped_or(state: &mut State, e: PyErr) -> PyErr {
    if !state.run.as_ref().is_some_and(Run::ending) {
        return e;
    }
    let finished = state.finish_run();
    match state.gpu() {
        Err(closed) => runtime(closed),
        Ok(_) => finished.err().map(runtime).unwrap_or(e),
    }
}

/// A frame [`put`] did not put, and why.
struct NotPut<T> {
    /// Why.
    error: PyErr,
    /// The frame, given back (`None`: the mailbox has it, or it is gone).
    frame: Option<T>,
}

/// Puts a frame in the mailbox; a blocked put looks at Ctrl+C every
/// [`SIGNAL_CHECK`]. `Ok`: the frame it replaced.
fn put<T: Send>(py: Python<'_>, mailbox: &Mailbox<T>, frame: T, every: bool) -> Result<Option<T>, NotPut<T>> {
    let mut frame = frame;
    loop {
        let until = Instant::now() + SIGNAL_CHECK;
        let give_up = || Instant::now() >= until;
        match py.detach(|| mailbox.put(frame, every, &give_up)) {
            Ok(Put::Done(replaced)) => return Ok(replaced),
            Ok(Put::GaveUp(back)) => frame = back,
            Err(e) => return Err(NotPut { error: runtime(e), frame: None }),
        }
        if let Err(e) = py.check_signals() {
            return Err(NotPut { error: e, frame: Some(frame) });
        }
    }
}

/// Reads a frame file a viewer wrote: `(width, height, pixels)`, the pixels
/// RGBA of `dtype` ("uint8": PNG; "float16", "float32": OpenEXR), rows packed.
#[pyfunction]
fn read_frame(py: Python<'_>, path: PathBuf, dtype: &str) -> PyResult<(u32, u32, Py<PyAny>)> {
    let format = Dtype::from_name(dtype).map_err(PyTypeError::new_err)?.format();
    let bytes =
        std::fs::read(&path).map_err(|e| PyValueError::new_err(format!("{}: {e}", path.display())))?;
    let decoded = vkcuda_run::output::frame_file::decode_frame(&bytes, format)
        .map_err(|e| PyValueError::new_err(format!("{}: {e:#}", path.display())))?;
    let (size, pixels) = (decoded.size, decoded.pixels);
    Ok((size.width, size.height, pyo3::types::PyBytes::new(py, &pixels).into_any().unbind()))
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Viewer>()?;
    m.add_class::<export::FrameSlot>()?;
    m.add_class::<serve::WatchClient>()?;
    m.add_function(wrap_pyfunction!(read_frame, m)?)?;
    m.add_function(wrap_pyfunction!(serve::frame_header, m)?)?;
    m.add_function(wrap_pyfunction!(serve::frame_message, m)?)?;
    m.add_function(wrap_pyfunction!(serve::closed_message, m)?)?;
    m.add_function(wrap_pyfunction!(doctor::doctor, m)?)?;
    // The page's one client module (the widget embeds it too), and JPEG's default quality.
    m.add("CLIENT_JS", vkcuda_serve::server::CLIENT_JS)?;
    m.add("DEFAULT_QUALITY", vkcuda_serve::ladder::DEFAULT_QUALITY)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
