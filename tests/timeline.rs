//! Host signals on an exported timeline after reading it, under the
//! validation layer: the stop path's `Timeline::raise_to` (docs/sync.md,
//! "Stopping after a failure"). Runs on any Vulkan 1.3 device that exports
//! timeline semaphores (NVIDIA; Mesa 22's lavapipe exports none: that test is
//! `#[ignore]`d, and `scripts/gpu-test.sh` runs it with `--include-ignored`).
//! A machine without what a test needs fails it, saying what is missing,
//! never passes it unrun.

#![allow(clippy::unwrap_used)] // a test: a failure is a failed test

use vkcuda::types::QueueKind;
use vkcuda::vk::device::{list_gpus, Device, Queue};
use vkcuda::vk::instance::Instance;
use vkcuda::vk::timeline::Timeline;

#[test]
#[ignore = "needs a Vulkan device that exports timeline semaphores (NVIDIA; not lavapipe): --include-ignored"]
fn raising_an_exported_timeline_after_host_signals_is_valid() {
    let instance = Instance::new(true, &[]).unwrap();
    let gpu = list_gpus(&instance)
        .unwrap()
        .into_iter()
        .find(|g| g.vulkan_1_3 && g.external.1)
        .expect("no Vulkan 1.3 device that exports semaphores");
    let queue = Queue { kind: QueueKind::Compute, present: None };
    let device = Device::new(instance.clone(), gpu, true, queue, Default::default()).unwrap();
    let timeline =
        Timeline::new(device.clone(), "rendered", 0, true).expect("an exportable timeline semaphore");
    // Exported, as for CUDA's import (the layer then tracks it as an external semaphore).
    drop(timeline.export().unwrap());
    // From the value it was created at (an abort before the first frame), then from values
    // that a host signal reached before, as in an abort where every frame before the failed
    // one was signalled: the read before each raise sees a value already seen reached.
    // No queue or stream has any operation on this timeline: every host signal here is valid.
    // SAFETY: as above.
    unsafe { timeline.raise_to(1) }.unwrap();
    for v in 1..=20u64 {
        // SAFETY: as above.
        unsafe { timeline.signal(2 * v) }.unwrap();
        // SAFETY: as above.
        unsafe { timeline.raise_to(2 * v) }.unwrap(); // reached: nothing to do
                                                      // SAFETY: as above.
        unsafe { timeline.raise_to(2 * v + 1) }.unwrap();
    }
    assert_eq!(timeline.value().unwrap(), 41);
    // A host signal that would not rise is refused before Vulkan sees it (VUID 03258): the
    // layer, which would report it, stays silent below.
    for stale in [41, 40, 0] {
        // SAFETY: as above.
        let refused = unsafe { timeline.signal(stale) }.unwrap_err();
        assert!(matches!(refused, vkcuda::Error::Invalid { .. }), "{refused:?}");
        assert!(refused.to_string().contains("03258"), "{refused}");
    }
    // SAFETY: as above.
    unsafe { timeline.raise_to(7) }.unwrap(); // below: nothing to do
    assert_eq!(timeline.value().unwrap(), 41);
    drop(timeline);
    drop(device);
    let counts = instance.validation().counts();
    assert!(counts.clean(), "validation: {counts}");
    println!("validation: {counts}");
}

/// A host signal that would not rise is refused before Vulkan sees it
/// (VUID-VkSemaphoreSignalInfo-value-03258), and a timeline made exportable
/// on a device without semaphore export is an error, not a semaphore the
/// export would fail on later. Any Vulkan 1.3 device (lavapipe in CI).
#[test]
fn a_host_signal_that_would_not_rise_is_refused() {
    let instance = Instance::new(true, &[]).unwrap();
    let gpu = list_gpus(&instance)
        .unwrap()
        .into_iter()
        .find(|g| g.vulkan_1_3)
        .expect("no Vulkan 1.3 device (lavapipe has one: apt-get install mesa-vulkan-drivers)");
    let queue = Queue { kind: QueueKind::Compute, present: None };
    let device = Device::new(instance.clone(), gpu, false, queue, Default::default()).unwrap();
    let timeline = Timeline::new(device.clone(), "rendered", 5, false).unwrap();
    // No queue has any operation on this timeline: every host signal here is valid.
    for stale in [5, 4, 0] {
        // SAFETY: as above.
        let refused = unsafe { timeline.signal(stale) }.unwrap_err();
        assert!(matches!(refused, vkcuda::Error::Invalid { .. }), "{refused:?}");
    }
    // SAFETY: as above.
    unsafe { timeline.signal(6) }.unwrap();
    assert_eq!(timeline.value().unwrap(), 6);
    // SAFETY: as above.
    assert!(unsafe { timeline.signal(6) }.is_err());
    let exportable = Timeline::new(device.clone(), "released", 0, true);
    assert!(matches!(exportable, Err(vkcuda::Error::MissingExtension { .. })), "{:?}", exportable.err());
    drop(timeline);
    drop(device);
    let counts = instance.validation().counts();
    assert!(counts.clean(), "validation: {counts}");
    println!("validation: {counts}");
}
