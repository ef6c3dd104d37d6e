//! The Vulkan loader, the instance and (with validation) the Khronos
//! validation layer with synchronization validation, whose messages are
//! counted and reported through `log` (target `vkcuda::validation`).

use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{bail, Error, Result};
use ash::vk;

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// Counts of the validation messages seen so far.
#[derive(Debug, Default)]
pub struct ValidationLog {
    errors: AtomicU64,
    warnings: AtomicU64,
}

impl ValidationLog {
    /// What was reported so far.
    pub fn counts(&self) -> ValidationCounts {
        ValidationCounts {
            errors: self.errors.load(Ordering::Relaxed),
            warnings: self.warnings.load(Ordering::Relaxed),
        }
    }
}

/// Validation messages of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ValidationCounts {
    /// Errors.
    pub errors: u64,
    /// Warnings.
    pub warnings: u64,
}

impl ValidationCounts {
    /// Whether the run is validation-clean.
    pub fn clean(&self) -> bool {
        self.errors + self.warnings == 0
    }
}

impl std::fmt::Display for ValidationCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} errors, {} warnings", self.errors, self.warnings)
    }
}

/// The loader's entry points and the instance. Everything Vulkan holds an
/// `Arc<Instance>`, so the instance is destroyed last. Its fields are
/// private (getters give them out): `Drop` destroys this instance.
pub struct Instance {
    entry: ash::Entry,
    raw: ash::Instance,
    debug: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
    // The messenger's user data points here: it lives as long as the instance.
    log: Arc<ValidationLog>,
}

/// Loads the Vulkan loader at `loader`, or the system's `libvulkan.so.1`.
fn load(loader: Option<&std::path::Path>) -> Result<ash::Entry> {
    // Loading libvulkan runs its initialisers: it is a Vulkan loader the user chose (the system's by default).
    match loader {
        // SAFETY: as above; the loader at the path the caller named.
        Some(path) => unsafe { ash::Entry::load_from(path) },
        // SAFETY: as above; the system's loader.
        None => unsafe { ash::Entry::load() },
    }
    .map_err(|e| {
        let which = loader.map_or("libvulkan.so.1".into(), |p| p.to_string_lossy().into_owned());
        Error::Library {
            context: format!(
                "cannot load the Vulkan loader ({which}): {e}: install one (the package that ships \
                 libvulkan.so.1), or pass the path of one"
            ),
        }
    })
}

/// Whether the Khronos validation layer is installed; an error saying how to install it if not.
fn check_validation_layer(entry: &ash::Entry) -> Result<()> {
    // SAFETY: plain query; the entry is loaded.
    let available = unsafe { entry.enumerate_instance_layer_properties() }?;
    if !available.iter().any(|l| l.layer_name_as_c_str() == Ok(VALIDATION_LAYER)) {
        bail!(
            "validation needs the Khronos validation layer (VK_LAYER_KHRONOS_validation), which is not installed \
             (Debian/Ubuntu: apt install vulkan-validationlayers; or set VK_LAYER_PATH)"
        );
    }
    Ok(())
}

impl Instance {
    /// The loader (it keeps libvulkan loaded).
    pub fn entry(&self) -> &ash::Entry {
        &self.entry
    }

    /// The instance's entry points.
    pub fn raw(&self) -> &ash::Instance {
        &self.raw
    }

    /// Loads libvulkan and creates a Vulkan 1.3 instance; with `validate`,
    /// with the validation layer and synchronization validation on.
    ///
    /// ```no_run
    /// use vkcuda::vk::{device, instance::Instance};
    /// let instance = Instance::new(true, &[])?;
    /// for gpu in device::list_gpus(&instance)? {
    ///     println!("{gpu}"); // index, name and UUID: what CUDA pairs by
    /// }
    /// // Every message the validation layer sent so far, counted.
    /// let counts = instance.validation().counts();
    /// assert_eq!((counts.errors, counts.warnings), (0, 0));
    /// # Ok::<(), vkcuda::Error>(())
    /// ```
    pub fn new(validate: bool, extensions: &[&CStr]) -> Result<Arc<Self>> {
        Self::with_loader(None, validate, extensions)
    }

