//! What a client is sent, chosen to hold its latency on its link: the codec,
//! the size the image is sent at (the page's canvas stays; the page scales a
//! smaller image up), the quality or bitrate, and the frame rate.
//!
//! - Where the link is plenty for JPEG at the default quality whatever it
//!   weighs (loopback, a fast LAN), JPEG at the canvas size, as before: the
//!   cheapest frame to make and to decode.
//! - Where it carries JPEG at about half that weight (quality ~40 and up), or
//!   the page has no video decoder (plain HTTP to another machine is not a
//!   secure context), JPEG with its quality set frame by frame to fit 80 % of
//!   the link's capacity at the display rate (up to the default quality:
//!   frames of a busy picture weigh 10 times a calm one's, and a link that
//!   carries them on average queues the heavy ones), then a lower rate and size.
//! - Below that, where the page decodes video (WebCodecs), VP8 at 80 % of
//!   the link's capacity; its quantizer, read back from the encoder, trades
//!   frame rate (down to 32 a second, for 30 delivered) for quality first,
//!   then size. (JPEG frames are quicker to make and to decode; VP8 frames
//!   at 1080p of 44 KB were made 52 a second on the H200: bench-31's `bd`.)
//!
//! Frames of `budget / rate` bytes take 0.8 / rate seconds to cross the
//! link whatever its speed: the window (the `link` module) keeps any queue to
//! a frame, so that is the latency the ladder holds. The page may pin the
//! codec, the quality, or exact pixels ([`Mode`]).

use std::time::{Duration, Instant};

use ash::vk;

use crate::vp8::MAX_QUANTIZER;

