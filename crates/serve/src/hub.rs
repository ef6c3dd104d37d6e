//! The clients of a browser view (pages and notebook widgets) and what each
//! wants: the [`Watchers`] the run's consumer asks what to draw, the place
//! each client's newest encoded frame waits for its link, and the encoder
//! threads between them.
//!
//! Each client's frames are paced by its own link ([`crate::link`]: a frame
//! is drawn for it only when the link has room for it) and shaped by its own
//! [`Ladder`] (codec, size, quality, rate). Newest wins: a frame is drawn
//! from the newest frame the run has then; the frames the run made
//! meanwhile are skipped for that client alone. A picture that stops
//! changing is sent once more, exact, and then nothing until it changes. A
//! client that stops reading stops wanting: the run never waits for it, and
//! it holds at most one encoded frame.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ash::vk;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::encode::{digest, Encoded, Stream};
use crate::ladder::{Codec, Ladder, LinkState, Mode, Plan};
use crate::link::Link;
use vkcuda_run::present::readback::{Pixels, ReadFrame};
use vkcuda_run::present::watch::{Want, Watchers};

/// Clients connected at once, at most.
pub const MAX_CLIENTS: usize = 32;
/// A picture unchanged (or no new frame) this long is sent once more, exact.
pub const STILL_AFTER: Duration = Duration::from_millis(250);
/// While an exact picture stands, how often a frame is drawn to see whether it changed.
const STILL_CHECK: Duration = Duration::from_millis(200);
/// How long a window-limited send counts as the link being the limit lately.
const LIMITED_LATELY: Duration = Duration::from_secs(2);

/// What one client has been sent, and how its stream is made now (its page shows it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientStats {
    /// Frames sent.
    pub sent: u64,
    /// The run's frames between those it got (newest wins).
    pub skipped: u64,
    /// Bytes sent.
    pub bytes: u64,
    /// The codec of the last frame sent: `jpeg`, `vp8`, `png` or `raw`.
    pub codec: String,
    /// The size it was sent at.
    pub size: [u32; 2],
    /// JPEG's quality, or VP8's quantizer (0–63), of the last frame.
    pub quality: u8,
    /// VP8's target, bits a second.
    pub bitrate: u32,
    /// The link's capacity as measured, bits a second.
    pub capacity: Option<f64>,
    /// The shortest round trip, ms (the page's decode included).
    pub rtt_ms: Option<f64>,
    /// The frame rate the stream aims at.
    pub fps: f64,
    /// Whether the last frame sent was exact (lossless at the canvas size).
    pub exact: bool,
}

/// Whether the picture stands still for a client.
#[derive(Debug)]
struct Still {
    /// What was drawn for the last frame sent (or checked), and its digest.
    last: Option<(Want, u64)>,
    /// Since when the picture is unchanged (or no frame came).
    since: Instant,
    /// The exact frame of the standing picture was sent.
    exact_sent: bool,
}

/// One client's state.
struct Client {
    canvas: Option<vk::Extent2D>,
    ladder: Ladder,
    link: Link,
    /// What `wanted` chose for it this frame.
    decided: Option<(Want, Plan)>,
    /// Frames being drawn or encoded for it, and as what.
    preparing: u32,
    drawing_for: Option<(Want, Plan)>,
    /// Its newest encoded frame, waiting for the link; `held`: the link made it wait.
    next: Option<Encoded>,
    held: bool,
    last_drawn: Option<Instant>,
    limited_at: Option<Instant>,
    still: Still,
    /// Nothing was sent at this canvas yet.
    fresh: bool,
    stream: Arc<Mutex<Stream>>,
    wake: Arc<Notify>,
    stats: ClientStats,
    last_sent: Option<u64>,
}

impl Client {
    fn new(wake: Arc<Notify>, threads: u32) -> Self {
        Self {
            canvas: None,
            ladder: Ladder::new(),
            link: Link::new(),
            decided: None,
            preparing: 0,
            drawing_for: None,
            next: None,
            held: false,
            last_drawn: None,
            limited_at: None,
            still: Still { last: None, since: Instant::now(), exact_sent: false },
            fresh: true,
            stream: Arc::new(Mutex::new(Stream::new(threads))),
            wake,
            stats: ClientStats::default(),
            last_sent: None,
        }
    }

    fn link_state(&self, now: Instant) -> LinkState {
        let limited_lately = self.limited_at.is_some_and(|at| now.duration_since(at) < LIMITED_LATELY);
        LinkState { capacity: self.link.capacity(), limited_lately }
    }

    /// Whether a standing picture's frames are sent once, exact (auto and video modes).
    fn settles(&self) -> bool {
        matches!(self.ladder.mode, Mode::Auto | Mode::Video)
    }

