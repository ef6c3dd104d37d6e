//! The session's side of a producer in a child process: it starts the
//! child, offers it the frames, then stands in its place on the producer's
//! thread: it paces frames, waits on the host for "released", says what each
//! frame shows, and follows what the child reports. When the child dies, this
//! thread's run ends with the child's error; the session then stands in for
//! what the child owed ([`crate::drive::session`]).

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

use super::channel::{Channel, Received};
use super::offer::Offered;
use super::wire::{send_kernel, FromChild, Produce, Render, ToChild, INJECT_ENV};
use crate::drive::producer::{FrameTiming, Job, Report, WakeOnPublish};
use crate::kernel::reload::{Compiled, ReloadLink};
use crate::scene::director::Director;
use vkcuda::interop::SharedFrames;

/// How long a new child may take to import the frames and load its kernels
/// (CUDA's start and a kernel's JIT compile: seconds).
pub const READY_WITHIN: Duration = Duration::from_secs(60);

/// How long a stopped child may take to finish its frames and exit.
const EXIT_WITHIN: Duration = Duration::from_secs(10);

/// The program a child runs: `program args… FD`, where FD is the number of
/// the socket it inherits; it takes it with [`super::inherited_socket`] and
/// calls [`super::serve`] with it. The CLI runs itself (`vkcuda
/// producer-child FD`, hidden: its `CHILD_COMMAND`).
#[derive(Clone, Debug)]
pub struct ChildCommand {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments before the descriptor's number.
    pub args: Vec<OsString>,
    /// The child's Vulkan instance loads the validation layer (a reference child).
    pub validate: bool,
}

/// What the reader thread learns from the child.
#[derive(Default)]
struct Heard {
    report: Mutex<Report>,
    error: Mutex<Option<String>>,
    /// The child said it finished every frame.
    done: AtomicBool,
    /// The child's socket closed (it exited or was killed).
    closed: AtomicBool,
    /// The newest kernel version sent, until the child swaps it in.
    sent: Mutex<Option<Compiled>>,
}

/// A producer in a child process, ready to run on the producer's thread.
pub struct ChildProducer {
    child: Child,
    channel: Channel,
    shared: Arc<SharedFrames>,
    director: Arc<Director>,
    link: Option<ReloadLink>,
    /// No timeline handles went to the child: this signals "rendered" for it.
    relay: bool,
    /// The child waits on the host for "released": each frame goes a frame early.
    ahead: bool,
    arch: Option<String>,
}

/// What a producer's child is started with ([`ChildProducer::start`]).
pub struct ChildStart<'a> {
    /// The frames it renders into (exported to it).
    pub shared: &'a Arc<SharedFrames>,
    /// The UUID of the device they are on (the child opens the same one).
    pub uuid: [u8; 16],
    /// What it renders.
    pub render: Render,
    /// Each frame's scene, sent with the frame.
    pub director: Arc<Director>,
    /// The kernel's reload link, when the kernel reloads.
    pub link: Option<ReloadLink>,
    /// The faults to inject (tests only), for the child's environment.
    pub inject: Vec<String>,
    /// The frames the run is planned for.
    pub total: u64,
}

impl ChildProducer {
    /// Starts `command`, offers it `start`'s frames (exported) to render
    /// what it says, and waits until it is ready.
    pub fn start(command: &ChildCommand, start: ChildStart<'_>) -> Result<Self> {
        let ChildStart { shared, uuid, render, director, link, inject, total } = start;
        let offered = Offered::export(shared, uuid, total)?;
        let relay = offered.timelines.is_empty();
        let ahead =
            !relay && matches!(&render, Render::Scene(c) | Render::Kernel { cuda: c, .. } if c.host_waits);
        let waits = match ahead {
            true => shared.timelines().iter().map(|t| t.export()).collect::<vkcuda::Result<Vec<_>>>()?,
            false => Vec::new(),
        };
        let (channel, theirs) = Channel::pair()?;
        let mut child = spawn(command, theirs, &inject)?;
        let ready = offer_and_wait(&channel, &offered, &render, &waits, command.validate);
        let arch = match ready {
            Ok(arch) => arch,
            Err(e) => {
                // A child that said why (or exited) is gone in a moment; one that went quiet is killed.
                let status = end(&mut child, EXIT_WITHIN);
                return Err(e.context(format!("starting the producer's process ({})", said(status))));
            }
        };
        if let (Some(link), Some(arch)) = (&link, &arch) {
            link.running(arch, link.version().max(1));
        }
        Ok(Self { child, channel, shared: shared.clone(), director, link, relay, ahead, arch })
    }