/// The JPEG quality where the link allows it, and of a page that asks for JPEG
/// without one. Design: the view before the ladder sent q80, the reference
/// every PSNR of docs/results/2026-11-27-links is scored against.
pub const DEFAULT_QUALITY: u8 = 80;
/// The share of the link's capacity a stream may use: bytes a frame against
/// queueing. bench-26, 2026-11-29 (`share.patch`): 0.9 gave 5 Mbit/s p95
/// 187 ms against 100, 720p 93 against 82.
pub(crate) const SHARE: f64 = 0.8;
/// How much above [`SHARE`] a probe asks, to find out whether the link carries
/// more: enough for the window to hold frames back, whose acknowledgements
/// then measure the link (the window grows by a quarter each round trip).
/// Design (BBR's probe, as docs/streaming.md's tuning table says).
const PROBE_GAIN: f64 = 2.0;
/// How often, and for how long, the link is probed (when it has not been the
/// limit lately). Design, as [`PROBE_GAIN`].
const PROBE_EVERY: Duration = Duration::from_millis(2500);
const PROBE_FOR: Duration = Duration::from_millis(600);
/// How often the rate and size are reconsidered. bench-18, 2026-11-28 (F):
/// after the fall p95 152, 183, 171 ms against 450, 463, 754.
const STEP_EVERY: Duration = Duration::from_millis(500);
/// How often while every VP8 frame is at the coarsest quantizer (the link
/// fell: frames still over their budget): twice as often (bench-18's F).
const PINNED_STEP_EVERY: Duration = Duration::from_millis(STEP_EVERY.as_millis() as u64 / 2);
/// The frame rate a stream gives up quality for before it gives up size. A
/// cap: frames come a little under it (a late encode, a frame held by the
/// window), so 32 for 30 delivered. bench-26, 2026-11-29: 30.9–32.3 frames/s
/// in 12 of 12 rows, PSNR 0.36 dB nearer q80's.
const MIN_FPS: f64 = 32.0;
/// A step down in rate: a quarter fewer frames, each with a third more bytes.
/// Design (7974969); docs/streaming.md at 9712a98 (bench-17) reads the steps
/// after the fall, the rate × 0.75 each.
const RATE_DOWN: f64 = 0.75;
/// A step up in rate: about what a step down gave up (1 / [`RATE_DOWN`] is
/// 1.333…; 1.33 as it was measured with). Design, as [`RATE_DOWN`].
const RATE_UP: f64 = 1.33;
/// The frames a second a client is budgeted at before its page says its
/// display's rate, or when it says none: a 60 Hz display's.
const BUDGET_FPS: f64 = 60.0;
/// The sizes an image may be sent at, as a share of the canvas. bench-23,
/// 2026-11-28: one step at a time (`fit.patch`, a step to the size that fits:
/// 20 Mbit/s p95 148–171 ms against 120–122).
const SCALES: [f64; 5] = [1.0, 0.75, 0.5, 0.375, 0.25];
/// The least side an image is sent at: a VP8 macroblock.
const LEAST_SIDE: u32 = 16;
/// VP8 quantizers (0–63): above `SOFT` the rate falls to its floor, each
/// frame getting more of the bytes (at 1080p over 20 Mbit/s julia frames
/// stay below JPEG q80's PSNR at any rate: quality first, down to
/// [`MIN_FPS`]); above `COARSE` the size falls too; below `FINE` the size,
/// then the rate, rise again. bench-26, 2026-11-29 (`SOFT`: quality first).
pub(crate) const SOFT: f64 = 40.0;
pub(crate) const COARSE: f64 = 50.0;
pub(crate) const FINE: f64 = 34.0;
/// The least JPEG quality an adaptive stream goes to (its most: [`DEFAULT_QUALITY`]).
/// Design (7974969); below it the size falls instead.
const JPEG_LEAST: u8 = 20;
/// JPEG within this of [`DEFAULT_QUALITY`] is fine: the size, then the rate,
/// rise. Design (7974969), as [`JPEG_LEAST`].
const JPEG_FINE_WITHIN: u8 = 10;
/// A JPEG frame over its budget by this share lowers the next frame's quality
/// by [`JPEG_DOWN`] of it (at least [`JPEG_DOWN_LEAST`]); one under
/// [`JPEG_LIGHT`] of it raises it by [`JPEG_UP`]: down fast (a heavy frame
/// queues), up slowly. Design (7974969), not tuned by a bench alone: bench-27's
/// JPEG rows over 100 Mbit/s (60 frames/s in 23 of 23) run with it.
const JPEG_HEAVY: f64 = 1.1;
const JPEG_LIGHT: f64 = 0.7;
const JPEG_DOWN: f64 = 0.15;
const JPEG_DOWN_LEAST: f64 = 2.0;
const JPEG_UP: f64 = 3.0;
/// Links faster than this (bytes a second) are plenty for JPEG whatever it
/// weighs (loopback). bench-27, 2026-11-29: a fixed q80 below it sent
/// 148–161 KB frames at p50 39–44 ms.
const PLENTY: f64 = 40e6;
/// Video once the budget is under this share of what JPEG at the default
/// quality needs (JPEG at about q40 weighs 0.6 of q80's); JPEG again above the
/// second. Design; bench-27 (the weight averaged over the scene) ran with them.
const VIDEO_BELOW: f64 = 0.55;
const JPEG_AGAIN: f64 = 0.75;
/// The budget of a page that pinned video before its link is measured, bytes a
/// second (8 Mbit/s). Design: the first frames' measure then raises it.
const VIDEO_UNMEASURED: f64 = 1e6;
/// VP8's bitrates, bits a second, at least and at most. Design: bounds, not
/// tunings (the links watched through are 5–100 Mbit/s).
const LEAST_BITRATE: f64 = 100e3;
const MOST_BITRATE: f64 = 200e6;
/// A JPEG's bytes follow its quality as `s^-JPEG_EXPONENT`, `s` the scale of its
/// quantization tables (libjpeg's: 5000/q below q50, 200 − 2q from it): fitted
/// to julia's frames (`vkcuda-codecs weights`: over 80 frames at 1080p the sum
/// of their bytes at q over their bytes at q80 within 2 % of it from q20 to q75,
/// within 6 % at 720p, where one frame's ratio ranges 0.32–0.82 at q20; a
/// smooth gradient weighs up to 1.3 times more than it says at q30–q65, so it
/// turns to video a little early, where VP8 weighs a fifth of JPEG).
const JPEG_EXPONENT: f64 = 0.5;
/// The frames JPEG's weight is averaged over: julia's detail, and its JPEG
/// frames' bytes, swing 10× within a fifth of a second; the first frames
/// alone chose the codec by where in that swing the stream began. bench-27,
/// 2026-11-29: 100 Mbit/s at 60 frames/s in 23 of 23 rows against 16 of 19.
const WEIGHT_FRAMES: u32 = 30;

/// What the page asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    /// Chosen for the link (and exact pixels once the picture stops).
    #[default]
    Auto,
    /// JPEG at this quality, paced by the link.
    Jpeg {
        /// 1–100.
        quality: u8,
    },
    /// Video, sized for the link.
    Video,
    /// Lossless (PNG) every frame, at the canvas size.
    Png,
    /// The RGBA rows every frame, at the canvas size (exact, uncompressed).
    Raw,
}

/// How a frame is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// RGBA rows.
    Raw,
    /// JPEG (4:2:0) at a quality.
    Jpeg {
        /// 1–100.
        quality: u8,
    },
    /// VP8 at a bitrate.
    Vp8 {
        /// Bits a second.
        bitrate: u32,
    },
    /// PNG (lossless).
    Png,
}

impl Codec {
    /// Whether the frame is exact (lossless, at the canvas size).
    pub fn exact(self) -> bool {
        matches!(self, Codec::Raw | Codec::Png)
    }
}

/// What the next frame of a client is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    /// How it is encoded.
    pub codec: Codec,
    /// The size it is sent at.
    pub extent: vk::Extent2D,
    /// At most this many frames a second.
    pub fps: f64,
}

/// What the ladder is told of the link.
#[derive(Clone, Copy, Debug, Default)]
pub struct LinkState {
    /// Capacity in bytes a second, once measured.
    pub capacity: Option<f64>,
    /// Whether the link was the limit lately (no probe needed).
    pub limited_lately: bool,
    /// Whether it was measured long enough to choose by (JPEG at the display rate
    /// fills it meanwhile: the first frames' measure is the window's, not the link's).
    pub settled: bool,
}

