//! The interactive viewer: a winit window that shows the shared images,
//! through a Vulkan swapchain or, where the device cannot present to the
//! window, the CPU-present path. Same producer, plan, shared images and frame
//! loop as `--headless`; only the consumer differs (`present::window::Presenter` instead of
//! the offscreen copy).
//!
//! The event loop never blocks on the GPU: before a frame it only polls
//! (briefly) whether the frame's slot is free, so Esc, the close button and
//! signals are answered while a kernel runs long, and a frame held up for
//! [`STALL`] is reported (a kernel that does not end); a quit then does
//! not wait for it, and after [`WAIT_TIMEOUT`] the viewer gives up by itself.
//!
//! One frame: pace the slot (its fence) → acquire a swapchain image (nothing
//! to acquire on the CPU path) → make sure the producer has submitted the
//! frame's "rendered" signal (so the present never waits on a signal not yet
//! submitted) → submit (waits: acquire + "rendered"; signals: present
//! semaphore + "released") → present (the CPU path puts the frame in the
//! window once it is consumed).

use std::collections::VecDeque;
use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use ash::vk;
use winit::application::ApplicationHandler;
use winit::dpi::LogicalSize;
use winit::event::{ElementState, KeyEvent, MouseButton, WindowEvent};
use winit::event_loop::{ActiveEventLoop, ControlFlow};
use winit::keyboard::{Key, NamedKey};
use winit::window::{Fullscreen, Window, WindowAttributes, WindowId};

use crate::cli::{Args, SizeArg};
use vkcuda::vk::WAIT_TIMEOUT;
use vkcuda_run::base::kinds::{Place, ProducerId, Renders};
use vkcuda_run::base::size::Size;
use vkcuda_run::diagnostics::xid;
use vkcuda_run::drive::child::{child_failure, Restart};
use vkcuda_run::drive::measure::Consumed;
use vkcuda_run::drive::producer::Report;
use vkcuda_run::drive::screen::{Fitted, OpenedScreen, Screen};
use vkcuda_run::drive::session::{warmup_frames, Session, SessionEnd, Stopped, STALL};
use vkcuda_run::drive::sink::{PngSink, SinkReport};
use vkcuda_run::drive::to_end::{
    png_sink, prepare_out_dir, summarize, watch_signals, MadeBy, Measured, Summary,
};
use vkcuda_run::error::failure::Remakes;
use vkcuda_run::for_people;
use vkcuda_run::frames::consumer::Completed;
use vkcuda_run::frames::display;
use vkcuda_run::frames::gpu::{self, Gpu};
use vkcuda_run::kernel::reload::{KernelReload, Swapped};
use vkcuda_run::metrics::clock::CpuMeter;
use vkcuda_run::metrics::stats::{median, micros, Samples};
use vkcuda_run::present::open::{event_loop, PresentSpec};
use vkcuda_run::present::readback::{Pixels, Readback, Shot};
use vkcuda_run::scene::director::{Director, Pointer};
use vkcuda_run::scene::{frame_pixel, Scene};

/// Runs the viewer until the window closes, Esc, a signal, or `--frames`.
pub fn run(args: &Args) -> Result<Summary> {
    display::check()?;
    let event_loop = event_loop::<()>(false)?;
    let mut app = App { args: args.clone(), viewer: None, outcome: None, caught: watch_signals()? };
    event_loop.run_app(&mut app).context("window event loop")?;
    app.outcome.unwrap_or_else(|| Err(anyhow!("the window closed before the viewer started")))
}

struct App {
    args: Args,
    viewer: Option<Viewer>,
    outcome: Option<Result<Summary>>,
    caught: Arc<AtomicUsize>,
}

impl App {
    /// Acts on what a frame (or an event) said: go on, quit, or fail.
    fn settle(&mut self, event_loop: &ActiveEventLoop, result: Result<bool>) {
        match result {
            Ok(true) => {}
            Ok(false) => self.finish(event_loop, None),
            Err(e) => self.finish(event_loop, Some(e)),
        }
    }

