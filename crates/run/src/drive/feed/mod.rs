//! Frames a caller hands in instead of frames rendered: what the Python
//! module's `show` feeds. The caller puts each frame into a [`Mailbox`]; a
//! fed producer's thread takes them out one at a time and makes them frames
//! of the plan:
//! - [`host::FedProducer`]: pixels in host memory, already in the shared
//!   frames' format, copied into a staging buffer the consumer uploads;
//!   "rendered" is signalled from the host, as the CPU producer does;
//! - [`device::FedCudaProducer`]: a slot of [`device::DeviceStaging`] (GPU
//!   memory the caller packed the frame into, on its own stream), copied
//!   into the shared buffer on the producer's stream, which signals "rendered".
//!   Most GPU frames skip the mailbox: the caller packs them straight into
//!   the shared buffer once Vulkan has released it ([`line::Line::make`]).
//!
//! The mailbox holds one frame. Newest wins: a frame put while another is
//! still waiting replaces it (counted, and handed back to the caller), so a
//! caller never waits for the consumer. Every frame: the caller waits until
//! the frame before was taken, so the consumer paces the caller (a dump that
//! must keep every frame).

pub mod client;
pub mod device;
pub mod host;
pub mod line;
pub mod run;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::{ensure, Result};

use crate::base::kinds::{ProducerId, Renders};

/// How often a wait in the mailbox looks whether it should give up.
const CHECK: Duration = Duration::from_millis(50);

/// Where a fed run's frames come from ([`crate::drive::setup::ProducerSpec::Fed`]).
#[derive(Clone, Debug)]
pub enum Feed {
    /// Pixels in host memory, in the frames' format.
    Host(Arc<Mailbox>),
    /// GPU memory: frames the caller packs straight into the shared
    /// buffers ([`line::Line::make`]), or slots it packed while the buffer
    /// was still Vulkan's.
    Device {
        /// The slots put, in order.
        mailbox: Arc<Mailbox<usize>>,
        /// The slots.
        staging: Arc<device::DeviceStaging>,
        /// Who makes the next frame.
        line: Arc<line::Line>,
    },
}

impl Feed {
    /// The producer it feeds: host frames' or GPU frames', in this process.
    pub fn producer(&self) -> ProducerId {
        match self {
            Feed::Host(_) => ProducerId::in_process(Renders::Fed),
            Feed::Device { .. } => ProducerId::in_process(Renders::FedFromCuda),
        }
    }

    /// Whether the producer has ended ([`Mailbox::ended`]).
    pub fn ended(&self) -> bool {
        match self {
            Feed::Host(m) => m.ended(),
            Feed::Device { mailbox, .. } => mailbox.ended(),
        }
    }

    /// What the mailbox has seen so far.
    pub fn counts(&self) -> Counts {
        match self {
            Feed::Host(m) => m.counts(),
            Feed::Device { mailbox, .. } => mailbox.counts(),
        }
    }

    /// Waits up to `within` for a change ([`Mailbox::wait_change`]).
    pub fn wait_change(&self, seen: Counts, within: Duration) {
        match self {
            Feed::Host(m) => m.wait_change(seen, within),
            Feed::Device { mailbox, .. } => mailbox.wait_change(seen, within),
        }
    }

    /// No more frames ([`Mailbox::close`]); a device slot left waiting is freed.
    pub fn close(&self) {
        match self {
            Feed::Host(m) => m.close(),
            Feed::Device { mailbox, .. } => mailbox.close(),
        }
    }
}

/// What a [`Mailbox`] has seen so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Frames put.
    pub put: u64,
    /// Frames the producer took.
    pub taken: u64,
    /// Frames replaced by a newer one before the producer took them.
    pub replaced: u64,
    /// Frames the device producer has made (counted after its "produced" count rises).
    pub made: u64,
}

struct State<T> {
    pending: Option<T>,
    closed: bool,
    counts: Counts,
}

impl<T> State<T> {
    /// Puts `frame` (or nothing) in place of the frame waiting, which is
    /// returned and counted as replaced.
    fn replace_pending(&mut self, frame: Option<T>) -> Option<T> {
        let replaced = std::mem::replace(&mut self.pending, frame);
        if replaced.is_some() {
            self.counts.replaced += 1;
        }
        replaced
    }
}

/// What [`Mailbox::put`] did with a frame.
#[derive(Debug, PartialEq, Eq)]
pub enum Put<T> {
    /// Put in; the frame it replaced, if one was still waiting.
    Done(Option<T>),
    /// Not put: the wait for the frame before was given up; here it is back.
    GaveUp(T),
}

