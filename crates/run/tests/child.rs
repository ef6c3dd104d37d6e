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

use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use ash::vk;
use vkcuda::sync::SyncScheme;
use vkcuda::types::QueueKind;
use vkcuda::vk::device::Queue;
use vkcuda::{Format, FrameDesc, Layout};
use vkcuda_run::base::director::Director;
use vkcuda_run::base::inject::{At, Fault, Inject};
use vkcuda_run::base::kinds::{ConsumeKind, ProducerId, ProducerKind, Renders};
use vkcuda_run::base::scene::{render_cpu_as, Diff, FrameArgs, Scene, SceneKind};
use vkcuda_run::drive::run_session;
use vkcuda_run::frames::gpu::{open_gpu, vulkan_instance, DeviceChoice, Gpu};
use vkcuda_run::present::offscreen::Offscreen;
use vkcuda_run::present::readback::{Pixels, ReadFrame, Readback, Recipient, Shot};
use vkcuda_run::running::child::child_failure;
use vkcuda_run::running::child::parent::ChildCommand;
use vkcuda_run::running::measure::Span;
use vkcuda_run::running::setup::{ConsumerSpec, PlanSpec, ProducerSpec, RunSpec};

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

#[test]
fn a_killed_child_costs_its_session_only() {
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
    let mut offscreen =
        Offscreen::new(gpu.device.clone(), (desc, desc.extent), (ConsumeKind::Copy, 1, 1), Some(readback))
            .expect("a copy consumer");
    let (caught, progress) = (Arc::new(AtomicUsize::new(0)), indicatif::ProgressBar::hidden());
    let mut seen = Vec::new();
    for round in 0..ROUNDS {
        // Every fourth session runs to its end; the others die at a frame of their own.
        let kill = (round % 4 != 3).then(|| (round * 7 + 3) % FRAMES);
        let spec = RunSpec {
            plan: PlanSpec {
                sync: [SyncScheme::Split, SyncScheme::Shared][round as usize % 2],
                buffers: 2,
                frames: FRAMES,
            },
            producer: ProducerSpec::Cpu(director.clone()),
            consumer: ConsumerSpec { in_flight: 2, paced: false, host_waits: false },
            inject: Inject(kill.map(|frame| At { fault: Fault::ChildKill, frame }).into_iter().collect()),
            child: Some(ChildCommand { program: program.clone(), args: Vec::new(), validate: true }),
        };
        let ran = run_session(
            &gpu,
            (&spec, 1000 * round),
            desc,
            &mut offscreen,
            Span::frames(FRAMES),
            (&caught, &progress),
        );
        let consumed = match (ran, kill) {
            (Ok((consumed, _, producer)), None) => {
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
        check_frames(round, &kept, &director, (desc, consumed));
        seen.push(footprint());
    }
    let (first, last) = (seen[2], seen[seen.len() - 1]);
    println!(
        "descriptors {} → {}, resident {} → {} pages over {ROUNDS} sessions",
        first.0, last.0, first.1, last.1
    );
    assert_eq!(first.0, last.0, "descriptors leak: {seen:?}");
    assert!(last.1 < first.1 + 4096, "resident memory grows: {seen:?}");
    drop(offscreen);
    let counts = gpu.device.validation();
    assert!(counts.clean(), "validation: {counts}");
    println!("validation: {counts}");
}
