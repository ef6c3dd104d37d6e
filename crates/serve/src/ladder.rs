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

/// The JPEG quality where the link allows it, and of a page that asks for JPEG without one.
pub const DEFAULT_QUALITY: u8 = 80;
/// The share of the link's capacity a stream may use.
const SHARE: f64 = 0.8;
/// How much above [`SHARE`] a probe asks, to find out whether the link carries
/// more: enough for the window to hold frames back, whose acknowledgements
/// then measure the link (the window grows by a quarter each round trip).
const PROBE_GAIN: f64 = 2.0;
/// How often, and for how long, the link is probed (when it has not been the limit lately).
const PROBE_EVERY: Duration = Duration::from_millis(2500);
const PROBE_FOR: Duration = Duration::from_millis(600);
/// How often the rate and size are reconsidered; twice as often while VP8 is
/// at its coarsest quantizer (the link fell: frames still over their budget).
const STEP_EVERY: Duration = Duration::from_millis(500);
/// The frame rate a stream gives up quality for before it gives up size. A
/// cap: frames come a little under it (a late encode, a frame held by the
/// window), so 32 for 30 delivered.
const MIN_FPS: f64 = 32.0;
/// The sizes an image may be sent at, as a share of the canvas.
const SCALES: [f64; 5] = [1.0, 0.75, 0.5, 0.375, 0.25];
/// VP8 quantizers (0–63): above `SOFT` the rate falls to its floor, each
/// frame getting more of the bytes (at 1080p over 20 Mbit/s julia frames
/// stay below JPEG q80's PSNR at any rate: quality first, down to
/// [`MIN_FPS`]); above `COARSE` the size falls too; below `FINE` the size,
/// then the rate, rise again.
const SOFT: f64 = 40.0;
const COARSE: f64 = 50.0;
const FINE: f64 = 34.0;
/// JPEG qualities an adaptive stream moves within.
const JPEG_RANGE: (u8, u8) = (20, DEFAULT_QUALITY);
/// Links faster than this (bytes a second) are plenty for JPEG whatever it weighs (loopback).
const PLENTY: f64 = 40e6;
/// Video once the budget is under this share of what JPEG at the default
/// quality needs (JPEG at about q40 weighs 0.6 of q80's); JPEG again above the second.
const VIDEO_BELOW: f64 = 0.55;
const JPEG_AGAIN: f64 = 0.75;
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
/// alone chose the codec by where in that swing the stream began.
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

/// One client's choices and what its frames weighed.
#[derive(Debug)]
pub struct Ladder {
    pub(crate) mode: Mode,
    /// The page decodes VP8.
    pub(crate) video: bool,
    /// The page's display rate (its frames a second at most), and whether it set none.
    display: f64,
    pub(crate) unlimited: bool,
    /// Video (else JPEG) while in [`Mode::Auto`].
    use_video: bool,
    /// Index into [`SCALES`].
    scale: usize,
    fps: f64,
    quality: u8,
    /// Bytes a JPEG at [`DEFAULT_QUALITY`] takes per canvas pixel, as the JPEG
    /// frames sent at the canvas size say (any quality, by [`jpeg_weight`]),
    /// averaged over the last [`WEIGHT_FRAMES`] or so, and how many said it.
    jpeg_density: Option<f64>,
    jpeg_frames: u32,
    /// VP8 quantizers since the last step.
    quantizers: Vec<u8>,
    last_step: Option<Instant>,
    probe_started: Option<Instant>,
}

impl Default for Ladder {
    fn default() -> Self {
        Self::new()
    }
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

impl Ladder {
    /// A client of no known link, budgeted at 60 frames a second and not held to
    /// a rate until the page says its display's.
    pub fn new() -> Self {
        Self {
            mode: Mode::Auto,
            video: false,
            display: 60.0,
            unlimited: true,
            use_video: false,
            scale: 0,
            fps: 60.0,
            quality: DEFAULT_QUALITY,
            jpeg_density: None,
            jpeg_frames: 0,
            quantizers: Vec::new(),
            last_step: None,
            probe_started: None,
        }
    }

    /// The page's display rate (0: no limit: frames as fast as it acknowledges,
    /// budgeted as 60 a second).
    pub fn set_display(&mut self, fps: f64) {
        self.unlimited = fps <= 0.0;
        self.display = if fps > 0.0 { fps } else { 60.0 };
        self.fps = self.fps.min(self.display).max(self.display.min(MIN_FPS));
    }

    /// The page's display rate (60 until it says).
    pub fn display(&self) -> f64 {
        self.display
    }

