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
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ash::vk;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

use crate::encode::{digest, Encoded, Stream};
use crate::header::{Kind, Size};
use crate::ladder::{Codec, Ladder, LinkState, Mode, Plan};
use crate::link::Link;
use vkcuda_run::present::readback::{Pixels, ReadFrame};
use vkcuda_run::present::watch::{Want, Watchers};

/// Clients connected at once, at most. Design (the door, docs/streaming.md).
pub const MAX_CLIENTS: usize = 32;
/// A picture unchanged (or no new frame) this long is sent once more, exact.
/// bench-3 to -5 (2026-11-27): a paused picture arrived exact 0.41–0.47 s after
/// the pause over 20 Mbit/s, 40 ms.
pub const STILL_AFTER: Duration = Duration::from_millis(250);
/// While an exact picture stands, how often a frame is drawn to see whether it
/// changed (measured with [`STILL_AFTER`]).
const STILL_CHECK: Duration = Duration::from_millis(200);
/// How long a staleness once told stands without a frame drawn (the frame shown
/// again may not have come: a show was under way). Design.
const RETELL: Duration = Duration::from_secs(2);
/// How often [`Hub::wait_stale`] looks again while nothing wakes it. Design:
/// well under [`STILL_AFTER`].
const STALE_NAP: Duration = Duration::from_millis(50);
/// How long a link is measured before its capacity chooses the codec (JPEG
/// fills it meanwhile). bench-1: the codec chosen before the link was measured
/// is superseded.
const SETTLE: Duration = Duration::from_millis(1500);
/// How long a window-limited send counts as the link being the limit lately
/// (no probe meanwhile). Design.
const LIMITED_LATELY: Duration = Duration::from_secs(2);
/// Frames drawn or encoded for a client at once: one for VP8 (its frames are
/// a chain: bench-13's `-tr2`, two at once, changed nothing: 19.8 / 22.4 /
/// 21.2 frames/s against 18.8 / 24.0 / 21.8), two for the others (design: a
/// frame encoded while the next is drawn, as the old view kept two).
const MOST_PREPARING_VIDEO: usize = 1;
const MOST_PREPARING: usize = 2;
/// The frames a client's lead time (draw to encoded) is averaged over: the
/// newest weighs 1/4. Design (bench-14's pacing: the encode time a moving average).
const LEAD_FRAMES: u32 = 4;
/// A draw the link held is made up once: the schedule restarts this share of
/// an interval back from now, not on from its due time. bench-14, 2026-11-28:
/// 20 Mbit/s 35–41 frames/s against 20–22 (with the window's two frames).
const CATCH_UP: u32 = 2;
/// A video client's encode takes at most this share of the encoder threads
/// (one over it: half), and the producer keeps the rest. bench-24, 2026-11-28:
/// 8 clients sharing 100 Mbit/s cost the producer +0.1 to +4.6 % against
/// −4.1 to −7.4 %.
const CLIENT_SHARE: u32 = 2;
/// The draw's exposure stays within 1/this and this. Design.
const EXPOSURE_RANGE: f32 = 64.0;

/// What one client has been sent, and how its stream is made now (its page shows it).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientStats {
    /// Frames sent.
    pub sent: u64,
    /// The run's frames between those it got (newest wins).
    pub skipped: u64,
    /// Bytes sent.
    pub bytes: u64,
    /// The codec of the last frame sent (`None`: none was sent yet).
    pub codec: Option<Kind>,
    /// The size it was sent at.
    pub size: Size,
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

/// A picture a client saw: what it was drawn as, and its digest.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Seen {
    want: Want,
    digest: u64,
}

/// Whether the picture stands still for a client.
#[derive(Debug)]
struct Still {
    /// What was drawn for the last frame sent (or checked).
    last: Option<Seen>,
    /// Since when the picture is unchanged.
    since: Instant,
    /// A frame drawn [`STILL_AFTER`] or more after the last change was still the
    /// same: the picture stands (a client the link held back saw nothing, and knows nothing).
    confirmed: bool,
    /// The exact frame of the standing picture was sent.
    exact_sent: bool,
}

impl Still {
    fn new(last: Option<Seen>) -> Self {
        Self { last, since: Instant::now(), confirmed: false, exact_sent: false }
    }
}

/// What `wanted` chose for a client this frame: what to draw, and how to encode it.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Decision {
    want: Want,
    plan: Plan,
}

/// A frame being drawn or encoded for a client.
#[derive(Clone, Copy, Debug)]
struct Prepared {
    frame: u64,
    /// What it was drawn as, and its plan (a frame drawn for other clients at the same size is not its).
    want: Want,
    plan: Plan,
    /// When its draw began.
    drawn: Instant,
}

/// The frames being drawn or encoded for a client.
#[derive(Debug, Default)]
struct Preparing {
    /// What `wanted` chose for it this frame.
    decided: Option<Decision>,
    frames: Vec<Prepared>,
    /// How long its frames take from the draw to encoded (a moving average over
    /// [`LEAD_FRAMES`]): the link is asked for room that far ahead.
    lead: Duration,
}

impl Preparing {
    /// The frame `frame` is encoded (or will not be) at `now`: it leaves, and the lead learns its time.
    fn done(&mut self, frame: u64, now: Instant) -> Option<Prepared> {
        let at = self.frames.iter().position(|p| p.frame == frame)?;
        let done = self.frames.remove(at);
        let took = now.saturating_duration_since(done.drawn);
        self.lead = (self.lead * (LEAD_FRAMES - 1) + took) / LEAD_FRAMES;
        Some(done)
    }
}

