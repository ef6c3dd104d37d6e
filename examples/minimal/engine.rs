//! What examples/minimal.rs needs from your engine that has nothing to do
//! with vkcuda: its command line, its own Vulkan instance (with the
//! validation layer's messages counted), a command pool, per frame slot a
//! command buffer and a fence, and kernels compiled at run time.

use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use ash::vk;
use cudarc::driver::{CudaContext, CudaFunction};

/// The command line.
pub struct Options {
    /// `--validate`: the validation layer, its messages counted.
    pub validate: bool,
    /// `--layout array|buffer`: the shared frames' layout.
    pub layout: vkcuda::Layout,
}

/// The command line: `--validate`, and `--layout array|buffer`.
pub fn args() -> Result<Options> {
    let args: Vec<String> = std::env::args().collect();
    let validate = args.iter().any(|a| a == "--validate");
    let layout = args.iter().position(|a| a == "--layout").and_then(|i| args.get(i + 1));
    let layout = match layout.map_or("array", |l| l.as_str()) {
        "array" => vkcuda::Layout::Array,
        "buffer" => vkcuda::Layout::Buffer,
        other => bail!("--layout {other}: array or buffer"),
    };
    Ok(Options { validate, layout })
}

/// `source`'s kernels `names`, compiled by NVRTC and loaded into `ctx`.
pub fn kernels<const N: usize>(
    ctx: &Arc<CudaContext>,
    source: &str,
    names: [&str; N],
) -> Result<[CudaFunction; N]> {
    // SAFETY: only tries to dlopen libnvrtc under its usual names.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        bail!("libnvrtc.so (NVRTC, the CUDA run-time compiler) was not found: add its folder to LD_LIBRARY_PATH");
    }
    let module = ctx.load_module(cudarc::nvrtc::compile_ptx(source)?)?;
    let loaded = names.map(|k| module.load_function(k).with_context(|| format!("kernel {k}")));
    let mut out = Vec::with_capacity(N);
    for k in loaded {
        out.push(k?);
    }
    out.try_into().map_err(|_| anyhow::anyhow!("{N} kernels"))
}

/// A queue family of `physical` with compute (where the frames are consumed here).
pub fn compute_family(instance: &ash::Instance, physical: vk::PhysicalDevice) -> Result<u32> {
    // SAFETY: plain query on a live physical device.
    let families = unsafe { instance.get_physical_device_queue_family_properties(physical) };
    let family = families.iter().position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE));
    Ok(family.context("no compute queue family")? as u32)
}

/// One frame slot's command buffer, and the fence its submission signals.
#[derive(Clone, Copy)]
pub struct Slot {
    /// Recorded anew for each frame of the slot.
    pub cmd: vk::CommandBuffer,
    /// Signalled when the slot's last submission is done.
    pub fence: vk::Fence,
}

/// Your command pool, and per image a command buffer and a fence.
pub struct Commands {
    pool: vk::CommandPool,
    cmds: Vec<vk::CommandBuffer>,
    /// Signalled when the slot's last submission is done.
    fences: Vec<vk::Fence>,
}

impl Commands {
    /// `slots` command buffers and fences on queue family `family`.
    pub fn new(raw: &ash::Device, family: u32, slots: usize) -> Result<Self> {
        let flags = vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER;
        let pool_info = vk::CommandPoolCreateInfo::default().queue_family_index(family).flags(flags);
        // SAFETY: valid create info; destroyed in `destroy`, after the queue is idle.
        let pool = unsafe { raw.create_command_pool(&pool_info, None) }?;
        let alloc =
            vk::CommandBufferAllocateInfo::default().command_pool(pool).command_buffer_count(slots as u32);
        // SAFETY: `pool` is live.
        let cmds = unsafe { raw.allocate_command_buffers(&alloc) }?;
        // SAFETY: default create infos; destroyed in `destroy`.
        let fences = (0..slots).map(|_| unsafe { raw.create_fence(&Default::default(), None) });
        Ok(Self { pool, cmds, fences: fences.collect::<Result<_, _>>()? })
    }

    /// Slot `slot`'s command buffer and fence.
    pub fn slot(&self, slot: usize) -> Slot {
        Slot { cmd: self.cmds[slot], fence: self.fences[slot] }
    }

