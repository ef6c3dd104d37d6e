//! Where the core's `log` records go in the application: stderr, one line
//! each, prefixed `vkcuda:` (validation messages included, e.g.
//! "vkcuda: validation error: ...").

use log::{Level, LevelFilter, Log, Metadata, Record};

struct Stderr;

impl Log for Stderr {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= Level::Info
    }

    fn log(&self, record: &Record<'_>) {
        if self.enabled(record.metadata()) {
            eprintln!("vkcuda: {}", record.args());
        }
    }

    fn flush(&self) {}
}

/// Sends `log` records of level info and above to stderr (once per process).
pub fn init() {
    static LOGGER: Stderr = Stderr;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(LevelFilter::Info);
    }
    // A worker thread's panic is reported once, as the error its join returns
    // (the run's one error line); the default hook would print a second
    // message with a source path. Panics on the main thread keep a line.
    std::panic::set_hook(Box::new(|info| {
        let thread = std::thread::current();
        match thread.name() {
            Some("main") | None => eprintln!("vkcuda: internal error: {info}"),
            Some(name) => log::debug!("thread '{name}' {info}"),
        }
    }));
}