    /// Ends the run (the session decides which side caused an error) and
    /// shuts the viewer down.
    fn finish(&mut self, event_loop: &ActiveEventLoop, error: Option<anyhow::Error>) {
        let summary = match self.viewer.take() {
            Some(mut v) => {
                let s = v.shutdown(&self.caught, error);
                drop(v);
                s
            }
            None => Err(error.unwrap_or_else(|| anyhow!("the viewer did not start"))),
        };
        self.outcome.get_or_insert(summary);
        event_loop.exit();
    }
}

impl ApplicationHandler for App {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.viewer.is_some() || self.outcome.is_some() {
            return;
        }
        match Viewer::new(event_loop, &self.args) {
            Ok(v) => self.viewer = Some(v),
            Err(e) => {
                self.outcome = Some(Err(e));
                event_loop.exit();
            }
        }
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, _id: WindowId, event: WindowEvent) {
        let Some(viewer) = self.viewer.as_mut() else { return };
        let result = match event {
            WindowEvent::CloseRequested => {
                viewer.quit = true;
                viewer.frame()
            }
            WindowEvent::Resized(_) => {
                viewer.screen.mark_stale();
                Ok(true)
            }
            WindowEvent::KeyboardInput { event, .. } => viewer.key(&event),
            WindowEvent::CursorMoved { position, .. } => {
                viewer.cursor = Some((position.x, position.y));
                viewer.pointer_changed();
                Ok(true)
            }
            WindowEvent::CursorLeft { .. } => {
                viewer.cursor = None;
                viewer.pointer_changed();
                Ok(true)
            }
            WindowEvent::MouseInput { state, button, .. } => {
                let bit = match button {
                    MouseButton::Left => 1,
                    MouseButton::Right => 2,
                    MouseButton::Middle => 4,
                    _ => 0,
                };
                match state {
                    ElementState::Pressed => viewer.buttons |= bit,
                    ElementState::Released => viewer.buttons &= !bit,
                }
                viewer.pointer_changed();
                Ok(true)
            }
            WindowEvent::RedrawRequested => {
                if self.caught.load(Ordering::Relaxed) != 0 {
                    viewer.quit = true;
                }
                viewer.frame()
            }
            _ => Ok(true),
        };
        self.settle(event_loop, result);
    }

    fn about_to_wait(&mut self, event_loop: &ActiveEventLoop) {
        event_loop.set_control_flow(ControlFlow::Wait);
        let caught = self.caught.load(Ordering::Relaxed) != 0;
        let Some(v) = self.viewer.as_mut() else { return };
        if !v.screen.minimized() {
            v.screen.window.request_redraw();
            return;
        }
        // Minimized: no redraws come, so the loop sleeps until the window changes; but it
        // looks at signals and a pending quit (close, Esc) four times a second.
        event_loop.set_control_flow(ControlFlow::WaitUntil(Instant::now() + Duration::from_millis(250)));
        if caught || v.quit {
            v.quit = true;
            let result = v.frame();
            self.settle(event_loop, result);
        }
    }
}

struct Viewer {
    // Field order is drop order: the interop, then the window and its presenter
    // (which owns the surface), before the device.
    run: Option<Session>,
    screen: Screen,
    gpu: Gpu,
    director: Arc<Director>,
    args: Args,
    show_stats: bool,
    consumed: u64,
    steady_start: Option<Instant>,
    /// Consumed frames, numbered in consumption order across interop rebuilds.
    completed: Samples<Completed>,
    meter: CpuMeter,
    report: Report,
    sink: SinkReport,
    /// The PNG writers of the snapshots ("S") that the presenter's readback hands frames to.
    snapshots: Option<PngSink>,
    /// When the frames of the last second went on screen (the title's frame rate).
    shown_at: VecDeque<Instant>,
    last_title: Instant,
    /// `--kernel`: the watcher and compile thread of its hot reload.
    reload: Option<KernelReload>,
    /// The frame the next one waits for, while it is not ready.
    held: Option<HeldUp>,
    /// Esc, the close button or a signal: quit once the submitted frames are
    /// done, or at once if they are stuck.
    quit: bool,
    /// The pointer in window pixels, while it is over the window.
    cursor: Option<(f64, f64)>,
    /// Mouse buttons held: bit 0 left, 1 right, 2 middle.
    buttons: u32,
    /// Paced to the screen: the most frames the producer was ahead of it.
    lead: Option<u64>,
    /// The kernel's child failed: what it said, and when a fix may run. No
    /// session runs meanwhile; the window keeps the last frame.
    faulted: Option<(String, Restart)>,
    /// When the Vulkan device was last made again.
    remakes: Remakes,
}