/// The page's display rate.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Display {
    /// It said none: frames as fast as it acknowledges, budgeted at [`BUDGET_FPS`].
    Unlimited,
    /// At most this many frames a second.
    Rate(f64),
}

impl Display {
    /// The page's word: `fps` a second, 0 or less for no limit.
    fn of(fps: f64) -> Self {
        match fps {
            fps if fps > 0.0 => Display::Rate(fps),
            fps if fps <= 0.0 => Display::Unlimited,
            // Not a number: held to the budget's rate, as one said.
            _ => Display::Rate(BUDGET_FPS),
        }
    }

    /// Its frames a second (the budget's when unlimited).
    fn fps(self) -> f64 {
        match self {
            Display::Unlimited => BUDGET_FPS,
            Display::Rate(fps) => fps,
        }
    }
}

/// What the page asked of its stream.
#[derive(Debug)]
struct Asked {
    mode: Mode,
    /// It decodes VP8.
    video: bool,
    display: Display,
}

/// What auto mode sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AutoCodec {
    Jpeg,
    Video,
}

/// What the frames since the last step say of the stream: each a reason to step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Verdict {
    /// Softer than a frame's bytes at a lower rate would be: the rate falls.
    soft: bool,
    /// Too coarse at this size: the size falls.
    coarse: bool,
    /// Finer than needed: the size, then the rate, rise.
    fine: bool,
}

impl Verdict {
    /// Of VP8 frames of mean quantizer `q`.
    fn of_quantizer(q: f64) -> Self {
        Self { soft: q > SOFT, coarse: q > COARSE, fine: q < FINE }
    }

    /// Of JPEG frames at `quality`: coarse at its floor, fine near its top.
    fn of_jpeg(quality: u8) -> Self {
        let coarse = quality <= JPEG_LEAST;
        Self { soft: coarse, coarse, fine: quality >= DEFAULT_QUALITY - JPEG_FINE_WITHIN }
    }
}

/// Where the stream stands on the ladder.
#[derive(Debug)]
struct Rung {
    /// What auto mode sends now.
    auto: AutoCodec,
    /// Index into [`SCALES`].
    scale: usize,
    fps: f64,
    /// JPEG's quality in auto mode, fitted frame by frame.
    quality: u8,
}

impl Rung {
    /// One step, at `floor` frames a second at least and `display` at most:
    /// `pinned` (every VP8 frame at the coarsest quantizer) the rate to its
    /// floor and a size down at once; else the rate down while soft, then the
    /// size while coarse; the size up while fine, then the rate.
    fn step(&mut self, verdict: Verdict, pinned: bool, floor: f64, display: f64) {
        if pinned {
            self.fps = floor;
            self.scale = (self.scale + 1).min(SCALES.len() - 1);
        } else if verdict.soft && self.fps > floor {
            self.fps = (self.fps * RATE_DOWN).max(floor);
        } else if verdict.coarse && self.scale + 1 < SCALES.len() {
            self.scale += 1;
        } else if verdict.fine && self.scale > 0 {
            self.scale -= 1;
        } else if verdict.fine && self.fps < display {
            self.fps = (self.fps * RATE_UP).min(display);
        }
    }

    /// The size at this step: the canvas scaled, at least [`LEAST_SIDE`] pixels a side, even.
    fn extent(&self, canvas: vk::Extent2D) -> vk::Extent2D {
        if self.scale == 0 {
            return canvas;
        }
        let s = SCALES[self.scale];
        let side = |v: u32| (((f64::from(v) * s) as u32).max(LEAST_SIDE) & !1).min(v);
        vk::Extent2D { width: side(canvas.width), height: side(canvas.height) }
    }
}

/// JPEG's weight: the bytes a JPEG at [`DEFAULT_QUALITY`] takes per canvas
/// pixel, as the JPEG frames sent at the canvas size say (any quality, by
/// [`jpeg_weight`]), averaged over the last [`WEIGHT_FRAMES`] or so.
#[derive(Debug, Default)]
struct JpegWeight {
    density: Option<f64>,
    /// How many said it (up to [`WEIGHT_FRAMES`]).
    frames: u32,
}

impl JpegWeight {
    /// A JPEG at `quality` of `extent` took `bytes`.
    fn note(&mut self, bytes: usize, extent: vk::Extent2D, quality: u8) {
        let pixels = (f64::from(extent.width) * f64::from(extent.height)).max(1.0);
        let density = bytes as f64 / pixels / jpeg_weight(quality);
        self.frames = (self.frames + 1).min(WEIGHT_FRAMES);
        let new = 1.0 / f64::from(self.frames);
        self.density = Some(self.density.map_or(density, |d| d + new * (density - d)));
    }

    /// Bytes a second JPEG at the default quality needs at `canvas`, `fps` frames a second, once weighed.
    fn need(&self, canvas: vk::Extent2D, fps: f64) -> Option<f64> {
        let pixels = f64::from(canvas.width) * f64::from(canvas.height);
        self.density.map(|d| d * pixels * fps)
    }
}