    /// What to draw for it now, if anything: the ladder's plan, or the exact
    /// picture once it stood still; nothing while a frame is on its way to
    /// the link, while the link has no room, or before its rate allows.
    fn want(&mut self, now: Instant) -> Option<(Want, Plan)> {
        let canvas = self.canvas?;
        let mut plan = self.ladder.plan(canvas, self.link_state(now), now);
        let most = if matches!(plan.codec, Codec::Vp8 { .. }) { 1 } else { 2 };
        if self.preparing >= most || self.next.is_some() {
            return None;
        }
        let quiet = now.duration_since(self.still.since);
        let mut interval = Duration::from_secs_f64(1.0 / plan.fps.max(1.0));
        if self.settles() && quiet >= STILL_AFTER {
            // Exact at the canvas size; once sent, now and then to see whether it changed.
            plan = Plan { codec: Codec::Png, extent: canvas, fps: plan.fps };
            if self.still.exact_sent {
                interval = interval.max(STILL_CHECK);
            }
        }
        if self.last_drawn.is_some_and(|at| now.duration_since(at) < interval) {
            return None;
        }
        let expected = self.stats.bytes.checked_div(self.stats.sent).unwrap_or(0);
        if !self.link.may_send(expected) {
            self.link.block();
            self.limited_at = Some(now);
            return None;
        }
        Some((Want { extent: plan.extent, pixels: pixels_for(plan.codec) }, plan))
    }

    /// Its waiting frame, if the link has room for it now (counted as sent).
    fn take_next(&mut self, now: Instant) -> Option<Encoded> {
        let bytes = self.next.as_ref()?.bytes.len() as u64;
        if !self.link.may_send(bytes) {
            self.held = true;
            self.limited_at = Some(now);
            return None;
        }
        let next = self.next.take()?;
        self.link.sent(next.frame, bytes, now, std::mem::take(&mut self.held));
        let s = &mut self.stats;
        (s.sent, s.bytes) = (s.sent + 1, s.bytes + bytes);
        s.skipped += self.last_sent.map_or(0, |l| next.frame.saturating_sub(l + 1));
        self.last_sent = Some(next.frame);
        Some(next)
    }
}

/// How a codec wants its frame drawn.
fn pixels_for(codec: Codec) -> Pixels {
    match codec {
        Codec::Raw | Codec::Png => Pixels::Rgba8,
        Codec::Jpeg { .. } => Pixels::I420 { full_range: true },
        Codec::Vp8 { .. } => Pixels::I420 { full_range: false },
    }
}

/// An encode job: a frame drawn as one [`Want`], and the clients it goes to with their plans.
struct Job {
    frame: ReadFrame,
    to: Vec<(u64, Plan, Arc<Mutex<Stream>>)>,
}

#[derive(Default)]
struct State {
    clients: BTreeMap<u64, Client>,
    joined: u64,
    /// When [`Hub::wait_stale`] last said a frame was wanted again (it says so once per [`STILL_AFTER`]).
    stale_told: Option<Instant>,
}

/// The clients, and the encoder workers their frames go through.
pub struct Hub {
    state: Mutex<State>,
    /// Signalled when a frame is delivered or acknowledged, and when a client leaves.
    arrived: Condvar,
    exposure: AtomicU32,
    jobs: Mutex<Option<SyncSender<Job>>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    /// VP8 threads per client.
    video_threads: u32,
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
            video_threads: (workers as u32 / 2).clamp(1, 8),
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

    /// Applies `f` to client `id`, if connected.
    fn with<R>(&self, id: u64, f: impl FnOnce(&mut Client) -> R) -> Option<R> {
        self.state().clients.get_mut(&id).map(f)
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
        s.clients.insert(id, Client::new(wake.clone(), self.video_threads));
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
        self.with(id, |c| {
            if c.canvas != Some(extent) {
                // A frame of the old size being drawn or encoded would not be its size; the
                // picture is new to it (sent again, then exact).
                (c.canvas, c.preparing, c.next, c.drawing_for, c.fresh) = (Some(extent), 0, None, None, true);
                c.still = Still { last: None, since: Instant::now(), exact_sent: false };
            }
        });
    }

    /// The client's canvas, once the page said it.
    pub fn canvas(&self, id: u64) -> Option<vk::Extent2D> {
        self.with(id, |c| c.canvas).flatten()
    }

    /// What the client asks for from its next frame on.
    pub fn set_mode(&self, id: u64, mode: Mode) {
        self.with(id, |c| c.ladder.mode = mode);
    }

    /// Whether the client's page decodes VP8.
    pub fn set_video(&self, id: u64, video: bool) {
        self.with(id, |c| c.ladder.video = video);
    }