/// A frame that is not finished (or, before a present, not submitted by the
/// producer), and since when the viewer waits for it.
struct HeldUp {
    frame: u64,
    since: Instant,
    /// Reported as stuck (after [`STALL`]).
    said: bool,
}

/// How long one poll of the GPU may keep the event loop.
const POLL: Duration = Duration::from_millis(10);

impl Viewer {
    fn new(event_loop: &ActiveEventLoop, args: &Args) -> Result<Self> {
        let attributes = Window::default_attributes()
            .with_title("vkcuda")
            .with_inner_size(LogicalSize::new(1280.0, 720.0))
            .with_fullscreen(args.fullscreen.then_some(Fullscreen::Borderless(None)));
        let OpenedScreen { gpu, mut screen, .. } = open_screen(event_loop, attributes, args)?;
        let e = screen.presenter.extent();
        let size = args.size_or(Size { width: e.width, height: e.height });
        let director = Arc::new(Director::new(Scene {
            kind: args.scene,
            width: size.width,
            height: size.height,
            cost: args.cost,
        }));
        let reload = args.kernel_spec().map(|k| KernelReload::start(&k)).transpose()?;
        if args.paced() {
            eprintln!(
                "vkcuda: latency low{}: the producer starts a frame once the one before is on screen \
                 (--latency throughput: more frames per second)",
                if args.latency.is_none() { " (the default with --kernel)" } else { "" }
            );
        }
        let spec = args.spec_reloading(&gpu, &director, reload.as_ref())?;
        let run = Session::start(&gpu, &spec, args.frame_desc(size), args.timeline_base)?;
        screen.presenter.bind_shared(run.frames())?;
        Ok(Self {
            run: Some(run),
            screen,
            gpu,
            director,
            args: args.clone(),
            show_stats: false,
            consumed: 0,
            steady_start: None,
            completed: Samples::default(),
            meter: CpuMeter::default(),
            report: Report::default(),
            sink: SinkReport::default(),
            snapshots: None,
            shown_at: VecDeque::new(),
            last_title: Instant::now(),
            reload,
            held: None,
            quit: false,
            cursor: None,
            buttons: 0,
            lead: None,
            faulted: None,
            remakes: Remakes::default(),
        })
    }

    /// One frame; `Ok(false)` once `--frames` frames were shown, or to quit.
    fn frame(&mut self) -> Result<bool> {
        if self.faulted.is_some() {
            return self.await_fix();
        }
        match self.step() {
            // The producer's failure ends the step (the held-up wait gives up): a kernel's child?
            Err(e) if self.run.as_ref().is_some_and(Session::producer_failed) => match self.fault()? {
                true => Ok(true),
                false => Err(e),
            },
            Err(e) if self.remakes.due(&e, self.run.as_ref().is_some_and(|r| r.producer().in_child())) => {
                self.remake(e).map(|()| true)
            }
            other => other,
        }
    }

