//! GPU tensors handed to `show`: DLPack (`__dlpack__`, versioned 1.0
//! capsules and the older ones) and `__cuda_array_interface__` (v3), read
//! into a pointer, a [`Layout`] and the stream their data is ready on.

use std::ffi::c_void;
use std::sync::OnceLock;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyDict, PyTuple};

use crate::array::{Dtype, Layout};

/// DLPack's device types this module knows.
const DL_CPU: i32 = 1;
const DL_CUDA: i32 = 2;
const DL_CUDA_HOST: i32 = 3;
const DL_CUDA_MANAGED: i32 = 13;

#[repr(C)]
#[derive(Clone, Copy)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *const i64,
    strides: *const i64,
    byte_offset: u64,
}

#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: *mut c_void,
}

#[repr(C)]
struct DlManagedTensorVersioned {
    version: [u32; 2],
    manager_ctx: *mut c_void,
    deleter: *mut c_void,
    flags: u64,
    dl_tensor: DlTensor,
}

/// A tensor as `show` reads it: in GPU memory, or (`host`) a host DLPack
/// tensor with no `__array_interface__` (a PyTorch CPU tensor).
pub struct DeviceArray {
    /// In host memory (DLPack's CPU or CUDA-pinned device): shown through the host.
    pub host: bool,
    /// The CUDA device (ordinal) it lives on.
    pub device: usize,
    /// Its first element.
    pub pointer: u64,
    /// Where its elements are.
    pub layout: Layout,
    /// The stream its data is ready on (`None`: ready now, or ordered by the producer's own sync).
    pub stream: Option<u64>,
    /// Keeps the DLPack capsule (and so the tensor's memory) alive while it is read.
    _capsule: Option<Py<PyAny>>,
}

/// Whether `x` is a tensor read through DLPack or the CUDA array interface
/// (`Some`: in GPU memory, or a host DLPack tensor that has no
/// `__array_interface__`), a host array read through `__array_interface__`
/// (`None`), or neither of use (an error).
/// `own(device)` gives the viewer's own stream on that device, for a DLPack
/// producer to order its work before when the caller names no stream.
pub fn device_array(
    x: &Bound<'_, PyAny>,
    stream: Option<u64>,
    channels_first: bool,
    own: &mut dyn FnMut(usize) -> PyResult<u64>,
) -> PyResult<Option<DeviceArray>> {
    if x.hasattr("__dlpack__")? {
        if let Some(s) = stream {
            // The pack runs on the caller's stream, after the work that made the tensor: the
            // producer need not order anything (no `stream` argument; PyTorch spends an event
            // and a stream query on an explicit None), and the capsule says the device.
            return Ok(dlpack(x, None, channels_first)?.map(|a| a.on(s)));
        }
        if x.hasattr("__dlpack_device__")? {
            let (kind, id): (i32, i32) = x.call_method0("__dlpack_device__")?.extract()?;
            if matches!(kind, DL_CUDA | DL_CUDA_MANAGED) {
                cuda_driver()?;
                let own = own(usize::try_from(id).unwrap_or(0))?;
                return dlpack(x, Some(own), channels_first);
            }
            device_kind(kind, id)?;
            return match x.hasattr("__array_interface__")? {
                true => Ok(None),
                false => dlpack(x, None, channels_first),
            };
        }
    }
    if let Ok(interface) = x.getattr("__cuda_array_interface__") {
        cuda_driver()?;
        return cuda_array_interface(&interface, stream, channels_first).map(Some);
    }
    Ok(None)
}

/// CUDA's driver library, loaded once: an array in CUDA memory on a machine
/// where it cannot be loaded is an error that says so (cudarc would panic).
fn cuda_driver() -> PyResult<()> {
    static LOADED: OnceLock<Result<(), String>> = OnceLock::new();
    let loaded = LOADED.get_or_init(|| vkcuda::cuda::load_driver().map_err(|e| e.to_string()));
    loaded.clone().map_err(|e| PyRuntimeError::new_err(format!("vkcuda: an array in CUDA memory, and {e}")))
}

impl DeviceArray {
    /// The same tensor, read on `stream`.
    fn on(self, stream: u64) -> Self {
        Self { stream: Some(stream), ..self }
    }
}

