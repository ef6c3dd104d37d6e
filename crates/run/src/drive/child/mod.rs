//! A producer in a process of its own. CUDA cannot go on in a process
//! whose kernel faulted (after an illegal address even a new context fails),
//! while a new process runs CUDA at once: so the session (Vulkan device,
//! consumer, window or server) keeps the frames and hands them to a child.
//!
//! The protocol, in three layers over one Unix stream socket the child
//! inherits: [`channel`] the transport (both ends greet with the version and
//! each refuses another; messages, bulk bytes, handles), [`offer`] the frames
//! offered (protocol-neutral: a viewer in another process could take the same
//! offer), [`wire`] the producer's messages on top:
//! 0. both ends say hello ([`channel::Channel::hello`]);
//! 1. the session sends an [`offer::Offer`] (the frames and their plan, the
//!    device's UUID, the timelines' values), the frames' memory and (when
//!    exportable) the timelines as descriptors (`SCM_RIGHTS`), then a
//!    [`wire::Produce`] (what to render; a kernel's CUBIN as bulk bytes);
//! 2. the child imports them, pairs its device by UUID, loads its kernels and
//!    says [`wire::FromChild::Ready`] (within [`parent::READY_WITHIN`]);
//! 3. per frame, the session waits on the host until the frame is released,
//!    then sends [`wire::ToChild::Frame`] (and any new kernel version before it);
//!    the child enqueues wait → kernel → signal and says
//!    [`wire::FromChild::Produced`] (without timeline handles it writes the
//!    frame and the session signals "rendered" for it);
//! 4. [`wire::ToChild::Stop`]: the child finishes, says
//!    [`wire::FromChild::Done`] and exits.
//!
//! A child that fails says [`wire::FromChild::Failed`] and exits; one that
//! dies says nothing: either way its socket closes, the producer's thread
//! ends with its error, and the session stands in for what it owed
//! (host signals once the process is gone). Nothing here knows sessions or
//! front ends: a front end names the program ([`parent::ChildCommand`]; the
//! CLI runs itself); the child takes its socket with [`inherited_socket`] and
//! calls [`serve`] with it. Children are started from one thread that lives
//! as long as the process, so a session started on any thread keeps its
//! child until it ends, and the child dies with the session's process.

pub mod channel;
pub mod offer;
pub mod parent;
mod reference;
pub mod wire;

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaStream};

use anyhow::{anyhow, bail, ensure, Context, Result};

use crate::diagnostics::inject::{At, Fault, Inject};
use crate::drive::producer::cuda::{CudaProducer, HostWaits, KernelsToLoad, UserKernelToLoad};
use crate::drive::producer::{Control, Job, Report};
use crate::error::failure::{panic_message, RunError};
use crate::kernel::reload::{Compiled, Made, ReloadLink};
use channel::{Channel, Received};
use offer::Offered;
use vkcuda::interop::CudaFrames;
use vkcuda::sync::FramePlan;
use vkcuda::types::QueueKind;
use vkcuda::vk::device::{list_gpus, Device, Queue};
use vkcuda::vk::timeline::Timeline;
use wire::{received_kernel, FromChild, Produce, Render, ToChild, INJECT_ENV};

/// The failure of a producer in a child process, when `e` is one: what it
/// said. The session it ended has stopped validly (its Vulkan side stood in
/// for the child), so a new session can start on the same device.
pub fn child_failure(e: &anyhow::Error) -> Option<String> {
    match e.downcast_ref::<RunError>()? {
        RunError::ProducerFailed { producer, error, .. } if producer.in_child() => {
            Some(crate::for_people(&format!("{error:#}")))
        }
        _ => None,
    }
}

/// When a session whose child failed may start again: once the kernel
/// changed (a save that compiles), not before: the same kernel would fault again.
pub struct Restart {
    link: ReloadLink,
    seen: u64,
}

impl Restart {
    /// Waits for a version compiled after now.
    pub fn after_failure(link: ReloadLink) -> Self {
        let seen = link.published();
        Self { link, seen }
    }

    /// Whether a new version compiled; then the next session starts with it
    /// as the next version (not swapped in a second time).
    pub fn ready(&self) -> bool {
        let ready = self.link.published() > self.seen;
        if ready {
            self.link.take_for_restart();
        }
        ready
    }
}

/// How often a child with nothing to do looks whether its stream failed.
const IDLE_CHECK: Duration = Duration::from_millis(100);