    /// One frame of a running session.
    fn step(&mut self) -> Result<bool> {
        // Finished frames go on screen first: paced to the screen, the producer waits for them.
        let run = self.run.as_mut().ok_or_else(|| anyhow!("no interop running"))?;
        let done = run.show_finished(&mut self.screen.presenter, POLL)?;
        self.on_screen(done);
        // Quitting: once every submitted frame is done, or they are stuck.
        let held = self.held_up()?;
        if self.quit && (!held || self.stuck()) {
            return Ok(false);
        }
        if held || self.screen.minimized() {
            return Ok(true);
        }
        if self.screen.stale() {
            self.rebuild()?;
            if self.screen.stale() {
                return Ok(true);
            }
        }
        let run = self.run.as_mut().ok_or_else(|| anyhow!("no interop running"))?;
        self.meter.frame(self.consumed, self.steady_start.is_some());
        let presented = self.screen.present(run)?;
        self.on_screen(presented.done);
        if presented.frame.is_none() {
            return Ok(true);
        }
        self.consumed += 1;
        if self.consumed == warmup_frames(self.args.frame_count()) {
            self.steady_start = Some(Instant::now());
        }
        self.update_title();
        Ok(self.consumed < self.args.frame_count())
    }

    /// Frames consumed, in order: they are on screen now (the CPU path puts
    /// each in the window as it is consumed; a swapchain image was presented
    /// before). The first frame of a newly swapped kernel says how long it
    /// took to get there.
    fn on_screen(&mut self, done: Vec<Completed>) {
        for c in done {
            let at = c.consumed_at;
            self.shown_at.push_back(at);
            while self.shown_at.front().is_some_and(|t| at.duration_since(*t) > Duration::from_secs(1)) {
                self.shown_at.pop_front();
            }
            if let Some(s) = self.reload.as_ref().and_then(|r| r.link().shown(c.frame)) {
                report_swap(&s, &self.shown_at);
            }
            record(&mut self.completed, c);
        }
    }

    /// Whether the next frame (with a rebuild or a quit pending, any
    /// submitted frame) is held up, polled for at most [`POLL`]; reports a
    /// frame held up for [`STALL`], and fails after [`WAIT_TIMEOUT`].
    fn held_up(&mut self) -> Result<bool> {
        let run = self.run.as_ref().ok_or_else(|| anyhow!("no interop running"))?;
        if run.producer_failed() {
            // The producer failed: its error, which the stop returns, is the cause.
            return Err(vkcuda::Error::Cancelled { what: format!("frame {}", run.next()) }.into());
        }
        let produced = self.quit || !self.screen.presenter.through_cpu();
        let Some(frame) = run.held_up_by(self.screen.stale() || self.quit, produced, POLL)? else {
            if let Some(h) = self.held.take().filter(|h| h.said) {
                eprintln!("vkcuda: frame {} finished after {:.1?}", h.frame, h.since.elapsed());
            }
            return Ok(false);
        };
        // Held up without a break since the first frame that was (a quit may add more).
        let held = self.held.get_or_insert(HeldUp { frame, since: Instant::now(), said: false });
        let (frame, waited) = (held.frame, held.since.elapsed());
        if waited >= WAIT_TIMEOUT {
            bail!(
                "frame {frame} did not finish in {WAIT_TIMEOUT:?} (a kernel that does not end?): quitting \
                 without waiting for it"
            );
        }
        if waited >= STALL && !held.said {
            held.said = true;
            eprintln!(
                "vkcuda: frame {frame} has not finished after {STALL:?} (a kernel that does not end?): \
                 Esc or Ctrl+C quits without waiting for it; the viewer gives up by itself after {WAIT_TIMEOUT:?}"
            );
        }
        self.update_title();
        Ok(true)
    }

