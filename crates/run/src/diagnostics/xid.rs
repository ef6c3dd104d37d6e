//! The NVIDIA driver's fault reports in the kernel log ("NVRM: Xid"): what
//! a run that timed out says about why. After a CUDA kernel faults on an
//! NVIDIA GPU (Xid 31, an MMU fault; Xid 13, a graphics exception), Vulkan
//! graphics pipelines on that GPU stop finishing, in every later process,
//! until the GPU is reset (Xid 109, a context switch timeout, then follows);
//! copies, compute and CUDA in a new process keep working (docs/kernels.md).
//! A wait that times out cannot tell that from a kernel that never ends; the
//! kernel log can, where it is readable (`/dev/kmsg`: root, or
//! `kernel.dmesg_restrict=0`).

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};

/// Xids that say a GPU fault left the GPU's graphics pipelines stuck.
const FAULTS: [u32; 4] = [13, 31, 43, 109];
/// The most kernel log records read (the log is a ring of a few MB).
const MAX_RECORDS: usize = 200_000;

/// One "NVRM: Xid" report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Xid {
    /// Its number (31: an MMU fault; 109: a context switch timeout ...).
    pub code: u32,
    /// The report as the kernel log has it.
    pub line: String,
}

/// The Xid a kernel log message reports, if it is one
/// (`NVRM: Xid (PCI:0000:00:06): 31, pid=9108, name=vkcuda, ...`).
pub fn parse(message: &str) -> Option<Xid> {
    let at = message.find("NVRM: Xid")?;
    let line = message[at..].trim_end().to_string();
    let (_, rest) = line.split_once("): ")?;
    let code = rest.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()?;
    Some(Xid { code, line })
}

/// The Xids in the kernel log, oldest first; none where it cannot be read.
pub fn in_kernel_log() -> Vec<Xid> {
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(mut kmsg) =
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open("/dev/kmsg")
    else {
        return Vec::new();
    };
    let mut record = vec![0u8; 8192];
    let mut found = Vec::new();
    // One record a read ("PRIORITY,SEQ,TIME,FLAGS;MESSAGE"); EAGAIN at the end of the log.
    for _ in 0..MAX_RECORDS {
        match kmsg.read(&mut record) {
            Ok(n) if n > 0 => {
                let text = String::from_utf8_lossy(&record[..n]);
                found.extend(text.split_once(';').and_then(|(_, m)| parse(m)));
            }
            // EPIPE: a record was overwritten while reading; the next read goes on.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            _ => break,
        }
    }
    found
}

/// What a run that timed out should add, given the kernel log's Xids: the
/// last fault's report and the cure, or nothing if none is a fault.
pub fn fault_hint(xids: &[Xid]) -> Option<String> {
    let last = xids.iter().rev().find(|x| FAULTS.contains(&x.code))?;
    Some(format!(
        "the kernel log reports a GPU fault ({}): after a CUDA kernel faults on an NVIDIA GPU, \
         Vulkan graphics pipelines there stop finishing, in every later process, until an administrator \
         resets the GPU (`nvidia-smi -r`, or a reboot); copies, compute (the headless draw, a window \
         presented through the CPU, the browser view) and CUDA in a new process still work",
        last.line
    ))
}

/// Prints [`fault_hint`] of the kernel log on stderr, once a process: a run
/// held up (the session) and then timed out (the front end) reads the log and
/// says it once.
pub fn say_fault_hint_once() {
    static SAID: AtomicBool = AtomicBool::new(false);
    if SAID.swap(true, Ordering::Relaxed) {
        return;
    }
    if let Some(hint) = fault_hint(&in_kernel_log()) {
        eprintln!("vkcuda: {hint}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As the H200's kernel log had them after a `--kernel` stored through a bad address.
    const FAULT: &str = "NVRM: Xid (PCI:0000:00:06): 31, pid=9108, name=vkcuda, channel 0x00000012, intr \
        00000000. MMU Fault: ENGINE GRAPHICS GPC1 GPCCLIENT_T1_10 faulted @ 0x0_00000000. Fault is of type \
        FAULT_PDE ACCESS_TYPE_VIRT_WRITE";
    const TIMEOUT: &str = "NVRM: Xid (PCI:0000:00:06): 109, pid=9200, name=vkcuda, Ch 00000013, errorString \
        CTX SWITCH TIMEOUT, Info 0x3c040";

    #[test]
    fn xids_are_read_from_kernel_log_messages() {
        assert_eq!(parse(FAULT).map(|x| x.code), Some(31));
        assert_eq!(parse(&format!("[  253.653668] {TIMEOUT}\n")).map(|x| x.code), Some(109));
        assert_eq!(parse(FAULT).map(|x| x.line.starts_with("NVRM: Xid (PCI")), Some(true));
        for other in ["NVRM: loading NVIDIA UNIX x86_64 Kernel Module", "usb 1-1: new device", "NVRM: Xid"] {
            assert_eq!(parse(other), None, "{other}");
        }
    }

    #[test]
    fn the_hint_names_the_last_fault_and_the_cure() {
        let xids: Vec<Xid> = [FAULT, TIMEOUT].iter().filter_map(|m| parse(m)).collect();
        let hint = fault_hint(&xids).unwrap();
        assert!(hint.contains("CTX SWITCH TIMEOUT") && hint.contains("nvidia-smi -r"), "{hint}");
        let benign = parse("NVRM: Xid (PCI:0000:00:06): 94, pid=1, Contained: SM (0x1).").unwrap();
        assert_eq!(fault_hint(&[benign]), None, "Xid 94 is a contained error, not this fault");
        assert_eq!(fault_hint(&[]), None);
    }
}
