//! One run of frames of one size and format: a run-layer session fed from a
//! [`vkcuda_run::running::feed::Mailbox`], consumed on a thread of its own into the offscreen target
//! and, when dumping, the writer pool. A new size or format ends the run and
//! starts the next one, whose timelines count on from where this one ended.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use ash::vk;

use crate::spec::{fed_director, fed_spec, Ended, IN_FLIGHT};
use vkcuda::FrameDesc;
use vkcuda_run::base::inject::Inject;
use vkcuda_run::base::kinds::ConsumeKind;
use vkcuda_run::base::size::Size;
use vkcuda_run::frames::consumer::ExtraSync;
use vkcuda_run::frames::gpu::Gpu;
use vkcuda_run::present::offscreen::Offscreen;
use vkcuda_run::present::readback::{Readback, Shot};
use vkcuda_run::running::feed::Feed;
use vkcuda_run::running::session::Session;
use vkcuda_run::running::setup::RunSpec;
use vkcuda_run::running::sink::{PngSink, Reference};

/// Where a run's frames go.
#[derive(Clone, Debug)]
pub struct Output {
    /// The folder every frame is written to (PNG, EXR for floats); `None`: nowhere.
    pub dir: Option<PathBuf>,
    /// Writer threads.
    pub workers: usize,
}

/// Who consumes a run's frames.
enum Consumer {
    /// A thread of its own (headless).
    Thread(JoinHandle<Result<Ended>>),
    /// The window thread, for window `id`.
    Window { id: u64, closed: Arc<AtomicBool> },
}

/// A running run; see the module docs.
pub struct Run {
    /// The shared frames' format, size and layout.
    pub desc: FrameDesc,
    /// Where `show` puts frames.
    pub feed: Feed,
    consumer: Option<Consumer>,
}

impl Run {
    /// Starts the consumer thread of frames `desc` fed from `feed`, numbered
    /// from `first`, with timelines from `base`.
    pub fn start(
        gpu: Arc<Gpu>,
        desc: FrameDesc,
        feed: Feed,
        output: Output,
        (first, base): (u64, u64),
    ) -> Result<Self> {
        let spec = fed_spec(desc, feed.clone());
        let size = Size { width: desc.extent.width, height: desc.extent.height };
        let thread = std::thread::Builder::new().name("vkcuda consumer".into()).spawn(move || {
            let result = consume(&gpu, &spec, size, (first, base), &output);
            if let Some(feed) = &spec.feed {
                feed.close();
            }
            result
        })?;
        Ok(Self { desc, feed, consumer: Some(Consumer::Thread(thread)) })
    }

    /// Starts consuming frames `desc` fed from `feed` in window `id` (see [`Run::start`]).
    pub fn start_in(
        window: (u64, Arc<AtomicBool>),
        desc: FrameDesc,
        feed: Feed,
        at: (u64, u64),
    ) -> Result<Self> {
        let (id, closed) = window;
        let f = feed.clone();
        crate::window::ask(|reply| crate::window::Command::Start { id, desc, feed: f, at, reply })?;
        Ok(Self { desc, feed, consumer: Some(Consumer::Window { id, closed }) })
    }

    /// Whether this run takes frames from GPU memory.
    pub fn on_device(&self) -> bool {
        matches!(self.feed, Feed::Device { .. })
    }

    /// Whether frames `desc` from host or (`device`) GPU memory go to this
    /// run: it has their size, format and feed, and goes on.
    pub fn serves(&self, desc: FrameDesc, device: bool) -> bool {
        self.desc == desc && self.on_device() == device && !self.stopped()
    }

    /// Whether the consumer thread has ended (it failed, or the run was finished).
    pub fn stopped(&self) -> bool {
        match &self.consumer {
            None => true,
            Some(Consumer::Thread(t)) => t.is_finished(),
            Some(Consumer::Window { closed, .. }) => closed.load(Ordering::Acquire),
        }
    }

    /// Whether the run has ended or is ending: [`Run::stopped`], or its
    /// producer has ended (the consumer follows); its error is then
    /// [`Run::finish`]'s. Not for every call: it takes the feed's locks.
    pub fn ending(&self) -> bool {
        let line_closed = matches!(&self.feed, Feed::Device { line, .. } if line.closed());
        line_closed || self.feed.ended() || self.stopped()
    }