    /// The producer failed. With the kernel in a child process (and its hot
    /// reload), the session ends, the window keeps the last frame and the
    /// title says why, until a save that compiles (`true`); else the run
    /// ends with the error (`false`).
    fn fault(&mut self) -> Result<bool> {
        let (Some(reload), Some(run)) = (&self.reload, &self.run) else { return Ok(false) };
        if !run.producer().in_child() {
            return Ok(false);
        }
        let restart = Restart::after_failure(reload.link());
        let run = self.run.take().ok_or_else(|| anyhow!("no interop running"))?;
        // The frames it still ends were never made: the window keeps the last one made.
        self.screen.presenter.freeze();
        let failed = vkcuda::Error::Cancelled { what: format!("frame {}", run.next()) };
        let error = match run.end(&mut self.screen.presenter, Err::<(), _>(failed.into())) {
            Ok(SessionEnd { stopped, .. }) => {
                self.absorb(stopped);
                anyhow!("the producer stopped")
            }
            Err(e) => e.into(),
        };
        self.finish_snapshots();
        let Some(why) = child_failure(&error) else { return Err(error) };
        eprintln!(
            "vkcuda: {why}\nvkcuda: the window keeps the last frame; save a fix and the run goes on with it"
        );
        xid::say_fault_hint_once();
        self.faulted = Some((why, restart));
        self.last_title = Instant::now() - Duration::from_secs(1);
        self.update_title();
        self.show_fault();
        Ok(true)
    }

    /// Writes the fault over the window's last frame; where it cannot (the
    /// title and stderr say it anyway), the session still waits for a fix.
    fn show_fault(&mut self) {
        let Some((why, _)) = &self.faulted else { return };
        let cure = "Save a fix and the run goes on with it; Esc quits.";
        if let Err(e) = self.screen.presenter.show_notice(why, cure) {
            eprintln!("vkcuda: the window cannot write the fault over its last frame: {e:#}");
        }
    }

    /// While the kernel's fault is shown: quits if asked, starts a new
    /// session once a fix compiled, else waits a little (the loop comes back).
    fn await_fix(&mut self) -> Result<bool> {
        let Some((why, restart)) = &self.faulted else { return Ok(true) };
        if self.quit {
            bail!("{why}");
        }
        if !restart.ready() {
            // The window changed: the fault again over the last frame, at its new size.
            if self.screen.stale() && self.screen.fit_idle()? {
                self.show_fault();
            }
            std::thread::sleep(POLL);
            return Ok(true);
        }
        self.faulted = None;
        self.start_session(self.args.timeline_base)?;
        eprintln!("vkcuda: the fix runs");
        Ok(true)
    }

    /// The driver lost the Vulkan device (`lost`), the producer in a child:
    /// the session ends, the device is made again on the same instance and
    /// window (the window keeps its last frame meanwhile), and a new session
    /// goes on with a new child.
    fn remake(&mut self, lost: anyhow::Error) -> Result<()> {
        eprintln!(
            "vkcuda: {}\nvkcuda: making the Vulkan device again; the run goes on",
            for_people(&format!("{lost:#}"))
        );
        let run = self.run.take().ok_or_else(|| anyhow!("no interop running"))?;
        // Its frames in flight went with the device: the error it ends with is the loss, said above.
        if let Ok(SessionEnd { stopped, .. }) = run.end(&mut self.screen.presenter, Err::<(), _>(lost)) {
            self.absorb(stopped);
        }
        self.finish_snapshots();
        self.held = None;
        let device = self.gpu.device.clone();
        self.gpu = self.screen.remake_device(&self.args.device_choice(), &device)?;
        drop(device);
        self.remakes.made();
        self.start_session(self.args.timeline_base)
    }

    /// Starts a session at the window's size (or `--size`), its timelines from `base`.
    fn start_session(&mut self, base: u64) -> Result<()> {
        let e = self.screen.presenter.extent();
        let size = self.args.size_or(Size { width: e.width, height: e.height });
        let spec = self.args.spec_reloading(&self.gpu, &self.director, self.reload.as_ref())?;
        // Frame numbers restart with the new session.
        self.reload.iter().for_each(|r| r.link().forget_swap());
        let run = Session::start(&self.gpu, &spec, self.args.frame_desc(size), base)?;
        self.screen.presenter.bind_shared(run.frames())?;
        self.run = Some(run);
        Ok(())
    }

