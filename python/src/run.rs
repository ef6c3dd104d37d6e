//! One run of frames of one size and format: a run-layer fed run
//! ([`vkcuda_run::drive::feed::run`]) on a thread of its own, or in a window. A new size or format ends the run and
//! starts the next one, whose timelines count on from where this one ended.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{anyhow, Result};

use crate::window::Opened;
use vkcuda::FrameDesc;
use vkcuda_run::drive::feed::run::{Ended, Fed, Output, Progress, StartAt};
use vkcuda_run::drive::feed::Feed;
use vkcuda_run::frames::gpu::Gpu;

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
    /// What the consumer has consumed and written so far.
    pub progress: Arc<Progress>,
    consumer: Option<Consumer>,
}

impl Run {
    /// Starts the consumer thread of frames `desc` fed from `feed`, numbered
    /// and with timelines as `at` says.
    pub fn start(gpu: Arc<Gpu>, desc: FrameDesc, feed: Feed, output: Output, at: StartAt) -> Result<Self> {
        let progress = Arc::new(Progress::default());
        let fed = Fed { feed: feed.clone(), progress: progress.clone() };
        let thread = vkcuda_run::drive::feed::run::spawn(gpu, desc, fed, output, at)?;
        Ok(Self { desc, feed, progress, consumer: Some(Consumer::Thread(thread)) })
    }

    /// Starts consuming frames `desc` fed from `feed` in `window` (see [`Run::start`]).
    pub fn start_in(window: &Opened, desc: FrameDesc, feed: Feed, at: StartAt) -> Result<Self> {
        let (id, closed) = (window.id, window.closed.clone());
        let progress = Arc::new(Progress::default());
        let fed = Fed { feed: feed.clone(), progress: progress.clone() };
        crate::window::ask(|reply| crate::window::Command::Start { id, desc, fed, at, reply })?;
        Ok(Self { desc, feed, progress, consumer: Some(Consumer::Window { id, closed }) })
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
