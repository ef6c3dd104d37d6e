//! Why a run ended badly, by cause: what a front end needs to tell its user
//! and to choose an exit code or an exception, without reading messages.
//! The session decides which side caused a failure
//! ([`crate::drive::session::Session::end`]); each front end words the
//! fields of a usage error in its own terms ([`worded`]).

use std::fmt;
use std::time::Duration;

use super::usage::{UsageError, Vocabulary};
use crate::base::kinds::ProducerId;

/// Why a run failed.
#[derive(Debug)]
pub enum RunError {
    /// A field of the run's description cannot work: the caller's to fix
    /// (the CLI's exit code 2).
    Usage(UsageError),
    /// A signal (Ctrl+C, SIGTERM) stopped the run while a frame was held up
    /// for `waited`: the run stopped without waiting for it.
    Cancelled {
        /// The signal's number.
        signal: i32,
        /// What the wait was for ("frame 12").
        awaited: String,
        /// How long the frame had been held up at least.
        waited: Duration,
    },
    /// A wait for the GPU or the producer ran out: a frame never came.
    TimedOut(anyhow::Error),
    /// The producer failed: its error, and the consumer's if it failed for
    /// a reason of its own meanwhile (not merely because the producer did).
    ProducerFailed {
        /// Which producer: what rendered, and where.
        producer: ProducerId,
        /// Its error.
        error: anyhow::Error,
        /// The consumer's own error, if any.
        consumer: Option<anyhow::Error>,
    },
    /// The interop core failed on the consumer's side (Vulkan, CUDA).
    Core(anyhow::Error),
    /// Anything else on the consumer's side (a window, a file, the writer pool).
    Consumer(anyhow::Error),
}

impl RunError {
    /// The consumer side's error `e`, by cause: a usage error, a wait that
    /// ran out, the core's, or the consumer's own.
    pub fn of_consumer(e: anyhow::Error) -> Self {
        if e.chain().any(|c| c.is::<UsageError>()) {
            return match e.downcast::<UsageError>() {
                Ok(u) => RunError::Usage(u),
                Err(e) => RunError::Consumer(e), // a usage error wrapped in context: keep the context
            };
        }
        if timed_out(&e) {
            return RunError::TimedOut(e);
        }
        match e.chain().any(|c| c.is::<vkcuda::Error>()) {
            true => RunError::Core(e),
            false => RunError::Consumer(e),
        }
    }

    /// Whether the consumer's Vulkan device was lost (`VK_ERROR_DEVICE_LOST`):
    /// nothing runs on it any more, but a device made again may.
    pub fn device_lost(&self) -> bool {
        match self {
            RunError::Core(e) | RunError::TimedOut(e) => lost(e),
            RunError::ProducerFailed { consumer: Some(c), .. } => lost(c),
            _ => false,
        }
    }

    /// The error in `words`' terms: its usage error's fields named as that
    /// front end names them, and its causes after it ("outer: inner").
    pub fn worded(&self, words: &dyn Vocabulary) -> String {
        match self {
            RunError::Usage(u) => u.0.worded(words),
            RunError::Cancelled { .. } => self.to_string(),
            RunError::TimedOut(e) | RunError::Core(e) | RunError::Consumer(e) => worded(e, words),
            RunError::ProducerFailed { producer, error, consumer } => {
                let also = consumer.as_ref().map(|c| format!(" ({})", worded(c, words))).unwrap_or_default();
                format!("the {producer} producer failed{also}: {}", worded(error, words))
            }
        }
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Usage(u) => u.fmt(f),
            RunError::Cancelled { signal, awaited, waited } => write!(
                f,
                "interrupted by signal {signal} after waiting over {waited:?} for {awaited} (a kernel that \
                 does not end?): stopping without waiting for it"
            ),
            RunError::TimedOut(e) | RunError::Core(e) | RunError::Consumer(e) => e.fmt(f),
            RunError::ProducerFailed { producer, consumer, .. } => match consumer {
                Some(c) => write!(f, "the {producer} producer failed ({c:#})"),
                None => write!(f, "the {producer} producer failed"),
            },
        }
    }
}