    /// The client's decoder needs a key frame.
    pub fn key_frame(&self, id: u64) {
        if let Some(stream) = self.with(id, |c| c.stream.clone()) {
            lock(&stream).key_due = true;
        }
    }

    /// The client shows at most `fps` frames a second (its display's rate); 0: no limit.
    pub fn set_rate(&self, id: u64, fps: f64) {
        self.with(id, |c| c.ladder.set_display(fps));
    }

    /// The client drew frame `frame`: the link measures it, and another may go.
    pub fn ack(&self, id: u64, frame: u64) {
        self.with(id, |c| c.link.acked(frame, Instant::now()));
        self.arrived.notify_all();
    }

    /// The client's newest frame, if one waits and its link has room now (counted as sent).
    pub fn next_for(&self, id: u64) -> Option<Encoded> {
        self.with(id, |c| c.take_next(Instant::now())).flatten()
    }

    /// [`Hub::next_for`], waiting at most `timeout` for one (a thread that
    /// pumps frames, the notebook widget's); `None` also once the client left.
    pub fn wait_next(&self, id: u64, timeout: Duration) -> Option<Encoded> {
        let deadline = Instant::now() + timeout;
        let mut s = self.state();
        loop {
            if let Some(next) = s.clients.get_mut(&id)?.take_next(Instant::now()) {
                return Some(next);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            s = self.arrived.wait_timeout(s, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// What the client has been sent, and how.
    pub fn stats(&self, id: u64) -> ClientStats {
        self.with(id, |c| {
            let rtt_ms = c.link.min_rtt().map(|r| r.as_secs_f64() * 1e3);
            ClientStats { capacity: c.link.capacity().map(|b| b * 8.0), rtt_ms, ..c.stats.clone() }
        })
        .unwrap_or_default()
    }

    /// Whether some client waits for a frame that does not come (the run made
    /// none lately: a viewer that is not shown new frames): one that has no
    /// frame at its canvas yet, or whose standing picture was not sent
    /// exact. The run's last frame needs drawing again. Waits at most `timeout` for one.
    pub fn wait_stale(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut s = self.state();
        loop {
            let now = Instant::now();
            let told = s.stale_told.is_some_and(|at| now.duration_since(at) < STILL_AFTER);
            let stale = !told
                && s.clients.values().any(|c| {
                    let idle = c.last_drawn.is_none_or(|at| now.duration_since(at) >= STILL_AFTER);
                    let owed = c.fresh || (c.settles() && !c.still.exact_sent);
                    let free = c.preparing == 0 && c.next.is_none() && c.link.frames_in_flight() == 0;
                    c.canvas.is_some() && free && idle && owed
                });
            if stale {
                s.stale_told = Some(now);
            }
            let Some(left) = deadline.checked_duration_since(now).filter(|_| !stale) else { return stale };
            let nap = left.min(Duration::from_millis(50));
            s = self.arrived.wait_timeout(s, nap).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// Multiplies the draw's exposure by `factor` (within 1/64..64).
    pub fn change_exposure(&self, factor: f32) {
        let scale = |bits: u32| Some((f32::from_bits(bits) * factor).clamp(1.0 / 64.0, 64.0).to_bits());
        // One read-modify-write: two pages' keys at once both count.
        let _ = self.exposure.fetch_update(Ordering::Relaxed, Ordering::Relaxed, scale);
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

    /// Whether frame `frame`, drawn as `want` with digest `digest`, shows the
    /// client a picture it has not been sent. A client that settles skips an
    /// unchanged picture, sends the exact one once it stood still, and
    /// then only checks (now and then) whether it changed.
    fn changed(&self, id: u64, want: Want, digest: u64) -> bool {
        self.with(id, |c| {
            if !c.settles() {
                return true;
            }
            let seen = Some((want, digest));
            let moved = c.still.last != seen;
            match (want.pixels == Pixels::Rgba8, c.still.exact_sent) {
                // The exact frame of the standing picture.
                (true, false) => {
                    (c.still.last, c.still.exact_sent) = (seen, true);
                    true
                }
                _ if !moved => false,
                // It moves again: frames go out (an exact check that differs is not one of them).
                (exact, _) => {
                    c.still = Still { last: seen, since: Instant::now(), exact_sent: false };
                    !exact
                }
            }
        })
        .unwrap_or(false)
    }

    /// An encoded frame for client `id` (`None`: nothing to send for it):
    /// replaces an older one still waiting, never a newer.
    fn deliver(&self, id: u64, encoded: Option<Encoded>) {
        self.with(id, |c| {
            c.preparing = c.preparing.saturating_sub(1);
            let Some(encoded) = encoded else { return };
            let Some((want, plan)) = c.drawing_for else { return };
            let per_frame = Ladder::per_frame(&plan, c.link_state(Instant::now()));
            c.ladder.encoded(encoded.codec, want.extent, encoded.bytes.len(), encoded.quantizer, per_frame);
            let newest = c.next.as_ref().map(|n| n.frame).max(c.last_sent);
            if newest.is_none_or(|n| encoded.frame > n) {
                record_stream(&mut c.stats, &encoded, want.extent, plan.fps);
                (c.next, c.fresh) = (Some(encoded), false);
                c.wake.notify_one();
            }
        });
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

/// The stream's current choice, for the page's status line.
fn record_stream(s: &mut ClientStats, e: &Encoded, extent: vk::Extent2D, fps: f64) {
    (s.codec, s.quality, s.bitrate) = match e.codec {
        Codec::Raw => ("raw".into(), 100, 0),
        Codec::Png => ("png".into(), 100, 0),
        Codec::Jpeg { quality } => ("jpeg".into(), quality, 0),
        Codec::Vp8 { bitrate } => ("vp8".into(), e.quantizer.unwrap_or(0), bitrate),
    };
    (s.size, s.fps, s.exact) = ([extent.width, extent.height], fps, e.codec.exact());
}

impl Watchers for Hub {
    fn wanted(&self, _frame: u64) -> Vec<Want> {
        let now = Instant::now();
        let mut wants: Vec<Want> = Vec::new();
        for c in self.state().clients.values_mut() {
            c.decided = c.want(now);
            if let Some((want, _)) = c.decided.filter(|(w, _)| !wants.contains(w)) {
                wants.push(want);
            }
        }
        wants
    }

    fn drawing(&self, _frame: u64, want: Want) {
        let now = Instant::now();
        for c in self.state().clients.values_mut() {
            if let Some(decided) = c.decided.take_if(|(w, _)| *w == want) {
                c.preparing += 1;
                (c.last_drawn, c.drawing_for) = (Some(now), Some(decided));
            }
        }
    }

    fn take(&self, frame: ReadFrame) {
        let want = Want { extent: frame.shot.extent, pixels: frame.shot.pixels };
        let to: Vec<(u64, Plan, Arc<Mutex<Stream>>)> = self
            .state()
            .clients
            .iter()
            .filter_map(|(id, c)| {
                let (w, plan) = c.drawing_for.filter(|_| c.preparing > 0)?;
                (w == want).then(|| (*id, plan, c.stream.clone()))
            })
            .collect();
        if to.is_empty() {
            return;
        }
        let ids: Vec<u64> = to.iter().map(|(id, ..)| *id).collect();
        let sent = match lock(&self.jobs).as_ref() {
            Some(jobs) => jobs.try_send(Job { frame, to }),
            None => Err(TrySendError::Disconnected(Job { frame, to })),
        };
        if sent.is_err() {
            // Every encoder is busy: this frame is skipped; the next one is drawn for them.
            self.unprepare(ids.into_iter());
        }
    }

    fn exposure(&self) -> f32 {
        f32::from_bits(self.exposure.load(Ordering::Relaxed))
    }

    fn abandon(&self) {
        for c in self.state().clients.values_mut() {
            (c.preparing, c.decided) = (0, None);
        }
    }
}

/// An encoder thread: encodes each job for each of its clients (one JPEG
/// for clients that ask the same of it), skipping a picture a client already has.
fn encode_jobs(hub: &Weak<Hub>, jobs: &Mutex<Receiver<Job>>) {
    loop {
        let job = lock(jobs).recv();
        let Ok(Job { frame, to }) = job else { return };
        let Some(hub) = hub.upgrade() else { return };
        let stamp = unix_micros(frame.recorded);
        let want = Want { extent: frame.shot.extent, pixels: frame.shot.pixels };
        let digest = digest((*frame.pixels).as_ref());
        let mut done: Vec<Encoded> = Vec::new();
        for (id, plan, stream) in to {
            if !hub.changed(id, want, digest) {
                hub.deliver(id, None);
                continue;
            }
            let shared =
                done.iter().find(|e| e.codec == plan.codec && !matches!(plan.codec, Codec::Vp8 { .. }));
            let encoded = match shared {
                Some(e) => Ok(e.clone()),
                None => lock(&stream).encode(&frame, plan.codec, stamp),
            };
            match encoded {
                Ok(e) => {
                    done.push(e.clone());
                    hub.deliver(id, Some(e));
                }
                Err(e) => {
                    log::warn!("vkcuda: encoding frame {} failed: {e}", frame.frame);
                    hub.deliver(id, None);
                }
            }
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
