//! Opening a window and what presents into it, for every front end: winit's
//! event loop (as an error, not a crash, where a window system library is
//! missing), and the device with its [`Presenter`] on either present path:
//! a Vulkan swapchain of the window's surface, or the CPU path (the drawn
//! frame put in the window by softbuffer) where the device cannot present.

use std::ffi::CStr;
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use winit::event_loop::EventLoop;
use winit::raw_window_handle::{HasDisplayHandle, HasWindowHandle, RawDisplayHandle};
use winit::window::Window;

use super::window::Presenter;
use super::x11;
use crate::base::kinds::{PresentMode, PresentPath};
use crate::error::usage::Message;
use crate::frames::display::no_window;
use crate::frames::gpu::{self, DeviceChoice, Gpu};
use crate::UsageError;
use vkcuda::types::QueueKind;
use vkcuda::vk::device::{list_gpus, Device, Queue};
use vkcuda::vk::instance::Instance;

/// Makes the Vulkan instance, with these instance extensions (the window
/// system's surface ones, or none).
pub type MakeInstance<'a> = &'a dyn Fn(&[&CStr]) -> Result<Arc<Instance>>;

/// What opening the presenter needs besides the window.
pub struct PresentSpec<'a> {
    /// The device to open.
    pub device: &'a DeviceChoice,
    /// Makes the instance.
    pub instance: MakeInstance<'a>,
    /// Which path.
    pub path: PresentPath,
    /// The swapchain's present mode (`None`: FIFO; mailbox on Wayland).
    pub mode: Option<PresentMode>,
    /// Frames in flight (the presenter's slots).
    pub slots: usize,
}

/// winit's event loop, on the main thread or (`any_thread`) on this one. winit
/// panics when a window system library it loads at run time is missing;
/// [`crate::frames::display::check`] names those first, and a panic that still
/// happens becomes an error here, not a crash.
pub fn event_loop<T: 'static>(any_thread: bool) -> Result<EventLoop<T>> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let made = std::panic::catch_unwind(|| {
        let mut builder = EventLoop::<T>::with_user_event();
        if any_thread {
            use winit::platform::wayland::EventLoopBuilderExtWayland;
            use winit::platform::x11::EventLoopBuilderExtX11;
            EventLoopBuilderExtX11::with_any_thread(&mut builder, true);
            EventLoopBuilderExtWayland::with_any_thread(&mut builder, true);
        }
        builder.build()
    });
    std::panic::set_hook(hook);
    match made {
        Ok(made) => made.map_err(|e| no_window(&e.to_string()).into()),
        Err(panic) => {
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "winit panicked".into());
            Err(no_window(&why).into())
        }
    }
}

/// A window's device and presenter ([`open`]).
pub struct Opened {
    /// The device.
    pub gpu: Gpu,
    /// What draws into the window.
    pub presenter: Presenter,
    /// Which device and present path, and why, for people.
    pub line: Message,
}

/// The device and presenter for `window` on `spec.path` (auto: Vulkan, else
/// the CPU path with the reason), and a line saying which.
pub fn open(window: &Arc<Window>, spec: &PresentSpec<'_>) -> Result<Opened> {
    match spec.path {
        PresentPath::Vulkan => open_vulkan(window, spec),
        PresentPath::Cpu => open_cpu(window, spec, Message::new().text("asked for")),
        PresentPath::Auto => match open_vulkan(window, spec) {
            Ok(v) => Ok(v),
            Err(e) if e.chain().any(|c| c.downcast_ref::<UsageError>().is_some()) => Err(e),
            Err(e) => open_cpu(window, spec, Message::new().text(format!("{e:#}"))),
        },
    }
}

