//! Test-only fault injection (`--inject FAULT@FRAME`, hidden from `--help`):
//! the e2e tests and `scripts/gpu-test.sh` fail a run at a chosen frame, in
//! each place a real run can fail, to prove every failure stops validly
//! (exit code, one error line, no validation message, no partial file).

use std::fmt;
use std::str::FromStr;

/// Where a run fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The CUDA producer launches a kernel that traps (a sticky context error).
    KernelTrap,
    /// The producer thread panics before it makes the frame.
    ProducerPanic,
    /// The producer makes nothing more from the frame on, as one whose kernel
    /// never ends, until the run gives up on it.
    ProducerStall,
    /// The consumer fails while recording the frame (its batch is never submitted).
    ConsumerError,
    /// Writing the frame's PNG fails as on a full disk (`ENOSPC`).
    PngWrite,
    /// The frame's CPU reference is corrupted, so `--verify` finds a mismatch.
    Mismatch,
    /// The process sends itself SIGINT as the consumer submits the frame.
    Sigint,
    /// The process sends itself SIGTERM as the consumer submits the frame.
    Sigterm,
    /// A producer in a child process is killed (SIGKILL) before it makes the frame.
    ChildKill,
    /// The consumer's device reports itself lost (`VK_ERROR_DEVICE_LOST`)
    /// while it records the frame, as a driver may after a GPU fault.
    DeviceLost,
}

const NAMES: [(Fault, &str); 10] = [
    (Fault::KernelTrap, "cuda-fault"),
    (Fault::ProducerPanic, "producer-panic"),
    (Fault::ProducerStall, "producer-stall"),
    (Fault::ConsumerError, "consumer-error"),
    (Fault::PngWrite, "png-write"),
    (Fault::Mismatch, "mismatch"),
    (Fault::Sigint, "sigint"),
    (Fault::Sigterm, "sigterm"),
    (Fault::ChildKill, "child-kill"),
    (Fault::DeviceLost, "device-lost"),
];

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = NAMES.iter().find(|(k, _)| k == self).map_or("?", |(_, n)| n);
        f.write_str(name)
    }
}

/// One fault at one frame: `FAULT@FRAME`, e.g. `png-write@12`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At {
    /// The fault.
    pub fault: Fault,
    /// The frame it hits.
    pub frame: u64,
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.fault, self.frame)
    }
}

impl FromStr for At {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let names = || NAMES.iter().map(|(_, n)| *n).collect::<Vec<_>>().join(", ");
        let (name, frame) = s.split_once('@').ok_or_else(|| format!("'{s}' is not FAULT@FRAME"))?;
        let fault = NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(k, _)| *k)
            .ok_or_else(|| format!("unknown fault '{name}' (one of: {})", names()))?;
        let frame = frame.parse().map_err(|_| format!("frame '{frame}' in '{s}' is not a whole number"))?;
        Ok(At { fault, frame })
    }
}

/// The faults a run injects (none outside tests).
#[derive(Clone, Debug, Default)]
pub struct Inject(pub Vec<At>);

impl Inject {
    /// Whether `fault` hits frame `g`.
    pub fn at(&self, fault: Fault, g: u64) -> bool {
        self.0.iter().any(|a| a.fault == fault && a.frame == g)
    }

    /// The first frame `fault` hits, if any.
    pub fn first(&self, fault: Fault) -> Option<u64> {
        self.0.iter().filter(|a| a.fault == fault).map(|a| a.frame).min()
    }

    /// The first frame `fault` hits, armed once a process: for a fault the run
    /// survives, whose frame the next session makes again (it must not fail twice).
    pub fn first_once(&self, fault: Fault) -> Option<u64> {
        static ARMED: std::sync::Mutex<Vec<Fault>> = std::sync::Mutex::new(Vec::new());
        let frame = self.first(fault)?;
        let mut armed = ARMED.lock().unwrap_or_else(|p| p.into_inner());
        (!armed.contains(&fault)).then(|| {
            armed.push(fault);
            frame
        })
    }

    /// Panics if a producer panic is injected at frame `g`.
    pub fn producer_panic(&self, g: u64) {
        if self.at(Fault::ProducerPanic, g) {
            panic!("injected producer panic at frame {g}");
        }
    }

    /// With a producer stall injected at frame `g`: waits until `given_up()`
    /// (the run gave up on the producer), then fails.
    pub fn producer_stall(&self, g: u64, given_up: impl Fn() -> bool) -> anyhow::Result<()> {
        if self.at(Fault::ProducerStall, g) {
            while !given_up() {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            anyhow::bail!("injected producer stall at frame {g}");
        }
        Ok(())
    }

    /// The PNG writer's injected failure for frame `g`: a full disk.
    pub fn png_write(&self, g: u64) -> std::io::Result<()> {
        match self.at(Fault::PngWrite, g) {
            true => Err(std::io::Error::from_raw_os_error(libc::ENOSPC)),
            false => Ok(()),
        }
    }

    /// The signal to send to this process as frame `g` is submitted, if any.
    pub fn signal(&self, g: u64) -> Option<i32> {
        match (self.at(Fault::Sigint, g), self.at(Fault::Sigterm, g)) {
            (true, _) => Some(libc::SIGINT),
            (_, true) => Some(libc::SIGTERM),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_fault_and_refuses_bad_ones() {
        for (fault, name) in NAMES {
            assert_eq!(format!("{name}@7").parse::<At>(), Ok(At { fault, frame: 7 }));
            assert_eq!(fault.to_string(), name);
        }
        assert!("png-write".parse::<At>().unwrap_err().contains("FAULT@FRAME"));
        assert!("disk@3".parse::<At>().unwrap_err().contains("unknown fault 'disk'"));
        assert!("png-write@x".parse::<At>().unwrap_err().contains("not a whole number"));
        let inject = Inject(vec!["sigterm@3".parse().unwrap(), "png-write@5".parse().unwrap()]);
        assert_eq!((inject.signal(3), inject.signal(5)), (Some(libc::SIGTERM), None));
        assert!(inject.png_write(5).is_err() && inject.png_write(3).is_ok());
        assert_eq!((inject.first(Fault::PngWrite), inject.first(Fault::Mismatch)), (Some(5), None));
    }
}
