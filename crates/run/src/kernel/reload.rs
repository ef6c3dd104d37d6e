//! Hot reload of a `--kernel` file in the viewer: a watcher (`notify`) sees
//! the file, or a file it includes, change; a compile thread builds it with
//! NVRTC, off the render threads; the producer swaps the new kernel in
//! between two frames ([`ReloadLink::take`]), so no frame is lost, torn or
//! out of plan order. A compile error leaves the running kernel in place and
//! is printed (`FILE:LINE`) and kept for the window title.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use notify::{RecursiveMode, Watcher};

use crate::kernel::nvrtc::Program;
use crate::kernel::user::{compile_checked, KernelSpec};

/// A save often arrives as several events (truncate, write, rename): one
/// compile for all of them, once none came for this long, or at once when
/// one says the file is complete (closed after writing, or renamed into place).
const SETTLE: Duration = Duration::from_millis(2);

/// What the compile thread is told.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trigger {
    /// The file changed; more may follow.
    Changed,
    /// The file is complete: compile now.
    Complete,
    /// R: compile now, even if the sources did not change.
    Reload,
}

/// How a watched file's event triggers a compile, if it does.
fn trigger_of(kind: &notify::EventKind) -> Option<Trigger> {
    use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
    use notify::EventKind;
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => Some(Trigger::Complete),
        EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both)) => Some(Trigger::Complete),
        // Reading the file, or its times and permissions changing, changes no source.
        EventKind::Access(_) | EventKind::Modify(ModifyKind::Metadata(_)) => None,
        _ => Some(Trigger::Changed),
    }
}

/// What the producer and the compile thread share: new PTX one way, the
/// device's architecture the other, and the version running.
#[derive(Clone, Default)]
pub struct ReloadLink {
    inner: Arc<LinkInner>,
}

/// A compiled version on its way to the screen.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// What NVRTC made.
    pub program: Program,
    /// How it was made.
    pub made: Made,
}

/// How a version was made, for the report when it is on screen.
#[derive(Clone, Copy, Debug)]
pub struct Made {
    /// When the change that made it was seen.
    pub changed: Instant,
    /// How long NVRTC took.
    pub compile: Duration,
    /// When it was handed over to the producer.
    pub ready: Instant,
}

/// A version the producer swapped in, until the viewer shows its first frame.
#[derive(Clone, Copy, Debug)]
pub struct Swapped {
    /// The version.
    pub version: u64,
    /// Its first frame (the session's numbering).
    pub frame: u64,
    /// How it was made.
    pub made: Made,
}

impl std::fmt::Debug for ReloadLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadLink").field("running", &self.version()).finish()
    }
}

#[derive(Default)]
struct LinkInner {
    /// The newest compiled version not yet taken by the producer.
    pending: Mutex<Option<Compiled>>,
    /// The newest version swapped in whose first frame the viewer has not shown yet.
    swapped: Mutex<Option<Swapped>>,
    /// The last PTX that compiled: a producer made after a rebuild starts with it.
    last_good: Mutex<Option<Program>>,
    /// `sm_XY` of the producer's device, once it has one.
    arch: Mutex<Option<String>>,
    /// The kernel version the producer runs: 1 for the file as it was at start.
    running: AtomicU64,
    /// Called when a version is published: the producer's wake-up, while one runs.
    waker: Mutex<Option<Waker>>,
    /// Versions compiled and published so far.
    published: AtomicU64,
}

