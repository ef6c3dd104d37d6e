//! Windows of viewers made with `headless=False`: one event-loop thread per
//! process (winit allows one event loop per process) hosts every window, so
//! the Python thread never runs the loop and a window stays responsive (keys,
//! resize, close) while Python trains or renders, in a script, `python -i` or
//! a Jupyter kernel.
//!
//! Each window runs the run layer's pieces: a [`Screen`] (the window and its
//! presenter: a swapchain of the window's surface, or the CPU path, and the
//! frame loop's steps the CLI's viewer runs too) and, once frames come, a
//! [`Session`] fed from the viewer's mailbox. Frames are consumed as the producer makes
//! them: drawn, letterboxed, into the window and presented. The Python side
//! talks to the thread with [`Command`]s through the loop's proxy; a command
//! that needs an answer carries a channel for it.

use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use winit::application::ApplicationHandler;
use winit::dpi::PhysicalSize;
use winit::event::{ElementState, WindowEvent};
use winit::event_loop::{ActiveEventLoop, ControlFlow, EventLoopProxy};
use winit::keyboard::{Key, NamedKey};
use winit::window::{Window, WindowId};

use crate::spec;
use vkcuda::FrameDesc;
use vkcuda_run::base::kinds::PresentPath;
use vkcuda_run::base::size::Size;
use vkcuda_run::drive::feed::run::{self as fed, Ended, Fed, Progress, StartAt};
use vkcuda_run::drive::feed::Feed;
use vkcuda_run::drive::screen::{OpenedScreen, Screen};
use vkcuda_run::drive::session::Session;
use vkcuda_run::error::failure::gave_up;
use vkcuda_run::frames::gpu::Gpu;
use vkcuda_run::present::open::{event_loop, PresentSpec};

/// How often the loop looks at a window whose frames are in flight.
const POLL: Duration = Duration::from_millis(1);

/// What the Python side asks of the window thread.
pub enum Command {
    /// Open a window of `size` pixels titled `title`.
    Open { size: Size, title: String, validate: bool, gpu: Option<String>, reply: Sender<Result<Opened>> },
    /// Start consuming frames `desc` from `fed` (timelines from `at.base`).
    Start { id: u64, desc: FrameDesc, fed: Fed, at: StartAt, reply: Sender<Result<()>> },
    /// End the frames of the current session (its feed is closed).
    Finish { id: u64, reply: Sender<Result<Ended>> },
    /// Close the window.
    Close { id: u64, reply: Sender<Result<()>> },
    /// A frame was put: look at the windows.
    Wake,
    /// Say why the caller's frames stopped over the window's last frame.
    Say { id: u64, why: String },
}

/// An open window, as the Python side holds it.
pub struct Opened {
    /// The window's number.
    pub id: u64,
    /// Its device.
    pub gpu: Arc<Gpu>,
    /// Set once the window closed (by its user or an error) and `error` says why, if an error.
    pub closed: Arc<AtomicBool>,
    /// The error that closed it.
    pub error: Arc<Mutex<Option<String>>>,
    /// How frames reach it: "swapchain" (Vulkan presents) or "cpu" (put in by the CPU).
    pub present: &'static str,
}

/// The window thread's proxy, made with the thread at the first window.
static PROXY: Mutex<Option<EventLoopProxy<Command>>> = Mutex::new(None);

/// Sends `command` to the window thread, starting it first if need be.
pub fn send(command: Command) -> Result<()> {
    let mut proxy = PROXY.lock().unwrap_or_else(|p| p.into_inner());
    if proxy.is_none() {
        *proxy = Some(start_thread()?);
    }
    let proxy = proxy.as_ref().ok_or_else(|| anyhow!("no window thread"))?;
    proxy.send_event(command).map_err(|_| anyhow!("the window thread has ended"))
}

/// Asks the window thread and waits for its answer.
pub fn ask<T>(make: impl FnOnce(Sender<Result<T>>) -> Command) -> Result<T> {
    let (reply, answer) = channel();
    send(make(reply))?;
    answer.recv().map_err(|_| anyhow!("the window thread has ended"))?
}