    /// Waits for slot `slot`'s last submission, and resets its fence.
    pub fn wait(&self, raw: &ash::Device, slot: usize) -> Result<()> {
        let fence = &self.fences[slot..=slot];
        // SAFETY: the fence was submitted with the slot's last frame.
        unsafe { raw.wait_for_fences(fence, true, 10_000_000_000) }?;
        // SAFETY: signalled, so no submission uses it.
        Ok(unsafe { raw.reset_fences(fence) }?)
    }

    /// Once the queue is idle: nothing uses the pool or fences any more.
    pub fn destroy(self, raw: &ash::Device) {
        for f in self.fences {
            // SAFETY: as above.
            unsafe { raw.destroy_fence(f, None) };
        }
        // SAFETY: as above; its command buffers go with it.
        unsafe { raw.destroy_command_pool(self.pool, None) };
    }
}

/// Your engine's own Vulkan instance (vkcuda makes none here): Vulkan 1.3,
/// vkcuda's instance extensions, and with `validate` the Khronos layer with
/// synchronization validation, whose warnings and errors are counted.
pub struct EngineInstance {
    _entry: ash::Entry,
    pub raw: ash::Instance,
    debug: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    /// Validation messages so far; boxed: the messenger holds its address.
    messages: Box<AtomicU64>,
}

impl EngineInstance {
    pub fn new(validate: bool, extensions: &[&CStr]) -> Result<Self> {
        // SAFETY: loads the system's Vulkan loader (libvulkan.so.1) and nothing else.
        let entry = unsafe { ash::Entry::load() }.context("loading libvulkan.so.1")?;
        let mut ext: Vec<*const i8> = extensions.iter().map(|e| e.as_ptr()).collect();
        let layers = [c"VK_LAYER_KHRONOS_validation".as_ptr()];
        let layers = if validate { &layers[..] } else { &[] };
        if validate {
            ext.extend([ash::ext::debug_utils::NAME.as_ptr(), ash::ext::validation_features::NAME.as_ptr()]);
        }
        let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_3);
        let sync = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
        let mut features = vk::ValidationFeaturesEXT::default().enabled_validation_features(&sync);
        let mut info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_layer_names(layers)
            .enabled_extension_names(&ext);
        if validate {
            info = info.push_next(&mut features);
        }
        // SAFETY: every pointer in `info` points into locals that outlive the call.
        let raw = unsafe { entry.create_instance(&info, None) }.context("vkCreateInstance")?;
        let mut this = Self { _entry: entry, raw, debug: None, messages: Box::default() };
        if validate {
            let utils = ash::ext::debug_utils::Instance::new(&this._entry, &this.raw);
            let severity =
                vk::DebugUtilsMessageSeverityFlagsEXT::WARNING | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR;
            let types =
                vk::DebugUtilsMessageTypeFlagsEXT::GENERAL | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION;
            let messenger = vk::DebugUtilsMessengerCreateInfoEXT::default()
                .message_severity(severity)
                .message_type(types)
                .pfn_user_callback(Some(on_message))
                .user_data((&*this.messages as *const AtomicU64).cast_mut().cast());
            // SAFETY: the count the messenger points at is boxed and outlives it (Drop order).
            let m = unsafe { utils.create_debug_utils_messenger(&messenger, None) }?;
            this.debug = Some((utils, m));
        }
        Ok(this)
    }

    /// Validation warnings and errors counted so far.
    pub fn messages(&self) -> u64 {
        self.messages.load(Ordering::Relaxed)
    }
}

impl Drop for EngineInstance {
    fn drop(&mut self) {
        if let Some((utils, m)) = self.debug.take() {
            // SAFETY: the messenger is this instance's, destroyed once.
            unsafe { utils.destroy_debug_utils_messenger(m, None) };
        }
        // SAFETY: the device and every object made on it were destroyed before.
        unsafe { self.raw.destroy_instance(None) };
    }
}

unsafe extern "system" fn on_message(
    _: vk::DebugUtilsMessageSeverityFlagsEXT,
    _: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    count: *mut std::ffi::c_void,
) -> vk::Bool32 {
    // SAFETY: `count` is the instance's boxed counter, alive while the messenger is.
    unsafe { &*(count as *const AtomicU64) }.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the layer passes a valid struct and NUL-terminated message for this call.
    if let Some(m) = unsafe { data.as_ref() }.filter(|d| !d.p_message.is_null()) {
        // SAFETY: as above.
        let text = unsafe { CStr::from_ptr(m.p_message) };
        eprintln!("validation: {}", text.to_string_lossy());
    }
    vk::FALSE
}
