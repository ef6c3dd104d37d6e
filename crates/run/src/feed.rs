//! Frames a caller hands in instead of frames rendered: what the Python
//! module's `show` feeds. The caller puts each frame's pixels, already in the
//! shared frames' format, into a [`Mailbox`]; the fed producer's thread takes
//! them out one at a time, once the consumer has released the staging buffer
//! they go into, and signals "rendered" from the host, as the CPU producer
//! does.
//!
//! The mailbox holds one frame. Newest wins: a frame put while another is
//! still waiting replaces it (counted), so a caller never waits for the
//! consumer. Every frame: the caller waits until the frame before was taken,
//! so the consumer paces the caller (a dump that must keep every frame).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::{ensure, Result};

use crate::producer::cpu::host_loop;
use crate::producer::{Job, Report};
use vkcuda::interop::SharedFrames;
use vkcuda::vk::memory::Buffer;

/// How often a wait in the mailbox looks whether it should give up.
const CHECK: Duration = Duration::from_millis(50);

/// What a [`Mailbox`] has seen so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Frames put.
    pub put: u64,
    /// Frames the producer took.
    pub taken: u64,
    /// Frames replaced by a newer one before the producer took them.
    pub replaced: u64,
}

#[derive(Default)]
struct State {
    pending: Option<Vec<u8>>,
    closed: bool,
    counts: Counts,
}

/// One frame between a caller and the fed producer; see the module docs.
#[derive(Default)]
pub struct Mailbox {
    state: Mutex<State>,
    changed: Condvar,
    /// The fed producer's thread has left its loop: it will take nothing more.
    ended: AtomicBool,
}

impl std::fmt::Debug for Mailbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailbox").field("counts", &self.counts()).field("ended", &self.ended()).finish()
    }
}

impl Mailbox {
    /// An empty, open mailbox.
    pub fn new() -> Arc<Self> {
        Arc::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts a frame's pixels in. With `every`, first waits until the frame
    /// before was taken, giving the pixels back (`Ok(Some)`) once `give_up()`
    /// says so; otherwise replaces a frame still waiting. An error once closed.
    pub fn put(&self, pixels: Vec<u8>, every: bool, give_up: &dyn Fn() -> bool) -> Result<Option<Vec<u8>>> {
        let mut state = self.lock();
        while every && state.pending.is_some() && !state.closed {
            if give_up() {
                return Ok(Some(pixels));
            }
            state = self.changed.wait_timeout(state, CHECK).unwrap_or_else(|p| p.into_inner()).0;
        }
        ensure!(!state.closed, "the frames' consumer has stopped");
        if state.pending.replace(pixels).is_some() {
            state.counts.replaced += 1;
        }
        state.counts.put += 1;
        self.changed.notify_all();
        Ok(None)
    }

    /// No more frames: the producer takes the one still waiting, then ends.
    pub fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    /// The next frame, waiting for one; `None` once closed and empty, or once `stop()` says so.
    fn take(&self, stop: &dyn Fn() -> bool) -> Option<Vec<u8>> {
        let mut state = self.lock();
        loop {
            if let Some(pixels) = state.pending.take() {
                state.counts.taken += 1;
                self.changed.notify_all();
                return Some(pixels);
            }
            if state.closed || stop() {
                return None;
            }
            state = self.changed.wait_timeout(state, CHECK).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// Waits up to `within` for a change: a frame put or taken, or the close.
    pub fn wait_change(&self, seen: Counts, within: Duration) {
        let state = self.lock();
        if state.counts == seen && !state.closed {
            let _ = self.changed.wait_timeout(state, within);
        }
    }

    /// What the mailbox has seen so far.
    pub fn counts(&self) -> Counts {
        self.lock().counts
    }

    /// Whether the fed producer has ended: every frame it will make is made.
    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }
}

/// The fed producer: copies each frame taken from its [`Mailbox`] into
/// the staging buffer of its slot, for the consumer to upload.
pub struct FedProducer {
    shared: Arc<SharedFrames>,
    staging: Arc<Vec<Buffer>>,
    mailbox: Arc<Mailbox>,
}

impl FedProducer {
    /// Fills `staging[plan.image(g)]` from `mailbox` and signals `shared`'s timelines from the host.
    pub fn new(shared: Arc<SharedFrames>, staging: Arc<Vec<Buffer>>, mailbox: Arc<Mailbox>) -> Self {
        Self { shared, staging, mailbox }
    }

    /// The producer thread's loop: until the mailbox is closed and empty, or the run stops.
    pub fn run(self, job: &Job) -> Result<Report> {
        let control = &job.control;
        let result = host_loop(job, &self.shared, &self.staging, |_, pixels| {
            let stop = || control.failed();
            let Some(frame) = self.mailbox.take(&stop) else { return Ok(None) };
            ensure!(
                frame.len() == pixels.len(),
                "a fed frame has {} bytes, the shared frame {}",
                frame.len(),
                pixels.len()
            );
            pixels.copy_from_slice(&frame);
            Ok(Some(Duration::ZERO))
        });
        // After the last "produced" count: a consumer that sees `ended` sees every frame made.
        self.mailbox.ended.store(true, Ordering::Release);
        self.mailbox.close();
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    #[test]
    fn the_newest_frame_replaces_one_still_waiting() {
        let mailbox = Mailbox::new();
        mailbox.put(vec![1], false, &|| false).unwrap();
        mailbox.put(vec![2], false, &|| false).unwrap();
        assert_eq!(mailbox.counts(), Counts { put: 2, taken: 0, replaced: 1 });
        assert_eq!(mailbox.take(&|| false), Some(vec![2]));
        mailbox.close();
        assert_eq!(mailbox.take(&|| false), None, "closed and empty");
        assert!(mailbox.put(vec![3], false, &|| false).is_err(), "closed");
    }

    #[test]
    fn every_frame_waits_until_the_frame_before_is_taken() {
        let mailbox = Mailbox::new();
        mailbox.put(vec![1], true, &|| false).unwrap();
        let (tx, rx) = channel();
        let m = mailbox.clone();
        std::thread::spawn(move || {
            let _ = tx.send(matches!(m.put(vec![2], true, &|| false), Ok(None)));
        });
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err(), "put while frame 1 waits");
        assert_eq!(mailbox.take(&|| false), Some(vec![1]));
        assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(true));
        assert_eq!(mailbox.take(&|| false), Some(vec![2]));
        assert_eq!(mailbox.counts(), Counts { put: 2, taken: 2, replaced: 0 });
        assert_eq!(mailbox.put(vec![3], true, &|| false).unwrap(), None);
        assert_eq!(mailbox.put(vec![4], true, &|| true).unwrap(), Some(vec![4]), "given back on giving up");
    }

    #[test]
    fn a_closed_mailbox_still_gives_its_last_frame() {
        let mailbox = Mailbox::new();
        mailbox.put(vec![7], false, &|| false).unwrap();
        mailbox.close();
        assert_eq!(mailbox.take(&|| false), Some(vec![7]));
        assert_eq!(mailbox.take(&|| false), None);
        assert_eq!(mailbox.take(&|| true), None, "a stop ends the wait too");
    }
}
