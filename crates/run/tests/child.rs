//! The producer in a child process, end to end on any Vulkan device that
//! exports memory (lavapipe in CI): the reference child
//! (examples/producer_child.rs) imports the frames' memory into a Vulkan
//! device of its own and writes the CPU reference; the session signals
//! "rendered" for it. Most sessions are killed at a frame of their own
//! (`child-kill@K`, before the child makes frame K): each must end with the
//! child's death as its error, after every frame before K was consumed and
//! equal to the reference, and a new session then starts on the same
//! device. Open descriptors and resident memory stay flat over the rounds,
//! and the validation layer (synchronization validation on) says nothing.
//! A session started on a thread that ends at once keeps its child until
//! the session ends (the child dies with the process, not that thread).

use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::Result;
use ash::vk;
use vkcuda::sync::SyncScheme;
use vkcuda::types::QueueKind;
use vkcuda::vk::device::Queue;
use vkcuda::{Format, FrameDesc, Layout};
use vkcuda_run::base::kinds::{ConsumeKind, ProducerId, ProducerKind, Renders};
use vkcuda_run::diagnostics::inject::{At, Fault, Inject};
use vkcuda_run::drive::child::child_failure;
use vkcuda_run::drive::child::parent::ChildCommand;
use vkcuda_run::drive::measure::Span;
use vkcuda_run::drive::session::Session;
use vkcuda_run::drive::setup::{ConsumerSpec, PlanSpec, ProducerSpec, RunSpec};
use vkcuda_run::drive::to_end::{consume, run_session, Measured, Monitor};
use vkcuda_run::frames::gpu::{open_gpu, vulkan_instance, DeviceChoice, Gpu};
use vkcuda_run::present::offscreen::{Offscreen, OffscreenShape, OffscreenWork};
use vkcuda_run::present::readback::{Pixels, ReadFrame, Readback, Recipient, Shot};
use vkcuda_run::scene::director::Director;
use vkcuda_run::scene::{render_cpu_as, Diff, FrameArgs, Scene, SceneKind};

const SIZE: (u32, u32) = (45, 29);
const FRAMES: u64 = 24;
/// Sessions: enough that a hazard hit one time in six shows (1 - (5/6)^30 > 99 %).
const ROUNDS: u64 = 30;

/// The child: the example beside this test's binary (`cargo test` builds examples).
fn child_program() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let program = exe.parent()?.parent()?.join("examples").join("producer_child");
    program.exists().then_some(program)
}

/// A frame read back: its number in the session, its pixels.
type Frame = (u64, Vec<u8>);

/// The frames read back, as the consumer took them.
#[derive(Clone, Default)]
struct Keep(Arc<Mutex<Vec<Frame>>>);

impl Recipient for Keep {
    fn holds(&self) -> usize {
        0
    }
    fn take(&mut self, frame: ReadFrame) -> Result<()> {
        let bytes = (*frame.pixels).as_ref()[..frame.shot.bytes()].to_vec();
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push((frame.frame, bytes));
        Ok(())
    }
    fn failed(&self) -> Option<String> {
        None
    }
}

/// Descriptors open in this process, and its resident memory in pages.
fn footprint() -> (usize, u64) {
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    (fds, statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0))
}

/// Round `round`'s frames read back: at least all but the last two of the
/// `consumed`, each equal to the CPU reference of what the director said.
fn check_frames(round: u64, kept: &Keep, director: &Director, (desc, consumed): (FrameDesc, u64)) {
    let frames = std::mem::take(&mut *kept.0.lock().unwrap_or_else(|p| p.into_inner()));
    assert!(
        frames.len() as u64 >= consumed.min(FRAMES) - consumed.min(2),
        "round {round}: {} frames read back of {consumed}",
        frames.len()
    );
    for (g, got) in frames {
        let spec = director.spec(g).expect("the frame's spec");
        let mut want = vec![0u8; desc.bytes() as usize];
        render_cpu_as(&spec.scene, &FrameArgs::new(&spec.scene, spec.tick), desc.format, &mut want, 1);
        let diff = Diff::between(&got, &want);
        assert_eq!(diff.differing, 0, "round {round}, frame {g}: {diff:?}");
    }
}

/// One test at a time: they count this process's children and descriptors.
static ALONE: Mutex<()> = Mutex::new(());

fn alone() -> MutexGuard<'static, ()> {
    ALONE.lock().unwrap_or_else(|p| p.into_inner())
}

/// A device, the frames' description, and a copy consumer that keeps what it reads back.
struct Rig {
    gpu: Gpu,
    desc: FrameDesc,
    kept: Keep,
    offscreen: Offscreen,
    director: Arc<Director>,
    program: PathBuf,
}

/// The rig, or `None` where the device exports no memory (said).
fn rig() -> Option<Rig> {
    let Some(program) = child_program() else {
        panic!("no examples/producer_child beside the test binary: cargo test builds it (cargo build --examples)");
    };
    let instance = vulkan_instance(true, &[]).expect("Vulkan with the validation layer");
    let queue = Queue { kind: QueueKind::Compute, present: None };
    let choice = DeviceChoice { gpu: None, producer: ProducerKind::Cpu, announce: false };
    let gpu: Gpu = open_gpu(&choice, instance, queue).expect("a Vulkan device (lavapipe or a GPU)");
    // Lavapipe and NVIDIA export memory: a device that does not is a broken set-up, not a pass.
    assert!(gpu.device.memory_export().is_some(), "{} exports no memory", gpu.device.info());
    let scene = Scene { kind: SceneKind::Julia, width: SIZE.0, height: SIZE.1, cost: 16 };
    let director = Arc::new(Director::new(scene));
    let desc = FrameDesc::new(vk::Extent2D { width: SIZE.0, height: SIZE.1 })
        .format(Format::Rgba8)
        .layout(Layout::Buffer);
    let kept = Keep::default();
    let shot = Shot { extent: desc.extent, format: desc.format, pixels: Pixels::Rendered, first: 0 };
    let readback = Readback::new(gpu.device.clone(), shot, 4, Box::new(kept.clone())).expect("a readback");
    let shape = OffscreenShape { frame: desc, extent: desc.extent };
    let work = OffscreenWork { kind: ConsumeKind::Copy, dump_every: 1, copies: 1 };
    let offscreen = Offscreen::new(gpu.device.clone(), shape, work, Some(readback)).expect("a copy consumer");
    Some(Rig { gpu, desc, kept, offscreen, director, program })
}