/// Host memory (`Ok`: shown through the host), or an error naming a device
/// `show` cannot read, by its DLPack device type.
fn device_kind(kind: i32, id: i32) -> PyResult<()> {
    match kind {
        DL_CPU | DL_CUDA_HOST => Ok(()),
        other => Err(PyTypeError::new_err(format!(
            "a tensor on DLPack device type {other} (device {id}): show() takes CUDA or host memory"
        ))),
    }
}

/// Reads `x.__dlpack__(stream=...)`: the producer orders its work before
/// `stream` (a viewer's own), so the data is ready there; `None`: no ordering
/// (the caller's stream reads it, after the work that made it). `Ok(None)`:
/// the capsule is of host memory and `x` has `__array_interface__` (NumPy's
/// own path reads it); a host tensor without one is read from the capsule.
fn dlpack(x: &Bound<'_, PyAny>, stream: Option<u64>, channels_first: bool) -> PyResult<Option<DeviceArray>> {
    let py = x.py();
    // DLPack forbids 0 for CUDA: the legacy default stream is 1.
    let asked = stream.map(|s| if s == 0 { 1 } else { s });
    let kwargs = PyDict::new(py);
    if let Some(s) = asked {
        kwargs.set_item("stream", s)?;
    }
    kwargs.set_item("max_version", (1, 0))?;
    let capsule = match x.call_method("__dlpack__", (), Some(&kwargs)) {
        Ok(c) => c,
        Err(e) if e.is_instance_of::<PyTypeError>(py) => {
            // A producer from before DLPack 1.0 takes no max_version.
            kwargs.del_item("max_version")?;
            x.call_method("__dlpack__", (), Some(&kwargs))?
        }
        Err(e) => return Err(e),
    };
    let capsule_ref = capsule
        .cast::<PyCapsule>()
        .map_err(|_| PyTypeError::new_err("__dlpack__ did not return a capsule"))?;
    // SAFETY: the capsule's name lives as long as the capsule, which outlives this use.
    let name = capsule_ref.name()?.map(|n| unsafe { n.as_cstr() }.to_str().unwrap_or("")).unwrap_or("");
    let tensor: &DlTensor = match name {
        "dltensor_versioned" => {
            let p = capsule_ref
                .pointer_checked(Some(c"dltensor_versioned"))?
                .as_ptr()
                .cast::<DlManagedTensorVersioned>();
            // SAFETY: a capsule of this name holds a DLManagedTensorVersioned, alive while the capsule is.
            let managed = unsafe { &*p };
            if managed.version[0] != 1 {
                return Err(PyTypeError::new_err(format!(
                    "DLPack {}.{} is not understood",
                    managed.version[0], managed.version[1]
                )));
            }
            &managed.dl_tensor
        }
        "dltensor" => {
            let p = capsule_ref.pointer_checked(Some(c"dltensor"))?.as_ptr().cast::<DlManagedTensor>();
            // SAFETY: a capsule of this name holds a DLManagedTensor, alive while the capsule is.
            &unsafe { &*p }.dl_tensor
        }
        other => {
            return Err(PyTypeError::new_err(format!("a DLPack capsule named {other:?} (already used?)")))
        }
    };
    let (kind, id) = (tensor.device.device_type, tensor.device.device_id);
    let host = !matches!(kind, DL_CUDA | DL_CUDA_MANAGED);
    if host {
        device_kind(kind, id)?;
        if x.hasattr("__array_interface__")? {
            return Ok(None);
        }
    }
    let dtype = dl_dtype(tensor.dtype)?;
    let ndim = usize::try_from(tensor.ndim)
        .map_err(|_| PyValueError::new_err("a tensor with negative dimensions"))?;
    // SAFETY: DLPack: `shape` has `ndim` entries, `strides` too unless null (C order), both alive with the capsule.
    let shape = unsafe { std::slice::from_raw_parts(tensor.shape, ndim) };
    let shape: Vec<usize> = shape.iter().map(|&n| n.max(0) as usize).collect();
    let strides: Option<Vec<isize>> = (!tensor.strides.is_null()).then(|| {
        // SAFETY: see above.
        let s = unsafe { std::slice::from_raw_parts(tensor.strides, ndim) };
        s.iter().map(|&e| e as isize * dtype.size() as isize).collect()
    });
    let layout =
        Layout::new(dtype, &shape, strides.as_deref(), channels_first).map_err(PyValueError::new_err)?;
    let pointer = (tensor.data as u64).wrapping_add(tensor.byte_offset);
    let device = usize::try_from(tensor.device.device_id).unwrap_or(0);
    Ok(Some(DeviceArray { host, device, pointer, layout, stream: asked, _capsule: Some(capsule.unbind()) }))
}

