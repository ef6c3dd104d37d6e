//! A producer's child process, for the run layer's child protocol
//! (`vkcuda_run::running::child`): what your own program runs when it
//! hosts the producer in a process of its own. A run starts it with the
//! socket it inherits as the last argument; the CLI runs itself instead
//! (`vkcuda producer-child FD`). `crates/run/tests/child.rs` uses this one.

use std::os::fd::{FromRawFd, OwnedFd};
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(fd) = std::env::args().next_back().and_then(|a| a.parse::<i32>().ok()) else {
        eprintln!("producer_child: started by a run, with its socket's descriptor as the last argument");
        return ExitCode::from(2);
    };
    // SAFETY: the run that started this process passed it this descriptor, for it alone.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    match vkcuda_run::running::child::serve(fd) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("producer_child: {e:#}");
            ExitCode::from(1)
        }
    }
}