    /// Whether the viewer has waited [`STALL`] for a frame.
    fn stuck(&self) -> bool {
        self.held.as_ref().is_some_and(|h| h.said)
    }
    /// Recreates the swapchain for the window's size; with `--size window`,
    /// rebuilds the interop at that size too (timeline values keep rising).
    fn rebuild(&mut self) -> Result<()> {
        let run = self.run.as_mut().ok_or_else(|| anyhow!("no interop running"))?;
        let Fitted { done, fitted } = self.screen.fit(run)?;
        done.into_iter().for_each(|c| record(&mut self.completed, c));
        if !fitted {
            return Ok(()); // minimized: stay stale until restored
        }
        let e = self.screen.presenter.extent();
        let wanted = Size { width: e.width, height: e.height };
        if self.args.size == SizeArg::Window && run.size() != wanted {
            let old = self.run.take().ok_or_else(|| anyhow!("no interop running"))?;
            let stopped = old.end(&mut self.screen.presenter, Ok(()))?.stopped;
            let base = stopped.next_base;
            self.absorb(stopped);
            self.finish_snapshots();
            self.start_session(base)?;
        }
        // The frame moved in the window (or changed size): where is the pointer now?
        self.pointer_changed();
        Ok(())
    }

    fn absorb(&mut self, stopped: Stopped) {
        self.lead = self.lead.max(stopped.lead);
        let report = stopped.report;
        self.report.frames += report.frames;
        // Producer frame numbers restart with each session: renumber after the earlier ones.
        let offset = self.report.frames - report.frames;
        report.timings.iter().for_each(|(f, t)| self.report.timings.push(offset + f, *t));
        self.report.cpu_per_frame = report.cpu_per_frame;
        // Frame numbers restart with each session: latency is a headless measurement.
        stopped.drained.into_iter().for_each(|c| record(&mut self.completed, c));
    }

    fn finish_snapshots(&mut self) {
        if let Some(mut r) = self.screen.presenter.snapshot.take() {
            let read = r.finish();
            if let Some(sink) = self.snapshots.take() {
                self.sink.merge(sink.finish().with_readback(read));
            }
        }
    }

    fn key(&mut self, event: &KeyEvent) -> Result<bool> {
        if event.state != ElementState::Pressed {
            return Ok(true);
        }
        // The director's keys, by the names a browser gives them (the browser view shares them).
        let named = match event.logical_key.as_ref() {
            Key::Named(NamedKey::Space) => " ",
            Key::Named(NamedKey::ArrowRight) => "ArrowRight",
            Key::Named(NamedKey::ArrowLeft) => "ArrowLeft",
            Key::Character(c) => c,
            _ => "",
        };
        match event.logical_key.as_ref() {
            _ if self.director.act(named) => {}
            Key::Named(NamedKey::Escape) => self.quit = true,
            Key::Named(NamedKey::F1) => self.show_stats = !self.show_stats,
            Key::Character("v") | Key::Character("V") => {
                let mode = self.screen.presenter.cycle_mode();
                eprintln!("vkcuda: present mode {mode}");
                self.screen.mark_stale();
            }
            Key::Character("s") | Key::Character("S") => self.snapshot()?,
            Key::Character("e") | Key::Character("E") => self.screen.presenter.change_exposure(2.0),
            Key::Character("d") | Key::Character("D") => self.screen.presenter.change_exposure(0.5),
            Key::Character("r") | Key::Character("R") => self.reload.iter().for_each(KernelReload::reload),
            _ => return Ok(true),
        }
        self.last_title = Instant::now() - Duration::from_secs(1);
        self.update_title();
        Ok(true)
    }

    /// Asks for the next frame to be written as PNG (through the headless writer).
    fn snapshot(&mut self) -> Result<()> {
        if self.screen.presenter.snapshot.is_none() {
            if let Err(e) = prepare_out_dir(&self.args.out) {
                eprintln!("vkcuda: cannot save: {e}");
                return Ok(());
            }
            // No session while a kernel's fault is shown: nothing new to save.
            let Some(run) = self.run.as_ref() else { return Ok(()) };
            let extent = vk::Extent2D { width: run.size().width, height: run.size().height };
            let shot = Shot {
                extent,
                format: self.args.format,
                pixels: Pixels::Rendered,
                first: self.director.first(),
            };
            let sink = png_sink(&self.args.out, self.args.reference());
            let slots = run.slots();
            let recipient = sink.recipient(Some(self.director.clone()))?;
            self.screen.presenter.snapshot =
                Some(Readback::new(self.gpu.device.clone(), shot, slots, recipient)?);
            self.snapshots = Some(sink);
        }
        self.screen.presenter.request_snapshot();
        Ok(())
    }