/// Tells the producer that a new version waits.
pub type Waker = Box<dyn Fn() + Send>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ReloadLink {
    /// The producer: a new version to swap in before the next frame, if any.
    pub fn take(&self) -> Option<Compiled> {
        lock(&self.inner.pending).take()
    }

    /// The producer: it swapped `compiled` in as version `version` from frame `frame` on.
    pub fn swapped(&self, compiled: &Compiled, version: u64, frame: u64) {
        *lock(&self.inner.swapped) = Some(Swapped { version, frame, made: compiled.made });
    }

    /// The viewer, as it shows frame `frame`: the swap whose first frame
    /// that is (or came before), once.
    pub fn shown(&self, frame: u64) -> Option<Swapped> {
        lock(&self.inner.swapped).take_if(|s| s.frame <= frame)
    }

    /// Forgets a swap not yet shown (its session ended: frame numbers restart).
    pub fn forget_swap(&self) {
        lock(&self.inner.swapped).take();
    }

    /// The producer: the program to start with (the last that compiled), if any.
    pub fn last_good(&self) -> Option<Program> {
        lock(&self.inner.last_good).clone()
    }

    /// The producer: its device's architecture, and that version `n` runs.
    pub fn running(&self, arch: &str, n: u64) {
        *lock(&self.inner.arch) = Some(arch.to_string());
        self.inner.running.store(n, Ordering::Relaxed);
    }

    /// Versions compiled since the start (a save that compiles adds one).
    pub fn published(&self) -> u64 {
        self.inner.published.load(Ordering::Acquire)
    }

    /// The next producer starts with the last PTX that compiled, which no
    /// producer ran yet (a fix saved after a fault): it is taken (not swapped
    /// in again) and counted as the next version.
    pub fn take_for_restart(&self) {
        if lock(&self.inner.pending).take().is_some() {
            self.inner.running.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The version the producer runs (0 before it started).
    pub fn version(&self) -> u64 {
        self.inner.running.load(Ordering::Relaxed)
    }

    /// The producer: `waker` is called when a new version waits (`None`: the producer ended).
    pub fn on_publish(&self, waker: Option<Waker>) {
        *lock(&self.inner.waker) = waker;
    }

    /// A producer in a child process: starts with `program` (the session's last good one).
    pub(crate) fn start_with(&self, program: Program) {
        *lock(&self.inner.last_good) = Some(program);
    }

    /// Hands `compiled` to the producer (the compile thread; a child process's loop).
    pub(crate) fn publish(&self, compiled: Compiled) {
        *lock(&self.inner.last_good) = Some(compiled.program.clone());
        *lock(&self.inner.pending) = Some(compiled);
        // Counted once it can be taken: a restart then starts with it.
        self.inner.published.fetch_add(1, Ordering::AcqRel);
        if let Some(wake) = lock(&self.inner.waker).as_ref() {
            wake();
        }
    }

    fn arch(&self) -> Option<String> {
        lock(&self.inner.arch).clone()
    }
}

/// The last compile's failure: its first diagnostic, and when.
#[derive(Clone, Debug)]
pub struct Failure {
    /// `FILE:LINE: error: ...`
    pub first_line: String,
    /// When the compile failed.
    pub at: Instant,
}

/// The watcher and the compile thread (the viewer owns it; dropping it stops both).
pub struct KernelReload {
    link: ReloadLink,
    trigger: Option<Sender<Trigger>>,
    failure: Arc<Mutex<Option<Failure>>>,
    thread: Option<JoinHandle<()>>,
    /// Its callback holds a sender of the compile thread's channel.
    watcher: Option<notify::RecommendedWatcher>,
}

impl KernelReload {
    /// Watches `spec`'s file and the files it includes.
    pub fn start(spec: &KernelSpec) -> Result<Self> {
        let link = ReloadLink::default();
        let (trigger, triggered) = channel::<Trigger>();
        let watched = Arc::new(Mutex::new(dependencies(&spec.file)));
        let start = sources(&lock(&watched));
        let names = watched.clone();
        let tx = trigger.clone();
        let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
            let Ok(event) = event else { return };
            // The watched folders are canonical (as `dependencies` names the files), so an
            // event's path is the file's own.
            let ours = event.paths.iter().any(|p| lock(&names).contains(p));
            if let Some(t) = trigger_of(&event.kind).filter(|_| ours) {
                let _ = tx.send(t);
            }
        })
        .context("watching the kernel file")?;
        let dirs: BTreeSet<PathBuf> =
            lock(&watched).iter().filter_map(|f| f.parent().map(Path::to_path_buf)).collect();
        for dir in dirs {
            watcher
                .watch(&dir, RecursiveMode::NonRecursive)
                .with_context(|| format!("watching {}", dir.display()))?;
        }
        let failure = Arc::new(Mutex::new(None));
        let thread = {
            let (spec, link, failure) = (spec.clone(), link.clone(), failure.clone());
            std::thread::Builder::new()
                .name("kernel-compile".into())
                .spawn(move || compile_loop(&spec, &link, &failure, &triggered, &watched, start))
                .context("starting the kernel compile thread")?
        };
        Ok(Self { link, trigger: Some(trigger), failure, thread: Some(thread), watcher: Some(watcher) })
    }

    /// What the producer is given.
    pub fn link(&self) -> ReloadLink {
        self.link.clone()
    }

    /// Compiles the file again now (the R key).
    pub fn reload(&self) {
        if let Some(t) = &self.trigger {
            let _ = t.send(Trigger::Reload);
        }
    }

    /// The last compile's failure, while it is the newest news (a later
    /// success clears it).
    pub fn failure(&self) -> Option<Failure> {
        lock(&self.failure).clone()
    }
}

