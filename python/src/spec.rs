//! A viewer's device: the device choice and the process's Vulkan instances.

use std::ffi::{CStr, CString};
use std::sync::{Arc, Mutex};

use anyhow::Result;

use vkcuda::vk::instance::Instance;
use vkcuda_run::base::kinds::ProducerKind;
use vkcuda_run::frames::gpu::{DeviceChoice, Gpu};

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