fn start_thread() -> Result<EventLoopProxy<Command>> {
    vkcuda_run::frames::display::check()?;
    let (tx, rx) = channel();
    std::thread::Builder::new().name("vkcuda windows".into()).spawn(move || {
        let made = event_loop::<Command>(true);
        let event_loop = match made {
            Ok(l) => l,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        let _ = tx.send(Ok(event_loop.create_proxy()));
        let mut app = App { windows: HashMap::new(), next_id: 0 };
        if let Err(e) = event_loop.run_app(&mut app) {
            log::error!("the window event loop ended: {e}");
        }
    })?;
    rx.recv().map_err(|_| anyhow!("the window thread did not start"))?
}

struct App {
    windows: HashMap<u64, Shown>,
    next_id: u64,
}

/// One window and what runs in it.
struct Shown {
    // Field order is drop order: the session, then the window and its presenter
    // (which owns the surface), before the device.
    session: Option<Session>,
    /// The session's feed (its producer's end tells when the last frame is made).
    feed: Option<Feed>,
    /// What the session has consumed so far, for the viewer's `stats()`.
    progress: Arc<Progress>,
    screen: Screen,
    gpu: Arc<Gpu>,
    closed: Arc<AtomicBool>,
    error: Arc<Mutex<Option<String>>>,
    /// The title the caller gave (a fault is said after it until the next session).
    title: String,
}

impl ApplicationHandler<Command> for App {
    fn resumed(&mut self, _event_loop: &ActiveEventLoop) {}

    fn user_event(&mut self, event_loop: &ActiveEventLoop, command: Command) {
        match command {
            Command::Open { size, title, validate, gpu, reply } => {
                let id = self.next_id;
                self.next_id += 1;
                let opened = Shown::open(event_loop, size, &title, validate, gpu).map(|w| {
                    let present = if w.screen.presenter.through_cpu() { "cpu" } else { "swapchain" };
                    let (gpu, closed, error) = (w.gpu.clone(), w.closed.clone(), w.error.clone());
                    let opened = Opened { id, gpu, closed, error, present };
                    self.windows.insert(id, w);
                    opened
                });
                let _ = reply.send(opened);
            }
            Command::Start { id, desc, fed, at, reply } => {
                let _ = reply.send(self.with(id, |w| w.start(desc, fed, at)));
            }
            Command::Finish { id, reply } => {
                let _ = reply.send(self.with(id, Shown::finish));
            }
            Command::Close { id, reply } => {
                if let Some(mut w) = self.windows.remove(&id) {
                    w.close(None);
                }
                let _ = reply.send(Ok(()));
            }
            Command::Wake => {}
            Command::Say { id, why } => {
                if let Some(w) = self.windows.get_mut(&id) {
                    w.say(&why);
                }
            }
        }
        self.look(event_loop);
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, window: WindowId, event: WindowEvent) {
        let Some((&id, w)) = self.windows.iter_mut().find(|(_, w)| w.screen.window.id() == window) else {
            return;
        };
        let quit = match event {
            WindowEvent::CloseRequested => true,
            WindowEvent::KeyboardInput { event, .. } => {
                event.state == ElementState::Pressed && event.logical_key == Key::Named(NamedKey::Escape)
            }
            WindowEvent::Resized(_) => {
                w.screen.mark_stale();
                false
            }
            WindowEvent::RedrawRequested => {
                if let Err(e) = w.frame() {
                    w.close(Some(e));
                    self.windows.remove(&id);
                }
                false
            }
            _ => false,
        };
        if quit {
            if let Some(mut w) = self.windows.remove(&id) {
                w.close(None);
            }
        }
        self.look(event_loop);
    }

    fn about_to_wait(&mut self, event_loop: &ActiveEventLoop) {
        self.look(event_loop);
    }
}

impl App {
    /// Runs `f` on window `id`, or says it is closed.
    fn with<T>(&mut self, id: u64, f: impl FnOnce(&mut Shown) -> Result<T>) -> Result<T> {
        let w = self.windows.get_mut(&id).ok_or_else(|| anyhow!("the window was closed"))?;
        f(w)
    }

    /// Asks for a redraw of every window with frames to consume or in flight,
    /// and looks again soon while there are.
    fn look(&mut self, event_loop: &ActiveEventLoop) {
        let mut busy = false;
        for w in self.windows.values() {
            if w.has_work() {
                w.screen.window.request_redraw();
                busy = true;
            }
        }
        event_loop.set_control_flow(match busy {
            true => ControlFlow::WaitUntil(Instant::now() + POLL),
            false => ControlFlow::Wait,
        });
    }
}

impl Shown {
    fn open(
        event_loop: &ActiveEventLoop,
        size: Size,
        title: &str,
        validate: bool,
        gpu: Option<String>,
    ) -> Result<Self> {
        let inner = PhysicalSize::new(size.width, size.height);
        let attributes = Window::default_attributes().with_title(title).with_inner_size(inner);
        let device = spec::device_choice(gpu);
        let instance = |extensions: &[&CStr]| spec::instance(validate, extensions);
        let present = PresentSpec {
            device: &device,
            instance: &instance,
            path: PresentPath::Auto,
            mode: None,
            slots: fed::IN_FLIGHT,
        };
        let OpenedScreen { gpu, screen, line } = Screen::open(event_loop, attributes, &present)?;
        log::info!("{}", line.worded(&crate::words::Python));
        Ok(Self {
            session: None,
            feed: None,
            progress: Arc::default(),
            screen,
            gpu: Arc::new(gpu),
            closed: Arc::new(AtomicBool::new(false)),
            error: Arc::new(Mutex::new(None)),
            title: title.to_string(),
        })
    }

    /// Starts the session of frames `desc` fed from `fed`, timelines from
    /// `at.base` (a window writes no files: its frames need no numbers).
    fn start(&mut self, desc: FrameDesc, fed: Fed, at: StartAt) -> Result<()> {
        let (Fed { feed, progress }, base) = (fed, at.base);
        anyhow::ensure!(self.session.is_none(), "a session is running already");
        let session = Session::start(&self.gpu, &fed::fed_spec(feed.clone()), desc, base)?;
        self.screen.presenter.bind_shared(session.frames())?;
        self.screen.window.set_title(&self.title);
        self.session = Some(session);
        self.feed = Some(feed);
        self.progress = progress;
        Ok(())
    }

    /// Whether frames wait to be consumed or are in flight.
    fn has_work(&self) -> bool {
        self.session.as_ref().is_some_and(|s| s.ready() || s.in_flight(Duration::ZERO).unwrap_or(false))
    }

    /// Consumes the next frame if it is made and its slot is free: draws it into the window and presents it.
    fn frame(&mut self) -> Result<()> {
        let Some(run) = self.session.as_mut() else { return Ok(()) };
        run.show_finished(&mut self.screen.presenter, Duration::ZERO)?;
        if self.screen.stale() && !self.screen.fit(run)?.fitted {
            return Ok(()); // minimized: stay stale until restored
        }
        if !run.ready() || run.held_up_by(false, true, Duration::ZERO)?.is_some() {
            return Ok(());
        }
        self.screen.present(run)?;
        self.progress.set_consumed(run.next());
        Ok(())
    }

    /// Ends the session (its feed is closed): every frame the producer makes
    /// is shown first, then the session stops.
    fn finish(&mut self) -> Result<Ended> {
        let started = Instant::now();
        while let Some(run) = self.session.as_ref() {
            // `ended` first: once it is seen, the producer's count is final.
            let ended = self.feed.as_ref().is_none_or(Feed::ended);
            if ended && !run.ready() {
                break;
            }
            if run.producer_failed() || started.elapsed() > vkcuda::vk::WAIT_TIMEOUT {
                break; // the stop says why
            }
            let before = run.next();
            self.frame()?;
            if self.session.as_ref().is_some_and(|r| r.next() == before) {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        self.feed = None;
        let session = self.session.take().ok_or_else(|| anyhow!("no session to finish"))?;
        let stopped = session.end(&mut self.screen.presenter, Ok(()))?.stopped;
        Ok(Ended { next_base: stopped.next_base, consumed: stopped.consumed, written: 0 })
    }

    /// Says `why` the caller's frames stopped (its CUDA fault, which spoils
    /// its context for good) over the window's last frame until the next
    /// frame goes in, and in its title until the next session.
    fn say(&mut self, why: &str) {
        let cure = "The window keeps the last frame; the next frame shown replaces this.";
        if let Err(e) = self.screen.presenter.show_notice(why, cure) {
            log::warn!("vkcuda: the window cannot say the error over its frame: {e:#}");
        }
        let first = why.lines().next().unwrap_or_default();
        self.screen.window.set_title(&format!("{} | {first}", self.title));
    }

    /// Closes the window: the session stops (on an error, aborts), and the Python side is told.
    fn close(&mut self, error: Option<anyhow::Error>) {
        let said = |e: &anyhow::Error| {
            *self.error.lock().unwrap_or_else(|p| p.into_inner()) = Some(crate::words::said(e))
        };
        // First: a show failing on the feed the stop closes must see why.
        error.as_ref().map(said);
        let only_gave_up = error.as_ref().is_some_and(gave_up);
        self.closed.store(true, Ordering::Release);
        self.feed = None;
        if let Some(s) = self.session.take() {
            if let Err(e) = s.end(&mut self.screen.presenter, error.map_or(Ok(()), Err)) {
                let e = anyhow::Error::from(e);
                if only_gave_up {
                    // The window only stopped waiting: the session's verdict (the producer's error) is the cause.
                    said(&e);
                }
                log::error!("closing a window: {e:#}");
            }
        }
        self.screen.window.set_visible(false);
    }
}