impl Drop for KernelReload {
    fn drop(&mut self) {
        // The compile thread ends when its channel closes: when both senders are gone.
        self.watcher.take();
        self.trigger.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Compiles on every trigger (at once when the file is complete, else after
/// [`SETTLE`] without another), for the
/// producer's architecture, and hands the PTX over or keeps the failure;
/// `watched`: the files the watcher follows (the kernel's and what it includes).
fn compile_loop(
    spec: &KernelSpec,
    link: &ReloadLink,
    failure: &Mutex<Option<Failure>>,
    triggered: &Receiver<Trigger>,
    watched: &Mutex<BTreeSet<PathBuf>>,
    start: Vec<String>,
) {
    // `compiled`: the sources last compiled (at first, as they were when the
    // watch began): an event that changes nothing (a save's close arriving
    // after its writes were compiled) compiles nothing.
    let mut compiled = start;
    let mut pending = None;
    loop {
        let first = match pending.take().map_or_else(|| triggered.recv(), Ok) {
            Ok(t) => t,
            Err(_) => return,
        };
        let changed = Instant::now();
        let mut forced = first == Trigger::Reload;
        let mut complete = first != Trigger::Changed;
        while !complete {
            match triggered.recv_timeout(SETTLE) {
                Ok(t) => (complete, forced) = (t != Trigger::Changed, forced || t == Trigger::Reload),
                Err(RecvTimeoutError::Timeout) => break,
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
        // Events of this same save that are already queued need no compile of their own.
        while let Ok(t) = triggered.try_recv() {
            forced |= t == Trigger::Reload;
        }
        let deps = dependencies(&spec.file);
        let now = sources(&deps);
        if now == compiled && !forced {
            continue;
        }
        compiled = now;
        // Before the producer has said its architecture, compile for a virtual one (PTX the driver JITs).
        let arch = link.arch().unwrap_or_else(|| "compute_75".into());
        let started = Instant::now();
        match compile_checked(&spec.file, &spec.entry, &arch) {
            Ok(program) => {
                let compile = started.elapsed();
                eprintln!("vkcuda: {} compiled in {compile:.0?}: swapping it in", spec.file.display());
                link.publish(Compiled { program, made: Made { changed, compile, ready: Instant::now() } });
                *lock(failure) = None;
            }
            Err(e) => {
                let text = format!("{e:#}");
                let first_line = text
                    .lines()
                    .find(|l| l.contains(": error"))
                    .unwrap_or(text.lines().next().unwrap_or(""))
                    .to_string();
                eprintln!("vkcuda: {}: the previous kernel keeps running: {text}", spec.file.display());
                *lock(failure) = Some(Failure { first_line, at: Instant::now() });
            }
        }
        // The includes may have changed with the file.
        *lock(watched) = deps;
        // What came during the compile is compiled next if it changed the sources; an R
        // pressed while compiling is answered by this compile.
        if triggered.try_iter().count() > 0 {
            pending = Some(Trigger::Changed);
        }
    }
}

/// The text of `files`, in order (unreadable ones as empty), to tell whether a save changed anything.
fn sources(files: &BTreeSet<PathBuf>) -> Vec<String> {
    files.iter().map(|f| std::fs::read_to_string(f).unwrap_or_default()).collect()
}

/// `file` and the files it includes with `#include "..."`, found next to the
/// including file, recursively (the built-in vkcuda.h is not a file).
pub fn dependencies(file: &Path) -> BTreeSet<PathBuf> {
    let mut found = BTreeSet::new();
    let mut todo = vec![file.to_path_buf()];
    while let Some(f) = todo.pop() {
        let f = f.canonicalize().unwrap_or(f);
        if found.len() > 64 || !found.insert(f.clone()) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&f) else { continue };
        let dir = f.parent().map(Path::to_path_buf).unwrap_or_default();
        for line in text.lines() {
            let Some(rest) = line.trim_start().strip_prefix("#include") else { continue };
            let Some(name) = rest.trim().strip_prefix('"').and_then(|r| r.split('"').next()) else {
                continue;
            };
            let path = dir.join(name);
            if path.is_file() {
                todo.push(path);
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits (up to 20 s) until `done()` gives something.
    fn wait_for<T>(what: &str, done: impl Fn() -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(t) = done() {
                return t;
            }
            assert!(Instant::now() < deadline, "{what}: not after 20 s");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn a_fix_after_a_fault_is_taken_for_the_restart_as_the_next_version() {
        let link = ReloadLink::default();
        let now = Instant::now();
        let made = Made { changed: now, compile: Duration::ZERO, ready: now };
        let compiled = |ptx: &str| Compiled { program: Program { ptx: ptx.into(), cubin: None }, made };
        link.running("sm_90", 2);
        link.take_for_restart();
        assert_eq!(link.version(), 2, "nothing new: the same version");
        link.publish(compiled("fix"));
        link.take_for_restart();
        assert_eq!(link.version(), 3);
        assert!(link.take().is_none(), "taken: not swapped in again");
        assert_eq!(link.last_good().map(|p| p.ptx).as_deref(), Some("fix"), "the restart's program");
    }

    /// The watcher and the compile thread, without a GPU (NVRTC for a virtual
    /// architecture): an edit is compiled and handed over, a broken edit is a
    /// failure naming FILE:LINE and hands nothing over, the fix clears it, R too.
    #[test]
    fn edits_are_compiled_and_handed_over() {
        if let Err(e) = crate::kernel::nvrtc::load() {
            println!("skipped: {e}");
            return;
        }
        let dir = std::env::temp_dir().join(format!("vkcuda-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("k.cu");
        let kernel = |body: &str| {
            format!("#include \"vkcuda.h\"\nextern \"C\" __global__ void render(vk_frame f)\n{{\n    VK_PIXEL(f, x, y);\n    {body}\n}}\n")
        };
        std::fs::write(&file, kernel("vk_put8(f.target, x, y, make_uchar4(1, 2, 3, 255));")).unwrap();
        let spec = KernelSpec {
            file: file.clone(),
            entry: "render".into(),
            params: [0.0; 8],
            block: (16, 16),
            live: true,
        };
        let reload = KernelReload::start(&spec).unwrap();
        let link = reload.link();
        assert!(link.take().is_none(), "nothing before an edit");
        std::fs::write(&file, kernel("vk_put8(f.target, x, y, make_uchar4(4, 5, 6, 255));")).unwrap();
        let program = wait_for("the edit's PTX", || link.take()).program;
        assert!(program.ptx.contains(".entry render("));
        std::fs::write(&file, kernel("vk_put8(f.target, x, y, make_uchar5(4, 5, 6, 255));")).unwrap();
        let failure = wait_for("the broken edit's failure", || reload.failure());
        assert!(failure.first_line.contains("k.cu:5: error"), "{}", failure.first_line);
        assert!(link.take().is_none(), "a broken edit hands nothing over");
        let kept = link.last_good().map(|p| p.ptx);
        assert_eq!(kept.as_deref(), Some(program.ptx.as_str()), "the last good version stays");
        std::fs::write(&file, kernel("vk_put8(f.target, x, y, make_uchar4(7, 8, 9, 255));")).unwrap();
        wait_for("the fix's PTX", || link.take());
        assert!(reload.failure().is_none(), "the fix clears the failure");
        reload.reload();
        wait_for("R's PTX", || link.take());
        drop(reload); // ends the watcher and the compile thread (a hang here fails the test run)
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_complete_file_compiles_at_once() {
        use notify::event::{
            AccessKind, AccessMode, CreateKind, DataChange, MetadataKind, ModifyKind, RenameMode,
        };
        use notify::EventKind;
        let closed = EventKind::Access(AccessKind::Close(AccessMode::Write));
        let renamed = EventKind::Modify(ModifyKind::Name(RenameMode::To));
        assert_eq!(
            (trigger_of(&closed), trigger_of(&renamed)),
            (Some(Trigger::Complete), Some(Trigger::Complete))
        );
        let written = EventKind::Modify(ModifyKind::Data(DataChange::Content));
        let created = EventKind::Create(CreateKind::File);
        assert_eq!(
            (trigger_of(&written), trigger_of(&created)),
            (Some(Trigger::Changed), Some(Trigger::Changed))
        );
        let read = EventKind::Access(AccessKind::Read);
        let touched = EventKind::Modify(ModifyKind::Metadata(MetadataKind::WriteTime));
        assert_eq!((trigger_of(&read), trigger_of(&touched)), (None, None));
    }

    #[test]
    fn dependencies_follow_local_includes() {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let deps = dependencies(&root.join("tests/kernels/includes.cu"));
        let names: Vec<_> = deps.iter().filter_map(|p| p.file_name()?.to_str()).collect();
        assert_eq!(names, ["includes.cu", "includes_helper.h"]);
    }
}
