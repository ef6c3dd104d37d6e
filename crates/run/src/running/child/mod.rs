//! A producer in a process of its own. CUDA cannot go on in a process
//! whose kernel faulted (after an illegal address even a new context fails),
//! while a new process runs CUDA at once: so the session (Vulkan device,
//! consumer, window or server) keeps the frames and hands them to a child.
//!
//! The protocol, over one Unix stream socket the child inherits:
//! 1. the session sends an [`wire::Offer`] (the frames and their plan, the
//!    device's UUID, what to render), then the frames' memory and (when
//!    exportable) the timelines as descriptors (`SCM_RIGHTS`);
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
//! CLI runs itself) and calls [`serve`] in the child.

pub mod parent;
mod reference;
pub mod wire;

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cudarc::driver::{CudaContext, CudaStream};

use anyhow::{anyhow, bail, ensure, Context, Result};

use crate::base::failure::{panic_message, RunError};
use crate::base::inject::{At, Fault, Inject};
use crate::base::reload::{Compiled, Made, ReloadLink};
use crate::running::producer::cuda::{CudaProducer, HostWaits};
use crate::running::producer::{Control, Job, Report};
use vkcuda::interop::{CudaFrames, ExportedFrames};
use vkcuda::platform::ExportedMemory;
use vkcuda::sync::FramePlan;
use vkcuda::types::QueueKind;
use vkcuda::vk::device::{list_gpus, Device, Queue};
use vkcuda::vk::timeline::Timeline;
use wire::{FromChild, Offer, Received, Render, ToChild, Wire, VERSION};

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
    let wire = Wire::from_fd(fd);
    wire.read_timeout(Some(parent::READY_WITHIN))?;
    let offer = match wire.recv::<Offer>()? {
        Received::Message(offer) => offer,
        _ => bail!("no offer came from the session"),
    };
    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        ensure!(
            offer.version == VERSION,
            "the session speaks version {} (this child {VERSION})",
            offer.version
        );
        let fds = wire.recv_fds(offer.handles())?;
        wire.read_timeout(Some(IDLE_CHECK))?;
        match &offer.render {
            Render::Reference => reference::serve(&wire, &offer, fds),
            Render::Scene(_) | Render::Kernel { .. } => serve_cuda(&wire, &offer, fds),
        }
    }));
    let outcome = served
        .unwrap_or_else(|panic| Err(anyhow!("the producer's process panicked: {}", panic_message(&*panic))));
    if let Err(e) = &outcome {
        let _ = wire.send(&FromChild::Failed { error: format!("{e:#}") });
    }
    outcome
}

/// The faults injected in a child (`child-kill`, `producer-panic`).
pub(crate) struct Injected(Inject);

impl Injected {
    fn parse(faults: &[String]) -> Result<Self> {
        let at =
            faults.iter().map(|f| f.parse::<At>().map_err(|e| anyhow!(e))).collect::<Result<Vec<_>>>()?;
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
fn serve_cuda(wire: &Wire, offer: &Offer, fds: Vec<OwnedFd>) -> Result<()> {
    let (plan, desc) = offer.frames.parts()?;
    let (cuda, kernel) = match &offer.render {
        Render::Scene(cuda) => (cuda, None),
        Render::Kernel { kernel, program, cuda } => (cuda, Some((kernel, program))),
        Render::Reference => bail!("not a CUDA child"),
    };
    let device = vkcuda::cuda::list_devices()?
        .into_iter()
        .find(|d| d.uuid == offer.uuid)
        .context("no CUDA device here has the session's Vulkan device UUID")?;
    let ctx = vkcuda::cuda::context(&device, cuda.sched)?;
    let mut handles = fds;
    let mut timelines = handles.split_off(offer.memory.len());
    let waits = timelines.split_off(offer.timelines);
    let memory = handles
        .into_iter()
        .zip(&offer.memory)
        // SAFETY: the session exported these from its shared frames of `desc` (SharedFrames::export).
        .map(|(fd, &size)| unsafe { ExportedMemory::from_raw(fd, size) })
        .collect();
    let exported = ExportedFrames { plan, desc, memory, timelines, color: offer.color };
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
    let kernel = kernel.map(|(spec, _)| (spec, link.clone()));
    let mut producer = CudaProducer::with_frames(ctx, import, (&cuda.ptx_cache, kernel), cuda.high_priority)?;
    if !waits.is_empty() {
        producer.host_waits = Some(HostWaits::Imported(host_waits(offer.uuid, plan, waits)?));
    }
    wire.send(&FromChild::Ready { arch: producer.arch().map(str::to_string) })?;
    let injected = Injected::parse(&offer.inject)?;
    let job = Job { plan, control: Control::new(u64::MAX), inject: injected.0.clone() };
    let mut newest = None;
    let outcome = render_frames(wire, &mut producer, (&job, &injected), (link.as_ref(), &mut newest))
        .map_err(|e| e.context(what_failed(&offer.render, newest)));
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

/// Renders the frames the session sends until it says stop.
fn render_frames(
    wire: &Wire,
    producer: &mut CudaProducer,
    (job, inject): (&Job, &Injected),
    (link, newest): (Option<&ReloadLink>, &mut Option<u64>),
) -> Result<()> {
    producer.bind()?;
    let (timer, mut clock) = producer.clocks()?;
    let (mut report, mut next) = (Report::default(), None);
    loop {
        let (g, spec) = match wire.recv::<ToChild>()? {
            Received::Message(ToChild::Frame { g, spec }) => (g, spec),
            Received::Message(ToChild::Kernel(program)) => {
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
            wire.send(&FromChild::Swapped { g })?;
        }
        inject.before(g);
        producer.host_wait(job, g)?;
        *newest = Some(g);
        let resolved = producer.render(job, (g, &spec), (&timer, &mut clock), &mut report)?;
        report.frames = g + 1;
        if let Some(t) = resolved {
            let g = g.saturating_sub(crate::running::producer::cuda::EVENT_RING as u64);
            wire.send(&FromChild::Timing {
                g,
                render_ns: t.render.as_nanos() as u64,
                rendered_ns: t.rendered_ns,
            })?;
        }
        wire.send(&FromChild::Produced { g })?;
    }
    producer.settle(&job.control, false)?;
    let resolved_from = report.frames.saturating_sub(crate::running::producer::cuda::EVENT_RING as u64);
    timer.finish(&mut report)?;
    for (g, t) in report.timings.iter().filter(|(g, _)| *g >= resolved_from) {
        wire.send(&FromChild::Timing {
            g: *g,
            render_ns: t.render.as_nanos() as u64,
            rendered_ns: t.rendered_ns,
        })?;
    }
    wire.send(&FromChild::Done)
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