/// When the rate and size were last reconsidered, and the VP8 quantizers since.
#[derive(Debug, Default)]
struct Steps {
    last: Option<Instant>,
    quantizers: Vec<u8>,
}

impl Steps {
    /// The mean quantizer since the last step.
    fn quantizer(&self) -> Option<f64> {
        let n = self.quantizers.len();
        (n > 0).then(|| self.quantizers.iter().map(|&q| f64::from(q)).sum::<f64>() / n as f64)
    }
}

/// The probe's clock: while no frame waited for the link lately, now and then
/// a burst above the share: the link's answer measures it anew (it may be
/// faster now).
#[derive(Debug, Default)]
struct Probe {
    started: Option<Instant>,
}

impl Probe {
    /// The budget's gain at `now` on `link`: [`PROBE_GAIN`] for [`PROBE_FOR`]
    /// every [`PROBE_EVERY`] while the link was not the limit lately, else 1.
    fn gain(&mut self, link: LinkState, now: Instant) -> f64 {
        if link.limited_lately {
            self.started = Some(now);
            return 1.0;
        }
        let started = *self.started.get_or_insert(now);
        let since = now.duration_since(started);
        if since >= PROBE_EVERY + PROBE_FOR {
            self.started = Some(now);
        }
        if since >= PROBE_EVERY && since < PROBE_EVERY + PROBE_FOR {
            PROBE_GAIN
        } else {
            1.0
        }
    }
}

/// The quality of the JPEG after one at `quality` took `bytes` of a `target`:
/// down by [`JPEG_DOWN`] of it (at least [`JPEG_DOWN_LEAST`]) when heavy, up
/// by [`JPEG_UP`] when light, within [`JPEG_LEAST`]..=[`DEFAULT_QUALITY`].
fn fitted_quality(quality: u8, bytes: usize, target: f64) -> u8 {
    let ratio = bytes as f64 / target.max(1.0);
    let q = f64::from(quality);
    let next = if ratio > JPEG_HEAVY {
        q - (q * JPEG_DOWN).max(JPEG_DOWN_LEAST)
    } else if ratio < JPEG_LIGHT {
        q + JPEG_UP
    } else {
        q
    };
    (next as u8).clamp(JPEG_LEAST, DEFAULT_QUALITY)
}

/// One client's choices and what its frames weighed.
#[derive(Debug)]
pub struct Ladder {
    asked: Asked,
    rung: Rung,
    weight: JpegWeight,
    steps: Steps,
    probe: Probe,
}

impl Default for Ladder {
    fn default() -> Self {
        Self::new()
    }
}

impl Ladder {
    /// A client of no known link, budgeted at 60 frames a second (`BUDGET_FPS`)
    /// and not held to a rate until the page says its display's.
    pub fn new() -> Self {
        Self {
            asked: Asked { mode: Mode::Auto, video: false, display: Display::Unlimited },
            rung: Rung { auto: AutoCodec::Jpeg, scale: 0, fps: BUDGET_FPS, quality: DEFAULT_QUALITY },
            weight: JpegWeight::default(),
            steps: Steps::default(),
            probe: Probe::default(),
        }
    }

    /// What the page asked for.
    pub(crate) fn mode(&self) -> Mode {
        self.asked.mode
    }

    /// The page asks for `mode` from its next frame on.
    pub(crate) fn set_mode(&mut self, mode: Mode) {
        self.asked.mode = mode;
    }

    /// Whether the page decodes VP8.
    pub(crate) fn video(&self) -> bool {
        self.asked.video
    }

    /// The page decodes VP8 (or not).
    pub(crate) fn set_video(&mut self, video: bool) {
        self.asked.video = video;
    }

    /// The page's display rate (0: no limit: frames as fast as it acknowledges,
    /// budgeted as `BUDGET_FPS`, 60 a second).
    pub fn set_display(&mut self, fps: f64) {
        self.asked.display = Display::of(fps);
        let display = self.display();
        self.rung.fps = self.rung.fps.min(display).max(display.min(MIN_FPS));
    }

    /// The page's display rate (`BUDGET_FPS`, 60, until it says).
    pub fn display(&self) -> f64 {
        self.asked.display.fps()
    }

    /// Whether the page said no display rate (frames as fast as it acknowledges).
    pub(crate) fn unlimited(&self) -> bool {
        self.asked.display == Display::Unlimited
    }

    /// The plan for the next frame at `canvas`, at `now`, on `link`.
    pub fn plan(&mut self, canvas: vk::Extent2D, link: LinkState, now: Instant) -> Plan {
        let full =
            Plan { codec: Codec::Jpeg { quality: DEFAULT_QUALITY }, extent: canvas, fps: self.display() };
        let budget = link.capacity.map(|c| c * SHARE * self.probe.gain(link, now));
        match self.asked.mode {
            Mode::Raw => Plan { codec: Codec::Raw, ..full },
            Mode::Png => Plan { codec: Codec::Png, ..full },
            Mode::Jpeg { quality } => Plan { codec: Codec::Jpeg { quality }, ..full },
            Mode::Video => self.video_plan(canvas, budget.unwrap_or(VIDEO_UNMEASURED), now),
            Mode::Auto => match budget {
                None => full,
                Some(budget) => self.auto_plan(canvas, budget, link, now),
            },
        }
    }