/// One frame between a caller and a fed producer; see the module docs.
pub struct Mailbox<T = Vec<u8>> {
    state: Mutex<State<T>>,
    changed: Condvar,
    /// The fed producer's thread has left its loop: it will take nothing more.
    ended: AtomicBool,
}

impl<T> std::fmt::Debug for Mailbox<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailbox").field("counts", &self.counts()).field("ended", &self.ended()).finish()
    }
}

impl<T> Mailbox<T> {
    /// An empty, open mailbox.
    pub fn new() -> Arc<Self> {
        let state = State { pending: None, closed: false, counts: Counts::default() };
        Arc::new(Self { state: Mutex::new(state), changed: Condvar::new(), ended: AtomicBool::new(false) })
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts a frame in. With `every`, first waits until the frame before
    /// was taken, giving the frame back once `give_up()` says so; otherwise
    /// replaces a frame still waiting. An error once closed.
    pub fn put(&self, frame: T, every: bool, give_up: &dyn Fn() -> bool) -> Result<Put<T>> {
        let mut state = self.lock();
        while every && state.pending.is_some() && !state.closed {
            if give_up() {
                return Ok(Put::GaveUp(frame));
            }
            state = self.changed.wait_timeout(state, CHECK).unwrap_or_else(|p| p.into_inner()).0;
        }
        ensure!(!state.closed, "the frames' consumer has stopped");
        let replaced = state.replace_pending(Some(frame));
        state.counts.put += 1;
        self.changed.notify_all();
        Ok(Put::Done(replaced))
    }

    /// No more frames: the producer takes the one still waiting, then ends.
    pub fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    /// The next frame, waiting for one; `None` once closed and empty, or once `stop()` says so.
    fn take(&self, stop: &dyn Fn() -> bool) -> Option<T> {
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

    /// The producer made a frame (after its "produced" count rose): a
    /// consumer waiting in [`Mailbox::wait_change`] wakes at once.
    fn made(&self) {
        self.lock().counts.made += 1;
        self.changed.notify_all();
    }

    /// The fed producer has left its loop, after its last "produced" count:
    /// a consumer that sees [`Mailbox::ended`] sees every frame made. Closes
    /// the mailbox, so a caller's next put fails.
    fn end(&self) {
        self.ended.store(true, Ordering::Release);
        self.close();
    }

    /// Takes the frame still waiting, if any (a stop: the caller frees what it holds).
    pub fn take_left(&self) -> Option<T> {
        self.lock().pending.take()
    }

    /// Whether a frame is waiting to be taken.
    fn has_pending(&self) -> bool {
        self.lock().pending.is_some()
    }

    /// Waits until a frame is waiting (`true`), or until the mailbox is closed
    /// and empty or `stop()` says so (`false`); takes nothing.
    fn wait_pending(&self, stop: &dyn Fn() -> bool) -> bool {
        let mut state = self.lock();
        loop {
            if state.pending.is_some() {
                return true;
            }
            if state.closed || stop() {
                return false;
            }
            state = self.changed.wait_timeout(state, CHECK).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// The frame waiting, if any, taken without waiting.
    fn take_now(&self) -> Option<T> {
        let mut state = self.lock();
        let frame = state.pending.take()?;
        state.counts.taken += 1;
        self.changed.notify_all();
        Some(frame)
    }

    /// The caller is about to make a frame itself: the frame still waiting,
    /// if any, is replaced (given back).
    fn drop_pending(&self) -> Option<T> {
        let mut state = self.lock();
        let replaced = state.replace_pending(None);
        if replaced.is_some() {
            self.changed.notify_all();
        }
        replaced
    }

    /// The caller made a frame itself, past the mailbox: it counts as put,
    /// taken and made, and replaces the frame still waiting, if any (given back).
    fn made_directly(&self) -> Option<T> {
        let mut state = self.lock();
        let replaced = state.replace_pending(None);
        state.counts.put += 1;
        state.counts.taken += 1;
        state.counts.made += 1;
        self.changed.notify_all();
        replaced
    }
}

/// Checks that a fed frame fills the frame it becomes.
fn check_size(fed: usize, frame: usize) -> Result<()> {
    ensure!(fed == frame, "a fed frame has {fed} bytes, the shared frame {frame}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;

    #[test]
    fn the_newest_frame_replaces_one_still_waiting() {
        let mailbox = Mailbox::new();
        assert_eq!(mailbox.put(vec![1], false, &|| false).unwrap(), Put::Done(None));
        assert_eq!(mailbox.put(vec![2], false, &|| false).unwrap(), Put::Done(Some(vec![1])), "handed back");
        assert_eq!(mailbox.counts(), Counts { put: 2, taken: 0, replaced: 1, made: 0 });
        assert_eq!(mailbox.take(&|| false), Some(vec![2]));
        mailbox.close();
        assert_eq!(mailbox.take(&|| false), None, "closed and empty");
        assert!(mailbox.put(vec![3], false, &|| false).is_err(), "closed");
    }

    #[test]
    fn every_frame_waits_until_the_frame_before_is_taken() {
        let mailbox = Mailbox::<Vec<u8>>::new();
        mailbox.put(vec![1], true, &|| false).unwrap();
        let (tx, rx) = channel();
        let m = mailbox.clone();
        std::thread::spawn(move || {
            let _ = tx.send(matches!(m.put(vec![2], true, &|| false), Ok(Put::Done(None))));
        });
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err(), "put while frame 1 waits");
        assert_eq!(mailbox.take(&|| false), Some(vec![1]));
        assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(true));
        assert_eq!(mailbox.take(&|| false), Some(vec![2]));
        assert_eq!(mailbox.counts(), Counts { put: 2, taken: 2, replaced: 0, made: 0 });
        assert_eq!(mailbox.put(vec![3], true, &|| false).unwrap(), Put::Done(None));
        assert_eq!(
            mailbox.put(vec![4], true, &|| true).unwrap(),
            Put::GaveUp(vec![4]),
            "given back on giving up"
        );
    }

    #[test]
    fn a_frame_made_wakes_a_waiting_consumer() {
        let mailbox = Mailbox::<usize>::new();
        let (tx, rx) = channel();
        let m = mailbox.clone();
        let seen = mailbox.counts();
        std::thread::spawn(move || {
            // Far longer than the receive below: only the notification ends it in time.
            m.wait_change(seen, Duration::from_secs(120));
            let _ = tx.send(m.counts().made);
        });
        mailbox.made();
        assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(1), "the consumer did not wake");
    }

    #[test]
    fn a_frame_made_directly_counts_as_put_taken_and_made_and_replaces_the_one_waiting() {
        let mailbox = Mailbox::<usize>::new();
        assert_eq!(mailbox.made_directly(), None, "nothing waited");
        mailbox.put(7, false, &|| false).unwrap();
        assert!(mailbox.has_pending());
        assert_eq!(mailbox.made_directly(), Some(7), "the slot waiting is given back");
        assert!(!mailbox.has_pending());
        assert_eq!(mailbox.counts(), Counts { put: 3, taken: 2, replaced: 1, made: 2 });
    }

    #[test]
    fn the_frame_waiting_is_dropped_before_a_frame_made_directly() {
        let mailbox = Mailbox::<usize>::new();
        assert_eq!(mailbox.drop_pending(), None, "nothing waited");
        mailbox.put(4, false, &|| false).unwrap();
        assert_eq!(mailbox.drop_pending(), Some(4), "the slot waiting is given back");
        assert_eq!(mailbox.counts(), Counts { put: 1, taken: 0, replaced: 1, made: 0 });
        assert_eq!(mailbox.made_directly(), None, "dropped already");
        assert_eq!(mailbox.counts(), Counts { put: 2, taken: 1, replaced: 1, made: 1 });
    }

    #[test]
    fn the_producer_waits_for_a_frame_without_taking_it() {
        let mailbox = Mailbox::<usize>::new();
        let (tx, rx) = channel();
        let m = mailbox.clone();
        std::thread::spawn(move || {
            let _ = tx.send(m.wait_pending(&|| false));
        });
        assert!(rx.recv_timeout(Duration::from_millis(100)).is_err(), "returned with nothing put");
        mailbox.put(3, false, &|| false).unwrap();
        assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(true));
        assert!(mailbox.has_pending(), "waiting took the frame");
        assert_eq!(mailbox.take_now(), Some(3));
        assert_eq!(mailbox.take_now(), None);
        assert_eq!(mailbox.counts().taken, 1);
        assert!(!mailbox.wait_pending(&|| true), "a stop ends the wait");
        mailbox.close();
        assert!(!mailbox.wait_pending(&|| false), "closed and empty");
    }

    #[test]
    fn a_closed_mailbox_still_gives_its_last_frame() {
        let mailbox = Mailbox::<Vec<u8>>::new();
        mailbox.put(vec![7], false, &|| false).unwrap();
        mailbox.close();
        assert_eq!(mailbox.take(&|| false), Some(vec![7]));
        assert_eq!(mailbox.take(&|| false), None);
        assert_eq!(mailbox.take(&|| true), None, "a stop ends the wait too");
    }
}
