//! The clients of a browser view and what each wants: the [`Watchers`] the
//! run's consumer asks which canvas sizes to draw, and the place each
//! client's newest encoded frame waits for its socket.
//!
//! Newest wins, per client: a client wants a frame while it has fewer than
//! [`MAX_UNACKED`] frames sent and not acknowledged, none waiting and none
//! being drawn or encoded. Its frame is drawn from the newest frame the run
//! has then; the frames the run made meanwhile are skipped for that client
//! alone. A client that stops reading stops wanting: the run never waits for it,
//! and it holds at most one encoded frame.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ash::vk;
use bytes::Bytes;
use tokio::sync::Notify;

use crate::encode::{encode, Mode};
use vkcuda_run::present::readback::ReadFrame;
use vkcuda_run::present::watch::Watchers;

/// Frames sent to a client and not yet acknowledged, at most.
pub const MAX_UNACKED: u32 = 2;
/// Frames drawn or encoding for a client at once, at most: encoded side by
/// side on two workers, a client's frames come twice as fast as one
/// encoder makes them.
pub const MAX_PREPARING: u32 = 2;
/// Clients connected at once, at most.
pub const MAX_CLIENTS: usize = 32;

/// A frame encoded for the wire: header and image (see [`crate::encode`]).
#[derive(Clone, Debug)]
pub struct Encoded {
    /// The run's frame.
    pub frame: u64,
    /// Header and payload.
    pub bytes: Bytes,
}

/// One client's state.
struct Client {
    /// The canvas size in device pixels; `None` until the page said it.
    canvas: Option<vk::Extent2D>,
    mode: Mode,
    /// Frames sent, not yet acknowledged.
    unacked: u32,
    /// Frames being drawn or encoded for it.
    preparing: u32,
    /// Its newest encoded frame, waiting for the socket.
    next: Option<Encoded>,
    /// The shortest time between two frames drawn for it (the page's display
    /// rate; `None`: as fast as it acknowledges), and when the last was drawn.
    interval: Option<Duration>,
    last_drawn: Option<Instant>,
    wake: Arc<Notify>,
    /// Frames sent, and the run's frames it did not get.
    sent: u64,
    skipped: u64,
    last_sent: Option<u64>,
    bytes: u64,
}

impl Client {
    /// Its waiting frame, if it may be sent now (counted as sent).
    fn take_next(&mut self) -> Option<Encoded> {
        if self.unacked >= MAX_UNACKED {
            return None;
        }
        let next = self.next.take()?;
        self.unacked += 1;
        self.sent += 1;
        self.bytes += next.bytes.len() as u64;
        self.skipped += self.last_sent.map_or(0, |l| next.frame.saturating_sub(l + 1));
        self.last_sent = Some(next.frame);
        Some(next)
    }

    fn wants(&self) -> bool {
        // Room for one more: sent but unacknowledged, waiting, and being made count.
        let held = self.unacked + self.preparing + u32::from(self.next.is_some());
        let due = match (self.interval, self.last_drawn) {
            (Some(interval), Some(last)) => last.elapsed() >= interval,
            _ => true,
        };
        self.canvas.is_some() && self.preparing < MAX_PREPARING && held < MAX_UNACKED + 1 && due
    }
}

/// What one client has been sent.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct ClientStats {
    /// Frames sent.
    pub sent: u64,
    /// The run's frames between those it got (newest wins).
    pub skipped: u64,
    /// Bytes sent.
    pub bytes: u64,
}

/// An encode job: a frame drawn at one size and the clients it goes to.
struct Job {
    frame: ReadFrame,
    to: Vec<(u64, Mode)>,
}

#[derive(Default)]
struct State {
    clients: BTreeMap<u64, Client>,
    joined: u64,
    /// Encode jobs dropped because every worker was busy.
    dropped: u64,
}