    /// Auto: JPEG at the default quality while the link carries it, else video or lighter JPEG.
    fn auto_plan(&mut self, canvas: vk::Extent2D, budget: f64, link: LinkState, now: Instant) -> Plan {
        // The budget over what JPEG at the default quality needs at the display rate.
        let room = match self.weight.need(canvas, self.display()) {
            _ if budget >= PLENTY => f64::INFINITY,
            Some(need) => budget / need,
            None => f64::INFINITY,
        };
        // Video where JPEG would fall below about half its default quality's bytes (a
        // JPEG frame is quicker to encode than a VP8 one: the display rate holds);
        // back to JPEG only with room to spare.
        let video = self.rung.auto == AutoCodec::Video;
        let below = if video { JPEG_AGAIN } else { VIDEO_BELOW };
        self.rung.auto = match self.asked.video && link.settled && room < below {
            true => AutoCodec::Video,
            false => AutoCodec::Jpeg,
        };
        if self.rung.auto == AutoCodec::Video {
            return self.video_plan(canvas, budget, now);
        }
        if room.is_infinite() {
            let display = self.display();
            (self.rung.scale, self.rung.fps, self.rung.quality) = (0, display, DEFAULT_QUALITY);
            return Plan { codec: Codec::Jpeg { quality: DEFAULT_QUALITY }, extent: canvas, fps: display };
        }
        self.step(now, None);
        let quality = self.rung.quality;
        Plan { codec: Codec::Jpeg { quality }, extent: self.rung.extent(canvas), fps: self.rung.fps }
    }

    fn video_plan(&mut self, canvas: vk::Extent2D, budget: f64, now: Instant) -> Plan {
        let coarse = self.steps.quantizer();
        self.step(now, coarse);
        let bitrate = (budget * 8.0).clamp(LEAST_BITRATE, MOST_BITRATE) as u32;
        Plan { codec: Codec::Vp8 { bitrate }, extent: self.rung.extent(canvas), fps: self.rung.fps }
    }

    /// Every [`STEP_EVERY`]: lower the rate while frames are soft, then the
    /// size while they are too coarse (VP8's mean `quantizer`; JPEG's quality
    /// at its floor); raise the size, then the rate, while there is room. While
    /// every VP8 frame is at the coarsest quantizer (a fall of the link leaves
    /// frames several times their budget: they queue), every
    /// [`PINNED_STEP_EVERY`], and the rate falls to its floor and the size a
    /// step at once.
    fn step(&mut self, now: Instant, quantizer: Option<f64>) {
        let pinned = quantizer.is_some_and(|q| q >= f64::from(MAX_QUANTIZER));
        let every = if pinned { PINNED_STEP_EVERY } else { STEP_EVERY };
        if self.steps.last.is_some_and(|at| now.duration_since(at) < every) {
            return;
        }
        let video = matches!(self.asked.mode, Mode::Video) || self.rung.auto == AutoCodec::Video;
        let verdict = match quantizer {
            Some(q) => Verdict::of_quantizer(q),
            // No video frame since the last step: nothing to go by.
            None if video => return,
            None => Verdict::of_jpeg(self.rung.quality),
        };
        self.steps = Steps { last: Some(now), quantizers: Vec::new() };
        let display = self.display();
        self.rung.step(verdict, pinned, display.min(MIN_FPS), display);
    }

    /// A frame was encoded as `codec` at `extent` into `bytes` (its VP8
    /// quantizer when video), `per_frame` the budget of a frame (bytes):
    /// JPEG's weight and, in auto mode, its quality follow the frame's bytes.
    pub fn encoded(
        &mut self,
        codec: Codec,
        extent: vk::Extent2D,
        bytes: usize,
        quantizer: Option<u8>,
        per_frame: Option<f64>,
    ) {
        match codec {
            Codec::Vp8 { .. } => self.steps.quantizers.extend(quantizer),
            Codec::Jpeg { quality }
                if self.rung.scale == 0 && (JPEG_LEAST..=DEFAULT_QUALITY).contains(&quality) =>
            {
                self.weight.note(bytes, extent, quality)
            }
            _ => {}
        }
        if let (Codec::Jpeg { quality }, Some(target), Mode::Auto) = (codec, per_frame, self.asked.mode) {
            self.rung.quality = fitted_quality(quality, bytes, target);
        }
    }

    /// The budget of one frame at `plan`'s rate on `link` (bytes), when measured.
    pub fn per_frame(plan: &Plan, link: LinkState) -> Option<f64> {
        link.capacity.map(|c| c * SHARE / plan.fps.max(1.0))
    }
}

