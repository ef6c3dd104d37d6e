//! One run of frames of one size and format: a run-layer session fed from a
//! [`Mailbox`], consumed on a thread of its own into the offscreen target
//! and, when dumping, the writer pool. A new size or format ends the run and
//! starts the next one, whose timelines count on from where this one ended.

use std::ffi::{CStr, CString};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, bail, Result};
use ash::vk;

use vkcuda::sync::SyncScheme;
use vkcuda::types::{CudaSched, Size};
use vkcuda::vk::instance::Instance;
use vkcuda::{FrameDesc, Layout};
use vkcuda_run::consumer::ExtraSync;
use vkcuda_run::director::Director;
use vkcuda_run::feed::{Feed, Mailbox};
use vkcuda_run::inject::Inject;
use vkcuda_run::kinds::{ConsumeKind, Handover, ProducerKind};
use vkcuda_run::present::offscreen::Offscreen;
use vkcuda_run::present::readback::{Readback, Shot};
use vkcuda_run::scene::{Scene, SceneKind};
use vkcuda_run::session::Session;
use vkcuda_run::setup::{Gpu, RunSpec};
use vkcuda_run::sink::{PngSink, Reference};

/// Shared frames of a run: frames can be fed while the consumer reads others.
const BUFFERS: usize = 3;
/// Consumer command buffers in flight.
const IN_FLIGHT: usize = 2;
/// Frames a run may last (the timelines' range is checked against it).
const FOREVER: u64 = 1 << 40;

/// Where a run's frames go.
#[derive(Clone, Debug)]
pub struct Output {
    /// The folder every frame is written to (PNG, EXR for floats); `None`: nowhere.
    pub dir: Option<PathBuf>,
    /// Writer threads.
    pub workers: usize,
}

/// What a run leaves.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ended {
    /// The next run's first timeline value.
    pub next_base: u64,
    /// Frames consumed.
    pub consumed: u64,
    /// Frames written to the folder.
    pub written: u64,
}

/// Who consumes a run's frames.
enum Consumer {
    /// A thread of its own (headless).
    Thread(JoinHandle<Result<Ended>>),
    /// The window thread, for window `id`.
    Window { id: u64, closed: Arc<AtomicBool> },
}

/// A running run; see the module docs.
pub struct Run {
    /// The shared frames' format, size and layout.
    pub desc: FrameDesc,
    /// Where `show` puts frames.
    pub feed: Feed,
    consumer: Option<Consumer>,
}

impl Run {
    /// Starts the consumer thread of frames `desc` fed from `feed`, numbered
    /// from `first`, with timelines from `base`.
    pub fn start(
        gpu: Arc<Gpu>,
        desc: FrameDesc,
        feed: Feed,
        output: Output,
        (first, base): (u64, u64),
    ) -> Result<Self> {
        let spec = fed_spec(desc, feed.clone());
        let size = Size { width: desc.extent.width, height: desc.extent.height };
        let thread = std::thread::Builder::new().name("vkcuda consumer".into()).spawn(move || {
            let result = consume(&gpu, &spec, size, (first, base), &output);
            if let Some(feed) = &spec.feed {
                feed.close();
            }
            result
        })?;
        Ok(Self { desc, feed, consumer: Some(Consumer::Thread(thread)) })
    }

    /// Starts consuming frames `desc` fed from `feed` in window `id` (see [`Run::start`]).
    pub fn start_in(
        window: (u64, Arc<AtomicBool>),
        desc: FrameDesc,
        feed: Feed,
        at: (u64, u64),
    ) -> Result<Self> {
        let (id, closed) = window;
        let f = feed.clone();
        crate::window::ask(|reply| crate::window::Command::Start { id, desc, feed: f, at, reply })?;
        Ok(Self { desc, feed, consumer: Some(Consumer::Window { id, closed }) })
    }

    /// Whether this run takes frames from GPU memory.
    pub fn on_device(&self) -> bool {
        matches!(self.feed, Feed::Device { .. })
    }

    /// Whether the consumer thread has ended (it failed, or the run was finished).
    pub fn stopped(&self) -> bool {
        match &self.consumer {
            None => true,
            Some(Consumer::Thread(t)) => t.is_finished(),
            Some(Consumer::Window { closed, .. }) => closed.load(Ordering::Acquire),
        }
    }

    /// Ends the run once every frame put is consumed and written.
    pub fn finish(mut self) -> Result<Ended> {
        self.feed.close();
        match self.consumer.take().ok_or_else(|| anyhow!("run already finished"))? {
            Consumer::Thread(thread) => thread.join().map_err(|_| anyhow!("the consumer thread panicked"))?,
            // A window its user closed has stopped its session already.
            Consumer::Window { closed, .. } if closed.load(Ordering::Acquire) => Ok(Ended::default()),
            Consumer::Window { id, .. } => {
                crate::window::ask(|reply| crate::window::Command::Finish { id, reply })
            }
        }
    }
}

impl Drop for Run {
    /// A run dropped unfinished (an error on the way) still ends its thread first.
    fn drop(&mut self) {
        self.feed.close();
        match self.consumer.take() {
            Some(Consumer::Thread(t)) => {
                let _ = t.join();
            }
            Some(Consumer::Window { id, closed }) if !closed.load(Ordering::Acquire) => {
                let _ = crate::window::ask(|reply| crate::window::Command::Finish { id, reply });
            }
            Some(Consumer::Window { .. }) => {}
            None => {}
        }
    }
}