    /// The plan for the next frame at `canvas`, at `now`, on `link`.
    pub fn plan(&mut self, canvas: vk::Extent2D, link: LinkState, now: Instant) -> Plan {
        let full =
            Plan { codec: Codec::Jpeg { quality: DEFAULT_QUALITY }, extent: canvas, fps: self.display };
        let budget = link.capacity.map(|c| c * SHARE * self.probe_gain(link, now));
        match self.mode {
            Mode::Raw => Plan { codec: Codec::Raw, ..full },
            Mode::Png => Plan { codec: Codec::Png, ..full },
            Mode::Jpeg { quality } => Plan { codec: Codec::Jpeg { quality }, ..full },
            Mode::Video => self.video_plan(canvas, budget.unwrap_or(1e6), now),
            Mode::Auto => match budget {
                None => full,
                Some(budget) => self.auto_plan(canvas, budget, link, now),
            },
        }
    }

    /// Auto: JPEG at the default quality while the link carries it, else video or lighter JPEG.
    fn auto_plan(&mut self, canvas: vk::Extent2D, budget: f64, link: LinkState, now: Instant) -> Plan {
        let pixels = f64::from(canvas.width) * f64::from(canvas.height);
        let jpeg_rate = self.jpeg_density.map(|d| d * pixels * self.display);
        // The budget over what JPEG at the default quality needs at the display rate.
        let room = match jpeg_rate {
            _ if budget >= PLENTY => f64::INFINITY,
            Some(need) => budget / need,
            None => f64::INFINITY,
        };
        // Video where JPEG would fall below about half its default quality's bytes (a
        // JPEG frame is quicker to encode than a VP8 one: the display rate holds);
        // back to JPEG only with room to spare.
        self.use_video =
            self.video && link.settled && room < if self.use_video { JPEG_AGAIN } else { VIDEO_BELOW };
        if self.use_video {
            return self.video_plan(canvas, budget, now);
        }
        if room.is_infinite() {
            self.scale = 0;
            self.fps = self.display;
            self.quality = DEFAULT_QUALITY;
            return Plan {
                codec: Codec::Jpeg { quality: DEFAULT_QUALITY },
                extent: canvas,
                fps: self.display,
            };
        }
        self.step(now, None);
        Plan { codec: Codec::Jpeg { quality: self.quality }, extent: self.extent(canvas), fps: self.fps }
    }

    fn video_plan(&mut self, canvas: vk::Extent2D, budget: f64, now: Instant) -> Plan {
        let coarse = self.quantizers_mean();
        self.step(now, coarse);
        let bitrate = (budget * 8.0).clamp(100e3, 200e6) as u32;
        Plan { codec: Codec::Vp8 { bitrate }, extent: self.extent(canvas), fps: self.fps }
    }

    /// Every [`STEP_EVERY`]: lower the rate while frames are soft, then the
    /// size while they are too coarse (VP8's quantizer; JPEG's quality at its
    /// floor); raise the size, then the rate, while there is room. While
    /// every VP8 frame is at the coarsest quantizer (a fall of the link
    /// leaves frames several times their budget: they queue), twice as
    /// often, and the rate falls to its floor and the size a step at once.
    fn step(&mut self, now: Instant, quantizer: Option<f64>) {
        let pinned = quantizer.is_some_and(|q| q >= f64::from(MAX_QUANTIZER));
        let every = if pinned { STEP_EVERY / 2 } else { STEP_EVERY };
        if self.last_step.is_some_and(|at| now.duration_since(at) < every) {
            return;
        }
        let video = matches!(self.mode, Mode::Video) || self.use_video;
        let (soft, coarse, fine) = match quantizer {
            Some(q) => (q > SOFT, q > COARSE, q < FINE),
            // No video frame since the last step: nothing to go by.
            None if video => return,
            None => {
                let coarse = self.quality <= JPEG_RANGE.0;
                (coarse, coarse, self.quality >= JPEG_RANGE.1 - 10)
            }
        };
        self.last_step = Some(now);
        self.quantizers.clear();
        let floor = self.display.min(MIN_FPS);
        if pinned {
            self.fps = floor;
            self.scale = (self.scale + 1).min(SCALES.len() - 1);
        } else if soft && self.fps > floor {
            self.fps = (self.fps * 0.75).max(floor);
        } else if coarse && self.scale + 1 < SCALES.len() {
            self.scale += 1;
        } else if fine && self.scale > 0 {
            self.scale -= 1;
        } else if fine && self.fps < self.display {
            self.fps = (self.fps * 1.33).min(self.display);
        }
    }

