//! `vkcuda._native`: the Python module's native half, a front end on the run
//! layer (`vkcuda-run`) and the core's public API, as the CLI is. The Python
//! package around it (`python/vkcuda`) adds the context manager, the clean-up
//! at interpreter exit and the docs.
//!
//! A [`Viewer`] owns a Vulkan device and one [`run::Run`] at a time: `show`
//! converts the array's pixels into the shared frames' format and puts them
//! in the run's mailbox; the run's producer thread copies them into a
//! staging buffer and signals "rendered", its consumer thread copies each
//! frame on the GPU and, when writing, reads it back for the writer pool.

mod array;
mod run;

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ash::vk;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use array::{Dtype, Layout};
use run::{Ended, Output, Run};
use vkcuda::FrameDesc;
use vkcuda_run::feed::Mailbox;
use vkcuda_run::setup::Gpu;

/// How long a blocked `show` waits between looks at Ctrl+C.
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// What a viewer has done, over all its runs.
#[derive(Default)]
struct Totals {
    put: u64,
    replaced: u64,
    consumed: u64,
    written: u64,
}

struct State {
    gpu: Option<Arc<Gpu>>,
    output: Output,
    every: bool,
    run: Option<Run>,
    next_base: u64,
    totals: Totals,
}

impl State {
    /// Ends the current run once all it was given is consumed (and written).
    fn finish_run(&mut self) -> anyhow::Result<()> {
        let Some(run) = self.run.take() else { return Ok(()) };
        let counts = run.mailbox.counts();
        self.totals.put += counts.put;
        self.totals.replaced += counts.replaced;
        let ended: Ended = run.finish()?;
        self.next_base = ended.next_base;
        self.totals.consumed += ended.consumed;
        self.totals.written += ended.written;
        Ok(())
    }

    /// The run for frames `desc`: the current one, or a new one after it.
    fn run_for(&mut self, desc: FrameDesc) -> anyhow::Result<&Run> {
        let gpu = self.gpu.clone().ok_or_else(|| anyhow::anyhow!("this viewer is closed"))?;
        if self.run.as_ref().is_some_and(|r| r.desc != desc || r.stopped()) {
            self.finish_run()?;
        }
        if self.run.is_none() {
            let first = self.totals.consumed;
            self.run = Some(Run::start(gpu, desc, self.output.clone(), first, self.next_base)?);
        }
        self.run.as_ref().ok_or_else(|| anyhow::anyhow!("no run"))
    }
}

/// Shows arrays: writes every frame to a folder (headless), counting what it
/// consumed; see the Python package's `vkcuda.Viewer`.
#[pyclass(module = "vkcuda._native")]
struct Viewer {
    state: Mutex<State>,
}

