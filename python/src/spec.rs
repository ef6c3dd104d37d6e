//! What every run of a viewer is made of, headless or in a window: the
//! run-layer description of a fed run, the device choice, the process's
//! Vulkan instances, and what a finished run leaves.

use std::ffi::{CStr, CString};
use std::sync::{Arc, Mutex};

use anyhow::Result;

use vkcuda::sync::SyncScheme;
use vkcuda::types::CudaSched;
use vkcuda::vk::instance::Instance;
use vkcuda::{FrameDesc, Layout};
use vkcuda_run::base::director::Director;
use vkcuda_run::base::inject::Inject;
use vkcuda_run::base::kinds::ProducerKind;
use vkcuda_run::base::scene::{Scene, SceneKind};
use vkcuda_run::base::size::Size;
use vkcuda_run::frames::gpu::{DeviceChoice, Gpu};
use vkcuda_run::running::feed::Feed;
use vkcuda_run::running::setup::RunSpec;

/// Shared frames of a run: frames can be fed while the consumer reads others.
const BUFFERS: usize = 3;
/// Consumer command buffers in flight: one per shared frame, as the CLI has
/// at 3 buffers, so every frame the caller can make is on its way at once.
pub const IN_FLIGHT: usize = 3;
/// Frames a run may last (the timelines' range is checked against it).
const FOREVER: u64 = 1 << 40;

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

/// The run-layer description of a fed run.
pub fn fed_spec(desc: FrameDesc, feed: Feed) -> RunSpec {
    RunSpec {
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
        kernel: None,
        reload: None,
        inject: Inject::default(),
        feed: Some(feed),
    }
}

/// Opens the Vulkan device frames are consumed on: `gpu` (an index or UUID
/// prefix), else the first; with the validation layer when `validate`.
pub fn open(validate: bool, gpu: Option<String>) -> Result<Arc<Gpu>> {
    let instance = instance(validate, &[])?;
    let queue = vkcuda::vk::device::Queue { kind: vkcuda::types::QueueKind::Graphics, present: None };
    Ok(Arc::new(vkcuda_run::frames::gpu::open_gpu(&device_choice(gpu), instance, queue)?))
}

/// What picks a viewer's device: `gpu` (an index or UUID prefix), else the
/// first with a CUDA twin (GPU tensors need one; host arrays do not), else the first.
pub fn device_choice(gpu: Option<String>) -> DeviceChoice {
    DeviceChoice { gpu, producer: ProducerKind::Auto, announce: false }
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
    let instance = vkcuda_run::frames::gpu::vulkan_instance(validate, extensions)?;
    made.push((key, instance.clone()));
    Ok(instance)
}

/// What a fed frame is, for the consumer's readback and the frame numbers:
/// frames of `size` numbered from `first` (a fed frame has no scene of its own).
pub fn fed_director(size: Size, first: u64) -> Arc<Director> {
    let scene = Scene { kind: SceneKind::Gradient, width: size.width, height: size.height, cost: 1 };
    Arc::new(Director::starting_at(scene, first))
}