    /// Tells the director where the pointer is over the frame, for the next frames.
    fn pointer_changed(&self) {
        let frame = self.director.current().scene;
        let frame = vk::Extent2D { width: frame.width, height: frame.height };
        let at = self.cursor.and_then(|c| frame_pixel(self.screen.presenter.extent(), frame, c));
        self.director.set_pointer(Pointer { at, buttons: self.buttons });
    }

    fn update_title(&mut self) {
        let now = Instant::now();
        if now.duration_since(self.last_title) < Duration::from_millis(250) {
            return;
        }
        self.last_title = now;
        let spec = self.director.current();
        let paused = if self.director.paused() { " (paused)" } else { "" };
        // What renders: the scene, or the kernel file and the version running; a
        // compile error of the last 10 s after it.
        let (what, failed) = match (&self.reload, &self.args.kernel) {
            (Some(r), Some(file)) => {
                let name = file
                    .file_name()
                    .map_or_else(|| file.display().to_string(), |n| n.to_string_lossy().into());
                let failure = r.failure().filter(|f| f.at.elapsed() < Duration::from_secs(10));
                (format!("{name} v{}", r.link().version()), failure.map(|f| format!(" | {}", f.first_line)))
            }
            _ => (spec.scene.kind.to_string(), None),
        };
        let failed = match &self.faulted {
            Some((why, _)) => Some(format!(" | {why} | save a fix to go on")),
            None => failed,
        };
        let failed = failed.unwrap_or_default();
        let failed = match self.held.as_ref().filter(|h| h.said) {
            Some(h) => format!(
                "{failed} | frame {} not finished after {} s: Esc quits",
                h.frame,
                h.since.elapsed().as_secs()
            ),
            None => failed,
        };
        let title = if self.show_stats {
            let run = self.run.as_ref();
            let skip = self.completed.len().saturating_sub(120);
            let vulkan =
                median(&self.completed.iter().skip(skip).map(|(_, c)| c.gpu_time).collect::<Vec<_>>());
            let render = run.map(|r| r.render_time());
            format!(
                "vkcuda — {} {}x{} {} {} exposure {} tick {} cost {}{paused} | {} fps | {} {} | Vulkan {}{} | {} | {} producer | sync {}{failed}",
                what,
                spec.scene.width,
                spec.scene.height,
                self.args.format,
                self.args.layout,
                self.screen.presenter.exposure(),
                spec.tick,
                spec.scene.cost,
                self.shown_at.len(),
                match run.map(Session::producer) {
                    Some(ProducerId { renders: Renders::Cuda, place: Place::InProcess }) => "CUDA",
                    _ => "CPU",
                },
                micros(render),
                micros(vulkan),
                match self.screen.presenter.through_cpu() {
                    true => format!(" + readback | CPU present {}", micros(Some(self.screen.presenter.put_time()))),
                    false => String::new(),
                },
                self.screen.presenter.mode(),
                run.map_or_else(|| "?".to_string(), |r| r.producer().to_string()),
                self.args.sync,
            )
        } else {
            format!("vkcuda — {what}{paused}{failed}")
        };
        self.screen.window.set_title(&title);
    }

