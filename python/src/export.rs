//! A frame handed out for the caller to write in place (`Viewer.frame()`):
//! DLPack capsules (versioned 1.0 and older) and `__cuda_array_interface__`
//! over its GPU memory, an (H, W, 4) C-order tensor of the frame's dtype.
//! That memory is the exported Vulkan buffer itself once Vulkan has released
//! it ([`Line::reserve`]; every frame waits for that), else (newest wins, the
//! buffer still Vulkan's) a slot the producer copies in. Writes go on the
//! frame's stream, or on a stream a DLPack consumer names, which is then
//! ordered after the frame's stream's waits and joins it at the end.

use std::ffi::{c_void, CStr};
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, Result};
use cudarc::driver::{sys, CudaContext};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use vkcuda_run::cuda::driver::{self, Event};

use crate::array::Dtype;
use crate::runtime;
use vkcuda_run::drive::feed::device::DeviceStaging;
use vkcuda_run::drive::feed::line::{Line, Reserved};
use vkcuda_run::drive::feed::Mailbox;

const LEGACY: &CStr = c"dltensor";
const VERSIONED: &CStr = c"dltensor_versioned";

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: [i32; 2],
    ndim: i32,
    dtype: [u8; 4],
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

/// DLManagedTensor with the shape it points to, freed by its deleter.
#[repr(C)]
struct Legacy {
    tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut Legacy)>,
    shape: [i64; 3],
}

/// DLManagedTensorVersioned (1.0) with the shape it points to.
#[repr(C)]
struct Versioned {
    version: [u32; 2],
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut Versioned)>,
    flags: u64,
    tensor: DlTensor,
    shape: [i64; 3],
}

unsafe extern "C" fn delete_legacy(m: *mut Legacy) {
    // SAFETY: made by Box::into_raw in `capsule`, deleted once (by its consumer or the capsule).
    drop(unsafe { Box::from_raw(m) });
}

unsafe extern "C" fn delete_versioned(m: *mut Versioned) {
    // SAFETY: as above.
    drop(unsafe { Box::from_raw(m) });
}

/// The capsule's destructor: a capsule nobody consumed (still named
/// "dltensor"/"dltensor_versioned") deletes its tensor; a consumer renames it first.
unsafe extern "C" fn drop_capsule(capsule: *mut pyo3::ffi::PyObject) {
    for (name, versioned) in [(LEGACY, false), (VERSIONED, true)] {
        // SAFETY: a live capsule (CPython calls this from its deallocation).
        if unsafe { pyo3::ffi::PyCapsule_IsValid(capsule, name.as_ptr()) } == 1 {
            // SAFETY: valid under this name, checked just above.
            let p = unsafe { pyo3::ffi::PyCapsule_GetPointer(capsule, name.as_ptr()) };
            match versioned {
                // SAFETY: the pointer is the Box this module made for this name.
                false => unsafe { delete_legacy(p.cast()) },
                // SAFETY: as above.
                true => unsafe { delete_versioned(p.cast()) },
            }
        }
    }
}

/// A frame's size as its tensor's shape (H, W, 4) counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameShape {
    /// Rows (H).
    pub height: usize,
    /// Pixels a row (W).
    pub width: usize,
}

/// DLPack's device type of CUDA memory (`kDLCUDA`).
const DL_CUDA: i32 = 2;

/// A device as DLPack names it: its type and its number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct DlDevice {
    /// The device type (`kDLCUDA`: [`DL_CUDA`]).
    kind: i32,
    /// The device's ordinal.
    id: i32,
}

impl From<(i32, i32)> for DlDevice {
    /// From DLPack's `(device_type, device_id)`, as Python passes it.
    fn from((kind, id): (i32, i32)) -> Self {
        DlDevice { kind, id }
    }
}