    /// The producer thread's loop: frames to the child until the limit, then
    /// its end. Its error is the child's when the child failed or died.
    pub fn run(mut self, job: &Job) -> Result<Report> {
        let heard = Arc::new(Heard::default());
        let reader = self.listen(job, &heard)?;
        let wake = WakeOnPublish::new(self.link.as_ref(), &job.control);
        let sent = self.send_frames(job, &heard);
        drop(wake);
        // The child finishes what it has and exits; one whose kernel never ends is killed.
        let _ = self.channel.send(&ToChild::Stop);
        let until = Instant::now() + EXIT_WITHIN;
        while !heard.closed.load(Ordering::Acquire) && !job.control.abandoned() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        let killed = !heard.closed.load(Ordering::Acquire);
        // A closed socket: the child is exiting; else it is killed at once.
        let status = end(&mut self.child, if killed { Duration::ZERO } else { EXIT_WITHIN });
        let _ = reader.join();
        let error = heard.error.lock().unwrap_or_else(|p| p.into_inner()).take();
        let report = std::mem::take(&mut *heard.report.lock().unwrap_or_else(|p| p.into_inner()));
        if let Some(e) = error {
            return Err(anyhow!("{e}"));
        }
        if killed {
            bail!(
                "the producer's process did not finish its frames (a kernel that does not end?): killed it ({})",
                said(status)
            );
        }
        if !heard.done.load(Ordering::Acquire) {
            let g = job.control.produced();
            bail!("the producer's process ended before it made frame {g} ({})", said(status));
        }
        sent.map(|()| report)
    }

    /// Frames `0..limit` to the child, each once its turn came and its frame
    /// was released; stops early when the child's socket closed or a side failed.
    fn send_frames(&self, job: &Job, heard: &Heard) -> Result<()> {
        let (control, timelines) = (&job.control, self.shared.timelines());
        let gone = || heard.closed.load(Ordering::Acquire);
        let mut g = 0;
        while g < control.limit() {
            // Paced to a screen: a version compiled meanwhile goes at once, so the child
            // loads it while the turn comes, as a producer in this process does.
            while !control.await_turn(g, &gone) {
                self.send_new_kernel(heard)?;
            }
            if g >= control.limit() || gone() || control.failed() {
                break;
            }
            // A child that waits on the host itself gets the frame once the one before is released.
            let released = if self.ahead { g.saturating_sub(1) } else { g };
            if let Some(w) = job.plan.producer(released).wait {
                timelines[w.timeline].wait(w.value, &|| control.failed() || gone())?;
            }
            self.send_new_kernel(heard)?;
            self.channel.send(&ToChild::Frame { g, spec: self.director.begin(g) })?;
            g += 1;
        }
        Ok(())
    }

    /// The newest kernel version compiled, if one came since the last: to the
    /// child, which swaps it in before the next frame it is sent.
    fn send_new_kernel(&self, heard: &Heard) -> Result<()> {
        if let Some(compiled) = self.link.as_ref().and_then(ReloadLink::take) {
            send_kernel(&self.channel, &compiled.program)?;
            *heard.sent.lock().unwrap_or_else(|p| p.into_inner()) = Some(compiled);
        }
        Ok(())
    }

    /// The reader thread: what the child says, as it says it.
    fn listen(&self, job: &Job, heard: &Arc<Heard>) -> Result<std::thread::JoinHandle<()>> {
        let reader = self.channel.try_clone()?;
        let (heard, job) = (heard.clone(), job.clone());
        // Only without timeline handles does this signal for the child.
        let relay = self.relay.then(|| self.shared.clone());
        let (link, arch) = (self.link.clone(), self.arch.clone());
        let thread = std::thread::Builder::new().name("child listener".into()).spawn(move || {
            loop {
                let message = match reader.recv::<FromChild>() {
                    Ok(Received::Message(m)) => m,
                    Ok(Received::Quiet) => continue,
                    Ok(Received::Closed) => break,
                    Err(e) => {
                        heard.error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(format!("{e:#}"));
                        break;
                    }
                };
                let heard_it = hear(message, &job, &heard, relay.as_deref(), &link, &arch);
                if let Err(e) = heard_it {
                    heard.error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(format!("{e:#}"));
                    break;
                }
            }
            heard.closed.store(true, Ordering::Release);
            if !heard.done.load(Ordering::Acquire) {
                job.control.fail();
            }
        })?;
        Ok(thread)
    }
}

