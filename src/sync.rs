//! The frame plan: for frame `g`, which shared image is used and which
//! timeline values each side waits for and signals.
//!
//! This is the whole synchronization protocol of vkcuda as one pure,
//! unit-tested type. The GPU code never computes a timeline value itself: it
//! asks the plan. Two schemes exist.
//!
//! ## `split` (default): one timeline per signaller
//!
//! | timeline   | signalled by          | waited on by                   |
//! |------------|-----------------------|--------------------------------|
//! | `rendered` | the producer (CUDA)   | the consumer (Vulkan)          |
//! | `released` | the consumer (Vulkan) | the producer, before it reuses an image |
//!
//! With `N` images and `b` the semaphores' initial value, frame `g` uses
//! image `g mod N`, and:
//!
//! | side     | waits for                                  | then signals           |
//! |----------|--------------------------------------------|------------------------|
//! | producer | `released ≥ b + g − N + 1` (only if g ≥ N) | `rendered = b + g + 1` |
//! | consumer | `rendered ≥ b + g + 1`                     | `released = b + g + 1` |
//!
//! `released = b + g − N + 1` means "the consumer finished frame `g − N`",
//! the last frame that read image `g mod N`. Each timeline has one signaller,
//! so its values rise in that signaller's submission order, and the producer
//! may run up to `N − 1` frames ahead of the consumer: image count buys overlap.
//!
//! ## `shared`: one timeline for both directions
//!
//! | side     | waits for                      | then signals        |
//! |----------|--------------------------------|---------------------|
//! | producer | `T ≥ b + 2g` (only if g ≥ 1)   | `T = b + 2g + 1`    |
//! | consumer | `T ≥ b + 2g + 1`               | `T = b + 2g + 2`    |
//!
//! A timeline's value may only rise, and here both sides signal it, so the
//! producer must wait until the consumer finished frame `g − 1` before it may
//! signal frame `g`: every frame pays a full round trip and extra images buy
//! nothing. It is kept to measure exactly that (see the README's results).

use std::fmt;

/// Which synchronization scheme the frames follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize), serde(rename_all = "lowercase"))]
pub enum SyncScheme {
    /// One timeline per signaller: `rendered` (producer) and `released` (consumer).
    Split,
    /// One timeline shared by both directions; serialises producer and consumer.
    Shared,
}

impl fmt::Display for SyncScheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SyncScheme::Split => "split",
            SyncScheme::Shared => "shared",
        })
    }
}

/// One value on one timeline: "wait until timeline `timeline` reaches
/// `value`" or "set timeline `timeline` to `value`".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimelinePoint {
    /// Index into [`FramePlan::timeline_names`] (and the semaphore array built from it).
    pub timeline: usize,
    /// The timeline value.
    pub value: u64,
}

/// What one side does for one frame: wait (if anything), use `image`, signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// Index of the shared image this frame uses.
    pub image: usize,
    /// The point to wait for before touching the image (`None`: nothing to wait for).
    pub wait: Option<TimelinePoint>,
    /// The point to signal once done with the image.
    pub signal: TimelinePoint,
}

/// Index of the `rendered` timeline (split scheme) or the single timeline (shared).
pub const RENDERED: usize = 0;
/// Index of the `released` timeline in the split scheme.
pub const RELEASED: usize = 1;

/// The pure frame/value plan. Cheap to copy; every method is O(1).
///
/// ```
/// use vkcuda::sync::{FramePlan, SyncScheme, RELEASED, RENDERED};
/// // Two frames in rotation, one timeline per signaller, from 0, for up to 1000 frames.
/// let plan = FramePlan::new(SyncScheme::Split, 2, 0, 1000)?;
/// // Frame 5 uses frame 1 of the two; CUDA first waits until Vulkan released
/// // frame 3, that frame's last reader...
/// let cuda = plan.producer(5);
/// assert_eq!(cuda.image, 1);
/// assert_eq!(cuda.wait.map(|w| (w.timeline, w.value)), Some((RELEASED, 4)));
/// // ...then signals "rendered" = 6, which Vulkan waits for before it reads it.
/// assert_eq!((cuda.signal.timeline, cuda.signal.value), (RENDERED, 6));
/// assert_eq!(plan.consumer(5).wait, Some(cuda.signal));
/// // The first frames of each image wait for nothing.
/// assert_eq!(plan.producer(1).wait, None);
/// # Ok::<(), vkcuda::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FramePlan {
    scheme: SyncScheme,
    images: usize,
    base: u64,
}