/// A DLPack capsule over `pointer`: an (H, W, 4) C-order tensor of `shape` and `dtype` on CUDA device `device`.
fn capsule(
    py: Python<'_>,
    pointer: u64,
    device: i32,
    shape: FrameShape,
    dtype: Dtype,
    versioned: bool,
) -> PyResult<Py<PyAny>> {
    let FrameShape { height: h, width: w } = shape;
    let (code, bits) = match dtype {
        Dtype::U8 => (1u8, 8u8),
        Dtype::F16 => (2, 16),
        Dtype::F32 => (2, 32),
    };
    let tensor = |shape: *mut i64| DlTensor {
        data: pointer as *mut c_void,
        device: [DL_CUDA, device],
        ndim: 3,
        dtype: [code, bits, 1, 0],
        shape,
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let shape = [h as i64, w as i64, 4];
    let (raw, name): (*mut c_void, &CStr) = if versioned {
        let boxed = Box::into_raw(Box::new(Versioned {
            version: [1, 0],
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_versioned),
            flags: 0,
            tensor: tensor(std::ptr::null_mut()),
            shape,
        }));
        // SAFETY: just made, and not shared yet.
        let made = unsafe { &mut *boxed };
        // The shape lives in the same box as the tensor that points to it.
        made.tensor.shape = made.shape.as_mut_ptr();
        (boxed.cast(), VERSIONED)
    } else {
        let boxed = Box::into_raw(Box::new(Legacy {
            tensor: tensor(std::ptr::null_mut()),
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_legacy),
            shape,
        }));
        // SAFETY: as above.
        let made = unsafe { &mut *boxed };
        made.tensor.shape = made.shape.as_mut_ptr();
        (boxed.cast(), LEGACY)
    };
    // SAFETY: a valid pointer, a static name, and a destructor that frees it unless consumed.
    let made = unsafe { pyo3::ffi::PyCapsule_New(raw, name.as_ptr(), Some(drop_capsule)) };
    if made.is_null() {
        // SAFETY: the capsule was not made: the box is still ours.
        unsafe { drop_capsule_box(raw, versioned) };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference CPython just returned.
    Ok(unsafe { Bound::from_owned_ptr(py, made) }.unbind())
}

/// Frees a box `capsule` made when the capsule itself could not be made.
unsafe fn drop_capsule_box(raw: *mut c_void, versioned: bool) {
    match versioned {
        // SAFETY: the caller's: `raw` is the box, unowned by any capsule.
        false => unsafe { delete_legacy(raw.cast()) },
        // SAFETY: as above.
        true => unsafe { delete_versioned(raw.cast()) },
    }
}

/// The memory a frame is written in.
pub enum Target {
    /// The shared buffer of frame `g`, reserved on its line.
    Buffer { line: Arc<Line>, reserved: Reserved },
    /// A slot of the run's staging, put in the mailbox when shown.
    Slot(usize),
}

/// One frame being written in place; see the module docs.
#[pyclass(module = "vkcuda._native")]
pub struct FrameSlot {
    pub(crate) ctx: Arc<CudaContext>,
    pub(crate) staging: Arc<DeviceStaging>,
    pub(crate) mailbox: Arc<Mailbox<usize>>,
    pub(crate) target: Target,
    pub(crate) device: i32,
    pub(crate) size: FrameShape,
    pub(crate) dtype: Dtype,
    /// The stream writes are ordered on; other writers' streams join it at the end.
    pub(crate) stream: u64,
    pub(crate) writers: Mutex<Vec<u64>>,
    /// Put in the mailbox, or given back: nothing more to do.
    pub(crate) done: Mutex<bool>,
}

impl FrameSlot {
    /// `later` waits (on the GPU) for what is enqueued on `earlier` so far.
    fn order(&self, earlier: u64, later: u64) -> Result<()> {
        self.ctx.bind_to_thread()?;
        // Dropped at the end: destroying a recorded event is fine, the wait holds what it needs.
        let event = Event::new()?;
        // SAFETY: a new event of this context; both streams are of this context.
        let ordered = unsafe { driver::record(event.raw(), earlier as sys::CUstream) }
            // SAFETY: as above.
            .and_then(|()| unsafe { driver::wait_event(later as sys::CUstream, event.raw()) });
        ordered.context("ordering two streams")
    }

    /// Ends the writes: every writer's stream joins the frame's, which
    /// records a slot's "ready".
    pub(crate) fn finish_writes(&self) -> Result<()> {
        let writers = std::mem::take(&mut *self.writers.lock().unwrap_or_else(|p| p.into_inner()));
        for w in writers {
            self.order(w, self.stream)?;
        }
        let Target::Slot(slot) = self.target else { return Ok(()) };
        self.ctx.bind_to_thread()?;
        // SAFETY: the slot's event and the frame's stream, both of this context, which is bound.
        unsafe { driver::record(self.staging.ready(slot), self.stream as sys::CUstream) }
            .context("cuEventRecord (the frame's writes)")
    }

