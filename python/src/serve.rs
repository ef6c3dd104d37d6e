//! A viewer's watchers (the `vkcuda-serve` crate): `serve=`'s browser view,
//! as the CLI's `--serve` has it (the address bound before the GPU is
//! opened), and notebook widgets, which join the same hub through Jupyter's
//! comm ([`WatchClient`]). Each run's consumer draws every frame at the sizes
//! the clients want. The pages' pointer and keys are kept for the caller
//! (`Viewer.pointer()`, `Viewer.keys()`): a training script can react.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use ash::vk;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use vkcuda_run::scene::frame_pixel;
use vkcuda_serve::protocol::{self, CanvasPoint, Header, Pixel, RunStatus, Then, ToPage};
use vkcuda_serve::{Address, Bound, Controls, Hub};

/// Keys kept for [`PageInput::keys`], at most (the oldest go first).
const KEPT_KEYS: usize = 64;

/// What the page sent: the pointer over its canvas, and keys not yet read.
#[derive(Default)]
struct Seen {
    pointer: Option<CanvasPoint>,
    canvas: vk::Extent2D,
    buttons: u32,
    keys: VecDeque<String>,
}

/// The pointer over the frame, as the page sent it: the frame pixel under it, and the buttons held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagePointer {
    /// The frame pixel.
    pub at: Pixel,
    /// Bit 0 left, 1 right, 2 middle.
    pub buttons: u32,
}

/// The page's input, for the caller; and what the pages are told of the
/// caller's frames.
#[derive(Default)]
pub struct PageInput {
    seen: Mutex<Seen>,
    /// Why the last frame the caller gave did not reach the view (a CUDA
    /// fault in its kernels, the run stopped): said over the last frame.
    fault: Mutex<Option<String>>,
}

impl PageInput {
    fn seen(&self) -> MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The frame pixel under the pointer for frames of `frame`'s size, and the buttons held.
    pub fn pointer(&self, frame: vk::Extent2D) -> Option<PagePointer> {
        let s = self.seen();
        let p = s.pointer?;
        let (x, y) = frame_pixel(s.canvas, frame, (p.x, p.y))?;
        Some(PagePointer { at: Pixel { x, y }, buttons: s.buttons })
    }

    /// What the pages say over their last frame (`None`: nothing).
    pub fn set_fault(&self, fault: Option<String>) {
        *self.fault.lock().unwrap_or_else(|p| p.into_inner()) = fault;
    }

    /// The keys pressed since the last call, oldest first.
    pub fn keys(&self) -> Vec<String> {
        self.seen().keys.drain(..).collect()
    }
}

impl Controls for PageInput {
    fn key(&self, key: &str) {
        let mut s = self.seen();
        if s.keys.len() == KEPT_KEYS {
            s.keys.pop_front();
        }
        s.keys.push_back(key.to_string());
    }

    fn pointer(&self, canvas: vk::Extent2D, at: Option<CanvasPoint>, buttons: u32) {
        let mut s = self.seen();
        (s.canvas, s.pointer, s.buttons) = (canvas, at, buttons);
    }

    fn status(&self) -> RunStatus {
        let error = self.fault.lock().unwrap_or_else(|p| p.into_inner()).clone();
        RunStatus { what: "vkcuda.Viewer".into(), error, director: None }
    }
}

/// A viewer's watchers: the view its runs draw for (served with `serve=`;
/// the notebook widget joins its hub directly), and what the pages sent.
pub struct View {
    pub shared: vkcuda_serve::View,
    pub input: Arc<PageInput>,
}

/// Binds `serve` (`PORT` or `ADDR:PORT`): a malformed value is a `ValueError`,
/// one that cannot be bound (a port in use) an `OSError`.
pub fn bind(serve: &str) -> PyResult<Bound> {
    let address: Address = serve.parse().map_err(|e| PyValueError::new_err(format!("serve={serve}: {e}")))?;
    address.bind().map_err(|e| PyOSError::new_err(format!("serve={serve}: {e}")))
}