/// Acts on one message of the child; `relay`: the frames whose "rendered"
/// this signals for it; `link`: the kernel's reload link, told of a swap to
/// a version compiled for `arch`.
fn hear(
    message: FromChild,
    job: &Job,
    heard: &Heard,
    relay: Option<&SharedFrames>,
    link: &Option<ReloadLink>,
    arch: &Option<String>,
) -> Result<()> {
    match message {
        FromChild::Produced { g } => {
            if let Some(shared) = relay {
                let s = job.plan.producer(g).signal;
                // SAFETY: this thread is the only producer-side signaller of the timeline, in
                // frame order; the frame was sent only once its wait ("released") was met, so
                // no signal at or below this value is pending (VUID-VkSemaphoreSignalInfo-value-03259).
                unsafe { shared.timelines()[s.timeline].signal(s.value) }?;
            }
            job.control.set_produced(g + 1);
        }
        FromChild::Timing { g, render_ns, rendered_ns } => {
            let t = FrameTiming { render: Duration::from_nanos(render_ns), rendered_ns };
            job.control.set_render_time(t.render);
            heard.report.lock().unwrap_or_else(|p| p.into_inner()).timings.push(g, t);
        }
        FromChild::Swapped { g } => {
            let sent = heard.sent.lock().unwrap_or_else(|p| p.into_inner()).take();
            if let (Some(link), Some(compiled)) = (link, sent) {
                let version = link.version() + 1;
                link.running(arch.as_deref().unwrap_or(""), version);
                link.swapped(&compiled, version, g);
            }
        }
        FromChild::Failed { error } => {
            heard.error.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(error);
        }
        FromChild::Done => {
            let mut report = heard.report.lock().unwrap_or_else(|p| p.into_inner());
            report.frames = job.control.produced();
            heard.done.store(true, Ordering::Release);
        }
        FromChild::Ready { .. } => bail!("the producer's process said it was ready twice"),
    }
    Ok(())
}

/// Greets the child, offers it the frames, says what to render (and hands it
/// the timelines it waits on), with the validation layer when `validate`,
/// then waits (bounded) for it to be ready.
fn offer_and_wait(
    channel: &Channel,
    offered: &Offered,
    render: &Render,
    waits: &[OwnedFd],
    validate: bool,
) -> Result<Option<String>> {
    channel.hello(READY_WITHIN).context("greeting the producer's process")?;
    offered.send(channel)?;
    Produce::send(channel, render, waits.len(), validate)?;
    channel.send_handles(&waits.iter().map(AsFd::as_fd).collect::<Vec<_>>())?;
    channel.read_timeout(Some(READY_WITHIN))?;
    let ready = match channel.recv::<FromChild>()? {
        Received::Message(FromChild::Ready { arch }) => Ok(arch),
        Received::Message(FromChild::Failed { error }) => Err(anyhow!("{error}")),
        Received::Message(other) => Err(anyhow!("the producer's process said {other:?} before it was ready")),
        Received::Quiet => Err(anyhow!("the producer's process was not ready within {READY_WITHIN:?}")),
        Received::Closed => Err(anyhow!("the producer's process exited before it was ready")),
    };
    channel.read_timeout(None)?;
    ready
}

/// Starts the child with `theirs` as an inherited descriptor whose number is
/// its last argument, in a process group of its own (a terminal's Ctrl+C is
/// the session's to handle), killed if the session's process dies first;
/// `inject` (tests only) in its environment.
fn spawn(command: &ChildCommand, theirs: OwnedFd, inject: &[String]) -> Result<Child> {
    let mut cmd = prepared(command, theirs.as_raw_fd());
    match inject.is_empty() {
        true => cmd.env_remove(INJECT_ENV),
        false => cmd.env(INJECT_ENV, inject.join(",")),
    };
    let child =
        spawned(cmd).map_err(|e| anyhow!("starting {} for the producer: {e}", command.program.display()));
    // Kept open until the child has it (spawned returns after its exec or failure).
    drop(theirs);
    child
}