    /// The frame's memory.
    fn pointer(&self) -> sys::CUdeviceptr {
        match &self.target {
            Target::Buffer { reserved, .. } => reserved.pointer,
            Target::Slot(slot) => self.staging.pointer(*slot),
        }
    }

    /// A frame not shown: its slot goes back, or its buffer to the line,
    /// after the writes already enqueued (which [`FrameSlot::finish_writes`] joined).
    pub(crate) fn give_back(&self) {
        match &self.target {
            // SAFETY: the frame's stream is a live stream of the line's context.
            Target::Buffer { line, reserved } => unsafe {
                line.abandon(reserved.g, self.stream as sys::CUstream)
            },
            Target::Slot(slot) => self.staging.release(*slot),
        }
    }

    /// Marks the slot done; `false` if it already was.
    pub(crate) fn take(&self) -> bool {
        !std::mem::replace(&mut *self.done.lock().unwrap_or_else(|p| p.into_inner()), true)
    }
}

#[pymethods]
impl FrameSlot {
    /// DLPack: the frame as an (H, W, 4) tensor; `stream`: where the consumer
    /// writes (ordered after the memory's last use).
    #[pyo3(signature = (*, stream=None, max_version=None, dl_device=None, copy=None))]
    fn __dlpack__(
        &self,
        py: Python<'_>,
        stream: Option<i64>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(i32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        if *self.done.lock().unwrap_or_else(|p| p.into_inner()) {
            return Err(PyRuntimeError::new_err("vkcuda: this frame was already shown"));
        }
        let here = DlDevice { kind: DL_CUDA, id: self.device };
        if copy == Some(true) || dl_device.map(DlDevice::from).is_some_and(|d| d != here) {
            return Err(pyo3::exceptions::PyBufferError::new_err(
                "vkcuda: a frame is exported in place on its GPU only",
            ));
        }
        let consumer = match stream {
            None | Some(-1) => None,
            Some(0) => Some(1), // DLPack: 0 is not a CUDA stream; the legacy default is 1
            Some(s) => Some(s as u64),
        };
        if let Some(s) = consumer.filter(|s| *s != self.stream) {
            let _context = crate::context::CallersContext::note();
            self.order(self.stream, s).map_err(runtime)?;
            self.writers.lock().unwrap_or_else(|p| p.into_inner()).push(s);
        }
        // DLPack's (major, minor): a consumer of 1.0 or later takes the versioned capsule.
        let versioned = max_version.is_some_and(|(major, _minor)| major >= 1);
        capsule(py, self.pointer(), self.device, self.size, self.dtype, versioned)
    }

    fn __dlpack_device__(&self) -> (i32, i32) {
        (DL_CUDA, self.device)
    }

    /// The frame for CUDA array interface consumers (Numba, CuPy): ready on the frame's stream.
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        let typestr = match self.dtype {
            Dtype::U8 => "|u1",
            Dtype::F16 => "<f2",
            Dtype::F32 => "<f4",
        };
        d.set_item("shape", self.shape())?;
        d.set_item("typestr", typestr)?;
        d.set_item("data", (self.pointer(), false))?;
        d.set_item("strides", py.None())?;
        d.set_item("stream", self.stream)?;
        d.set_item("version", 3)?;
        Ok(d)
    }

    /// The frame's shape: (H, W, 4).
    #[getter]
    fn shape(&self) -> (usize, usize, usize) {
        (self.size.height, self.size.width, 4)
    }

    /// The stream writes are ordered on (a CUDA stream handle).
    #[getter]
    fn stream(&self) -> u64 {
        self.stream
    }

    /// Drops the frame now (an exception in its block): the next frame need
    /// not wait for the garbage collector, which a traceback holding the
    /// frame would delay.
    fn discard(&self) {
        self.discard_now();
    }
}

impl FrameSlot {
    /// A frame not to be shown gives its memory back now, after the writes
    /// already enqueued (once: a frame shown or discarded already is left).
    fn discard_now(&self) {
        if self.take() {
            let _context = crate::context::CallersContext::note();
            if let Err(e) = self.finish_writes() {
                log::error!("a frame left unshown: {e:#}");
            }
            self.give_back();
        }
    }
}

impl Drop for FrameSlot {
    /// A frame never shown gives its memory back.
    fn drop(&mut self) {
        self.discard_now();
    }
}
