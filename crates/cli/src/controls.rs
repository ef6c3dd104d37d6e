//! The browser view's [`Controls`] for the CLI's runs, which render what a
//! [`Director`] says (the scenes and `--kernel`): the page's keys act on it
//! as the window's do (R reloads a kernel), the pointer reaches it as the
//! window's does (a kernel's `vk_frame`).

use std::sync::{Arc, Mutex};

use ash::vk;

use vkcuda_run::kernel::reload::KernelReload;
use vkcuda_run::scene::director::{Director, Pointer};
use vkcuda_run::scene::frame_pixel;
use vkcuda_serve::protocol::{CanvasPoint, DirectorStatus, Pixel, RunStatus, Size};
use vkcuda_serve::Controls;

/// The page's keys and pointer, on a director (and a kernel's hot reload).
pub struct RunControls {
    director: Arc<Director>,
    reload: Option<Arc<KernelReload>>,
    /// What renders, for the status line (the scene's name when `None`).
    what: Option<String>,
    /// The producer's failure, shown on the page over the last frame until a new session runs.
    fault: Mutex<Option<String>>,
}

impl RunControls {
    /// Controls of `director`'s run; `reload` and `what` for a `--kernel` (its file's name).
    pub fn new(director: Arc<Director>, reload: Option<Arc<KernelReload>>, what: Option<String>) -> Self {
        Self { director, reload, what, fault: Mutex::new(None) }
    }

    /// Says `fault` on every page (`None`: the run goes on again).
    pub fn set_fault(&self, fault: Option<String>) {
        *self.fault.lock().unwrap_or_else(|p| p.into_inner()) = fault;
    }
}

impl Controls for RunControls {
    fn key(&self, key: &str) {
        if !self.director.act(key) && matches!(key, "r" | "R") {
            self.reload.iter().for_each(|r| r.reload());
        }
    }

    fn pointer(&self, canvas: vk::Extent2D, at: Option<CanvasPoint>, buttons: u32) {
        let scene = self.director.current().scene;
        let frame = vk::Extent2D { width: scene.width, height: scene.height };
        let at = at.and_then(|p| frame_pixel(canvas, frame, (p.x, p.y)));
        self.director.set_pointer(Pointer { at, buttons });
    }

    fn status(&self) -> RunStatus {
        let now = self.director.current();
        let director = DirectorStatus {
            scene: now.scene.kind,
            paused: self.director.paused(),
            tick: now.tick,
            cost: now.scene.cost,
            size: Size { width: now.scene.width, height: now.scene.height },
            pointer: now.pointer.at.map(|(x, y)| Pixel { x, y }),
            buttons: now.pointer.buttons,
        };
        RunStatus {
            what: self.what.clone().unwrap_or_else(|| now.scene.kind.to_string()),
            error: self.fault.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            director: Some(director),
        }
    }
}