/// The child's side: serves the session on the socket `fd` until it says
/// stop or goes away. Its error has been said to the session already (when
/// the socket still works); the caller exits with status 1 then.
pub fn serve(fd: OwnedFd) -> Result<()> {
    let channel = Channel::inherited(fd);
    channel.hello(parent::READY_WITHIN)?;
    channel.read_timeout(Some(parent::READY_WITHIN))?;
    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let offered = Offered::receive(&channel)?;
        let produce = Produce::receive(&channel)?;
        let waits = channel.recv_handles(produce.wait_timelines)?;
        channel.read_timeout(Some(IDLE_CHECK))?;
        match &produce.render {
            Render::Reference => reference::serve(&channel, &produce, offered),
            Render::Scene(_) | Render::Kernel { .. } => serve_cuda(&channel, &produce, offered, waits),
        }
    }));
    let outcome = served
        .unwrap_or_else(|panic| Err(anyhow!("the producer's process panicked: {}", panic_message(&*panic))));
    if let Err(e) = &outcome {
        let _ = channel.send(&FromChild::Failed { error: format!("{e:#}") });
    }
    outcome
}

/// Takes the socket a child inherited, named by its number `arg` (the last
/// argument its session gave it): checked to be an open Unix stream socket,
/// and closed on exec from here on (the child's own children do not inherit it).
///
/// # Safety
/// The descriptor `arg` names is owned by nothing else in this process: call
/// it once, for the descriptor the session passed, before anything else could
/// take that number (a descriptor owned twice is closed twice).
pub unsafe fn inherited_socket(arg: &std::ffi::OsStr) -> Result<OwnedFd> {
    let fd: RawFd = arg
        .to_str()
        .and_then(|a| a.parse().ok())
        .filter(|&fd| fd > 2)
        .with_context(|| format!("{arg:?} is not an inherited descriptor's number"))?;
    let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: fstat(2) writes `stat` and reads nothing of this process; any number is valid to ask.
    if unsafe { libc::fstat(fd, stat.as_mut_ptr()) } != 0 {
        bail!("descriptor {fd}: {} (not inherited?)", std::io::Error::last_os_error());
    }
    // SAFETY: fstat succeeded, so it wrote the whole struct.
    let mode = unsafe { stat.assume_init() }.st_mode;
    ensure!(mode & libc::S_IFMT == libc::S_IFSOCK, "descriptor {fd} is not a socket");
    let (domain, kind) = (socket_option(fd, libc::SO_DOMAIN)?, socket_option(fd, libc::SO_TYPE)?);
    ensure!(
        (domain, kind) == (libc::AF_UNIX, libc::SOCK_STREAM),
        "descriptor {fd} is not a Unix stream socket"
    );
    // SAFETY: fcntl(2) on an open descriptor, which only its flags change.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
        bail!("descriptor {fd}: {}", std::io::Error::last_os_error());
    }
    // SAFETY: open (fstat said so) and owned by nothing else (the caller's promise).
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An integer option of the socket `fd` at `SOL_SOCKET`.
fn socket_option(fd: RawFd, option: libc::c_int) -> Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    let out = (&mut value as *mut libc::c_int).cast();
    // SAFETY: getsockopt(2) writes at most `len` bytes to `value`, which has them.
    if unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, option, out, &mut len) } != 0 {
        bail!("descriptor {fd}: {}", std::io::Error::last_os_error());
    }
    Ok(value)
}

/// The faults injected in a child (`child-kill`, `producer-panic`).
pub(crate) struct Injected(Inject);

impl Injected {
    /// The faults the session put in this process's environment (none outside tests).
    fn from_env() -> Result<Self> {
        let faults = std::env::var(INJECT_ENV).unwrap_or_default();
        let faults = faults.split(',').filter(|f| !f.is_empty());
        let at = faults.map(|f| f.parse::<At>().map_err(|e| anyhow!(e))).collect::<Result<Vec<_>>>()?;
        Ok(Self(Inject(at)))
    }

    /// Before frame `g`: dies as a killed child would, or panics, if asked to.
    fn before(&self, g: u64) {
        if self.0.at(Fault::ChildKill, g) {
            // SAFETY: raise(3) only delivers a signal to this process.
            unsafe { libc::raise(libc::SIGKILL) };
        }
        self.0.producer_panic(g);
    }
}

