//! A producer's child process, for the run layer's child protocol
//! (`vkcuda_run::drive::child`): what your own program runs when it
//! hosts the producer in a process of its own. A run starts it with the
//! socket it inherits as the last argument; the CLI runs itself instead
//! (`vkcuda producer-child FD`). `crates/run/tests/child.rs` uses this one.

use std::process::ExitCode;

use vkcuda_run::drive::child;

fn main() -> ExitCode {
    let Some(fd) = std::env::args_os().next_back() else {
        eprintln!("producer_child: started by a run, with its socket's descriptor as the last argument");
        return ExitCode::from(2);
    };
    // SAFETY: the run that started this process passed it this descriptor, for it alone;
    // nothing in this process took it before.
    match unsafe { child::inherited_socket(&fd) }.and_then(child::serve) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("producer_child: {e:#}");
            ExitCode::from(1)
        }
    }
}