impl std::error::Error for RunError {
    /// The next cause, as `{e:#}` and [`anyhow::Error::chain`] walk them.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Usage(_) | RunError::Cancelled { .. } => None,
            RunError::TimedOut(e) | RunError::Core(e) | RunError::Consumer(e) => e.source(),
            RunError::ProducerFailed { error, .. } => Some(error.as_ref()),
        }
    }
}

/// Whether `e` ended a run because its Vulkan device was lost: a run's
/// error as [`RunError::device_lost`] says, else the consumer's own error.
pub fn device_lost(e: &anyhow::Error) -> bool {
    e.downcast_ref::<RunError>().map_or_else(|| lost(e), RunError::device_lost)
}

/// Whether `e` or a cause of it is `VK_ERROR_DEVICE_LOST`.
fn lost(e: &anyhow::Error) -> bool {
    e.chain().any(|c| matches!(c.downcast_ref::<vkcuda::Error>(), Some(vkcuda::Error::DeviceLost { .. })))
}

/// How long a Vulkan device made again must last to be made again once more.
pub const REMAKE_AFTER: Duration = Duration::from_secs(10);

/// When a front end makes a lost Vulkan device again: the loss ended the
/// run ([`device_lost`]), its producer runs in a child (one in this process
/// would share the lost device's memory), and the device made last lasted
/// [`REMAKE_AFTER`] (else the cause persists and the run ends with it).
#[derive(Clone, Copy, Debug, Default)]
pub struct Remakes {
    last: Option<std::time::Instant>,
}

impl Remakes {
    /// Whether to make the device again after `e`, the producer being in a child or not.
    pub fn due(&self, e: &anyhow::Error, in_child: bool) -> bool {
        let lasted = self.last.is_none_or(|at| at.elapsed() >= REMAKE_AFTER);
        in_child && lasted && device_lost(e)
    }

    /// A device was made again now.
    pub fn made(&mut self) {
        self.last = Some(std::time::Instant::now());
    }
}

/// `e` and its causes as `{e:#}` shows them ("outer: inner"), each message
/// naming a field ([`super::usage::Message`], [`UsageError`], [`RunError`])
/// in `words`' terms.
pub fn worded(e: &anyhow::Error, words: &dyn Vocabulary) -> String {
    let mut parts = Vec::new();
    for c in e.chain() {
        if let Some(run) = c.downcast_ref::<RunError>() {
            // A run error words its own causes.
            parts.push(run.worded(words));
            break;
        }
        parts.push(match (c.downcast_ref::<UsageError>(), c.downcast_ref::<super::usage::Message>()) {
            (Some(u), _) => u.0.worded(words),
            (_, Some(m)) => m.worded(words),
            _ => c.to_string(),
        });
    }
    parts.join(": ")
}

/// Whether `e` is, or was caused by, a usage error (the CLI's exit code 2).
pub fn is_usage(e: &anyhow::Error) -> bool {
    e.chain()
        .any(|c| c.is::<UsageError>() || matches!(c.downcast_ref::<RunError>(), Some(RunError::Usage(_))))
}

/// Whether `e` only says a wait gave up because the other side failed (the
/// other side's error is then the cause).
pub fn gave_up(e: &anyhow::Error) -> bool {
    e.chain().any(|c| matches!(c.downcast_ref::<vkcuda::Error>(), Some(vkcuda::Error::Cancelled { .. })))
}

/// Whether `e` says a wait for the GPU or the producer ran out.
pub fn timed_out(e: &anyhow::Error) -> bool {
    e.chain().any(|c| matches!(c.downcast_ref::<vkcuda::Error>(), Some(vkcuda::Error::TimedOut { .. })))
}

/// What the wait that `e` ended was for ("a frame" if it names none).
pub fn awaited(e: &anyhow::Error) -> String {
    e.chain()
        .find_map(|c| match c.downcast_ref::<vkcuda::Error>() {
            Some(vkcuda::Error::Cancelled { what } | vkcuda::Error::TimedOut { what, .. }) => {
                Some(what.clone())
            }
            _ => None,
        })
        .unwrap_or_else(|| "a frame".into())
}