/// When a client's next frame is due at its rate: due times follow a schedule
/// (a draw a little late does not make the next one late too), so a client
/// asking 60 a second gets 60.
#[derive(Debug, Default)]
struct Schedule {
    due: Option<Instant>,
    /// The interval its rate gives.
    pace: Duration,
    last_drawn: Option<Instant>,
}

impl Schedule {
    /// Whether `now` is before the next frame's due time (or, when its rate
    /// just rose, before `interval` after its last draw).
    fn early(&self, now: Instant, interval: Duration) -> bool {
        self.due.is_some_and(|due| now < due.min(self.last_drawn.unwrap_or(due) + interval))
    }

    /// A frame is drawn at `now`: the next is due an interval on, or, when far
    /// behind, [`CATCH_UP`] back from now (a draw the link held, behind a large
    /// frame, is made up by the next, once).
    fn drew(&mut self, now: Instant) {
        self.last_drawn = Some(now);
        let on = self.due.unwrap_or(now) + self.pace;
        self.due = Some(on.max(now - self.pace / CATCH_UP));
    }
}

/// A client's newest encoded frame, waiting for the link, and the last sent.
#[derive(Default)]
struct Outgoing {
    next: Option<Encoded>,
    /// The link made a waiting frame wait (the next sent was limited by it).
    held: bool,
    last_sent: Option<u64>,
}

/// What a client is owed, beside a standing picture's exact frame.
#[derive(Debug)]
struct Owed {
    /// Nothing was sent at this canvas yet.
    fresh: bool,
    /// A frame was skipped for it (its rate, its link) since its last draw.
    behind: bool,
}

/// One client's state.
struct Client {
    canvas: Option<vk::Extent2D>,
    ladder: Ladder,
    link: Link,
    /// When the link last held a frame back.
    limited_at: Option<Instant>,
    preparing: Preparing,
    schedule: Schedule,
    outgoing: Outgoing,
    still: Still,
    owed: Owed,
    stream: Arc<Mutex<Stream>>,
    wake: Arc<Notify>,
    stats: ClientStats,
}

impl Client {
    fn new(wake: Arc<Notify>) -> Self {
        Self {
            canvas: None,
            ladder: Ladder::new(),
            link: Link::new(),
            limited_at: None,
            preparing: Preparing::default(),
            schedule: Schedule::default(),
            outgoing: Outgoing::default(),
            still: Still::new(None),
            owed: Owed { fresh: true, behind: false },
            stream: Arc::new(Mutex::new(Stream::new())),
            wake,
            stats: ClientStats::default(),
        }
    }

    fn link_state(&self, now: Instant) -> LinkState {
        let limited_lately = self.limited_at.is_some_and(|at| now.duration_since(at) < LIMITED_LATELY);
        let settled = self.link.measured_for(now) >= SETTLE;
        LinkState { capacity: self.link.capacity(), limited_lately, settled }
    }

    /// Whether a standing picture's frames are sent once, exact (auto and video modes).
    fn settles(&self) -> bool {
        matches!(self.ladder.mode(), Mode::Auto | Mode::Video)
    }

    /// What to draw for it now, if anything: the ladder's plan, or the exact
    /// picture once it stood still; nothing while a frame is on its way to
    /// the link, while the link has no room, or before its rate allows.
    fn want(&mut self, now: Instant) -> Option<Decision> {
        let canvas = self.canvas?;
        let mut plan = self.ladder.plan(canvas, self.link_state(now), now);
        let most = match plan.codec {
            Codec::Vp8 { .. } => MOST_PREPARING_VIDEO,
            _ => MOST_PREPARING,
        };
        if self.preparing.frames.len() >= most || self.outgoing.next.is_some() {
            return None;
        }
        // The ladder's rate, or the page's display rate when it said one.
        let mut interval = match self.ladder.unlimited() && plan.fps >= self.ladder.display() {
            true => Duration::ZERO,
            false => Duration::from_secs_f64(1.0 / plan.fps.max(1.0)),
        };
        if self.settles() && self.still.confirmed {
            // Exact at the canvas size; once sent, now and then to see whether it changed.
            plan = Plan { codec: Codec::Png, extent: canvas, fps: plan.fps };
            if self.still.exact_sent {
                interval = interval.max(STILL_CHECK);
            }
        }
        // Not before its due time (nor, when its rate just rose, an interval after its last draw).
        if self.schedule.early(now, interval) {
            self.owed.behind = true;
            return None;
        }
        self.schedule.pace = interval;
        let expected = self.stats.bytes.checked_div(self.stats.sent).unwrap_or(0);
        if !self.link.may_draw(expected, self.preparing.frames.len(), now, self.preparing.lead) {
            self.link.block();
            self.owed.behind = true;
            self.limited(now);
            return None;
        }
        Some(Decision { want: Want { extent: plan.extent, pixels: pixels_for(plan.codec) }, plan })
    }

    /// The link held a frame back at `now`: it was the limit lately (not when it
    /// only drains to measure its round trip: the ladder's probes go on).
    fn limited(&mut self, now: Instant) {
        if !self.link.draining() {
            self.limited_at = Some(now);
        }
    }