/// The CUDA child: imports the frames into a context on the device with the
/// session's UUID and renders each frame the session sends.
fn serve_cuda(channel: &Channel, produce: &Produce, offered: Offered, waits: Vec<OwnedFd>) -> Result<()> {
    let uuid = offered.offer.uuid;
    let plan = offered.offer.frames.parts()?.plan;
    let (cuda, kernel) = match &produce.render {
        Render::Scene(cuda) => (cuda, None),
        Render::Kernel { kernel, program, cuda } => (cuda, Some((kernel, program))),
        Render::Reference => bail!("not a CUDA child"),
    };
    let device = vkcuda::cuda::list_devices()?
        .into_iter()
        .find(|d| d.uuid == uuid)
        .context("no CUDA device here has the session's Vulkan device UUID")?;
    let ctx = vkcuda::cuda::context(&device, cuda.sched)?;
    // SAFETY: the session exported these from its shared frames of the offer's plan and
    // frames, on the device with its UUID (SharedFrames::export).
    let exported = unsafe { offered.into_exported() }?;
    let link = kernel.map(|(_, program)| {
        let link = ReloadLink::default();
        program.iter().for_each(|p| link.start_with(p.clone()));
        link
    });
    let import = |ctx: Arc<CudaContext>, stream: Arc<CudaStream>| {
        // SAFETY: the handles are the session's export of frames on the device with this
        // UUID, and the session follows the same plan.
        let frames = unsafe { CudaFrames::import_exported(ctx, exported, stream) }?;
        Ok(frames)
    };
    let user = kernel.map(|(spec, _)| UserKernelToLoad { spec, reload: link.clone() });
    let to_load = KernelsToLoad { ptx_cache: &cuda.ptx_cache, user };
    let mut producer = CudaProducer::with_frames(ctx, import, to_load, cuda.high_priority)?;
    if !waits.is_empty() {
        producer.host_waits = Some(HostWaits::Imported(host_waits(uuid, plan, waits)?));
    }
    channel.send(&FromChild::Ready { arch: producer.arch().map(str::to_string) })?;
    let injected = Injected::from_env()?;
    let job = Job { plan, control: Control::new(u64::MAX), inject: injected.0.clone() };
    let mut newest = None;
    let outcome = render_frames(channel, &mut producer, &job, &injected, link.as_ref(), &mut newest)
        .map_err(|e| e.context(what_failed(&produce.render, newest)));
    if producer.stream_failed() || outcome.is_err() {
        // Its stream may still hold a kernel that never ends: the process exit ends it.
        std::mem::forget(producer);
    }
    outcome
}

/// The session's timelines (`handles`, in the plan's order) imported into a
/// Vulkan device of this process with `uuid`, for host waits only (its
/// device runs no queue work; no validation layer).
fn host_waits(uuid: [u8; 16], plan: FramePlan, handles: Vec<OwnedFd>) -> Result<Vec<Timeline>> {
    let instance = crate::frames::gpu::vulkan_instance(false, &[])?;
    let gpu = list_gpus(&instance)?
        .into_iter()
        .find(|g| g.uuid == uuid)
        .context("no Vulkan device here has the session's device UUID")?;
    let queue = Queue { kind: QueueKind::Compute, present: None };
    let device = Device::new(instance, gpu, true, queue, Default::default())?;
    let mut timelines = Vec::new();
    for (handle, name) in handles.into_iter().zip(plan.timeline_names()) {
        // SAFETY: the session exported it from its timeline on the device with this UUID.
        timelines.push(unsafe { Timeline::import(device.clone(), name, handle) }?);
    }
    Ok(timelines)
}