/// What a panic said (its payload as text), for the error that reports it.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("no message")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::kinds::Renders;
    use crate::error::usage::{Field, Flags, Message};
    use anyhow::{anyhow, Context};

    #[test]
    fn a_consumer_error_is_classified_by_its_cause() {
        let usage = anyhow::Error::from(UsageError::new(Message::new().field(Field::Size, "9x9")));
        assert!(matches!(RunError::of_consumer(usage), RunError::Usage(_)));
        let waited = vkcuda::Error::TimedOut { what: "frame 3".into(), after: Duration::from_secs(1) };
        let timed = anyhow::Error::from(waited).context("consuming");
        assert!(matches!(RunError::of_consumer(timed), RunError::TimedOut(_)));
        let core = anyhow::Error::from(vkcuda::Error::Invalid { context: "x".into() }).context("submitting");
        assert!(matches!(RunError::of_consumer(core), RunError::Core(_)));
        assert!(matches!(RunError::of_consumer(anyhow!("disk full")), RunError::Consumer(_)));
    }

    #[test]
    fn a_lost_device_is_made_again_for_a_child_producer_and_not_twice_within_the_bound() {
        let lost = || {
            anyhow::Error::from(RunError::of_consumer(anyhow::Error::from(vkcuda::Error::DeviceLost {
                context: "frame 9".into(),
            })))
        };
        let mut remakes = Remakes::default();
        assert!(!remakes.due(&lost(), false), "a producer in this process shares the lost memory");
        assert!(!remakes.due(&anyhow!("disk full"), true));
        assert!(remakes.due(&lost(), true));
        remakes.made();
        assert!(!remakes.due(&lost(), true), "lost again at once: the cause persists");
        remakes.last = Some(std::time::Instant::now() - REMAKE_AFTER);
        assert!(remakes.due(&lost(), true));
    }

    #[test]
    fn a_lost_device_is_told_from_other_failures_on_either_side() {
        let lost = || anyhow::Error::from(vkcuda::Error::DeviceLost { context: "frame 9".into() });
        let core = RunError::of_consumer(lost().context("submitting"));
        assert!(core.device_lost() && device_lost(&anyhow::Error::from(core)));
        let other =
            RunError::of_consumer(anyhow::Error::from(vkcuda::Error::Invalid { context: "x".into() }));
        assert!(!other.device_lost());
        let producer = |consumer| RunError::ProducerFailed {
            producer: ProducerId::child(Renders::Cpu),
            error: lost(),
            consumer,
        };
        assert!(!producer(None).device_lost(), "the producer's own words are not the consumer's device");
        assert!(producer(Some(lost())).device_lost());
        assert!(!device_lost(&anyhow!("disk full")));
        assert!(device_lost(&lost().context("presenting")), "a front end's own consumer error");
    }

    #[test]
    fn a_run_error_words_its_fields_and_keeps_its_causes() {
        let size = UsageError::new(Message::new().field(Field::Size, "9x9").text(" is too large"));
        let e = anyhow::Error::from(RunError::Usage(size));
        assert_eq!(worded(&e, &Flags), "--size 9x9 is too large");
        assert!(is_usage(&e) && !is_usage(&anyhow!("no")));
        let error = anyhow!("CUDA_ERROR_ILLEGAL_ADDRESS").context("frame 4");
        let consumer = Some(anyhow!("the window closed"));
        let failed = anyhow::Error::from(RunError::ProducerFailed {
            producer: ProducerId::in_process(Renders::Cuda),
            error,
            consumer,
        });
        let said = "the cuda producer failed (the window closed): frame 4: CUDA_ERROR_ILLEGAL_ADDRESS";
        assert_eq!(worded(&failed, &Flags), said);
        assert_eq!(format!("{failed:#}"), said, "Display and source() walk the same causes");
        let outer = Err::<(), _>(failed).context("run 2").unwrap_err();
        assert_eq!(worded(&outer, &Flags), format!("run 2: {said}"));
    }
}