/// A session of the reference child, with `inject`.
fn child_spec(rig: &Rig, sync: SyncScheme, inject: Inject) -> RunSpec {
    RunSpec {
        plan: PlanSpec { sync, buffers: 2, frames: FRAMES },
        producer: ProducerSpec::Cpu(rig.director.clone()),
        consumer: ConsumerSpec { in_flight: 2, paced: false, host_waits: false },
        inject,
        child: Some(ChildCommand { program: rig.program.clone(), args: Vec::new(), validate: true }),
    }
}

/// This process's children, of every thread.
fn children() -> Vec<u32> {
    let tasks = std::fs::read_dir("/proc/self/task").expect("this process's threads");
    let listed =
        tasks.flatten().map(|t| std::fs::read_to_string(t.path().join("children")).unwrap_or_default());
    listed.flat_map(|l| l.split_whitespace().filter_map(|p| p.parse().ok()).collect::<Vec<_>>()).collect()
}

/// Waits (bounded) until `done` holds.
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < until, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_session_outlives_the_thread_that_started_it() {
    let _alone = alone();
    let Some(mut rig) = rig() else { return };
    let spec = child_spec(&rig, SyncScheme::Split, Inject::default());
    assert_eq!(children(), Vec::<u32>::new(), "children before the session");
    // The session starts on a thread that ends at once (as a Python caller's may);
    // this thread consumes it.
    let (tid, session) = std::thread::scope(|s| {
        let started = s.spawn(|| {
            // SAFETY: gettid(2) cannot fail.
            let tid = unsafe { libc::gettid() };
            (tid, Session::start(&rig.gpu, &spec, rig.desc, 0).map_err(|e| format!("{e:#}")))
        });
        started.join().expect("the starting thread")
    });
    let mut session = session.expect("a session with a child");
    // Gone from the task list, a thread has finished exiting: parent-death signals included.
    wait_for("the starting thread is gone", || {
        !std::path::Path::new(&format!("/proc/self/task/{tid}")).exists()
    });
    assert_eq!(children().len(), 1, "the session's child");
    let (caught, progress) = (AtomicUsize::new(0), indicatif::ProgressBar::hidden());
    let offscreen = &mut rig.offscreen;
    let outcome = offscreen
        .bind(session.frames())
        .and_then(|()| consume(&mut session, offscreen, Span::frames(FRAMES), &caught, &progress));
    let consumed = session.end(offscreen, outcome).expect("every frame, from the child").outcome;
    assert_eq!(consumed.frames, FRAMES);
    check_frames(0, &rig.kept, &rig.director, (rig.desc, FRAMES));
    // The session ended: so did its child.
    wait_for("the child is gone", || children().is_empty());
}

#[test]
fn a_killed_child_costs_its_session_only() {
    let _alone = alone();
    let Some(mut rig) = rig() else { return };
    let (caught, progress) = (Arc::new(AtomicUsize::new(0)), indicatif::ProgressBar::hidden());
    let mut seen = Vec::new();
    for round in 0..ROUNDS {
        // Every fourth session runs to its end; the others die at a frame of their own.
        let kill = (round % 4 != 3).then(|| (round * 7 + 3) % FRAMES);
        let sync = [SyncScheme::Split, SyncScheme::Shared][round as usize % 2];
        let inject = Inject(kill.map(|frame| At { fault: Fault::ChildKill, frame }).into_iter().collect());
        let spec = child_spec(&rig, sync, inject);
        let ran = run_session(
            &rig.gpu,
            &spec,
            1000 * round,
            rig.desc,
            &mut rig.offscreen,
            Monitor { span: Span::frames(FRAMES), caught: &caught, progress: &progress },
        );
        let consumed = match (ran, kill) {
            (Ok(Measured { consumed, producer, .. }), None) => {
                assert_eq!(
                    producer,
                    ProducerId::child(Renders::Cpu),
                    "round {round}: the reference, in a child"
                );
                consumed.total
            }
            (Err(e), Some(k)) => {
                let why = child_failure(&e)
                    .unwrap_or_else(|| panic!("round {round}: not the child's failure: {e:#}"));
                assert!(why.contains(&format!("before it made frame {k}")), "round {round}: {why}");
                k
            }
            (ran, kill) => panic!("round {round} (killed at {kill:?}): {:?}", ran.map(|_| ())),
        };
        check_frames(round, &rig.kept, &rig.director, (rig.desc, consumed));
        seen.push(footprint());
    }
    let (first, last) = (seen[2], seen[seen.len() - 1]);
    println!(
        "descriptors {} → {}, resident {} → {} pages over {ROUNDS} sessions",
        first.0, last.0, first.1, last.1
    );
    assert_eq!(first.0, last.0, "descriptors leak: {seen:?}");
    assert!(last.1 < first.1 + 4096, "resident memory grows: {seen:?}");
    let Rig { gpu, offscreen, .. } = rig;
    drop(offscreen);
    let counts = gpu.device.validation();
    assert!(counts.clean(), "validation: {counts}");
    println!("validation: {counts}");
}