/// Renders the frames the session sends until it says stop, with the
/// faults `inject` names; a version that comes is published on `link`;
/// `newest`: the newest frame begun.
fn render_frames(
    channel: &Channel,
    producer: &mut CudaProducer,
    job: &Job,
    inject: &Injected,
    link: Option<&ReloadLink>,
    newest: &mut Option<u64>,
) -> Result<()> {
    producer.bind()?;
    let mut clocks = producer.clocks()?;
    let (mut report, mut next) = (Report::default(), None);
    loop {
        let (g, spec) = match channel.recv::<ToChild>()? {
            Received::Message(ToChild::Frame { g, spec }) => (g, spec),
            Received::Message(ToChild::Kernel { ptx, cubin }) => {
                let program = received_kernel(channel, ptx, cubin)?;
                let now = Instant::now();
                let made = Made { changed: now, compile: Duration::ZERO, ready: now };
                link.context("a kernel version for a child that runs none")?
                    .publish(Compiled { program, made });
                // Loaded now, while the session waits for the frame's turn (paced to a
                // screen, it sends a version as soon as it compiled): not on the frame's path.
                producer.load_new_version(&mut next);
                continue;
            }
            Received::Message(ToChild::Stop) => break,
            Received::Quiet if producer.stream_failed() => break,
            Received::Quiet => continue,
            Received::Closed => return Ok(()),
        };
        let version = link.map(ReloadLink::version);
        producer.take_new_version(&mut next, g)?;
        if link.map(ReloadLink::version) != version {
            channel.send(&FromChild::Swapped { g })?;
        }
        inject.before(g);
        producer.host_wait(job, g)?;
        *newest = Some(g);
        let resolved = producer.render(job, g, &spec, &mut clocks, &mut report)?;
        report.frames = g + 1;
        if let Some(t) = resolved {
            let g = g.saturating_sub(crate::drive::producer::cuda::EVENT_RING as u64);
            channel.send(&FromChild::Timing {
                g,
                render_ns: t.render.as_nanos() as u64,
                rendered_ns: t.rendered_ns,
            })?;
        }
        channel.send(&FromChild::Produced { g })?;
    }
    producer.settle(&job.control, false)?;
    let resolved_from = report.frames.saturating_sub(crate::drive::producer::cuda::EVENT_RING as u64);
    clocks.timer.finish(&mut report)?;
    for (g, t) in report.timings.iter().filter(|(g, _)| *g >= resolved_from) {
        channel.send(&FromChild::Timing {
            g: *g,
            render_ns: t.render.as_nanos() as u64,
            rendered_ns: t.rendered_ns,
        })?;
    }
    channel.send(&FromChild::Done)
}

/// What failed, for people: the kernel (the user's file and entry) and the
/// newest frame it was given (a fault surfaces a little later than it happens).
fn what_failed(render: &Render, newest: Option<u64>) -> String {
    let kernel = match render {
        Render::Kernel { kernel, .. } => format!("{}: kernel `{}`", kernel.file.display(), kernel.entry),
        _ => "the built-in scene's kernel".to_string(),
    };
    match newest {
        Some(g) => format!("{kernel} failed at frame {g} or a frame before it still running"),
        None => format!("{kernel} failed before its first frame"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, IntoRawFd};
    use std::os::unix::net::{UnixDatagram, UnixStream};

    #[test]
    fn an_inherited_socket_is_checked() {
        // SAFETY: a number that names no descriptor: nothing is taken.
        let not_a_number = unsafe { inherited_socket("x".as_ref()) }.expect_err("not a number");
        assert!(format!("{not_a_number}").contains("not an inherited descriptor"), "{not_a_number}");
        // SAFETY: standard output is refused before anything is taken.
        let stdio = unsafe { inherited_socket("1".as_ref()) }.expect_err("stdout");
        assert!(format!("{stdio}").contains("not an inherited descriptor"), "{stdio}");
        let past = i32::MAX.to_string();
        // SAFETY: no process has this many descriptors: nothing is taken.
        let closed = unsafe { inherited_socket(past.as_ref()) }.expect_err("no such descriptor");
        assert!(format!("{closed}").contains("Bad file descriptor"), "{closed}");
        let file = std::fs::File::open("/proc/self/stat").expect("a file");
        let raw = file.as_raw_fd().to_string();
        // SAFETY: a file is refused, so `file` keeps owning it.
        let not_a_socket = unsafe { inherited_socket(raw.as_ref()) }.expect_err("a file");
        assert!(format!("{not_a_socket}").contains("is not a socket"), "{not_a_socket}");
        let (datagram, _other) = UnixDatagram::pair().expect("datagram sockets");
        let raw = datagram.as_raw_fd().to_string();
        // SAFETY: a datagram socket is refused, so `datagram` keeps owning it.
        let wrong_kind = unsafe { inherited_socket(raw.as_ref()) }.expect_err("a datagram socket");
        assert!(format!("{wrong_kind}").contains("not a Unix stream socket"), "{wrong_kind}");
        let (stream, _peer) = UnixStream::pair().expect("stream sockets");
        let raw = stream.into_raw_fd();
        // SAFETY: `raw` was just given up by its owner.
        let taken = unsafe { inherited_socket(raw.to_string().as_ref()) }.expect("a Unix stream socket");
        assert_eq!(taken.as_raw_fd(), raw);
        // SAFETY: fcntl(2) reads the flags of an open descriptor.
        let flags = unsafe { libc::fcntl(raw, libc::F_GETFD) };
        assert_eq!(flags & libc::FD_CLOEXEC, libc::FD_CLOEXEC, "not closed on exec");
    }
}