impl FramePlan {
    /// A plan for `images` shared images whose timelines start at `base`.
    ///
    /// `base` is 0 in normal runs; tests start near 2^63 to prove nothing
    /// assumes small values. Fails when `images` is 0 or when `frames` frames
    /// would overflow a 64-bit timeline.
    ///
    /// ```
    /// use vkcuda::sync::{FramePlan, SyncScheme};
    /// assert!(FramePlan::new(SyncScheme::Shared, 0, 0, 10).is_err()); // no frame to share
    /// assert!(FramePlan::new(SyncScheme::Shared, 2, u64::MAX - 10, 10).is_err()); // overflows
    /// // The shared scheme takes two values per frame: 1000 frames from 2^63 still fit.
    /// let plan = FramePlan::new(SyncScheme::Shared, 3, 1 << 63, 1000)?;
    /// assert_eq!(plan.timeline_names(), ["frame"]);
    /// assert_eq!(plan.past_end(1000), (1 << 63) + 2002);
    /// # Ok::<(), vkcuda::Error>(())
    /// ```
    pub fn new(scheme: SyncScheme, images: usize, base: u64, frames: u64) -> crate::Result<Self> {
        if images == 0 {
            return Err(crate::Error::unsupported("a frame plan needs at least one image"));
        }
        let per_frame = match scheme {
            SyncScheme::Split => 1u64,
            SyncScheme::Shared => 2,
        };
        let needed = frames.checked_mul(per_frame).and_then(|n| n.checked_add(base));
        if needed.is_none() {
            return Err(crate::Error::unsupported(format!(
                "{frames} frames from timeline value {base} overflow a 64-bit timeline"
            )));
        }
        Ok(Self { scheme, images, base })
    }

    /// The scheme this plan follows.
    pub fn scheme(&self) -> SyncScheme {
        self.scheme
    }

    /// Number of shared images.
    pub fn images(&self) -> usize {
        self.images
    }

    /// The value every timeline is created with.
    pub fn initial_value(&self) -> u64 {
        self.base
    }