    /// Stops the interop, writes pending snapshots, and summarizes.
    /// `error`: the viewer's own, if it failed.
    fn shutdown(&mut self, caught: &AtomicUsize, error: Option<anyhow::Error>) -> Result<Summary> {
        let run = match (self.run.take(), error) {
            (Some(run), error) => (run, error),
            // Quit while a kernel's fault was shown: the run ends with it.
            (None, Some(e)) => return Err(e),
            (None, None) => bail!("no interop running"),
        };
        let (run, error) = run;
        let (size, producer) = (run.size(), run.producer());
        if self.stuck() {
            // Nothing will finish those frames: don't wait for them, nor the producer for its stream.
            run.abandon();
        }
        let stopped = match run.end(&mut self.screen.presenter, error.map_or(Ok(()), Err)) {
            Ok(ended) => ended.stopped,
            Err(e) => {
                self.finish_snapshots();
                return Err(e.into());
            }
        };
        self.absorb(stopped);
        self.finish_snapshots();
        if let Some(lead) = self.lead {
            let frames = if lead == 1 { "frame" } else { "frames" };
            eprintln!("vkcuda: paced to the screen: the producer was at most {lead} {frames} ahead of it");
        }
        if let Some(e) = &self.sink.error {
            return Err(anyhow!("{e}"));
        }
        let warmup = warmup_frames(self.args.frame_count());
        let consumed = Consumed {
            frames: self.consumed,
            total: self.consumed,
            steady: self.steady_start.map_or(Duration::ZERO, |t| t.elapsed()),
            steady_frames: self.consumed.saturating_sub(warmup),
            completed: std::mem::take(&mut self.completed),
            cpu_per_frame: self.meter.per_frame(self.consumed),
            footprint: None,
        };
        let validation = self.gpu.device.validation();
        let report = std::mem::take(&mut self.report);
        let measured = Measured { consumed, report, producer: MadeBy::Producer(producer) };
        Ok(summarize(measured, self.sink.clone(), size, &validation, caught))
    }
}

/// The window of `attributes` with its device and presenter, as the arguments ask.
fn open_screen(
    event_loop: &ActiveEventLoop,
    attributes: WindowAttributes,
    args: &Args,
) -> Result<OpenedScreen> {
    let device = args.device_choice();
    let instance = |extensions: &[&CStr]| gpu::vulkan_instance(args.validate, extensions);
    let spec = PresentSpec {
        device: &device,
        instance: &instance,
        path: args.present,
        mode: args.present_mode,
        slots: args.in_flight(),
    };
    let opened = Screen::open(event_loop, attributes, &spec)?;
    eprintln!("vkcuda: {}", opened.line.worded(&crate::words::Flags));
    Ok(opened)
}

/// The first frame of swapped-in version `s` is on screen (the last of
/// `shown`, when the frames of the last second went on screen): how long after
/// the change, as the compile plus the rest (in frames), and how many frames
/// went on screen since the compile ended.
fn report_swap(s: &Swapped, shown: &VecDeque<Instant>) {
    let interval = match (shown.front(), shown.back()) {
        (Some(a), Some(b)) if shown.len() > 1 => b.duration_since(*a) / (shown.len() as u32 - 1),
        _ => Duration::ZERO,
    };
    let Some(&at) = shown.back() else { return };
    let since = shown.iter().filter(|t| **t > s.made.ready).count();
    // Beside the compile: everything else from the change to the screen.
    let on_screen = at.duration_since(s.made.changed);
    let after = on_screen.saturating_sub(s.made.compile);
    let frames = if interval.is_zero() { 0.0 } else { after.as_secs_f64() / interval.as_secs_f64() };
    // The frame periods that ended with this frame: the new kernel's, and the one the compile ended in.
    let two = shown.len().checked_sub(3).and_then(|i| shown.get(i)).map(|a| at.duration_since(*a));
    eprintln!(
        "vkcuda: kernel v{} on screen {:.0?} after the change: compile {:.0?}, then {:.1?} ({frames:.1} frames of \
         {interval:.1?}; the {} frame shown since the compile; the last two frame periods {:.1?})",
        s.version,
        on_screen,
        s.made.compile,
        after,
        ordinal(since),
        two.unwrap_or_default(),
    );
}

/// 1st, 2nd, 3rd, 4th...
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// Keeps a consumed frame, numbered in consumption order (frame numbers
/// restart with each session).
fn record(completed: &mut Samples<Completed>, c: Completed) {
    let frame = completed.next_frame();
    completed.push(frame, Completed { frame, ..c });
}