    /// Its waiting frame, if the link has room for it now (counted as sent).
    fn take_next(&mut self, now: Instant) -> Option<Encoded> {
        let bytes = self.outgoing.next.as_ref()?.bytes.len() as u64;
        if !self.link.may_send(bytes) {
            self.outgoing.held = true;
            self.limited(now);
            return None;
        }
        let out = &mut self.outgoing;
        let next = out.next.take()?;
        self.link.sent(next.frame, bytes, now, std::mem::take(&mut out.held));
        let s = &mut self.stats;
        (s.sent, s.bytes) = (s.sent + 1, s.bytes + bytes);
        s.skipped += out.last_sent.map_or(0, |l| next.frame.saturating_sub(l + 1));
        out.last_sent = Some(next.frame);
        Some(next)
    }
}

impl Client {
    /// Whether a frame drawn as `want` with digest `digest` shows a picture not
    /// sent yet. A client that settles skips an unchanged picture, sends the
    /// exact one once it stood still, and then only checks (now and then)
    /// whether it changed.
    fn changed(&mut self, want: Want, digest: u64) -> bool {
        if !self.settles() {
            return true;
        }
        let seen = Some(Seen { want, digest });
        let moved = self.still.last != seen;
        match (want.pixels == Pixels::Rgba8, self.still.exact_sent) {
            // The exact frame of the standing picture.
            (true, false) => {
                (self.still.last, self.still.exact_sent) = (seen, true);
                true
            }
            _ if !moved => {
                // Unchanged, and long enough: it stands.
                self.still.confirmed |= self.still.since.elapsed() >= STILL_AFTER;
                false
            }
            // It moves again: frames go out (an exact check that differs is not one of them).
            (exact, _) => {
                self.still = Still::new(seen);
                !exact
            }
        }
    }

    /// Frame `frame` is drawn as `want` at `now`: if that is what it decided, it is being prepared.
    fn drawing(&mut self, frame: u64, want: Want, now: Instant) {
        if let Some(Decision { want, plan }) = self.preparing.decided.take_if(|d| d.want == want) {
            self.preparing.frames.push(Prepared { frame, want, plan, drawn: now });
            self.schedule.drew(now);
            self.owed.behind = false;
        }
    }