impl View {
    /// A hub with `encoders` encoder threads and no server.
    pub fn new(encoders: usize) -> Self {
        Self { shared: vkcuda_serve::View::new(encoders), input: Arc::new(PageInput::default()) }
    }

    /// Serves the page on `bound`; its keys and pointer are kept for the caller.
    pub fn serve(&mut self, bound: Bound) -> anyhow::Result<()> {
        self.shared.serve(bound, self.input.clone())
    }
}

/// A notebook widget's connection to a viewer's hub: the page's messages in,
/// frames out (Python's widget class pumps them over Jupyter's comm).
#[pyclass(module = "vkcuda._native")]
pub struct WatchClient {
    hub: Arc<Hub>,
    input: Arc<PageInput>,
    id: u64,
}

impl WatchClient {
    /// A new client of `view`'s hub; `None` when it has as many as it takes.
    pub fn join(view: &View) -> Option<Self> {
        let hub = &view.shared.hub;
        let id = hub.join()?.id;
        Some(Self { hub: hub.clone(), input: view.input.clone(), id })
    }
}

#[pymethods]
impl WatchClient {
    /// The next frame (the view's header, then JPEG or RGBA), waiting at
    /// most `timeout` seconds without the GIL; `None`: none came, or the client is closed.
    fn next(&self, py: Python<'_>, timeout: f64) -> Option<Py<PyBytes>> {
        let wait = Duration::from_secs_f64(timeout.clamp(0.0, 60.0));
        let frame = py.detach(|| self.hub.wait_next(self.id, wait))?;
        Some(PyBytes::new(py, &frame.bytes).unbind())
    }

    /// Applies a message from the widget (the page's JSON messages): the
    /// reply to send back (JSON), if any. A malformed one is a `ValueError`;
    /// a goodbye (`{"t": "bye"}`) closes the client.
    fn message(&self, text: &str) -> PyResult<Option<String>> {
        match protocol::apply(&self.hub, &*self.input, self.id, text) {
            Ok(Then::Reply(reply)) => Ok(Some(reply.text())),
            Ok(Then::Leave) => {
                self.hub.leave(self.id);
                Ok(None)
            }
            Ok(_) => Ok(None),
            Err(e) => Err(PyValueError::new_err(e)),
        }
    }

    /// The status message for the widget (JSON).
    fn status(&self) -> String {
        protocol::status(&self.hub, &*self.input, self.id).text()
    }

    /// Leaves the hub: no more frames are drawn for this client.
    fn close(&self) {
        self.hub.leave(self.id);
    }

    /// Whether it left (or the viewer closed).
    #[getter]
    fn closed(&self) -> bool {
        !self.hub.has(self.id)
    }
}

impl Drop for WatchClient {
    fn drop(&mut self) {
        self.hub.leave(self.id);
    }
}

/// The header of a frame the view sent (a widget's buffer, a page's binary
/// message) as a dict: kind ("raw", "jpeg", "vp8", "png"), key, quality,
/// frame, width, height, stamp (µs since the Unix epoch). A `ValueError` if
/// it is not one.
#[pyfunction]
pub fn frame_header(py: Python<'_>, frame: &[u8]) -> PyResult<Py<pyo3::types::PyDict>> {
    let h = Header::parse(frame).map_err(|e| PyValueError::new_err(e.to_string()))?;
    let d = pyo3::types::PyDict::new(py);
    d.set_item("kind", h.kind.name())?;
    d.set_item("key", h.key)?;
    d.set_item("quality", h.quality)?;
    d.set_item("frame", h.frame)?;
    d.set_item("width", h.width)?;
    d.set_item("height", h.height)?;
    d.set_item("stamp", h.stamp)?;
    Ok(d.unbind())
}

/// The message a frame's buffer comes with over the widget's comm (JSON; Jupyter's
/// comm has no binary messages of its own).
#[pyfunction]
pub fn frame_message() -> String {
    ToPage::Frame {}.text()
}

/// The message that tells a page the viewer closed, or would not take it (JSON).
#[pyfunction]
pub fn closed_message(reason: &str) -> String {
    ToPage::Closed { reason: reason.into() }.text()
}