    /// Names of the timelines this scheme needs, indexed by [`TimelinePoint::timeline`].
    pub fn timeline_names(&self) -> &'static [&'static str] {
        match self.scheme {
            SyncScheme::Split => &["rendered", "released"],
            SyncScheme::Shared => &["frame"],
        }
    }

    /// The shared image frame `g` uses.
    pub fn image(&self, g: u64) -> usize {
        (g % self.images as u64) as usize
    }

    /// What the producer (CUDA, or the CPU producer) does for frame `g`.
    pub fn producer(&self, g: u64) -> Step {
        let n = self.images as u64;
        let b = self.base;
        match self.scheme {
            SyncScheme::Split => Step {
                image: self.image(g),
                // Frame g - N was the last to read this image.
                wait: (g >= n).then(|| TimelinePoint { timeline: RELEASED, value: b + g - n + 1 }),
                signal: TimelinePoint { timeline: RENDERED, value: b + g + 1 },
            },
            SyncScheme::Shared => Step {
                image: self.image(g),
                // The value may only rise: wait until the consumer signalled frame g - 1.
                wait: (g >= 1).then(|| TimelinePoint { timeline: RENDERED, value: b + 2 * g }),
                signal: TimelinePoint { timeline: RENDERED, value: b + 2 * g + 1 },
            },
        }
    }

    /// What the consumer (Vulkan) does for frame `g`.
    pub fn consumer(&self, g: u64) -> Step {
        let b = self.base;
        match self.scheme {
            SyncScheme::Split => Step {
                image: self.image(g),
                wait: Some(TimelinePoint { timeline: RENDERED, value: b + g + 1 }),
                signal: TimelinePoint { timeline: RELEASED, value: b + g + 1 },
            },
            SyncScheme::Shared => Step {
                image: self.image(g),
                wait: Some(TimelinePoint { timeline: RENDERED, value: b + 2 * g + 1 }),
                signal: TimelinePoint { timeline: RENDERED, value: b + 2 * g + 2 },
            },
        }
    }

    /// The point that, once reached, means the consumer finished frame `g`
    /// (used for frames-in-flight pacing and readback).
    pub fn consumed(&self, g: u64) -> TimelinePoint {
        self.consumer(g).signal
    }

    /// Stopping after a failure: the point the host signals in the
    /// producer's stead so that pending consumer frame `g` can run, once
    /// the producer can signal nothing more (the wait of frame `g`; `None`
    /// if it has none). Frames are stood in for one at a time, oldest first,
    /// each after the frames before it finished: each such signal is then
    /// above the timeline's value and below every signal still pending on it
    /// (VUID-VkSemaphoreSignalInfo-value-03258 and -03259), where raising a
    /// timeline past the end at once breaks the second rule (docs/sync.md,
    /// "Stopping after a failure"). [`crate::interop::SharedFrames::stand_in`]
    /// does the signal.
    ///
    /// ```
    /// use vkcuda::sync::{FramePlan, SyncScheme, RENDERED};
    /// let plan = FramePlan::new(SyncScheme::Split, 2, 0, 100)?;
    /// // Consumer frame 7 waits for "rendered" = 8: the host signals that.
    /// let p = plan.stand_in(7).expect("a wait");
    /// assert_eq!((p.timeline, p.value), (RENDERED, 8));
    /// // Shared: below the batch's own signal (16), which must still come from the queue.
    /// let shared = FramePlan::new(SyncScheme::Shared, 2, 0, 100)?;
    /// assert!(shared.stand_in(7).unwrap().value < shared.consumer(7).signal.value);
    /// # Ok::<(), vkcuda::Error>(())
    /// ```
    pub fn stand_in(&self, g: u64) -> Option<TimelinePoint> {
        self.consumer(g).wait
    }

    /// A value above every value frames `0..frames` signal, on every
    /// timeline: the base of the plan of a rebuilt interop that goes on with
    /// the same timelines, whose values may only rise. Never a value to
    /// signal from the host while work is pending: a host signal may not
    /// pass a pending signal (VUID-VkSemaphoreSignalInfo-value-03259; see
    /// [`FramePlan::stand_in`]).
    pub fn past_end(&self, frames: u64) -> u64 {
        match self.scheme {
            SyncScheme::Split => self.base + frames + 1,
            SyncScheme::Shared => self.base + 2 * frames + 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A step source, so the simulator can also be fed deliberately broken plans.
    trait Plan {
        fn timelines(&self) -> usize;
        fn images(&self) -> usize;
        fn initial(&self) -> u64;
        fn producer(&self, g: u64) -> Step;
        fn consumer(&self, g: u64) -> Step;
    }

    impl Plan for FramePlan {
        fn timelines(&self) -> usize {
            self.timeline_names().len()
        }
        fn images(&self) -> usize {
            FramePlan::images(self)
        }
        fn initial(&self) -> u64 {
            self.initial_value()
        }
        fn producer(&self, g: u64) -> Step {
            FramePlan::producer(self, g)
        }
        fn consumer(&self, g: u64) -> Step {
            FramePlan::consumer(self, g)
        }
    }

    /// Where one side (a GPU queue executing its steps in order) stands.
    #[derive(Clone, Copy, PartialEq)]
    enum Phase {
        Waiting,
        Using,
    }

    struct Side {
        frame: u64,
        phase: Phase,
    }

    /// xorshift64*: deterministic, no dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
    }

    /// The simulated GPU: the timelines' values; per image, the frame whose
    /// contents it holds, and whether a side is in it.
    struct World {
        value: Vec<u64>,
        content: Vec<Option<u64>>,
        writing: Vec<bool>,
        reading: Vec<bool>,
    }

    impl World {
        /// Side `i` (0: producer, 1: consumer) starts frame `g` in image
        /// `img`; the consumer's next frame is `consumed`.
        fn start(&mut self, i: usize, g: u64, img: usize, consumed: u64) -> Result<(), String> {
            if i == 0 {
                if self.reading[img] {
                    return Err(format!(
                        "frame {g}: producer writes image {img} while the consumer reads it"
                    ));
                }
                // The old contents must have been consumed already.
                if let Some(old) = self.content[img].filter(|old| consumed <= *old) {
                    return Err(format!("frame {g}: producer overwrites frame {old} before it was consumed"));
                }
                self.writing[img] = true;
            } else {
                if self.writing[img] || self.content[img] != Some(g) {
                    let (holds, writing) = (self.content[img], self.writing[img]);
                    return Err(format!(
                        "frame {g}: consumer reads image {img} holding {holds:?} (writing: {writing})"
                    ));
                }
                self.reading[img] = true;
            }
            Ok(())
        }

        /// Side `i` ends frame `g` in image `img` and signals `s`.
        fn end(&mut self, i: usize, g: u64, img: usize, s: TimelinePoint) -> Result<(), String> {
            if i == 0 {
                self.writing[img] = false;
                self.content[img] = Some(g);
            } else {
                self.reading[img] = false;
            }
            if s.value <= self.value[s.timeline] {
                let now = self.value[s.timeline];
                return Err(format!(
                    "frame {g}: signal {} on timeline {} does not rise above {now}",
                    s.value, s.timeline
                ));
            }
            self.value[s.timeline] = s.value;
            Ok(())
        }
    }

    /// Runs producer and consumer as two in-order GPU queues, interleaved at
    /// random, and checks the protocol's invariants at every step:
    /// - every signal strictly raises its timeline (the value rule of timeline semaphores);
    /// - the producer never writes an image the consumer may still read;
    /// - the consumer reads exactly the frame it was told, fully written;
    /// - the run never deadlocks.
    fn simulate(plan: &dyn Plan, frames: u64, seed: u64) -> Result<(), String> {
        let images = plan.images();
        let mut world = World {
            value: vec![plan.initial(); plan.timelines()],
            content: vec![None; images],
            writing: vec![false; images],
            reading: vec![false; images],
        };
        let mut sides = [Side { frame: 0, phase: Phase::Waiting }, Side { frame: 0, phase: Phase::Waiting }];
        let mut rng = Rng(seed | 1);
        let reached =
            |value: &[u64], p: Option<TimelinePoint>| p.is_none_or(|p| value[p.timeline] >= p.value);
        let step_of = |i: usize, g: u64| if i == 0 { plan.producer(g) } else { plan.consumer(g) };
        while sides[0].frame < frames || sides[1].frame < frames {
            // Which sides can make progress now?
            let ready: Vec<usize> = (0..2)
                .filter(|&i| sides[i].frame < frames)
                .filter(|&i| {
                    sides[i].phase == Phase::Using || reached(&world.value, step_of(i, sides[i].frame).wait)
                })
                .collect();
            let Some(&i) = ready.get((rng.next() % ready.len().max(1) as u64) as usize) else {
                return Err(format!(
                    "deadlock: producer at frame {} and consumer at frame {} both wait; timelines {:?}",
                    sides[0].frame, sides[1].frame, world.value
                ));
            };
            let g = sides[i].frame;
            let step = step_of(i, g);
            match sides[i].phase {
                Phase::Waiting => {
                    world.start(i, g, step.image, sides[1].frame)?;
                    sides[i].phase = Phase::Using;
                }
                Phase::Using => {
                    world.end(i, g, step.image, step.signal)?;
                    sides[i] = Side { frame: g + 1, phase: Phase::Waiting };
                }
            }
        }
        Ok(())
    }

    const SCHEMES: [SyncScheme; 2] = [SyncScheme::Split, SyncScheme::Shared];

    #[test]
    fn plans_hold_their_invariants_over_10000_frames() {
        for scheme in SCHEMES {
            for images in 1..=3 {
                for base in [0, 1 << 63] {
                    let plan = FramePlan::new(scheme, images, base, 10_000).unwrap();
                    for seed in [1, 7, 0xdead_beef] {
                        simulate(&plan, 10_000, seed)
                            .unwrap_or_else(|e| panic!("{scheme} x{images} base {base}: {e}"));
                    }
                }
            }
        }
    }

    #[test]
    fn signals_strictly_rise_in_each_signallers_order() {
        for scheme in SCHEMES {
            for images in 1..=3 {
                let plan = FramePlan::new(scheme, images, 0, 10_000).unwrap();
                let mut last = vec![0u64; plan.timeline_names().len()];
                for g in 0..10_000 {
                    // Within one frame the producer signals before the consumer does.
                    for s in [plan.producer(g).signal, plan.consumer(g).signal] {
                        assert!(s.value > last[s.timeline], "{scheme} x{images} frame {g}: {s:?}");
                        last[s.timeline] = s.value;
                    }
                }
                assert!(last.iter().all(|&v| v <= plan.past_end(10_000)));
            }
        }
    }

    #[test]
    fn split_lets_the_producer_run_ahead_by_images_minus_one() {
        let plan = FramePlan::new(SyncScheme::Split, 3, 0, 100).unwrap();
        // Frame 5 reuses the image of frame 2 and so waits for its release only.
        assert_eq!(plan.producer(5).wait, Some(TimelinePoint { timeline: RELEASED, value: 3 }));
        assert_eq!(plan.consumed(2), TimelinePoint { timeline: RELEASED, value: 3 });
        assert_eq!(plan.producer(2).wait, None);
    }

    #[test]
    fn shared_serialises_every_frame() {
        let plan = FramePlan::new(SyncScheme::Shared, 3, 0, 100).unwrap();
        assert_eq!(plan.producer(5).wait, Some(plan.consumed(4)));
    }

    // The simulator itself must be able to fail: feed it plans with classic bugs.
    struct Broken(FramePlan, &'static str);
    impl Plan for Broken {
        fn timelines(&self) -> usize {
            self.0.timeline_names().len()
        }
        fn images(&self) -> usize {
            self.0.images()
        }
        fn initial(&self) -> u64 {
            0
        }
        fn producer(&self, g: u64) -> Step {
            let mut s = self.0.producer(g);
            match self.1 {
                // Waits for the wrong frame's release: one too early.
                "off-by-one" => s.wait = s.wait.map(|p| TimelinePoint { value: p.value - 1, ..p }),
                "no-wait" => s.wait = None,
                // Signals a value the consumer already passed.
                "stale-signal" if g > 2 => s.signal.value = 1,
                _ => {}
            }
            s
        }
        fn consumer(&self, g: u64) -> Step {
            let mut s = self.0.consumer(g);
            if self.1 == "consumer-waits-own-signal" {
                s.wait = Some(TimelinePoint { value: s.signal.value + 1, ..s.signal });
            }
            s
        }
    }

    #[test]
    fn the_simulator_catches_broken_plans() {
        for (scheme, bug) in [
            (SyncScheme::Split, "off-by-one"),
            (SyncScheme::Split, "no-wait"),
            (SyncScheme::Shared, "no-wait"),
            (SyncScheme::Split, "stale-signal"),
            (SyncScheme::Split, "consumer-waits-own-signal"),
        ] {
            let plan = Broken(FramePlan::new(scheme, 2, 0, 1000).unwrap(), bug);
            let caught = (1..20).any(|seed| simulate(&plan, 1000, seed).is_err());
            assert!(caught, "{scheme} {bug} went unnoticed");
        }
    }

    #[test]
    fn overflowing_plans_are_refused() {
        assert!(FramePlan::new(SyncScheme::Split, 0, 0, 1).is_err());
        assert!(FramePlan::new(SyncScheme::Shared, 2, u64::MAX - 10, 100).is_err());
        assert!(FramePlan::new(SyncScheme::Split, 2, u64::MAX - 200, 100).is_ok());
    }
}