    /// The size at the current step: the canvas scaled, at least 16 pixels a side, even.
    fn extent(&self, canvas: vk::Extent2D) -> vk::Extent2D {
        if self.scale == 0 {
            return canvas;
        }
        let s = SCALES[self.scale];
        let side = |v: u32| (((f64::from(v) * s) as u32).max(16) & !1).min(v);
        vk::Extent2D { width: side(canvas.width), height: side(canvas.height) }
    }

    /// While no frame waited for the link lately, now and then a burst above
    /// the share: the link's answer measures it anew (it may be faster now).
    fn probe_gain(&mut self, link: LinkState, now: Instant) -> f64 {
        if link.limited_lately {
            self.probe_started = Some(now);
            return 1.0;
        }
        let started = *self.probe_started.get_or_insert(now);
        let since = now.duration_since(started);
        if since >= PROBE_EVERY + PROBE_FOR {
            self.probe_started = Some(now);
        }
        if since >= PROBE_EVERY && since < PROBE_EVERY + PROBE_FOR {
            PROBE_GAIN
        } else {
            1.0
        }
    }

    fn quantizers_mean(&self) -> Option<f64> {
        let n = self.quantizers.len();
        (n > 0).then(|| self.quantizers.iter().map(|&q| f64::from(q)).sum::<f64>() / n as f64)
    }

    /// A frame was encoded as `codec` at `extent` into `bytes` (its VP8
    /// quantizer when video), for a canvas of `canvas`, `budget` bytes a
    /// frame: JPEG's quality follows the frame's weight.
    pub fn encoded(
        &mut self,
        codec: Codec,
        extent: vk::Extent2D,
        bytes: usize,
        quantizer: Option<u8>,
        per_frame: Option<f64>,
    ) {
        match codec {
            Codec::Vp8 { .. } => self.quantizers.extend(quantizer),
            Codec::Jpeg { quality }
                if self.scale == 0 && (JPEG_RANGE.0..=JPEG_RANGE.1).contains(&quality) =>
            {
                let pixels = (f64::from(extent.width) * f64::from(extent.height)).max(1.0);
                let density = bytes as f64 / pixels / jpeg_weight(quality);
                self.jpeg_frames = (self.jpeg_frames + 1).min(WEIGHT_FRAMES);
                let new = 1.0 / f64::from(self.jpeg_frames);
                self.jpeg_density = Some(self.jpeg_density.map_or(density, |d| d + new * (density - d)));
            }
            _ => {}
        }
        if let (Codec::Jpeg { quality }, Some(target), Mode::Auto) = (codec, per_frame, self.mode) {
            let ratio = bytes as f64 / target.max(1.0);
            let q = f64::from(quality);
            let next = if ratio > 1.1 {
                q - (q * 0.15).max(2.0)
            } else if ratio < 0.7 {
                q + 3.0
            } else {
                q
            };
            self.quality = (next as u8).clamp(JPEG_RANGE.0, JPEG_RANGE.1);
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
        l.video = true;
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
        l.video = true;
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
        l.video = true;
        l.encoded(Codec::Jpeg { quality: 80 }, HD, 254_000, None, None);
        l.encoded(Codec::Jpeg { quality: 80 }, HD, 376_000, None, None);
        for i in 0..60 {
            let (quality, swing) = ([30, 45][i % 2], [0.5, 1.5][i / 2 % 2]);
            let bytes = 180e3 * jpeg_weight(quality) * swing;
            l.encoded(Codec::Jpeg { quality }, HD, bytes as usize, None, None);
        }
        let per_pixel = l.jpeg_density.unwrap() * f64::from(HD.width * HD.height);
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
        l.video = true;
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
            let size = |q| crate::encode::jpeg_of_rgba(&rgba, (w, h), q).unwrap().len() as f64;
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
        (l.video, l.mode) = (true, Mode::Video);
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
        (l.video, l.mode) = (true, Mode::Video);
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
        (l.video, l.mode) = (true, Mode::Video);
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
        (l.video, l.mode) = (true, Mode::Video);
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
    fn pins_are_kept_and_sizes_stay_even_and_within_the_canvas() {
        let mut l = Ladder::new();
        l.mode = Mode::Png;
        assert_eq!(l.plan(HD, link(1.0), Instant::now()).codec, Codec::Png);
        l.mode = Mode::Jpeg { quality: 35 };
        assert_eq!(l.plan(HD, link(1.0), Instant::now()).codec, Codec::Jpeg { quality: 35 });
        l.scale = 4;
        let odd = vk::Extent2D { width: 333, height: 17 };
        assert_eq!(l.extent(odd), vk::Extent2D { width: 82, height: 16 });
        assert_eq!(l.extent(vk::Extent2D { width: 9, height: 9 }), vk::Extent2D { width: 9, height: 9 });
    }
}