/// The clients, and the encoder workers their frames go through.
pub struct Hub {
    state: Mutex<State>,
    /// Signalled when a frame arrives or is acknowledged, and when a client leaves.
    arrived: Condvar,
    exposure: AtomicU32,
    jobs: Mutex<Option<SyncSender<Job>>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

impl Hub {
    /// A hub with `workers` encoder threads.
    pub fn new(workers: usize) -> Arc<Self> {
        let workers = workers.max(1);
        let (send, receive) = sync_channel(workers);
        let hub = Arc::new(Self {
            state: Mutex::default(),
            arrived: Condvar::new(),
            exposure: AtomicU32::new(1.0f32.to_bits()),
            jobs: Mutex::new(Some(send)),
            workers: Mutex::default(),
        });
        let receive = Arc::new(Mutex::new(receive));
        let handles = (0..workers)
            .filter_map(|i| {
                let (hub, receive) = (Arc::downgrade(&hub), receive.clone());
                let spawned = std::thread::Builder::new()
                    .name(format!("vkcuda encoder {i}"))
                    .spawn(move || encode_jobs(&hub, &receive));
                spawned.map_err(|e| log::warn!("vkcuda: an encoder thread could not start: {e}")).ok()
            })
            .collect();
        *lock(&hub.workers) = handles;
        hub
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// A new client (no canvas yet), its id and the notification its frames come with;
    /// `None` when [`MAX_CLIENTS`] are connected.
    pub fn join(&self) -> Option<(u64, Arc<Notify>)> {
        let mut s = self.state();
        if s.clients.len() >= MAX_CLIENTS {
            return None;
        }
        s.joined += 1;
        let (id, wake) = (s.joined, Arc::new(Notify::new()));
        let client = Client {
            canvas: None,
            mode: Mode::Jpeg { quality: 80 },
            unacked: 0,
            preparing: 0,
            next: None,
            interval: None,
            last_drawn: None,
            wake: wake.clone(),
            sent: 0,
            skipped: 0,
            last_sent: None,
            bytes: 0,
        };
        s.clients.insert(id, client);
        Some((id, wake))
    }

    /// The client left: what it holds goes.
    pub fn leave(&self, id: u64) {
        self.state().clients.remove(&id);
        self.arrived.notify_all();
    }

    /// Whether client `id` is connected.
    pub fn has(&self, id: u64) -> bool {
        self.state().clients.contains_key(&id)
    }

    /// Clients connected.
    pub fn clients(&self) -> usize {
        self.state().clients.len()
    }

    /// The client's canvas is `extent` device pixels now.
    pub fn set_canvas(&self, id: u64, extent: vk::Extent2D) {
        if let Some(c) = self.state().clients.get_mut(&id).filter(|c| c.canvas != Some(extent)) {
            // A frame of the old size being drawn or encoded would not be its size.
            (c.canvas, c.preparing, c.next) = (Some(extent), 0, None);
        }
    }

    /// The client's canvas, once the page said it.
    pub fn canvas(&self, id: u64) -> Option<vk::Extent2D> {
        self.state().clients.get(&id).and_then(|c| c.canvas)
    }

    /// The client's encoding from its next frame on.
    pub fn set_mode(&self, id: u64, mode: Mode) {
        if let Some(c) = self.state().clients.get_mut(&id) {
            c.mode = mode;
        }
    }

    /// The client wants at most `fps` frames a second (its display's rate); 0: no limit.
    pub fn set_rate(&self, id: u64, fps: f64) {
        if let Some(c) = self.state().clients.get_mut(&id) {
            c.interval = (fps > 0.0).then(|| Duration::from_secs_f64(1.0 / fps));
        }
    }

    /// The client decoded a frame: it may be sent another.
    pub fn ack(&self, id: u64) {
        if let Some(c) = self.state().clients.get_mut(&id) {
            c.unacked = c.unacked.saturating_sub(1);
        }
        self.arrived.notify_all();
    }

    /// The client's newest frame, if one waits and it may be sent now (counted as sent).
    pub fn next_for(&self, id: u64) -> Option<Encoded> {
        self.state().clients.get_mut(&id)?.take_next()
    }

    /// [`Hub::next_for`], waiting at most `timeout` for one (a thread that
    /// pumps frames, the notebook widget's); `None` also once the client left.
    pub fn wait_next(&self, id: u64, timeout: Duration) -> Option<Encoded> {
        let deadline = Instant::now() + timeout;
        let mut s = self.state();
        loop {
            if let Some(next) = s.clients.get_mut(&id)?.take_next() {
                return Some(next);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            s = self.arrived.wait_timeout(s, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// What the client has been sent.
    pub fn stats(&self, id: u64) -> ClientStats {
        let s = self.state();
        s.clients.get(&id).map_or_else(ClientStats::default, |c| ClientStats {
            sent: c.sent,
            skipped: c.skipped,
            bytes: c.bytes,
        })
    }

    /// Encode jobs dropped so far because every encoder was busy.
    pub fn dropped(&self) -> u64 {
        self.state().dropped
    }

    /// Multiplies the draw's exposure by `factor` (within 1/64..64).
    pub fn change_exposure(&self, factor: f32) {
        let now = f32::from_bits(self.exposure.load(Ordering::Relaxed));
        self.exposure.store((now * factor).clamp(1.0 / 64.0, 64.0).to_bits(), Ordering::Relaxed);
    }

    /// Stops the encoders (after the jobs queued) and lets every client go
    /// (a widget's pump sees its client gone).
    pub fn close(&self) {
        lock(&self.jobs).take();
        for worker in std::mem::take(&mut *lock(&self.workers)) {
            let _ = worker.join();
        }
        for c in std::mem::take(&mut self.state().clients).into_values() {
            c.wake.notify_one();
        }
        self.arrived.notify_all();
    }

    /// An encoded frame for client `id`: it replaces an older one still
    /// waiting (encoders side by side may finish out of order: an older one is dropped).
    fn deliver(&self, id: u64, encoded: Encoded) {
        if let Some(c) = self.state().clients.get_mut(&id) {
            c.preparing = c.preparing.saturating_sub(1);
            let newest = c.next.as_ref().map(|n| n.frame).max(c.last_sent);
            if newest.is_none_or(|n| encoded.frame > n) {
                c.next = Some(encoded);
                c.wake.notify_one();
            }
        }
        self.arrived.notify_all();
    }

    /// Clients whose frame will not come want the next one.
    fn unprepare(&self, ids: impl Iterator<Item = u64>) {
        let mut s = self.state();
        for id in ids {
            if let Some(c) = s.clients.get_mut(&id) {
                c.preparing = c.preparing.saturating_sub(1);
            }
        }
    }
}

impl Watchers for Hub {
    fn wanted(&self, _frame: u64) -> Vec<vk::Extent2D> {
        let mut sizes: Vec<vk::Extent2D> = Vec::new();
        for c in self.state().clients.values().filter(|c| c.wants()) {
            if let Some(canvas) = c.canvas.filter(|e| !sizes.contains(e)) {
                sizes.push(canvas);
            }
        }
        sizes
    }

    fn drawing(&self, _frame: u64, extent: vk::Extent2D) {
        for c in self.state().clients.values_mut() {
            if c.wants() && c.canvas == Some(extent) {
                c.preparing += 1;
                c.last_drawn = Some(Instant::now());
            }
        }
    }

    fn take(&self, frame: ReadFrame) {
        let extent = frame.shot.extent;
        let to: Vec<(u64, Mode)> = self
            .state()
            .clients
            .iter()
            .filter(|(_, c)| c.canvas == Some(extent) && c.preparing > 0)
            .map(|(id, c)| (*id, c.mode))
            .collect();
        if to.is_empty() {
            return;
        }
        let ids: Vec<u64> = to.iter().map(|(id, _)| *id).collect();
        let sent = match lock(&self.jobs).as_ref() {
            Some(jobs) => jobs.try_send(Job { frame, to }),
            None => Err(TrySendError::Disconnected(Job { frame, to })),
        };
        if sent.is_err() {
            // Every encoder is busy: this frame is skipped; the next one is drawn for them.
            self.state().dropped += 1;
            self.unprepare(ids.into_iter());
        }
    }

    fn exposure(&self) -> f32 {
        f32::from_bits(self.exposure.load(Ordering::Relaxed))
    }

    fn abandon(&self) {
        for c in self.state().clients.values_mut() {
            c.preparing = 0;
        }
    }
}

/// An encoder thread: encodes each job once per mode its clients asked for.
fn encode_jobs(hub: &Weak<Hub>, jobs: &Mutex<Receiver<Job>>) {
    loop {
        let job = lock(jobs).recv();
        let Ok(Job { frame, to }) = job else { return };
        let Some(hub) = hub.upgrade() else { return };
        let stamp = unix_micros(frame.recorded);
        let mut done: Vec<(Mode, Bytes)> = Vec::new();
        for (id, mode) in to {
            let bytes = match done.iter().find(|(m, _)| *m == mode) {
                Some((_, b)) => b.clone(),
                None => match encode(&frame, mode, stamp) {
                    Ok(b) => {
                        done.push((mode, b.clone()));
                        b
                    }
                    Err(e) => {
                        log::warn!("vkcuda: encoding frame {} failed: {e}", frame.frame);
                        hub.unprepare(std::iter::once(id));
                        continue;
                    }
                },
            };
            hub.deliver(id, Encoded { frame: frame.frame, bytes });
        }
    }
}

/// `at` on the wall clock, in µs since the Unix epoch (the page compares it with its own).
fn unix_micros(at: Instant) -> u64 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    now.saturating_sub(at.elapsed()).as_micros() as u64
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use vkcuda::Format;
    use vkcuda_run::present::readback::Shot;

    const SIZE: vk::Extent2D = vk::Extent2D { width: 4, height: 2 };

    fn drawn(frame: u64, extent: vk::Extent2D) -> ReadFrame {
        let shot = Shot { extent, format: Format::Rgba8, drawn: true, first: 0 };
        let pixels = vec![frame as u8; (extent.width * extent.height * 4) as usize];
        ReadFrame { frame, shot, pixels: Box::new(pixels), recorded: Instant::now() }
    }

    /// Waits (bounded) until the client has a frame waiting; its number.
    fn waiting(hub: &Hub, id: u64) -> Option<u64> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(next) = hub.state().clients.get(&id).and_then(|c| c.next.as_ref().map(|n| n.frame)) {
                return Some(next);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        None
    }

    /// A hub with one client of canvas `SIZE` and two frames being made for it.
    fn making_two() -> (Arc<Hub>, u64) {
        let hub = Hub::new(1);
        let (id, _) = hub.join().unwrap();
        hub.set_canvas(id, SIZE);
        hub.wanted(0);
        hub.drawing(0, SIZE);
        hub.drawing(1, SIZE);
        (hub, id)
    }

    /// The run's consumer: the frame is drawn for whoever wants it, then taken.
    fn consume(hub: &Hub, frame: u64) -> Vec<vk::Extent2D> {
        let sizes = hub.wanted(frame);
        for &s in &sizes {
            hub.drawing(frame, s);
            hub.take(drawn(frame, s));
        }
        sizes
    }

    #[test]
    fn a_client_wants_frames_until_two_are_unacknowledged_and_one_waits() {
        let hub = Hub::new(1);
        let (id, _) = hub.join().unwrap();
        assert!(hub.wanted(0).is_empty(), "no canvas yet, no frame");
        hub.set_canvas(id, SIZE);
        assert_eq!(consume(&hub, 0), vec![SIZE]);
        assert_eq!(waiting(&hub, id), Some(0));
        assert_eq!(hub.next_for(id).map(|e| e.frame), Some(0));
        assert_eq!(consume(&hub, 5), vec![SIZE]);
        assert_eq!(waiting(&hub, id), Some(5));
        assert_eq!(hub.next_for(id).map(|e| e.frame), Some(5));
        assert_eq!(consume(&hub, 6), vec![SIZE], "one more is made while two are on their way");
        assert_eq!(waiting(&hub, id), Some(6));
        assert!(hub.next_for(id).is_none(), "two unacknowledged: it waits");
        assert!(hub.wanted(7).is_empty(), "two unacknowledged and one waiting: nothing drawn for it");
        hub.ack(id);
        let e = hub.next_for(id).unwrap();
        assert_eq!((e.frame, &e.bytes[0..4]), (6, &crate::encode::MAGIC[..]));
        let stats = hub.stats(id);
        assert_eq!((stats.sent, stats.skipped), (3, 4), "frames 1-4 were skipped for it");
        hub.close();
    }

    #[test]
    fn two_frames_are_made_at_once_and_an_older_one_never_replaces_a_newer() {
        let (hub, id) = making_two();
        assert!(hub.wanted(2).is_empty(), "two being made");
        hub.deliver(id, Encoded { frame: 1, bytes: Bytes::new() });
        hub.deliver(id, Encoded { frame: 0, bytes: Bytes::new() });
        assert_eq!(hub.next_for(id).map(|e| e.frame), Some(1));
        assert!(hub.next_for(id).is_none(), "frame 0 came after frame 1: dropped");
        hub.close();
    }

    #[test]
    fn clients_at_one_size_share_a_draw_and_a_stalled_one_holds_nothing_more() {
        let hub = Hub::new(2);
        let (a, _) = hub.join().unwrap();
        let (b, _) = hub.join().unwrap();
        let (c, _) = hub.join().unwrap();
        let other = vk::Extent2D { width: 8, height: 8 };
        hub.set_canvas(a, SIZE);
        hub.set_canvas(b, SIZE);
        hub.set_canvas(c, other);
        hub.set_mode(b, Mode::Raw);
        assert_eq!(consume(&hub, 0), vec![SIZE, other], "one draw per size");
        for id in [a, b, c] {
            assert_eq!(waiting(&hub, id), Some(0));
        }
        // Client c's socket takes frames, its page never acknowledges one.
        let mut drawn_for_c = 1;
        for frame in 1..100 {
            for id in [a, b] {
                if hub.next_for(id).is_some() {
                    hub.ack(id);
                }
            }
            hub.next_for(c);
            drawn_for_c += usize::from(consume(&hub, frame).contains(&other));
            for id in [a, b, c] {
                waiting(&hub, id);
            }
        }
        assert_eq!(drawn_for_c, 3, "two sent and one waiting, then nothing");
        assert_eq!(hub.stats(c).sent, 2);
        assert_eq!(hub.stats(a).sent, 99, "frames 0 to 98 sent, 99 waits");
        hub.leave(c);
        assert_eq!(hub.clients(), 2);
        hub.close();
    }

    #[test]
    fn a_new_canvas_size_drops_what_was_made_for_the_old_one() {
        let (hub, id) = making_two();
        let bigger = vk::Extent2D { width: 6, height: 6 };
        hub.set_canvas(id, bigger);
        assert_eq!(hub.wanted(1), vec![bigger], "the old size's frame is not waited for");
        hub.take(drawn(0, SIZE));
        assert!(hub.state().clients[&id].next.is_none());
        hub.close();
    }

    #[test]
    fn at_most_max_clients_and_a_stopped_run_frees_them() {
        let hub = Hub::new(1);
        let ids: Vec<u64> = (0..MAX_CLIENTS).map(|_| hub.join().unwrap().0).collect();
        assert!(hub.join().is_none());
        hub.set_canvas(ids[0], SIZE);
        hub.drawing(0, SIZE);
        hub.drawing(1, SIZE);
        assert!(hub.wanted(2).is_empty());
        hub.abandon();
        assert_eq!(hub.wanted(1), vec![SIZE], "the frame being drawn will not come: it wants the next");
        hub.close();
    }

    #[test]
    fn a_rate_spaces_the_frames_drawn_for_a_client() {
        let (hub, id) = making_two();
        hub.set_rate(id, 2.0);
        hub.deliver(id, Encoded { frame: 0, bytes: Bytes::new() });
        hub.deliver(id, Encoded { frame: 1, bytes: Bytes::new() });
        hub.next_for(id);
        hub.ack(id);
        assert!(hub.wanted(2).is_empty(), "half a second has not passed since the last draw");
        hub.set_rate(id, 0.0);
        assert_eq!(hub.wanted(3), vec![SIZE]);
        hub.close();
    }

    #[test]
    fn a_pump_waits_for_a_frame_and_not_after_its_client_left() {
        let hub = Hub::new(1);
        let (id, _) = hub.join().unwrap();
        hub.set_canvas(id, SIZE);
        let pump = {
            let hub = hub.clone();
            std::thread::spawn(move || hub.wait_next(id, Duration::from_secs(30)).map(|e| e.frame))
        };
        consume(&hub, 3);
        assert_eq!(pump.join().unwrap(), Some(3));
        assert!(hub.wait_next(id, Duration::from_millis(10)).is_none(), "nothing more came");
        let pump = {
            let hub = hub.clone();
            std::thread::spawn(move || hub.wait_next(id, Duration::from_secs(30)))
        };
        hub.leave(id);
        assert!(pump.join().unwrap().is_none(), "the client left: the pump is told at once");
        hub.close();
    }

    #[test]
    fn exposure_changes_by_factors_within_bounds() {
        let hub = Hub::new(1);
        hub.change_exposure(2.0);
        assert_eq!(hub.exposure(), 2.0);
        (0..20).for_each(|_| hub.change_exposure(0.5));
        assert_eq!(hub.exposure(), 1.0 / 64.0);
        hub.close();
    }
}