/// A device of `choice` made again for the window `presenter` draws into,
/// after `lost` was lost (every frame of its session ended): on `lost`'s
/// instance, presenting to the same surface (none on the CPU path); the
/// presenter moves to it, to be fitted to the window next.
pub fn reopen(presenter: &mut Presenter, choice: &DeviceChoice, lost: &Device) -> Result<Gpu> {
    let instance = lost.owner().context("a device vkcuda did not make is not made again here")?;
    let queue = Queue { kind: QueueKind::Graphics, present: presenter.surface() };
    let gpu = gpu::open_gpu(choice, instance.clone(), queue).context("making the Vulkan device again")?;
    presenter.move_to(gpu.device.clone())?;
    Ok(gpu)
}

/// The Vulkan-present path: an instance with the window system's surface
/// extensions, the window's surface, a device whose graphics queue can present to it.
fn open_vulkan(window: &Arc<Window>, spec: &PresentSpec<'_>) -> Result<Opened> {
    let display = window.display_handle()?.as_raw();
    let handle = window.window_handle()?.as_raw();
    let required =
        ash_window::enumerate_required_extensions(display).context("Vulkan cannot present here")?;
    // SAFETY: ash-window returns pointers to static NUL-terminated extension names.
    let extensions: Vec<&CStr> = required.iter().map(|p| unsafe { CStr::from_ptr(*p) }).collect();
    let instance = (spec.instance)(&extensions)?;
    if matches!(display, RawDisplayHandle::Xlib(_) | RawDisplayHandle::Xcb(_)) {
        if let Some(why) = x11::nvidia_cannot_present() {
            // Asking NVIDIA's driver about this server's surface would crash the process.
            if list_gpus(&instance)?.iter().any(|g| g.driver.starts_with("NVIDIA")) {
                bail!("NVIDIA's Vulkan cannot present to this window: {why}");
            }
        }
    }
    // SAFETY: the window outlives the surface (the presenter destroys it first).
    let surface =
        unsafe { ash_window::create_surface(instance.entry(), instance.raw(), display, handle, None) }
            .context("creating the window's Vulkan surface")?;
    let surface_fn = ash::khr::surface::Instance::new(instance.entry(), instance.raw());
    let queue = Queue { kind: QueueKind::Graphics, present: Some((surface_fn.clone(), surface)) };
    let mut gpu = match gpu::open_gpu(spec.device, instance.clone(), queue) {
        Ok(g) => g,
        Err(e) => {
            // SAFETY: nothing uses the surface yet.
            unsafe { surface_fn.destroy_surface(surface, None) };
            return Err(e);
        }
    };
    // On Wayland a fifo present blocks until the compositor's frame callback, which never
    // comes while the window is hidden (Mesa 22 under weston: forever): mailbox by default.
    let wayland = matches!(display, RawDisplayHandle::Wayland(_));
    let mode = spec.mode.unwrap_or(if wayland { PresentMode::Mailbox } else { PresentMode::Fifo });
    let presenter = Presenter::new(gpu.device.clone(), surface_fn, surface, spec.slots, mode)?;
    let why = std::mem::take(&mut gpu.why);
    let line = Message::new()
        .text(format!("{}; ", gpu.device.info()))
        .then(why)
        .text("; presenting through a Vulkan swapchain");
    Ok(Opened { gpu, presenter, line })
}

/// The CPU-present path: no surface; the draw pass into an offscreen image
/// that softbuffer puts in the window.
fn open_cpu(window: &Arc<Window>, spec: &PresentSpec<'_>, why: Message) -> Result<Opened> {
    let instance = (spec.instance)(&[])?;
    let queue = Queue { kind: QueueKind::Graphics, present: None };
    let mut gpu = gpu::open_gpu(spec.device, instance, queue)?;
    let presenter = Presenter::new_cpu(gpu.device.clone(), window.clone(), spec.slots)?;
    let chosen = std::mem::take(&mut gpu.why);
    let line = Message::new().text(format!("{}; ", gpu.device.info())).then(chosen);
    let line = line.text("; presenting through the CPU (softbuffer): ").then(why);
    Ok(Opened { gpu, presenter, line })
}