impl Viewer {
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

/// A Rust panic or error as a Python `RuntimeError` (no panic crosses into Python).
fn guarded<T>(what: &str, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
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

fn runtime(e: anyhow::Error) -> PyErr {
    PyRuntimeError::new_err(format!("vkcuda: {}", vkcuda_run::for_people(&format!("{e:#}"))))
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
            let gpu = x.hasattr("__cuda_array_interface__")? || x.hasattr("__dlpack__")?;
            let hint = match gpu {
                true => {
                    "; GPU tensors (__dlpack__, __cuda_array_interface__) are not accepted by this build yet"
                }
                false => "",
            };
            return Err(PyTypeError::new_err(format!(
                "show() takes a NumPy array (anything with __array_interface__), not {kind}{hint}"
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
    #[pyo3(signature = (out=None, every_frame=false, validate=false, gpu=None, workers=None))]
    fn new(
        py: Python<'_>,
        out: Option<PathBuf>,
        every_frame: bool,
        validate: bool,
        gpu: Option<String>,
        workers: Option<usize>,
    ) -> PyResult<Self> {
        guarded("Viewer()", || {
            if let Some(dir) = &out {
                std::fs::create_dir_all(dir)
                    .map_err(|e| PyValueError::new_err(format!("out={}: {e}", dir.display())))?;
            }
            let gpu = py.detach(|| run::open(validate, gpu)).map_err(runtime)?;
            let workers =
                workers.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let output = Output { dir: out, workers: workers.max(1) };
            let state = State {
                gpu: Some(gpu),
                output,
                every: every_frame,
                run: None,
                next_base: 0,
                totals: Totals::default(),
            };
            Ok(Self { state: Mutex::new(state) })
        })
    }

    /// Shows `x`: its pixels as they are now. Returns once they are copied;
    /// the frame is consumed (and written) on the viewer's threads.
    #[pyo3(signature = (x, channels_first=false, block=None))]
    fn show(
        &self,
        py: Python<'_>,
        x: &Bound<'_, PyAny>,
        channels_first: bool,
        block: Option<bool>,
    ) -> PyResult<()> {
        guarded("show()", || {
            let array = host_array(x, channels_first)?;
            let mut state = self.lock(py);
            let every = block.unwrap_or(state.every);
            let layout = array.layout;
            let gpu =
                state.gpu.clone().ok_or_else(|| PyRuntimeError::new_err("vkcuda: this viewer is closed"))?;
            let max = gpu.device.info.max_image_dimension as usize;
            if layout.width > max || layout.height > max {
                return Err(PyValueError::new_err(format!(
                    "an image of {}x{} is larger than this device's largest, {max}x{max}",
                    layout.width, layout.height
                )));
            }
            let extent = vk::Extent2D { width: layout.width as u32, height: layout.height as u32 };
            let desc = FrameDesc::new(extent).format(layout.format()).layout(vkcuda::Layout::Buffer);
            let mailbox = state.run_for(desc).map_err(runtime)?.mailbox.clone();
            let mut pixels = vec![0u8; layout.frame_bytes()];
            let first = array.data;
            // SAFETY: `x` (held by the caller for this call) describes `layout.span()` bytes
            // around its data pointer as its own memory; the conversion only reads them.
            py.detach(|| unsafe { layout.convert(first as *const u8, &mut pixels) });
            put(py, &mailbox, pixels, every).map_err(|e| {
                // The run's thread stopped: its own error says why.
                match state.run.as_ref().is_some_and(Run::stopped) {
                    true => state.finish_run().err().map(runtime).unwrap_or(e),
                    false => e,
                }
            })
        })
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
        let live = state.run.as_ref().map(|r| r.mailbox.counts()).unwrap_or_default();
        let dict = PyDict::new(py);
        dict.set_item("shown", state.totals.put + live.put)?;
        dict.set_item("replaced", state.totals.replaced + live.replaced)?;
        dict.set_item("consumed", state.totals.consumed)?;
        dict.set_item("written", state.totals.written)?;
        let validation = state.gpu.as_ref().map(|g| g.device.validation()).unwrap_or_default();
        dict.set_item("validation_errors", validation.errors)?;
        dict.set_item("validation_warnings", validation.warnings)?;
        if let Some(gpu) = &state.gpu {
            dict.set_item("device", gpu.device.info.to_string())?;
        }
        Ok(dict)
    }

    /// Consumes and writes what was shown, then lets the device go. Later calls do nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        guarded("close()", || {
            let mut state = self.lock(py);
            let state: &mut State = &mut state;
            let finished = py.detach(|| state.finish_run());
            state.gpu = None;
            finished.map_err(runtime)
        })
    }

    /// Whether [`Viewer::close`] was called.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        self.lock(py).gpu.is_none()
    }
}

/// Puts a frame in the mailbox; a blocked put looks at Ctrl+C every [`SIGNAL_CHECK`].
fn put(py: Python<'_>, mailbox: &Mailbox, pixels: Vec<u8>, every: bool) -> PyResult<()> {
    let mut pixels = Some(pixels);
    loop {
        let until = Instant::now() + SIGNAL_CHECK;
        let give_up = || Instant::now() >= until;
        let frame = pixels.take().ok_or_else(|| PyRuntimeError::new_err("vkcuda: frame lost"))?;
        match py.detach(|| mailbox.put(frame, every, &give_up)) {
            Ok(None) => return Ok(()),
            Ok(Some(back)) => pixels = Some(back),
            Err(e) => return Err(runtime(e)),
        }
        py.check_signals()?;
    }
}

/// Reads a frame file a viewer wrote: `(width, height, pixels)`, the pixels
/// RGBA of `dtype` ("uint8": PNG; "float16", "float32": OpenEXR), rows packed.
#[pyfunction]
fn read_frame(py: Python<'_>, path: PathBuf, dtype: &str) -> PyResult<(u32, u32, Py<PyAny>)> {
    let format = Dtype::from_typestr(match dtype {
        "uint8" => "|u1",
        "float16" => "<f2",
        "float32" => "<f4",
        other => other,
    })
    .map_err(PyTypeError::new_err)?
    .format();
    let bytes =
        std::fs::read(&path).map_err(|e| PyValueError::new_err(format!("{}: {e}", path.display())))?;
    let (width, height, pixels) = vkcuda_run::encode::decode_frame(&bytes, format)
        .map_err(|e| PyValueError::new_err(format!("{}: {e:#}", path.display())))?;
    Ok((width, height, pyo3::types::PyBytes::new(py, &pixels).into_any().unbind()))
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Viewer>()?;
    m.add_function(wrap_pyfunction!(read_frame, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