/// A JPEG's bytes at `quality` over its bytes at [`DEFAULT_QUALITY`] (qualities
/// 1–100), as the ladder models them (the codec comparison's `weights` measures it).
pub fn jpeg_weight(quality: u8) -> f64 {
    // libjpeg's table scale for a quality (jcparam.c, `jpeg_quality_scaling`).
    let scale = |q: u8| match q.clamp(1, 100) {
        q if q < 50 => 5000.0 / f64::from(q),
        q => (200.0 - 2.0 * f64::from(q)).max(1.0),
    };
    (scale(quality) / scale(DEFAULT_QUALITY)).powf(-JPEG_EXPONENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HD: vk::Extent2D = vk::Extent2D { width: 1920, height: 1080 };

    fn link(mbit: f64) -> LinkState {
        LinkState { capacity: Some(mbit * 1e6 / 8.0), limited_lately: true, settled: true }
    }

    #[test]
    fn jpeg_at_the_default_quality_where_the_link_carries_it() {
        let mut l = Ladder::new();
        l.set_video(true);
        let now = Instant::now();
        assert_eq!(l.plan(HD, LinkState::default(), now).codec, Codec::Jpeg { quality: 80 }, "unmeasured");
        // 150 KB frames at 60 a second: 72 Mbit/s; a 1 Gbit/s link carries it.
        l.encoded(Codec::Jpeg { quality: 80 }, HD, 150_000, None, None);
        let p = l.plan(HD, link(1000.0), now);
        assert_eq!((p.codec, p.extent, p.fps), (Codec::Jpeg { quality: 80 }, HD, 60.0));
    }

    #[test]
    fn video_where_jpeg_does_not_fit_and_the_page_decodes_it() {
        let mut l = Ladder::new();
        l.set_video(true);
        l.encoded(Codec::Jpeg { quality: 80 }, HD, 150_000, None, None);
        let p = l.plan(HD, link(20.0), Instant::now());
        assert_eq!(p.codec, Codec::Vp8 { bitrate: 16_000_000 }, "80 % of 20 Mbit/s");
        // Without a decoder: JPEG whose quality falls with each frame too heavy for the budget.
        let mut l = Ladder::new();
        l.encoded(Codec::Jpeg { quality: 80 }, HD, 150_000, None, None);
        let p = l.plan(HD, link(20.0), Instant::now());
        let per = Ladder::per_frame(&p, link(20.0)).unwrap();
        assert!((per - 33_333.0).abs() < 1.0, "{per}");
        l.encoded(p.codec, p.extent, 150_000, None, Some(per));
        assert!(matches!(l.plan(HD, link(20.0), Instant::now()).codec, Codec::Jpeg { quality: q } if q < 80));
    }

    #[test]
    fn the_codec_follows_the_scenes_jpeg_weight_not_its_first_frames() {
        // The bench's julia at its start: two heavy frames at q80 (254 and 376 KB), then
        // JPEG at qualities fitted to the budget whose weight at q80 averages 180 KB,
        // swinging 3x. Weighed by the first frames (290 KB at q80), a 85 Mbit/s link
        // chose VP8 and 98 Mbit/s never took it back to JPEG.
        let mut l = Ladder::new();
        l.set_video(true);
        l.encoded(Codec::Jpeg { quality: 80 }, HD, 254_000, None, None);
        l.encoded(Codec::Jpeg { quality: 80 }, HD, 376_000, None, None);
        for i in 0..60 {
            let (quality, swing) = ([30, 45][i % 2], [0.5, 1.5][i / 2 % 2]);
            let bytes = 180e3 * jpeg_weight(quality) * swing;
            l.encoded(Codec::Jpeg { quality }, HD, bytes as usize, None, None);
        }
        let per_pixel = l.weight.density.unwrap() * f64::from(HD.width * HD.height);
        assert!((per_pixel - 180e3).abs() < 20e3, "{per_pixel}");
        assert!(matches!(l.plan(HD, link(85.0), Instant::now()).codec, Codec::Jpeg { .. }));
        assert!(matches!(l.plan(HD, link(40.0), Instant::now()).codec, Codec::Vp8 { .. }));
        // Back on a faster link: JPEG again.
        assert!(matches!(l.plan(HD, link(98.0), Instant::now()).codec, Codec::Jpeg { .. }));
    }

    #[test]
    fn near_its_weight_jpeg_follows_the_budget_frame_by_frame() {
        // A link that carries the scene's JPEG at q80 on average (180 KB at 60 frames a
        // second, 86 Mbit/s, under 80 % of 130 Mbit/s): a heavy frame still lowers the quality.
        let mut l = Ladder::new();
        l.set_video(true);
        for _ in 0..WEIGHT_FRAMES {
            l.encoded(Codec::Jpeg { quality: 80 }, HD, 180_000, None, None);
        }
        let p = l.plan(HD, link(130.0), Instant::now());
        assert_eq!((p.codec, p.extent, p.fps), (Codec::Jpeg { quality: 80 }, HD, 60.0));
        let per = Ladder::per_frame(&p, link(130.0));
        l.encoded(p.codec, p.extent, 400_000, None, per);
        assert!(
            matches!(l.plan(HD, link(130.0), Instant::now()).codec, Codec::Jpeg { quality } if quality < 80)
        );
        // Where the link is plenty, the default quality whatever a frame weighs.
        l.encoded(p.codec, p.extent, 400_000, None, per);
        let p = l.plan(HD, link(1000.0), Instant::now());
        assert_eq!(p.codec, Codec::Jpeg { quality: 80 });
    }

    #[test]
    fn the_jpeg_weight_model_follows_libjpeg_on_julia() {
        // Julia frames whose detail swings, at 960x540: their weight at q80 as their
        // bytes at lower qualities and the model tell it, against libjpeg-turbo's.
        use vkcuda::Format;
        use vkcuda_run::scene::{render_cpu_as, FrameArgs, Scene, SceneKind};
        let (w, h) = (960, 540);
        let scene = Scene { kind: SceneKind::Julia, width: w, height: h, cost: 64 };
        let mut rgba = vec![0u8; (w * h * 4) as usize];
        let qualities = [25, 50, 65];
        let (mut q80, mut modelled) = (0.0, [0.0; 3]);
        for tick in (0..12).map(|i| i * 97) {
            render_cpu_as(&scene, &FrameArgs::new(&scene, tick), Format::Rgba8, &mut rgba, 4);
            let size = |q| {
                crate::encode::jpeg_of_rgba(&rgba, vk::Extent2D { width: w, height: h }, q).unwrap().len()
                    as f64
            };
            q80 += size(80);
            for (m, q) in modelled.iter_mut().zip(qualities) {
                *m += size(q) / jpeg_weight(q);
            }
        }
        for (m, q) in modelled.iter().zip(qualities) {
            assert!((0.9..1.1).contains(&(m / q80)), "q{q}: {}", m / q80);
        }
        assert!((jpeg_weight(80) - 1.0).abs() < 1e-9 && jpeg_weight(100) > 1.0 && jpeg_weight(1) > 0.0);
    }

    #[test]
    fn coarse_video_gives_up_rate_to_32_then_size_and_fine_video_takes_them_back() {
        let mut l = Ladder::new();
        l.set_video(true);
        l.set_mode(Mode::Video);
        let mut now = Instant::now();
        let mut seen = Vec::new();
        for _ in 0..12 {
            l.encoded(Codec::Vp8 { bitrate: 1 }, HD, 1, Some(52), None);
            now += STEP_EVERY;
            let p = l.plan(HD, link(5.0), now);
            seen.push((p.fps.round() as u32, p.extent.width));
        }
        assert_eq!(&seen[..4], &[(45, 1920), (34, 1920), (32, 1920), (32, 1440)], "{seen:?}");
        assert_eq!(seen.last(), Some(&(32, 480)), "down to a quarter: {seen:?}");
        for _ in 0..12 {
            l.encoded(Codec::Vp8 { bitrate: 1 }, HD, 1, Some(20), None);
            now += STEP_EVERY;
            l.plan(HD, link(5.0), now);
        }
        let p = l.plan(HD, link(5.0), now);
        assert_eq!((p.extent, p.fps.round()), (HD, 60.0));
    }

    #[test]
    fn soft_video_gives_up_rate_for_quality_but_not_size_and_holds_within_the_band() {
        // Frames between FINE and COARSE: softer than JPEG q80 at 1080p, not so coarse
        // that a smaller image would look better once scaled up.
        let mut l = Ladder::new();
        l.set_video(true);
        l.set_mode(Mode::Video);
        let mut now = Instant::now();
        let mut step = |l: &mut Ladder, q: u8| {
            l.encoded(Codec::Vp8 { bitrate: 1 }, HD, 1, Some(q), None);
            now += STEP_EVERY;
            let p = l.plan(HD, link(20.0), now);
            (p.fps.round() as u32, p.extent.width)
        };
        let seen: Vec<_> = (0..6).map(|_| step(&mut l, 45)).collect();
        assert_eq!(seen, [(45, 1920), (34, 1920), (32, 1920), (32, 1920), (32, 1920), (32, 1920)]);
        // Within the band neither rises nor falls; below it the rate comes back.
        let seen: Vec<_> = (0..3).map(|_| step(&mut l, 37)).collect();
        assert_eq!(seen, [(32, 1920); 3]);
        assert_eq!(step(&mut l, 30), (43, 1920));
    }

    #[test]
    fn video_at_its_coarsest_gives_up_rate_and_size_at_once_and_twice_as_often() {
        // The link fell under VP8 at 60 frames a second: every frame at the coarsest
        // quantizer. A step every 250 ms: the rate to its floor (32) and a size down in the first.
        let mut l = Ladder::new();
        l.set_video(true);
        l.set_mode(Mode::Video);
        let mut now = Instant::now();
        let mut seen = Vec::new();
        for _ in 0..3 {
            l.encoded(Codec::Vp8 { bitrate: 1 }, HD, 1, Some(MAX_QUANTIZER as u8), None);
            now += STEP_EVERY / 2;
            let p = l.plan(HD, link(5.0), now);
            seen.push((p.fps.round() as u32, p.extent.width));
        }
        assert_eq!(seen, [(32, 1440), (32, 960), (32, 720)]);
    }

    #[test]
    fn an_unlimited_link_is_probed_now_and_then() {
        let mut l = Ladder::new();
        l.set_video(true);
        l.set_mode(Mode::Video);
        let start = Instant::now();
        let free = LinkState { limited_lately: false, ..link(10.0) };
        let rate = |l: &mut Ladder, at: Duration| match l.plan(HD, free, start + at).codec {
            Codec::Vp8 { bitrate } => bitrate,
            c => panic!("{c:?}"),
        };
        assert_eq!(rate(&mut l, Duration::ZERO), 8_000_000);
        assert_eq!(rate(&mut l, PROBE_EVERY + Duration::from_millis(100)), 16_000_000);
        assert_eq!(rate(&mut l, PROBE_EVERY + PROBE_FOR + Duration::from_millis(10)), 8_000_000);
    }

    #[test]
    fn a_display_rate_or_none_and_the_rate_held_within_it() {
        assert_eq!(
            [0.0, -1.0, 30.0].map(Display::of),
            [Display::Unlimited, Display::Unlimited, Display::Rate(30.0)]
        );
        assert_eq!(Display::of(f64::NAN), Display::Rate(BUDGET_FPS));
        let mut l = Ladder::new();
        assert!(l.unlimited() && l.display() == BUDGET_FPS);
        l.set_display(20.0);
        assert_eq!((l.unlimited(), l.display(), l.rung.fps), (false, 20.0, 20.0));
        // A faster display: the rate stays, but not under MIN_FPS.
        l.set_display(144.0);
        assert_eq!(l.rung.fps, MIN_FPS);
    }

    #[test]
    fn jpeg_quality_falls_fast_on_a_heavy_frame_and_rises_slowly() {
        assert_eq!(fitted_quality(80, 111, 100.0), 68, "15 % down");
        assert_eq!(fitted_quality(10, 111, 100.0), JPEG_LEAST, "never under the floor");
        assert_eq!(fitted_quality(30, 1000, 100.0), 25, "15 % down, at least 2");
        assert_eq!(fitted_quality(24, 111, 100.0), JPEG_LEAST);
        assert_eq!(fitted_quality(50, 69, 100.0), 53);
        assert_eq!(fitted_quality(79, 0, 100.0), DEFAULT_QUALITY, "never over the default");
        assert_eq!(
            [fitted_quality(50, 70, 100.0), fitted_quality(50, 110, 100.0)],
            [50, 50],
            "near the budget"
        );
    }

    #[test]
    fn a_step_gives_up_rate_then_size_and_takes_back_size_then_rate() {
        let mut r = Rung { auto: AutoCodec::Video, scale: 0, fps: 60.0, quality: DEFAULT_QUALITY };
        let of = Verdict::of_quantizer;
        r.step(of(45.0), false, MIN_FPS, 60.0);
        assert_eq!((r.fps, r.scale), (60.0 * RATE_DOWN, 0), "soft: the rate");
        r.step(of(52.0), false, MIN_FPS, 60.0);
        r.step(of(52.0), false, MIN_FPS, 60.0);
        assert_eq!((r.fps, r.scale), (MIN_FPS, 0), "the rate to its floor first");
        r.step(of(52.0), false, MIN_FPS, 60.0);
        assert_eq!(r.scale, 1, "then the size");
        r.step(of(45.0), true, MIN_FPS, 60.0);
        assert_eq!((r.fps, r.scale), (MIN_FPS, 2), "pinned: a size at once");
        r.step(of(30.0), false, MIN_FPS, 60.0);
        r.step(of(30.0), false, MIN_FPS, 60.0);
        assert_eq!((r.fps, r.scale), (MIN_FPS, 0), "fine: the size back first");
        r.step(of(30.0), false, MIN_FPS, 60.0);
        assert_eq!(r.fps, MIN_FPS * RATE_UP);
        // A step up gives back about what a step down took.
        assert!((RATE_UP * RATE_DOWN - 1.0).abs() < 0.01);
        assert_eq!(Verdict::of_jpeg(JPEG_LEAST), Verdict { soft: true, coarse: true, fine: false });
        assert!(Verdict::of_jpeg(DEFAULT_QUALITY - JPEG_FINE_WITHIN).fine);
    }

    #[test]
    fn pins_are_kept_and_sizes_stay_even_and_within_the_canvas() {
        let mut l = Ladder::new();
        l.set_mode(Mode::Png);
        assert_eq!(l.plan(HD, link(1.0), Instant::now()).codec, Codec::Png);
        l.set_mode(Mode::Jpeg { quality: 35 });
        assert_eq!(l.plan(HD, link(1.0), Instant::now()).codec, Codec::Jpeg { quality: 35 });
        l.rung.scale = 4;
        let odd = vk::Extent2D { width: 333, height: 17 };
        assert_eq!(l.rung.extent(odd), vk::Extent2D { width: 82, height: 16 });
        assert_eq!(l.rung.extent(vk::Extent2D { width: 9, height: 9 }), vk::Extent2D { width: 9, height: 9 });
    }
}
