//! Offering frames to another process over a named socket: the seam a
//! viewer attaching to a producer already running is built on
//! (`vkcuda_run::drive::child::{channel, offer}`). A listener (the
//! producer's side) and a connector (the viewer's) greet, each checking the
//! other's protocol version, and the listener offers its frames: the plan,
//! one memory handle per frame, the timelines and their values.
//!
//! Both ends run here, on two threads, so it runs anywhere; the handles are
//! stand-ins (files of each frame's size). A producer offers its real frames
//! with `Offered::export(&shared, uuid, total)`; a viewer imports what it
//! takes with `unsafe { offered.into_exported() }` and then
//! `CudaFrames::import_exported` (or Vulkan's import).

use std::os::fd::OwnedFd;
use std::time::Duration;

use anyhow::{Context, Result};
use ash::vk;
use vkcuda::sync::{FramePlan, SyncScheme};
use vkcuda::{Format, FrameDesc, Layout};
use vkcuda_run::drive::child::channel::{Channel, Listener};
use vkcuda_run::drive::child::offer::{Offer, Offered, PlanWire, PlannedFrames};

/// How long either end waits for the other's greeting.
const GREETING: Duration = Duration::from_secs(10);

fn main() -> Result<()> {
    let dir = std::env::temp_dir().join(format!("vkcuda-frames-offer-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let listener = Listener::bind(&dir.join("frames.sock"))?;
    let path = listener.path().to_path_buf();
    let viewer = std::thread::spawn(move || view(&path));
    let channel = listener.accept(GREETING)?;
    stand_in(&dir)?.send(&channel)?;
    let said = viewer.join().map_err(|_| anyhow::anyhow!("the viewer panicked"))??;
    println!("{said}");
    drop(listener);
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// The connector: takes the offer and says what it got.
fn view(path: &std::path::Path) -> Result<String> {
    let channel = Channel::connect(path, GREETING)?;
    channel.read_timeout(Some(GREETING))?;
    let offered = Offered::receive(&channel)?;
    let PlannedFrames { plan, desc } = offered.offer.frames.parts()?;
    Ok(format!(
        "offered {} frames of {desc} ({} in rotation, {:?}), {} timelines at {:?}",
        offered.memory.len(),
        plan.images(),
        plan.scheme(),
        offered.timelines.len(),
        offered.offer.timelines
    ))
}

/// What a producer of two 64x64 buffer frames would offer, with files for its handles.
fn stand_in(dir: &std::path::Path) -> Result<Offered> {
    let desc =
        FrameDesc::new(vk::Extent2D { width: 64, height: 64 }).format(Format::Rgba8).layout(Layout::Buffer);
    let plan = FramePlan::new(SyncScheme::Split, 2, 0, 100)?;
    let mut memory: Vec<OwnedFd> = Vec::new();
    for i in 0..plan.images() {
        let file = std::fs::File::create(dir.join(format!("frame{i}"))).context("a stand-in for a frame")?;
        file.set_len(desc.bytes())?;
        memory.push(file.into());
    }
    let timelines: Vec<OwnedFd> = plan
        .timeline_names()
        .iter()
        .map(|name| std::fs::File::create(dir.join(name)).map(OwnedFd::from))
        .collect::<std::io::Result<_>>()?;
    let offer = Offer {
        uuid: [0; 16],
        frames: PlanWire::new(&plan, &desc, 100),
        memory: vec![desc.bytes(); memory.len()],
        timelines: vec![plan.initial_value(); timelines.len()],
        color: false,
    };
    Ok(Offered { offer, memory, timelines })
}
