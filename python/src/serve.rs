//! `serve=`: the browser view of a viewer's frames (the `vkcuda-serve`
//! crate, as the CLI's `--serve` has it). The address is bound before the
//! GPU is opened; each run's consumer draws every frame at the sizes the
//! clients want. The page's pointer and keys are kept for the caller
//! (`Viewer.pointer()`, `Viewer.keys()`): a training script can react.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use ash::vk;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::PyResult;
use serde_json::json;

use vkcuda_run::base::scene::frame_pixel;
use vkcuda_serve::{Address, Bound, Controls, Hub, Server};

/// Keys kept for [`PageInput::keys`], at most (the oldest go first).
const KEPT_KEYS: usize = 64;

/// What the page sent: the pointer over its canvas, and keys not yet read.
#[derive(Default)]
struct Seen {
    pointer: Option<(f64, f64)>,
    canvas: vk::Extent2D,
    buttons: u32,
    keys: VecDeque<String>,
}

/// The page's input, for the caller.
#[derive(Default)]
pub struct PageInput {
    seen: Mutex<Seen>,
}

impl PageInput {
    fn seen(&self) -> MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The frame pixel under the pointer for frames of `frame`'s size, and the buttons held.
    pub fn pointer(&self, frame: vk::Extent2D) -> Option<(u32, u32, u32)> {
        let s = self.seen();
        let (x, y) = frame_pixel(s.canvas, frame, s.pointer?)?;
        Some((x, y, s.buttons))
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

    fn pointer(&self, canvas: vk::Extent2D, at: Option<(f64, f64)>, buttons: u32) {
        let mut s = self.seen();
        (s.canvas, s.pointer, s.buttons) = (canvas, at, buttons);
    }

    fn status(&self) -> serde_json::Value {
        json!({ "what": "vkcuda.Viewer" })
    }
}

/// A viewer's browser view.
pub struct Served {
    server: Server,
    /// The clients; each run's consumer draws for them.
    pub hub: Arc<Hub>,
    pub input: Arc<PageInput>,
}

/// Binds `serve` (`PORT` or `ADDR:PORT`): a malformed value is a `ValueError`,
/// one that cannot be bound (a port in use) an `OSError`.
pub fn bind(serve: &str) -> PyResult<Bound> {
    let address: Address = serve.parse().map_err(|e| PyValueError::new_err(format!("serve={serve}: {e}")))?;
    address.bind().map_err(|e| PyOSError::new_err(format!("serve={serve}: {e}")))
}

impl Served {
    /// Serves on `bound` with `encoders` encoder threads.
    pub fn start(bound: Bound, encoders: usize) -> anyhow::Result<Self> {
        let hub = Hub::new(encoders);
        let input = Arc::new(PageInput::default());
        let server = Server::start(bound, hub.clone(), input.clone())?;
        Ok(Self { server, hub, input })
    }

    /// The page's URL.
    pub fn url(&self) -> &str {
        self.server.url()
    }

    /// Closes the clients and frees the port.
    pub fn stop(&mut self) {
        self.server.stop();
        self.hub.close();
    }
}