    /// A frame it was drawn for is encoded (`None`: nothing to send for it):
    /// the ladder learns its weight; it replaces an older one still waiting,
    /// never a newer.
    fn delivered(&mut self, frame: u64, encoded: Option<Encoded>, now: Instant) {
        let Some(Prepared { want, plan, .. }) = self.preparing.done(frame, now) else { return };
        let Some(encoded) = encoded else { return };
        let per_frame = Ladder::per_frame(&plan, self.link_state(now));
        self.ladder.encoded(encoded.codec, want.extent, encoded.bytes.len(), encoded.quantizer, per_frame);
        let newest = self.outgoing.next.as_ref().map(|n| n.frame).max(self.outgoing.last_sent);
        if newest.is_none_or(|n| encoded.frame > n) {
            record_stream(&mut self.stats, &encoded, want.extent, plan.fps);
            (self.outgoing.next, self.owed.fresh) = (Some(encoded), false);
            self.wake.notify_one();
        }
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

/// A client a frame goes to, with its plan and its stream.
struct Recipient {
    id: u64,
    plan: Plan,
    stream: Arc<Mutex<Stream>>,
}

/// An encode job: a frame drawn as one [`Want`], and the clients it goes to with their plans.
struct Job {
    frame: ReadFrame,
    to: Vec<Recipient>,
    /// Threads for one client's encode ([`client_threads`]): its VP8 encoder's
    /// (when one is made), or its JPEG's strips encoded at once.
    threads: u32,
}

/// Threads for each client's encode when `video` clients decode video and
/// `encoders` encoder threads run: half the encoders (at most 8) for one or
/// two, and the encoders shared out between more. libvpx's threads wait for
/// each other's rows by spinning: more of them than cores starve the producer
/// beside them (docs/streaming.md, bench-24).
fn client_threads(encoders: u32, video: usize) -> u32 {
    let video = u32::try_from(video).unwrap_or(u32::MAX).max(1);
    (encoders / video).clamp(1, (encoders / CLIENT_SHARE).clamp(1, crate::vp8::MAX_THREADS))
}

#[derive(Default)]
struct State {
    clients: BTreeMap<u64, Client>,
    joined: u64,
    /// When [`Hub::wait_stale`] last said a frame was wanted again: it says so
    /// again once a frame was drawn since, or [`RETELL`] after.
    stale_told: Option<Instant>,
    /// What the run's session numbers its frames from: every session counts
    /// from 0, and the clients see frames numbered after every one before
    /// (a page draws a frame only when it is newer than the last it drew).
    base: u64,
    /// One past the highest frame number drawn for the clients.
    seen: u64,
}

/// The clients, and the encoder workers their frames go through.
pub struct Hub {
    state: Mutex<State>,
    /// Signalled when a frame is delivered or acknowledged, and when a client leaves.
    arrived: Condvar,
    exposure: AtomicU32,
    jobs: Mutex<Option<SyncSender<Job>>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    /// Its encoder threads.
    encoders: u32,
    /// Frames sent to any client (the run's summary: what the view took of its frames).
    sent: AtomicU64,
}

/// A client let in: its id, and the notification its frames come with.
pub struct Joined {
    /// The client's id, for every later call.
    pub id: u64,
    /// Notified when a frame for it is ready.
    pub wake: Arc<Notify>,
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
            encoders: workers as u32,
            sent: AtomicU64::new(0),
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

    /// A new client (no canvas yet); `None` when `MAX_CLIENTS` (32) are connected.
    pub fn join(&self) -> Option<Joined> {
        let mut s = self.state();
        if s.clients.len() >= MAX_CLIENTS {
            return None;
        }
        s.joined += 1;
        let (id, wake) = (s.joined, Arc::new(Notify::new()));
        s.clients.insert(id, Client::new(wake.clone()));
        Some(Joined { id, wake })
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
                (c.canvas, c.outgoing.next, c.owed.fresh) = (Some(extent), None, true);
                c.preparing.frames.clear();
                c.still = Still::new(None);
            }
        });
    }

    /// The client's canvas, once the page said it.
    pub fn canvas(&self, id: u64) -> Option<vk::Extent2D> {
        self.with(id, |c| c.canvas).flatten()
    }

    /// What the client asks for from its next frame on.
    pub fn set_mode(&self, id: u64, mode: Mode) {
        self.with(id, |c| c.ladder.set_mode(mode));
    }

    /// Whether the client's page decodes VP8.
    pub fn set_video(&self, id: u64, video: bool) {
        self.with(id, |c| c.ladder.set_video(video));
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

    /// The client drew frame `frame`, which found `ahead` frames it had not yet
    /// acknowledged when it arrived (`None`: a client that does not say): the
    /// link measures it, and another may go.
    pub fn ack(&self, id: u64, frame: u64, ahead: Option<u32>) {
        self.with(id, |c| c.link.acked(frame, Instant::now(), ahead));
        self.arrived.notify_all();
    }

    /// The client's newest frame, if one waits and its link has room now (counted as sent).
    pub fn next_for(&self, id: u64) -> Option<Encoded> {
        let next = self.with(id, |c| c.take_next(Instant::now())).flatten();
        if next.is_some() {
            self.sent.fetch_add(1, Ordering::Relaxed);
        }
        next
    }

    /// Frames sent to any client so far, all clients together.
    pub fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// [`Hub::next_for`], waiting at most `timeout` for one (a thread that
    /// pumps frames, the notebook widget's); `None` also once the client left.
    pub fn wait_next(&self, id: u64, timeout: Duration) -> Option<Encoded> {
        let deadline = Instant::now() + timeout;
        let mut s = self.state();
        loop {
            if let Some(next) = s.clients.get_mut(&id)?.take_next(Instant::now()) {
                self.sent.fetch_add(1, Ordering::Relaxed);
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
    /// exact, or one that skipped the run's last frame (its rate or its link held it
    /// back). The run's last frame needs drawing again. Waits at most `timeout` for one.
    pub fn wait_stale(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut s = self.state();
        loop {
            let now = Instant::now();
            let told = s.stale_told;
            let stale = s.clients.values().any(|c| {
                let last_drawn = c.schedule.last_drawn;
                let idle = last_drawn.is_none_or(|at| now.duration_since(at) >= STILL_AFTER);
                let owed = c.owed.fresh || c.owed.behind || (c.settles() && !c.still.exact_sent);
                let free = c.preparing.frames.is_empty()
                    && c.outgoing.next.is_none()
                    && c.link.frames_in_flight() == 0;
                // Told already, and no frame drawn since: not again before RETELL.
                let waiting =
                    told.is_some_and(|t| now.duration_since(t) < RETELL && last_drawn.is_none_or(|d| d < t));
                c.canvas.is_some() && free && idle && owed && !waiting
            });
            if stale {
                s.stale_told = Some(now);
            }
            let Some(left) = deadline.checked_duration_since(now).filter(|_| !stale) else { return stale };
            let nap = left.min(STALE_NAP);
            s = self.arrived.wait_timeout(s, nap).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// Multiplies the draw's exposure by `factor` (within 1/64..64).
    pub fn change_exposure(&self, factor: f32) {
        let range = (1.0 / EXPOSURE_RANGE, EXPOSURE_RANGE);
        let scale = |bits: u32| Some((f32::from_bits(bits) * factor).clamp(range.0, range.1).to_bits());
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

    /// Whether a frame drawn as `want` with digest `digest` shows client `id` a
    /// picture it has not been sent ([`Client::changed`]).
    fn changed(&self, id: u64, want: Want, digest: u64) -> bool {
        self.with(id, |c| c.changed(want, digest)).unwrap_or(false)
    }

    /// Frame `frame` encoded for client `id` (`None`: nothing to send for it):
    /// replaces an older one still waiting, never a newer.
    fn deliver(&self, id: u64, frame: u64, encoded: Option<Encoded>) {
        self.with(id, |c| c.delivered(frame, encoded, Instant::now()));
        self.arrived.notify_all();
    }

    /// Clients whose frame `frame` will not come want the next one.
    fn unprepare(&self, frame: u64, ids: impl Iterator<Item = u64>) {
        let mut s = self.state();
        for id in ids {
            if let Some(c) = s.clients.get_mut(&id) {
                c.preparing.frames.retain(|p| p.frame != frame);
            }
        }
    }
}

/// The stream's current choice, for the page's status line.
fn record_stream(s: &mut ClientStats, e: &Encoded, extent: vk::Extent2D, fps: f64) {
    let (kind, quality, bitrate) = match e.codec {
        Codec::Raw => (Kind::Raw, 100, 0),
        Codec::Png => (Kind::Png, 100, 0),
        Codec::Jpeg { quality } => (Kind::Jpeg, quality, 0),
        Codec::Vp8 { bitrate } => (Kind::Vp8, e.quantizer.unwrap_or(0), bitrate),
    };
    (s.codec, s.quality, s.bitrate) = (Some(kind), quality, bitrate);
    (s.size, s.fps, s.exact) = (extent.into(), fps, e.codec.exact());
}

impl Watchers for Hub {
    fn wanted(&self, _frame: u64) -> Vec<Want> {
        let now = Instant::now();
        let mut wants: Vec<Want> = Vec::new();
        for c in self.state().clients.values_mut() {
            c.preparing.decided = c.want(now);
            if let Some(Decision { want, .. }) = c.preparing.decided.filter(|d| !wants.contains(&d.want)) {
                wants.push(want);
            }
        }
        wants
    }

    fn drawing(&self, frame: u64, want: Want) {
        let now = Instant::now();
        let mut s = self.state();
        let frame = frame + s.base;
        s.seen = s.seen.max(frame + 1);
        for c in s.clients.values_mut() {
            c.drawing(frame, want, now);
        }
    }

    fn take(&self, frame: ReadFrame) {
        let frame = ReadFrame { frame: frame.frame + self.state().base, ..frame };
        let want = Want { extent: frame.shot.extent, pixels: frame.shot.pixels };
        let (to, video): (Vec<Recipient>, usize) = {
            let s = self.state();
            let to = s.clients.iter().filter_map(|(id, c)| {
                let mut preparing = c.preparing.frames.iter();
                let p = preparing.find(|p| p.frame == frame.frame && p.want == want)?;
                Some(Recipient { id: *id, plan: p.plan, stream: c.stream.clone() })
            });
            (to.collect(), s.clients.values().filter(|c| c.ladder.video()).count())
        };
        if to.is_empty() {
            return;
        }
        let (ids, number): (Vec<u64>, u64) = (to.iter().map(|r| r.id).collect(), frame.frame);
        let job = Job { frame, to, threads: client_threads(self.encoders, video) };
        let sent = match lock(&self.jobs).as_ref() {
            Some(jobs) => jobs.try_send(job),
            None => Err(TrySendError::Disconnected(job)),
        };
        if sent.is_err() {
            // Every encoder is busy: this frame is skipped; the next one is drawn for them.
            self.unprepare(number, ids.into_iter());
        }
    }

    fn exposure(&self) -> f32 {
        f32::from_bits(self.exposure.load(Ordering::Relaxed))
    }

    fn abandon(&self) {
        for c in self.state().clients.values_mut() {
            c.preparing.decided = None;
            c.preparing.frames.clear();
        }
    }

    fn new_session(&self) {
        self.abandon();
        let mut s = self.state();
        s.base = s.seen;
    }
}

/// An encoder thread: encodes each job for each of its clients (one JPEG
/// for clients that ask the same of it), skipping a picture a client already has.
fn encode_jobs(hub: &Weak<Hub>, jobs: &Mutex<Receiver<Job>>) {
    loop {
        let job = lock(jobs).recv();
        let Ok(Job { frame, to, threads }) = job else { return };
        let Some(hub) = hub.upgrade() else { return };
        let stamp = unix_micros(frame.recorded);
        let want = Want { extent: frame.shot.extent, pixels: frame.shot.pixels };
        let digest = digest((*frame.pixels).as_ref());
        let mut done: Vec<Encoded> = Vec::new();
        for Recipient { id, plan, stream } in to {
            if !hub.changed(id, want, digest) {
                hub.deliver(id, frame.frame, None);
                continue;
            }
            let shared =
                done.iter().find(|e| e.codec == plan.codec && !matches!(plan.codec, Codec::Vp8 { .. }));
            let encoded = match shared {
                Some(e) => Ok(Some(e.clone())),
                None => {
                    let mut stream = lock(&stream);
                    stream.threads = threads;
                    stream.encode(&frame, plan.codec, plan.fps, stamp)
                }
            };
            match encoded {
                Ok(Some(e)) => {
                    done.push(e.clone());
                    hub.deliver(id, frame.frame, Some(e));
                }
                Ok(None) => hub.deliver(id, frame.frame, None),
                Err(e) => {
                    log::warn!("vkcuda: encoding frame {} failed: {e}", frame.frame);
                    hub.deliver(id, frame.frame, None);
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

#[cfg(test)]
mod over_a_wire;

#[cfg(test)]
mod tests {
    use super::*;
    use vkcuda::Format;
    use vkcuda_run::present::readback::Shot;

    const SIZE: vk::Extent2D = vk::Extent2D { width: 16, height: 8 };
    const JPEG: Pixels = Pixels::I420 { full_range: true };

    /// Frame `frame` drawn as `want`, every byte `fill` (the picture's content).
    fn drawn(frame: u64, want: Want, fill: u8) -> ReadFrame {
        let shot = Shot { extent: want.extent, format: Format::Rgba8, pixels: want.pixels, first: 0 };
        let pixels = vec![fill; shot.bytes()];
        ReadFrame { frame, shot, pixels: Box::new(pixels), recorded: Instant::now() }
    }

    /// Waits (bounded) until `check` holds.
    fn until(what: &str, mut check: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !check() {
            assert!(Instant::now() < deadline, "not within 10 s: {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The run's consumer: frame `frame` drawn for whoever wants it, every byte `fill`, then taken.
    fn consume(hub: &Hub, frame: u64, fill: u8) -> Vec<Want> {
        let wants = hub.wanted(frame);
        for &w in &wants {
            hub.drawing(frame, w);
            hub.take(drawn(frame, w, fill));
        }
        wants
    }

    fn waiting(hub: &Hub, id: u64) -> Option<u64> {
        hub.with(id, |c| c.outgoing.next.as_ref().map(|n| n.frame)).flatten()
    }

    fn client(hub: &Hub, mode: Mode) -> u64 {
        let id = hub.join().unwrap().id;
        hub.set_mode(id, mode);
        hub.set_rate(id, 0.0);
        hub.set_canvas(id, SIZE);
        id
    }

    #[test]
    fn a_client_at_60_a_second_gets_60_when_draws_come_at_odd_times() {
        // The run offers a draw every 7 ms (its frames' pace, not the page's); each
        // frame is encoded, sent and acknowledged at once. Timed from the last draw,
        // a 16.7 ms interval would give a draw every 21 ms: 47.6 a second.
        let mut c = Client::new(Arc::new(Notify::new()));
        c.canvas = Some(SIZE);
        c.ladder.set_mode(Mode::Raw);
        c.ladder.set_display(60.0);
        let start = Instant::now();
        let mut drawn = 0u32;
        for step in 0..1430u64 {
            let now = start + Duration::from_millis(7 * step);
            let Some(decided) = c.want(now) else { continue };
            c.preparing.decided = Some(decided);
            c.drawing(step, decided.want, now);
            c.preparing.frames.clear();
            c.link.sent(step, 100, now, false);
            c.link.acked(step, now + Duration::from_millis(1), None);
            drawn += 1;
        }
        // 10 s.
        assert!((595..=602).contains(&drawn), "{drawn} frames in 10 s at 60 a second");
    }

    #[test]
    fn the_schedule_keeps_its_due_times_and_makes_up_a_held_draw_once() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let mut s = Schedule { pace: ms(10), ..Schedule::default() };
        assert!(!s.early(t, ms(10)), "nothing drawn yet");
        s.drew(t);
        assert!(s.early(t + ms(9), ms(10)) && !s.early(t + ms(10), ms(10)));
        // Drawn 3 ms late: the next is still due on the schedule, not 10 ms after.
        s.drew(t + ms(13));
        assert_eq!(s.due, Some(t + ms(20)));
        // The rate just rose (a 5 ms interval): due 5 ms after the last draw, before the schedule.
        assert!(s.early(t + ms(17), ms(5)) && !s.early(t + ms(18), ms(5)));
        // Held 40 ms by the link: the next is due half an interval back from now (made up once).
        s.drew(t + ms(60));
        assert_eq!(s.due, Some(t + ms(55)));
        assert!(!s.early(t + ms(60), ms(10)));
    }

    #[test]
    fn the_lead_is_a_moving_average_of_the_frames_draw_to_encoded() {
        let t = Instant::now();
        let ms = Duration::from_millis;
        let mut p = Preparing::default();
        let plan = Plan { codec: Codec::Raw, extent: SIZE, fps: 60.0 };
        let want = Want { extent: SIZE, pixels: Pixels::Rgba8 };
        for frame in 0..2 {
            p.frames.push(Prepared { frame, want, plan, drawn: t });
        }
        assert_eq!(p.done(1, t + ms(8)).map(|d| d.frame), Some(1));
        assert_eq!(p.lead, ms(2), "a quarter of the new");
        assert!(p.done(1, t).is_none(), "done once");
        p.done(0, t + ms(10));
        assert_eq!(p.lead, (ms(2) * 3 + ms(10)) / 4);
    }

    #[test]
    fn before_the_link_is_measured_two_frames_go_and_newest_wins() {
        let hub = Hub::new(1);
        let id = hub.join().unwrap().id;
        hub.set_rate(id, 0.0);
        assert!(hub.wanted(0).is_empty(), "no canvas yet, no frame");
        hub.set_canvas(id, SIZE);
        assert_eq!(consume(&hub, 0, 1), vec![Want { extent: SIZE, pixels: JPEG }], "JPEG q80 at the canvas");
        until("frame 0 encoded", || waiting(&hub, id) == Some(0));
        let e = hub.next_for(id).unwrap();
        let h = crate::protocol::Header::parse(&e.bytes).unwrap();
        assert_eq!((h.kind, h.quality, h.frame), (crate::protocol::Kind::Jpeg, 80, 0));
        assert_eq!(consume(&hub, 5, 2).len(), 1);
        until("frame 5 encoded", || waiting(&hub, id) == Some(5));
        assert!(hub.next_for(id).is_some());
        assert!(hub.wanted(6).is_empty(), "two in flight, the link unmeasured: nothing more drawn");
        hub.ack(id, 5, None);
        assert_eq!(consume(&hub, 9, 3).len(), 1, "acknowledged: room again");
        until("frame 9 encoded", || waiting(&hub, id) == Some(9));
        // An older encode never replaces a newer one.
        let old =
            Encoded { frame: 8, bytes: bytes::Bytes::new(), codec: Codec::Raw, quantizer: None, key: true };
        let plan = Plan { codec: Codec::Raw, extent: SIZE, fps: 60.0 };
        let prepared =
            Prepared { frame: 8, want: Want { extent: SIZE, pixels: JPEG }, plan, drawn: Instant::now() };
        hub.with(id, |c| c.preparing.frames.push(prepared));
        hub.deliver(id, 8, Some(old));
        assert_eq!(waiting(&hub, id), Some(9));
        let stats = hub.stats(id);
        assert_eq!((stats.sent, stats.skipped, stats.codec), (2, 4, Some(Kind::Jpeg)), "frames 1-4 skipped");
        hub.close();
    }

    #[test]
    fn a_new_session_counting_from_0_again_is_numbered_after_the_frames_before() {
        let hub = Hub::new(1);
        let id = client(&hub, Mode::Raw);
        for frame in 0..3 {
            consume(&hub, frame, 1);
            until("the frame encoded", || waiting(&hub, id) == Some(frame));
            let e = hub.next_for(id).unwrap();
            hub.ack(id, e.frame, None);
        }
        // The session ends while frame 3 is drawn; the next counts from 0.
        let wants = hub.wanted(3);
        hub.drawing(3, wants[0]);
        hub.new_session();
        hub.take(drawn(3, wants[0], 9));
        assert_eq!(waiting(&hub, id), None, "the ended session's frame does not come");
        for (frame, sent) in [(0, 4), (1, 5)] {
            consume(&hub, frame, 2);
            until("the new session's frame encoded", || waiting(&hub, id) == Some(sent));
            let e = hub.next_for(id).unwrap();
            let h = crate::protocol::Header::parse(&e.bytes).unwrap();
            assert_eq!(
                (e.frame, h.frame),
                (sent, sent),
                "sent as frame {sent}, after frame 3 of the session before"
            );
            hub.ack(id, e.frame, None);
        }
        hub.close();
    }

    #[test]
    fn clients_that_want_the_same_share_a_draw_and_a_stalled_one_holds_one_frame() {
        let hub = Hub::new(2);
        let (a, b) = (client(&hub, Mode::Raw), client(&hub, Mode::Raw));
        let other = vk::Extent2D { width: 8, height: 8 };
        let c = client(&hub, Mode::Raw);
        hub.set_canvas(c, other);
        let wants = consume(&hub, 0, 0);
        assert_eq!(wants.len(), 2, "one draw per size: {wants:?}");
        for id in [a, b, c] {
            until("frame 0 for each", || waiting(&hub, id) == Some(0));
        }
        // Client c's socket takes frames; its page never acknowledges one.
        let mut drawn_for_c = 1;
        for frame in 1..60 {
            for id in [a, b] {
                if let Some(e) = hub.next_for(id) {
                    hub.ack(id, e.frame, None);
                }
            }
            hub.next_for(c);
            let wants = consume(&hub, frame, frame as u8);
            drawn_for_c += usize::from(wants.iter().any(|w| w.extent == other));
            for id in [a, b, c] {
                until("every frame drawn encoded", || {
                    hub.with(id, |c| c.preparing.frames.is_empty()).unwrap_or(true)
                });
            }
        }
        assert_eq!(drawn_for_c, 2, "two sent (the link's window before it is measured), then nothing");
        assert_eq!((hub.stats(c).sent, waiting(&hub, c)), (2, None), "it holds no frame");
        assert!(hub.stats(a).sent >= 50, "{:?}", hub.stats(a));
        hub.leave(c);
        assert_eq!(hub.clients(), 2);
        hub.close();
    }

    #[test]
    fn a_frame_drawn_for_others_at_the_same_size_is_not_a_clients() {
        // A video client encodes its frames in a chain: one it did not ask for would
        // break it (its page decodes garbage until the next key frame).
        let hub = Hub::new(1);
        let (a, b) = (client(&hub, Mode::Raw), client(&hub, Mode::Raw));
        let want = hub.wanted(10)[0];
        hub.drawing(10, want);
        // Frame 11: a is still preparing frame 10 (its limit), b asks again... only b draws.
        hub.with(a, |c| {
            let plan = Plan { codec: Codec::Raw, extent: SIZE, fps: 60.0 };
            c.preparing.frames.push(Prepared { frame: 0, want, plan, drawn: Instant::now() })
        });
        hub.with(b, |c| c.preparing.frames.clear());
        let wants = hub.wanted(11);
        assert_eq!(wants, vec![want]);
        hub.drawing(11, want);
        assert_eq!(
            hub.with(a, |c| c.preparing.frames.iter().map(|p| p.frame).collect::<Vec<_>>()),
            Some(vec![10, 0])
        );
        hub.take(drawn(11, want, 1));
        until("frame 11 encoded for b", || waiting(&hub, b) == Some(11));
        assert_eq!(waiting(&hub, a), None, "a did not ask for frame 11");
        hub.take(drawn(10, want, 1));
        until("frame 10 encoded for a", || waiting(&hub, a) == Some(10));
        hub.close();
    }

    #[test]
    fn a_standing_picture_is_sent_once_exact_and_a_change_brings_frames_again() {
        let hub = Hub::new(1);
        let id = client(&hub, Mode::Auto);
        let lossy = Want { extent: SIZE, pixels: JPEG };
        let exact = Want { extent: SIZE, pixels: Pixels::Rgba8 };
        let mut frame = 0;
        let mut next = |fill: u8| {
            frame += 1;
            let wants = consume(&hub, frame, fill);
            until("encoded", || hub.with(id, |c| c.preparing.frames.is_empty()).unwrap_or(true));
            if let Some(e) = hub.next_for(id) {
                hub.ack(id, e.frame, None);
                return (wants, Some(crate::protocol::Header::parse(&e.bytes).unwrap().kind));
            }
            (wants, None)
        };
        assert_eq!(next(7), (vec![lossy], Some(crate::protocol::Kind::Jpeg)));
        assert_eq!(next(7), (vec![lossy], None), "unchanged: not sent again");
        // Once it stood STILL_AFTER: drawn exact at the canvas, and sent (PNG), once.
        let mut seen = Vec::new();
        until("the exact frame", || {
            let got = next(7);
            seen.push(got.clone());
            got == (vec![exact], Some(crate::protocol::Kind::Png))
        });
        until("an exact check", || next(7).0 == vec![exact]);
        assert_eq!(next(7).1, None, "checked, unchanged: nothing sent");
        // It changes: the check that saw it is not sent; lossy frames come again.
        until("a check that sees the change", || next(9).0 == vec![exact]);
        assert_eq!(next(10), (vec![lossy], Some(crate::protocol::Kind::Jpeg)));
        assert!(hub.stats(id).exact || hub.stats(id).codec == Some(Kind::Jpeg));
        hub.close();
    }

    #[test]
    fn a_watcher_with_no_frame_yet_is_stale_once_per_still_period() {
        let hub = Hub::new(1);
        assert!(!hub.wait_stale(Duration::from_millis(1)), "nobody watches");
        let id = client(&hub, Mode::Raw);
        assert!(hub.wait_stale(Duration::from_secs(10)), "a new canvas, no frame");
        assert!(!hub.wait_stale(Duration::from_millis(1)), "said once, then not until a frame is drawn");
        consume(&hub, 1, 1);
        until("sent", || waiting(&hub, id).is_some());
        hub.next_for(id);
        hub.ack(id, 1, None);
        assert!(!hub.wait_stale(STILL_AFTER * 2), "a pinned mode owes nothing once it has a frame");
        hub.close();
    }

    #[test]
    fn at_most_max_clients_and_a_stopped_run_frees_them() {
        let hub = Hub::new(1);
        let ids: Vec<u64> = (0..MAX_CLIENTS).map(|_| hub.join().unwrap().id).collect();
        assert!(hub.join().is_none());
        hub.set_canvas(ids[0], SIZE);
        hub.set_mode(ids[0], Mode::Raw);
        hub.set_rate(ids[0], 0.0);
        let want = hub.wanted(0)[0];
        hub.drawing(0, want);
        assert_eq!(hub.with(ids[0], |c| c.preparing.frames.len()), Some(1));
        hub.abandon();
        assert_eq!(
            hub.with(ids[0], |c| c.preparing.frames.len()),
            Some(0),
            "the frame being drawn will not come"
        );
        hub.close();
    }

    #[test]
    fn a_display_rate_spaces_the_frames_drawn_for_a_client() {
        let hub = Hub::new(1);
        let id = client(&hub, Mode::Raw);
        hub.set_rate(id, 1.0);
        assert_eq!(consume(&hub, 0, 0).len(), 1);
        until("sent", || waiting(&hub, id).is_some());
        hub.ack(id, hub.next_for(id).unwrap().frame, None);
        assert!(hub.wanted(1).is_empty(), "a second has not passed since the last draw");
        hub.set_rate(id, 0.0);
        assert_eq!(hub.wanted(2).len(), 1);
        hub.close();
    }

    #[test]
    fn a_pump_waits_for_a_frame_and_not_after_its_client_left() {
        let hub = Hub::new(1);
        let id = client(&hub, Mode::Raw);
        let pump = {
            let hub = hub.clone();
            std::thread::spawn(move || hub.wait_next(id, Duration::from_secs(30)).map(|e| e.frame))
        };
        consume(&hub, 3, 3);
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
    fn video_clients_share_the_encoder_threads() {
        // 8 encoder threads: one video client's VP8 gets 4, each of 8 clients' gets 1.
        for (clients, threads) in [(1, 4), (8, 1)] {
            let hub = Hub::new(8);
            let ids: Vec<u64> = (0..clients).map(|_| client(&hub, Mode::Video)).collect();
            ids.iter().for_each(|&id| hub.set_video(id, true));
            consume(&hub, 0, 7);
            for &id in &ids {
                until("frame 0 encoded", || waiting(&hub, id) == Some(0));
                let stream = hub.with(id, |c| c.stream.clone()).unwrap();
                assert_eq!(lock(&stream).threads, threads, "{clients} video clients");
            }
            hub.close();
        }
        assert_eq!([0, 2, 3, 4, 16].map(|video| client_threads(8, video)), [4, 4, 2, 2, 1]);
        assert_eq!([(1, 1), (2, 1), (16, 1), (16, 3)].map(|(e, v)| client_threads(e, v)), [1, 1, 8, 5]);
    }

    #[test]
    fn exposure_changes_by_factors_within_bounds_and_none_is_lost() {
        let hub = Hub::new(1);
        hub.change_exposure(2.0);
        assert_eq!(hub.exposure(), 2.0);
        (0..20).for_each(|_| hub.change_exposure(0.5));
        assert_eq!(hub.exposure(), 1.0 / 64.0);
        (0..6).for_each(|_| hub.change_exposure(2.0));
        assert_eq!(hub.exposure(), 1.0);
        // Two pages pressing E and D at once: every change counts (powers of two are exact).
        let pressers: Vec<_> = (0..4)
            .map(|_| {
                let hub = hub.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        hub.change_exposure(2.0);
                        hub.change_exposure(0.5);
                    }
                })
            })
            .collect();
        pressers.into_iter().for_each(|p| p.join().unwrap());
        assert_eq!(hub.exposure(), 1.0);
        hub.close();
    }
}