/// `command` to run with the descriptor `fd` inherited (as its last
/// argument), in a group of its own, and killed when this process dies.
fn prepared(command: &ChildCommand, fd: RawFd) -> Command {
    let mut cmd = Command::new(&command.program);
    cmd.args(&command.args).arg(fd.to_string());
    let parent = std::process::id();
    // Each call's errno is read right after it fails: a later call may change it.
    let prepare = move || {
        // SAFETY: fcntl(2) on a descriptor this process owns; async-signal-safe (after fork).
        if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: setpgid(2) on this process; async-signal-safe.
        if unsafe { libc::setpgid(0, 0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: prctl(2) on this process; async-signal-safe.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // The parent died between fork and prctl: no signal will come for it.
        // SAFETY: getppid(2) cannot fail; async-signal-safe.
        if unsafe { libc::getppid() } as u32 != parent {
            return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(())
    };
    // SAFETY: `prepare` makes only async-signal-safe calls, as pre_exec requires between fork and exec.
    unsafe { cmd.pre_exec(prepare) };
    cmd
}

/// A child to start, and where its start's outcome goes.
type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// The spawner thread's queue, once it runs.
static SPAWNER: Mutex<Option<mpsc::Sender<SpawnRequest>>> = Mutex::new(None);

/// Starts `cmd` on the spawner: one thread that lives as long as the
/// process. `PR_SET_PDEATHSIG` fires when the *thread* that forked the child
/// exits, not its process: a session started on a short-lived thread (a
/// Python caller's may start on any) would lose its child when that thread
/// ended. The spawner never ends, so the child dies with the process only.
fn spawned(cmd: Command) -> std::io::Result<Child> {
    let (reply, outcome) = mpsc::channel();
    let lost = || std::io::Error::other("the thread that starts producers' processes is gone");
    {
        let mut spawner = SPAWNER.lock().unwrap_or_else(|p| p.into_inner());
        if spawner.is_none() {
            let (queue, requests) = mpsc::channel::<SpawnRequest>();
            // Detached: it holds no resource but its queue, and must outlive every caller.
            std::thread::Builder::new().name("child spawner".into()).spawn(move || {
                for (mut cmd, reply) in requests {
                    let _ = reply.send(cmd.spawn());
                }
            })?;
            *spawner = Some(queue);
        }
        spawner.as_ref().ok_or_else(lost)?.send((cmd, reply)).map_err(|_| lost())?;
    }
    outcome.recv().map_err(|_| lost())?
}

/// Waits up to `grace` for the child to exit, then kills it and reaps it.
fn end(child: &mut Child, grace: Duration) -> Option<ExitStatus> {
    let until = Instant::now() + grace;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(1)),
            Ok(None) => break,
            Err(_) => return None,
        }
    }
    let _ = child.kill();
    child.wait().ok()
}

/// An exit status in words.
fn said(status: Option<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(s) if s.signal().is_some() => format!("killed by signal {}", s.signal().unwrap_or(0)),
        Some(s) => format!("exit code {}", s.code().unwrap_or(-1)),
        None => "its exit status unknown".into(),
    }
}

impl Drop for ChildProducer {
    fn drop(&mut self) {
        // A producer never run (a session that failed to start): no child is left behind.
        end(&mut self.child, Duration::ZERO);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;
    use std::path::Path;

    /// Waits (bounded) until `done` holds.
    fn wait_for(what: &str, done: impl Fn() -> bool) {
        let until = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < until, "timed out waiting until {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// An echo child: `sh` copies what comes on its socket back to it, until it closes.
    fn echo() -> ChildCommand {
        let script = "exec cat <&$0 >&$0";
        ChildCommand { program: "/bin/sh".into(), args: vec!["-c".into(), script.into()], validate: false }
    }

    #[test]
    fn a_child_outlives_the_thread_that_started_it() {
        let (mut ours, theirs) = UnixStream::pair().expect("a socket pair");
        let started = std::thread::spawn(move || {
            // SAFETY: gettid(2) cannot fail.
            let tid = unsafe { libc::gettid() };
            (tid, spawn(&echo(), theirs.into(), &[]))
        });
        let (tid, child) = started.join().expect("the starting thread");
        let mut child = child.expect("the echo child");
        // Gone from the task list, a thread has finished exiting: parent-death signals included.
        wait_for("the starting thread is gone", || !Path::new(&format!("/proc/self/task/{tid}")).exists());
        ours.set_read_timeout(Some(Duration::from_secs(20))).expect("a timeout");
        ours.write_all(b"?").expect("a byte to the child");
        let mut back = [0u8; 1];
        let got = ours.read(&mut back).expect("the child's answer");
        assert_eq!((got, back), (1, *b"?"), "the child died with the thread that started it");
        // The session ends: the child sees its socket close and exits.
        drop(ours);
        let status = child.wait().expect("the child's exit");
        assert!(status.success(), "the child: {}", said(Some(status)));
    }

    #[test]
    fn a_failed_preparation_says_its_own_error() {
        // No such descriptor: fcntl fails with EBADF; the calls after it never run.
        let failed = spawned(prepared(&echo(), i32::MAX)).expect_err("a child without its socket");
        assert_eq!(failed.raw_os_error(), Some(libc::EBADF), "{failed}");
    }
}