fn dl_dtype(t: DlDataType) -> PyResult<Dtype> {
    match (t.code, t.bits, t.lanes) {
        (1, 8, 1) => Ok(Dtype::U8),
        (2, 16, 1) => Ok(Dtype::F16),
        (2, 32, 1) => Ok(Dtype::F32),
        (code, bits, lanes) => {
            let kind = match code {
                0 => "int",
                1 => "uint",
                2 => "float",
                4 => "bfloat",
                6 => "bool",
                _ => "type",
            };
            let lanes = if lanes > 1 { format!("x{lanes}") } else { String::new() };
            Err(PyTypeError::new_err(format!(
                "dtype {kind}{bits}{lanes} is not accepted: use uint8, float16 or float32"
            )))
        }
    }
}

/// Reads `__cuda_array_interface__` (v3): data pointer, shape, byte strides,
/// type string, and the stream the data is ready on (`stream` overrides it).
fn cuda_array_interface(
    interface: &Bound<'_, PyAny>,
    stream: Option<u64>,
    channels_first: bool,
) -> PyResult<DeviceArray> {
    let dict = interface
        .cast::<PyDict>()
        .map_err(|_| PyTypeError::new_err("__cuda_array_interface__ is not a dict"))?;
    let item = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        dict.get_item(key)?
            .ok_or_else(|| PyTypeError::new_err(format!("__cuda_array_interface__ has no {key}")))
    };
    let typestr: String = item("typestr")?.extract()?;
    let dtype = Dtype::from_typestr(&typestr).map_err(PyTypeError::new_err)?;
    let shape: Vec<usize> = item("shape")?.extract()?;
    let strides: Option<Vec<isize>> =
        dict.get_item("strides")?.filter(|s| !s.is_none()).map(|s| s.extract()).transpose()?;
    let data = item("data")?;
    let data = data
        .cast::<PyTuple>()
        .map_err(|_| PyTypeError::new_err("__cuda_array_interface__'s data is not a tuple"))?;
    let pointer: u64 = data.get_item(0)?.extract()?;
    let own: Option<u64> =
        dict.get_item("stream")?.filter(|s| !s.is_none()).map(|s| s.extract()).transpose()?;
    let layout =
        Layout::new(dtype, &shape, strides.as_deref(), channels_first).map_err(PyValueError::new_err)?;
    let device = pointer_device(pointer)?;
    Ok(DeviceArray { host: false, device, pointer, layout, stream: stream.or(own), _capsule: None })
}

/// The CUDA device a pointer's memory is on.
fn pointer_device(pointer: u64) -> PyResult<usize> {
    vkcuda_run::cuda::driver::pointer_device(pointer).map_err(|e| {
        PyValueError::new_err(format!(
            "__cuda_array_interface__'s pointer {pointer:#x} is not CUDA memory CUDA can place ({e:?})"
        ))
    })
}

/// A stream handle from what a caller passes as `stream=`.
pub fn stream_handle(stream: &Bound<'_, PyAny>) -> PyResult<u64> {
    if let Ok(handle) = stream.extract::<u64>() {
        return Ok(handle);
    }
    if stream.hasattr("__cuda_stream__")? {
        let (_, handle): (i64, u64) = stream.call_method0("__cuda_stream__")?.extract()?;
        return Ok(handle);
    }
    for attribute in ["cuda_stream", "ptr", "handle"] {
        if let Ok(value) = stream.getattr(attribute) {
            if let Ok(handle) = value.extract::<u64>() {
                return Ok(handle);
            }
            if let Ok(handle) = value.call_method0("__int__").and_then(|v| v.extract::<u64>()) {
                return Ok(handle);
            }
        }
    }
    let kind = stream.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    Err(PyTypeError::new_err(format!(
        "stream= takes a CUDA stream handle (int), or a stream object with __cuda_stream__, .cuda_stream, .ptr \
         or .handle, not {kind}"
    )))
}