    /// Ends the run once every frame put is consumed and written.
    pub fn finish(mut self) -> Result<Ended> {
        self.feed.close();
        match self.consumer.take().ok_or_else(|| anyhow!("run already finished"))? {
            Consumer::Thread(thread) => thread.join().map_err(|_| anyhow!("the consumer thread panicked"))?,
            // A window its user closed has stopped its session already.
            Consumer::Window { closed, .. } if closed.load(Ordering::Acquire) => Ok(Ended::default()),
            Consumer::Window { id, .. } => {
                crate::window::ask(|reply| crate::window::Command::Finish { id, reply })
            }
        }
    }
}

impl Drop for Run {
    /// A run dropped unfinished (an error on the way) still ends its thread first.
    fn drop(&mut self) {
        self.feed.close();
        match self.consumer.take() {
            Some(Consumer::Thread(t)) => {
                let _ = t.join();
            }
            Some(Consumer::Window { id, closed }) if !closed.load(Ordering::Acquire) => {
                let _ = crate::window::ask(|reply| crate::window::Command::Finish { id, reply });
            }
            Some(Consumer::Window { .. }) => {}
            None => {}
        }
    }
}

/// The consumer thread: a session of `spec` at `size`, every frame the
/// producer makes consumed (copied, and read back when writing), then the stop.
fn consume(
    gpu: &Gpu,
    spec: &RunSpec,
    size: Size,
    (first, base): (u64, u64),
    output: &Output,
) -> Result<Ended> {
    let device = gpu.device.clone();
    let feed = spec.feed.clone().ok_or_else(|| anyhow!("a fed run without a feed"))?;
    let director = fed_director(size, first);
    let extent = vk::Extent2D { width: size.width, height: size.height };
    let sink =
        output.dir.as_ref().map(|dir| PngSink::new(dir, output.workers, Reference::None, Inject::default()));
    let readback = match &sink {
        Some(sink) => {
            let shot = Shot { extent, format: spec.format, drawn: false, first: director.first() };
            Some(Readback::new(device.clone(), shot, IN_FLIGHT, sink.recipient(director.clone())?)?)
        }
        None => None,
    };
    let desc = vkcuda_run::running::setup::frame_desc(spec, size);
    let mut offscreen = Offscreen::new(device, (desc, extent), (ConsumeKind::Copy, 1, 1), readback)?;
    let mut session = Session::start(gpu, spec, &director, size, base)?;
    // The copy may be a shader's, whose descriptor sets name the session's buffers.
    let outcome = offscreen.bind(session.frames()).and_then(|()| follow(&mut session, &mut offscreen, &feed));
    let ended = session.end(&mut offscreen, outcome);
    let read = offscreen.finish();
    let sink = sink.map(|s| s.finish().with_readback(read)).unwrap_or_default();
    let ((), stopped) = ended?;
    if let Some(e) = sink.error {
        bail!("{e}");
    }
    Ok(Ended { next_base: stopped.next_base, consumed: stopped.consumed, written: sink.written })
}

/// Consumes each frame once the producer has made it, until it has made its last.
fn follow(session: &mut Session, offscreen: &mut Offscreen, mailbox: &Feed) -> Result<()> {
    // The device producer says when it made a frame; the host producer's is polled for.
    let told = matches!(mailbox, Feed::Device { .. });
    loop {
        // Counts first, then `ended`, then "produced": a frame made after the counts
        // were read changes them, so the wait below does not miss it; once `ended`
        // is seen, the producer's count is final.
        let seen = mailbox.counts();
        let ended = mailbox.ended();
        if session.ready() {
            session.submit(offscreen, ExtraSync::default())?;
            continue;
        }
        if ended {
            break;
        }
        // A frame taken but not yet made is moments away; otherwise wait for a change.
        let within = match !told && seen.taken > session.produced() {
            true => Duration::from_micros(200),
            false => Duration::from_millis(100),
        };
        mailbox.wait_change(seen, within);
    }
    if session.producer_failed() {
        // The producer's error, which the session's end returns, is the cause.
        return Err(vkcuda::Error::Cancelled { what: format!("frame {}", session.next()) }.into());
    }
    session.drain(offscreen)?;
    Ok(())
}
