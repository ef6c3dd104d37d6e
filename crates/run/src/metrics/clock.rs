//! The clocks vkcuda's timings are read from: the host's monotonic clock, on
//! which Vulkan and CUDA GPU times are placed so they can be compared (the
//! "rendered → consumed" latency), and each thread's own CPU time.

use std::time::Duration;

fn read(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: an out-pointer to a local; both clocks exist on every Linux.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// `CLOCK_MONOTONIC` in nanoseconds: the host time axis (Vulkan's calibrated
/// timestamps name this domain, and `std::time::Instant` reads it too).
pub fn now_ns() -> u64 {
    read(libc::CLOCK_MONOTONIC).as_nanos() as u64
}

/// CPU time the calling thread has used so far.
pub fn thread_cpu() -> Duration {
    read(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// A GPU clock placed on the host axis: one (GPU time, host time) pair taken
/// at the same moment, and the GPU clock's tick length.
#[derive(Clone, Copy, Debug)]
pub struct Anchor {
    /// GPU clock reading, in ticks.
    pub gpu_ticks: u64,
    /// [`now_ns`] at that moment.
    pub host_ns: u64,
    /// Nanoseconds per tick.
    pub ns_per_tick: f64,
}

impl Anchor {
    /// The host time of GPU clock reading `ticks`.
    pub fn host_ns(&self, ticks: u64) -> u64 {
        let delta = ticks as f64 - self.gpu_ticks as f64;
        (self.host_ns as f64 + delta * self.ns_per_tick) as u64
    }
}

/// Measures a thread's CPU time per frame from the frame where steady state
/// begins (after warm-up) to the end of its loop.
#[derive(Debug, Default)]
pub struct CpuMeter {
    from: Option<(u64, Duration)>,
}

impl CpuMeter {
    /// Call once per frame `g` on the measured thread; `steady` says whether
    /// warm-up is over. The first steady frame starts the meter.
    pub fn frame(&mut self, g: u64, steady: bool) {
        if steady && self.from.is_none() {
            self.from = Some((g, thread_cpu()));
        }
    }

    /// CPU time per frame since the meter started, `frames` being the count
    /// of frames done (all of them, warm-up included); call on the same thread.
    pub fn per_frame(&self, frames: u64) -> Option<Duration> {
        let (first, cpu) = self.from?;
        let n = frames.checked_sub(first).filter(|&n| n > 0)?;
        Some((thread_cpu().saturating_sub(cpu)) / n.min(u64::from(u32::MAX)) as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_advance_and_anchors_map() {
        let (a, c) = (now_ns(), thread_cpu());
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(now_ns() > a && thread_cpu() > c);
        let anchor = Anchor { gpu_ticks: 1000, host_ns: 5_000, ns_per_tick: 2.0 };
        assert_eq!(anchor.host_ns(1500), 6_000);
        assert_eq!(anchor.host_ns(900), 4_800);
    }
}