/// The run-layer description of a fed run.
pub fn fed_spec(desc: FrameDesc, feed: Feed) -> RunSpec {
    RunSpec {
        gpu: None,
        announce: false,
        producer: ProducerKind::Cpu,
        sync: SyncScheme::Split,
        buffers: BUFFERS,
        format: desc.format,
        layout: Layout::Buffer,
        frames: FOREVER,
        in_flight: IN_FLIGHT,
        paced: false,
        ptx_cache: None,
        cuda_sched: CudaSched::Auto,
        high_priority_stream: false,
        host_waits: false,
        producer_host_waits: false,
        handover: Handover::Vkcuda,
        kernel: None,
        reload: None,
        inject: Inject::default(),
        feed: Some(feed),
    }
}

/// The consumer thread: a session of `spec` at `size`, every frame the
/// producer makes consumed (copied, and read back when writing), then the stop.
fn consume(
    gpu: &Gpu,
    spec: &RunSpec,
    size: Size,
    (first, base): (u64, u64),
    output: &Output,
) -> Result<Ended> {
    let device = gpu.device.clone();
    let feed = spec.feed.clone().ok_or_else(|| anyhow!("a fed run without a feed"))?;
    let scene = Scene { kind: SceneKind::Gradient, width: size.width, height: size.height, cost: 1 };
    let director = Arc::new(Director::starting_at(scene, first));
    let extent = vk::Extent2D { width: size.width, height: size.height };
    let readback = match &output.dir {
        Some(dir) => {
            let sink = PngSink::new(dir, output.workers, Reference::None, Inject::default());
            let shot = Shot { extent, format: spec.format, drawn: false };
            Some(Readback::new(device.clone(), director.clone(), shot, IN_FLIGHT, sink)?)
        }
        None => None,
    };
    let desc = vkcuda_run::setup::frame_desc(spec, size);
    let mut offscreen = Offscreen::new(device, (desc, extent), (ConsumeKind::Copy, 1, 1), readback)?;
    let mut session = Session::start(gpu, spec, &director, size, base)?;
    let outcome = follow(&mut session, &mut offscreen, &feed);
    let stopped = session.stop(&mut offscreen, outcome.is_ok());
    let sink = offscreen.finish();
    outcome?;
    let stopped = stopped?;
    if let Some(e) = sink.error {
        bail!("frame writer: {e}");
    }
    Ok(Ended { next_base: stopped.next_base, consumed: stopped.consumed, written: sink.written })
}

/// Consumes each frame once the producer has made it, until it has made its last.
fn follow(session: &mut Session, offscreen: &mut Offscreen, mailbox: &Feed) -> Result<()> {
    loop {
        // `ended` first: once it is seen, the producer's count is final.
        let ended = mailbox.ended();
        if session.next < session.control.produced() {
            session.submit(offscreen, ExtraSync::default())?;
            continue;
        }
        if ended {
            break;
        }
        let seen = mailbox.counts();
        // A frame taken but not yet made is moments away; otherwise wait for a put.
        let within = match seen.taken > session.control.produced() {
            true => Duration::from_micros(200),
            false => Duration::from_millis(100),
        };
        mailbox.wait_change(seen, within);
    }
    if session.control.failed() {
        bail!("the fed producer failed");
    }
    session.drain(offscreen)?;
    Ok(())
}

/// Opens the Vulkan device frames are consumed on: `gpu` (an index or UUID
/// prefix), else the first; with the validation layer when `validate`.
pub fn open(validate: bool, gpu: Option<String>) -> Result<Arc<Gpu>> {
    let instance = instance(validate, &[])?;
    let queue = vkcuda::vk::device::Queue { kind: vkcuda::types::QueueKind::Graphics, present: None };
    Ok(Arc::new(vkcuda_run::setup::open_gpu(&device_spec(gpu), instance, queue)?))
}

/// What picks a viewer's device: `gpu` (an index or UUID prefix), else the
/// first with a CUDA twin (GPU tensors need one; host arrays do not), else the first.
pub fn device_spec(gpu: Option<String>) -> RunSpec {
    let mut spec = fed_spec(FrameDesc::new(vk::Extent2D { width: 1, height: 1 }), Feed::Host(Mailbox::new()));
    spec.gpu = gpu;
    spec.producer = ProducerKind::Auto;
    spec
}

/// The process's Vulkan instance, with or without validation: made once and
/// kept. Each instance loads the driver anew, and NVIDIA's driver (580) fails
/// to load after about 30 instances were made and destroyed in one process:
/// a notebook making viewer after viewer would lose Vulkan.
/// `extensions`: the window system's surface extensions for a window's
/// instance, or none; one instance is kept for each combination.
pub fn instance(validate: bool, extensions: &[&CStr]) -> Result<Arc<Instance>> {
    type Key = (bool, Vec<CString>);
    static INSTANCES: Mutex<Vec<(Key, Arc<Instance>)>> = Mutex::new(Vec::new());
    let key: Key = (validate, extensions.iter().map(|e| CString::from(*e)).collect());
    let mut made = INSTANCES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, instance)) = made.iter().find(|(k, _)| *k == key) {
        return Ok(instance.clone());
    }
    let instance = vkcuda_run::setup::vulkan_instance(validate, extensions)?;
    made.push((key, instance.clone()));
    Ok(instance)
}
