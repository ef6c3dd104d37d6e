//! A simulated link for the tests: a bottleneck of some rate that serves
//! frames one after the other (a queue, as tbf or a tunnel keeps it), a round
//! trip half each way, and a page that decodes frames in order and says with
//! each acknowledgement how many were ahead of it. The link's own tests
//! drive [`super::Link`] over it; the hub's drive its clients (the real
//! ladder, schedule and link) over it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A link of `rate` bytes a second and `rtt` round trip (half each way),
/// frames served one after the other (a queue at the bottleneck, as tbf
/// or a tunnel keeps it), and a page that decodes in `decode`.
pub(crate) struct Wire {
    pub(crate) rate: f64,
    pub(crate) rtt: Duration,
    pub(crate) decode: Duration,
    /// When the bottleneck is free again.
    free: Instant,
    /// Acknowledgements on their way back: (arrival, frame).
    pub(crate) acks: Vec<(Instant, u64)>,
    /// When each frame was sent.
    pub(crate) sent: HashMap<u64, Instant>,
    /// The next frame's number.
    pub(crate) next: u64,
    /// Every how many frames the page's decode stalls, and for how long (a busy tab).
    pub(crate) stall: Option<(u64, Duration)>,
    /// The page's decode times, frame after frame, as multiples of `decode` (none: always `decode`).
    pub(crate) jitter: Vec<f64>,
    /// Whether the page says, with each acknowledgement, how many frames it
    /// had not yet acknowledged when that one arrived (as the view's page does).
    pub(crate) reports: bool,
    /// When the page acknowledges each frame sent (it decodes in order: the
    /// last is when its decoder is free again), and how many were ahead of it.
    done: Vec<Instant>,
    ahead: HashMap<u64, u32>,
    /// When the rate changes, and to what (a link that falls mid-run).
    pub(crate) fall: Option<(Instant, f64)>,
    /// Every acknowledgement that arrived: when, and its frame's time from send to it.
    pub(crate) log: Vec<(Instant, Duration)>,
}

impl Wire {
    pub(crate) fn new(rate: f64, rtt: Duration, start: Instant) -> Self {
        let sent = HashMap::new();
        let decode = Duration::from_millis(2);
        Self {
            rate,
            rtt,
            decode,
            free: start,
            acks: Vec::new(),
            sent,
            next: 0,
            stall: None,
            jitter: Vec::new(),
            reports: false,
            done: Vec::new(),
            ahead: HashMap::new(),
            fall: None,
            log: Vec::new(),
        }
    }

    /// When the bottleneck, free from `start`, has carried `bytes`: at
    /// `rate`, and at the fall's rate from its instant on.
    fn carried(&mut self, start: Instant, bytes: u64) -> Instant {
        let at = |from: Instant, bytes: f64, rate: f64| from + Duration::from_secs_f64(bytes / rate);
        let Some((when, rate)) = self.fall else { return at(start, bytes as f64, self.rate) };
        let before = when.saturating_duration_since(start).as_secs_f64() * self.rate;
        if bytes as f64 <= before {
            return at(start, bytes as f64, self.rate);
        }
        (self.rate, self.fall) = (rate, None);
        at(start.max(when), bytes as f64 - before, rate)
    }

    /// Sends `bytes` of `frame` at `now`: its acknowledgement's arrival.
    pub(crate) fn send(&mut self, frame: u64, bytes: u64, now: Instant) -> Instant {
        self.sent.insert(frame, now);
        let start = self.free.max(now);
        self.free = self.carried(start, bytes);
        let decode = match self.stall {
            Some((every, long)) if frame % every == every - 1 => long,
            _ if self.jitter.is_empty() => self.decode,
            _ => self.decode.mul_f64(self.jitter[frame as usize % self.jitter.len()]),
        };
        let arrives = self.free + self.rtt / 2;
        let ahead = self.done.len() - self.done.partition_point(|done| *done <= arrives);
        self.ahead.insert(frame, ahead as u32);
        let decoded = self.done.last().map_or(arrives, |free| (*free).max(arrives)) + decode;
        self.done.push(decoded);
        let ack = decoded + self.rtt / 2;
        self.acks.push((ack, frame));
        ack
    }

    /// When the bottleneck is free again.
    pub(crate) fn free(&self) -> Instant {
        self.free
    }

    /// What the page says with frame `frame`'s acknowledgement: the frames ahead of it.
    pub(crate) fn ahead(&self, frame: u64) -> Option<u32> {
        self.ahead.get(&frame).copied().filter(|_| self.reports)
    }

    /// The acknowledgements that arrived by `now`, in order.
    pub(crate) fn arrived(&mut self, now: Instant) -> Vec<(Instant, u64)> {
        self.acks.sort();
        let n = self.acks.iter().take_while(|(at, _)| *at <= now).count();
        let arrived: Vec<(Instant, u64)> = self.acks.drain(..n).collect();
        self.log.extend(arrived.iter().map(|(at, f)| (*at, *at - self.sent[f])));
        arrived
    }
}