    /// [`Instance::new`] with the Vulkan loader at `loader` instead of the
    /// system's `libvulkan.so.1`.
    pub fn with_loader(
        loader: Option<&std::path::Path>,
        validate: bool,
        extensions: &[&CStr],
    ) -> Result<Arc<Self>> {
        let entry = load(loader)?;
        let mut ext: Vec<*const i8> = extensions.iter().map(|e| e.as_ptr()).collect();
        let mut layers = Vec::new();
        if validate {
            check_validation_layer(&entry)?;
            layers.push(VALIDATION_LAYER.as_ptr());
            ext.push(ash::ext::debug_utils::NAME.as_ptr());
            ext.push(ash::ext::validation_features::NAME.as_ptr());
        }
        let app = vk::ApplicationInfo::default()
            .application_name(c"vkcuda")
            .application_version(1)
            .api_version(vk::API_VERSION_1_3);
        let log = Arc::new(ValidationLog::default());
        // Built twice: chaining it into the instance's create info changes its pNext.
        let messenger_info = || {
            vk::DebugUtilsMessengerCreateInfoEXT::default()
                .message_severity(
                    vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                        | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
                )
                // Correctness only: PERFORMANCE hints would flag the GENERAL layout, which is
                // deliberate (CUDA knows no layouts; see shared_image.rs).
                .message_type(
                    vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                        | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION,
                )
                .pfn_user_callback(Some(on_message))
                .user_data(Arc::as_ptr(&log) as *mut c_void)
        };
        let mut instance_messenger = messenger_info();
        let enables = [vk::ValidationFeatureEnableEXT::SYNCHRONIZATION_VALIDATION];
        let mut features = vk::ValidationFeaturesEXT::default().enabled_validation_features(&enables);
        let mut info = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_layer_names(&layers)
            .enabled_extension_names(&ext);
        if validate {
            // Chained here too, so instance creation itself is validated.
            info = info.push_next(&mut features).push_next(&mut instance_messenger);
        }
        // SAFETY: every pointer in `info` points into locals that outlive the call.
        let raw = unsafe { entry.create_instance(&info, None) }.map_err(|e| match e {
            // The loader started no driver (none installed, or none that loads): a caller names the cure.
            vk::Result::ERROR_INCOMPATIBLE_DRIVER => Error::Vulkan {
                context:
                    "vkCreateInstance (no Vulkan 1.3 driver found; VK_LOADER_DEBUG=error,driver says why)"
                        .into(),
                result: e,
            },
            e => Error::unsupported(format!("vkCreateInstance (Vulkan 1.3 needed): {e}")),
        })?;
        let debug = if validate {
            let utils = ash::ext::debug_utils::Instance::new(&entry, &raw);
            // SAFETY: the messenger's user data (`log`) lives as long as the instance.
            let messenger = unsafe { utils.create_debug_utils_messenger(&messenger_info(), None) }?;
            Some((utils, messenger))
        } else {
            None
        };
        Ok(Arc::new(Self { entry, raw, debug, log }))
    }

    /// The validation messages counted so far (all zero without validation).
    pub fn validation(&self) -> &Arc<ValidationLog> {
        &self.log
    }

    /// Whether the validation layer is on.
    pub fn validating(&self) -> bool {
        self.debug.is_some()
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Some((utils, messenger)) = self.debug.take() {
            // SAFETY: the messenger belongs to this instance and is destroyed once.
            unsafe { utils.destroy_debug_utils_messenger(messenger, None) };
        }
        // SAFETY: every child object holds an Arc<Instance>, so none is left.
        unsafe { self.raw.destroy_instance(None) };
    }
}

unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: `user` points to the ValidationLog the Instance keeps alive as long as the messenger.
    let log = unsafe { &*(user as *const ValidationLog) };
    // SAFETY: the layer passes a valid callback-data struct for the duration of the call.
    let data = unsafe { data.as_ref() };
    let text = |p: *const std::ffi::c_char| match p.is_null() {
        true => String::new(),
        // SAFETY: p is a NUL-terminated string owned by the layer for this call.
        false => unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned(),
    };
    let message = data.map(|d| text(d.p_message)).unwrap_or_default();
    // Every message counts, including the layer's reports of its own bookkeeping ("most
    // likely a validation bug"): the pattern must run clean, not be explained away.
    if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
        log.errors.fetch_add(1, Ordering::Relaxed);
        log::error!(target: "vkcuda::validation", "validation error: {message}");
    } else {
        log.warnings.fetch_add(1, Ordering::Relaxed);
        log::warn!(target: "vkcuda::validation", "validation warning: {message}");
    }
    vk::FALSE
}
