//! `vkcuda doctor`: one checklist of what this machine gives vkcuda and
//! what each missing piece costs, then a verdict per use. Modelled on
//! `flutter doctor`, `vulkaninfo --summary` and PyTorch's `collect_env`:
//! every piece is looked at (one that is missing does not hide the next),
//! and each missing one names its cure for this machine.
//!
//! The report is typed ([`Report`]: [`Check`]s and [`Verdict`]s); each
//! front end names the uses in its own terms ([`Report::render`]).

use std::fmt::Write as _;

use ash::vk;

use crate::cuda::driver;
use crate::frames::display;
use crate::frames::loader::{self, Library, LOADER};
use crate::frames::machine::{
    self, Icds, LayerVersion, Nvidia, CAPABILITIES, CAPABILITIES_CURE, NVIDIA_MOUNTED_ICD, NVIDIA_VULKAN,
};
use crate::kernel::nvrtc;
use vkcuda::cuda::{self, CudaDevice};
use vkcuda::vk::device::{format_uuid, list_gpus, GpuInfo};
use vkcuda::vk::instance::Instance;

/// What a check found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// There, and usable.
    Ok,
    /// Missing or unusable: some use needs it.
    Missing,
    /// Worth knowing; nothing fails for it.
    Note,
}

/// One piece of the machine.
#[derive(Clone, Debug)]
pub struct Check {
    /// What was looked at ("Vulkan loader").
    pub piece: &'static str,
    /// What was found.
    pub status: Status,
    /// One line.
    pub summary: String,
    /// Indented lines under it (devices, files, where it looked).
    pub details: Vec<String>,
    /// What to do, where something is missing.
    pub cure: Option<String>,
}

impl Check {
    fn new(piece: &'static str, status: Status, summary: impl Into<String>) -> Self {
        Check { piece, status, summary: summary.into(), details: Vec::new(), cure: None }
    }

    fn cure(mut self, cure: impl Into<String>) -> Self {
        self.cure = Some(cure.into());
        self
    }
}

/// What a person may ask of vkcuda here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// Headless frames rendered by CUDA into the shared images.
    CudaHeadless,
    /// Headless frames from the CPU producer (any Vulkan device, lavapipe too).
    CpuHeadless,
    /// The browser view (a headless run with a server).
    Serve,
    /// A window.
    Window,
    /// The user's own CUDA kernel (NVRTC compiles it).
    Kernel,
    /// The validation layer with synchronization validation.
    Validate,
}

/// Whether a use works here, and why not.
#[derive(Clone, Debug)]
pub struct Verdict {
    /// The use.
    pub what: Use,
    /// Whether it works.
    pub works: bool,
    /// Why (what it runs on, or what it lacks).
    pub why: String,
}

/// The whole checklist.
#[derive(Clone, Debug)]
pub struct Report {
    /// Each piece, in the order a start-up meets them.
    pub checks: Vec<Check>,
    /// Each use.
    pub verdicts: Vec<Verdict>,
}

impl Report {
    /// 0: headless CUDA frames work; 1: only the CPU producer's do (no CUDA
    /// pairs with a Vulkan device); 2: no Vulkan device starts.
    pub fn exit_code(&self) -> u8 {
        let works = |u| self.verdicts.iter().any(|v| v.what == u && v.works);
        if works(Use::CudaHeadless) {
            0
        } else if works(Use::CpuHeadless) {
            1
        } else {
            2
        }
    }

    /// The report as text, each use named by `name` (a front end's words: `--kernel`, `kernel=`).
    pub fn render(&self, name: &dyn Fn(Use) -> String) -> String {
        let mut out = String::from("vkcuda doctor: what this machine gives vkcuda\n\n");
        for c in &self.checks {
            let mark = match c.status {
                Status::Ok => "[ok]",
                Status::Missing => "[no]",
                Status::Note => "[!] ",
            };
            let _ = writeln!(out, "{mark} {}: {}", c.piece, c.summary);
            for d in &c.details {
                let _ = writeln!(out, "       {d}");
            }
            if let Some(cure) = &c.cure {
                let _ = writeln!(out, "       -> {cure}");
            }
        }
        out.push_str("\nWhat works here:\n");
        let width = self.verdicts.iter().map(|v| name(v.what).len()).max().unwrap_or(0);
        for v in &self.verdicts {
            let mark = if v.works { "yes" } else { "no " };
            let _ = writeln!(out, "  {:width$}  {mark}  {}", name(v.what), v.why);
        }
        out
    }
}

/// Looks at every piece, from the loader to the display.
pub fn examine() -> Report {
    let libraries = loader::libraries();
    let entry = machine::entry(libraries);
    let mut checks = vec![loader_check(libraries, entry.as_ref()), glvnd_check(libraries)];
    let icds = Icds::here();
    checks.push(icd_check(&icds));
    let nvidia = Nvidia::here();
    let vulkan = Instance::with_loader(libraries.loader_path(), false, &[]).map_err(|e| e.to_string());
    let gpus: Vec<(GpuInfo, Interop)> = match &vulkan {
        Ok(instance) => list_gpus(instance)
            .unwrap_or_default()
            .into_iter()
            .map(|g| {
                let interop = Interop::of(instance.raw(), &g);
                (g, interop)
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    checks.push(device_check(&vulkan, &gpus, libraries));
    let cuda = cuda::load_driver().and_then(|()| cuda::list_devices()).map_err(|e| format!("{e:#}"));
    checks.push(cuda_check(&cuda, &gpus, &nvidia));
    let nvrtc = nvrtc::version().map_err(|e| format!("{e:#}"));
    checks.push(nvrtc_check(&nvrtc));
    let layer = entry.as_ref().and_then(machine::validation_layer);
    checks.push(layer_check(layer));
    let window = display_check();
    checks.push(window.clone());
    checks.extend(container_check(&nvidia, &icds));
    let verdicts = verdicts(&gpus, &cuda, nvrtc.is_ok(), layer.is_some(), window.status == Status::Ok);
    Report { checks, verdicts }
}

fn loader_check(libraries: &loader::Libraries, entry: Option<&ash::Entry>) -> Check {
    match &libraries.loader {
        Library::Found { .. } => {
            // SAFETY: a plain query of a loaded loader.
            let version = entry.and_then(|e| unsafe { e.try_enumerate_instance_version() }.ok().flatten());
            let version = version.map_or("1.0".into(), version_text);
            Check::new("Vulkan loader", Status::Ok, format!("{} (Vulkan {version})", libraries.loader))
        }
        Library::Missing { why } => {
            Check::new("Vulkan loader", Status::Missing, format!("no {LOADER}: {why}"))
                .cure(machine::cure_for_vulkan(libraries).0)
        }
    }
}

fn glvnd_check(libraries: &loader::Libraries) -> Check {
    let missing = libraries.glvnd.iter().any(|(_, l)| !l.found());
    let status = if missing { Status::Note } else { Status::Ok };
    let mut check = Check::new(
        "glvnd (NVIDIA's Vulkan driver opens it)",
        status,
        if missing { "incomplete" } else { "there" },
    );
    check.details = libraries.glvnd.iter().map(|(name, l)| format!("{name}: {l}")).collect();
    let vendors: Vec<String> = machine::egl_vendors().iter().map(|v| v.display().to_string()).collect();
    check.details.push(match vendors.is_empty() {
        true => format!("EGL vendor files: none in {}", machine::EGL_VENDOR_DIRS),
        false => format!("EGL vendor files: {}", vendors.join(", ")),
    });
    if missing {
        check.cure = Some("only NVIDIA's driver needs it: vkcuda's wheel bundles it".into());
    }
    check
}

fn icd_check(icds: &Icds) -> Check {
    let loading = icds.found.iter().filter(|i| i.loads.is_ok()).count();
    let status = if loading > 0 { Status::Ok } else { Status::Missing };
    let mut check = Check::new(
        "Vulkan drivers (ICD files)",
        status,
        format!("{} found, {loading} whose library loads", icds.found.len()),
    );
    let searched: Vec<String> = icds.searched.iter().map(|p| p.display().to_string()).collect();
    check.details.push(match &icds.variable {
        Some((name, value)) => format!("{name}={value} (replaces the loader's search)"),
        None => format!("searched: {}", searched.join(", ")),
    });
    for icd in &icds.found {
        let library = icd.library.as_deref().unwrap_or("?");
        let loads = match &icd.loads {
            Ok(()) => "loads".to_string(),
            Err(e) => format!("does not load: {e}"),
        };
        check.details.push(format!("{} -> {library} ({loads})", icd.file.display()));
    }
    check
}

/// The interop a device offers, beyond [`GpuInfo`].
#[derive(Clone, Copy, Debug)]
struct Interop {
    api: u32,
    timeline: bool,
    exportable_timeline: bool,
}

impl Interop {
    fn of(instance: &ash::Instance, gpu: &GpuInfo) -> Self {
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut features = vk::PhysicalDeviceFeatures2::default().push_next(&mut v12);
        // SAFETY: the physical device is of this instance; `features` chains a valid struct.
        unsafe { instance.get_physical_device_features2(gpu.physical, &mut features) };
        let timeline = v12.timeline_semaphore == vk::TRUE;
        // SAFETY: the physical device is of this instance.
        let api = unsafe { instance.get_physical_device_properties(gpu.physical) }.api_version;
        let mut kind = vk::SemaphoreTypeCreateInfo::default().semaphore_type(vk::SemaphoreType::TIMELINE);
        let info = vk::PhysicalDeviceExternalSemaphoreInfo::default()
            .handle_type(vk::ExternalSemaphoreHandleTypeFlags::OPAQUE_FD)
            .push_next(&mut kind);
        let mut props = vk::ExternalSemaphoreProperties::default();
        // SAFETY: as above; `info` chains a valid struct, `props` is an out-parameter.
        unsafe {
            instance.get_physical_device_external_semaphore_properties(gpu.physical, &info, &mut props)
        };
        let both =
            vk::ExternalSemaphoreFeatureFlags::EXPORTABLE | vk::ExternalSemaphoreFeatureFlags::IMPORTABLE;
        Interop { api, timeline, exportable_timeline: props.external_semaphore_features.contains(both) }
    }

    /// Whether CUDA can share frames with this device: Vulkan 1.3, fd export of memory and
    /// semaphores, and timeline semaphores that export.
    fn shares(&self, gpu: &GpuInfo) -> bool {
        gpu.vulkan_1_3 && gpu.external.0 && gpu.external.1 && self.timeline && self.exportable_timeline
    }
}

fn device_check(
    vulkan: &Result<std::sync::Arc<Instance>, String>,
    gpus: &[(GpuInfo, Interop)],
    libraries: &loader::Libraries,
) -> Check {
    let yes = |b: bool| if b { "yes" } else { "NO" };
    match vulkan {
        Err(e) => Check::new("Vulkan devices", Status::Missing, format!("no instance: {e}"))
            .cure(machine::cure_for_vulkan(libraries).0),
        Ok(_) if gpus.is_empty() => {
            Check::new("Vulkan devices", Status::Missing, "none").cure(machine::cure_for_vulkan(libraries).0)
        }
        Ok(_) => {
            let mut check = Check::new("Vulkan devices", Status::Ok, format!("{}", gpus.len()));
            for (g, i) in gpus {
                check.details.push(format!(
                    "{}: {} (driver {}, Vulkan {}, UUID {}); memory fd {}, semaphore fd {}, timeline {} (exportable {})",
                    g.index, g.name, g.driver.trim(), version_text(i.api), format_uuid(&g.uuid),
                    yes(g.external.0), yes(g.external.1), yes(i.timeline), yes(i.exportable_timeline)
                ));
            }
            check
        }
    }
}

fn cuda_check(cuda: &Result<Vec<CudaDevice>, String>, gpus: &[(GpuInfo, Interop)], nvidia: &Nvidia) -> Check {
    let devices = match cuda {
        Err(e) => {
            let status = if nvidia.present() { Status::Missing } else { Status::Note };
            let check = Check::new("CUDA", status, e.clone());
            return if nvidia.present() {
                check.cure(format!(
                    "the NVIDIA driver is loaded but CUDA does not start: {CAPABILITIES_CURE} in a container"
                ))
            } else {
                check
            };
        }
        Ok(d) => d,
    };
    let version = driver::driver_version().unwrap_or_else(|e| format!("? ({e:?})"));
    let mut check =
        Check::new("CUDA", Status::Ok, format!("driver API {version}, {} device(s)", devices.len()));
    for c in devices {
        let twin = gpus.iter().find(|(g, _)| g.uuid == c.uuid);
        let pair = twin.map_or("no Vulkan device has its UUID".to_string(), |(g, _)| {
            format!("pairs with Vulkan device {}", g.index)
        });
        check.details.push(format!("{}: {} (UUID {}): {pair}", c.ordinal, c.name, format_uuid(&c.uuid)));
    }
    if twin_count(devices, gpus) == 0 {
        check.status = Status::Missing;
        check.cure = Some("no CUDA device pairs with a Vulkan device: CUDA frames need NVIDIA's Vulkan driver for the same GPU".into());
    }
    check
}

fn twin_count(devices: &[CudaDevice], gpus: &[(GpuInfo, Interop)]) -> usize {
    devices.iter().filter(|c| gpus.iter().any(|(g, i)| g.uuid == c.uuid && i.shares(g))).count()
}

fn nvrtc_check(nvrtc: &Result<String, String>) -> Check {
    match nvrtc {
        Ok(v) => Check::new("NVRTC (your own kernels)", Status::Ok, format!("NVRTC {v}")),
        Err(_) => Check::new("NVRTC (your own kernels)", Status::Missing, "libnvrtc.so was not found")
            .cure(nvrtc::cure()),
    }
}

fn layer_check(layer: Option<LayerVersion>) -> Check {
    match layer {
        Some(LayerVersion { spec, implementation }) => Check::new(
            "validation layer",
            Status::Ok,
            format!("VK_LAYER_KHRONOS_validation {} (build {implementation})", version_text(spec)),
        ),
        None => {
            Check::new("validation layer", Status::Missing, "VK_LAYER_KHRONOS_validation is not installed")
                .cure(machine::cure_for_layer())
        }
    }
}

fn display_check() -> Check {
    if display::named().is_empty() {
        return Check::new(
            "display",
            Status::Note,
            "none (neither DISPLAY nor WAYLAND_DISPLAY is set): headless and the browser view need none",
        );
    }
    match display::check() {
        Ok(()) => Check::new("display", Status::Ok, "a window system answers"),
        Err(e) => Check::new("display", Status::Missing, e.to_string()),
    }
}

/// Hints for a container: NVIDIA's driver present, its Vulkan parts absent or hidden.
fn container_check(nvidia: &Nvidia, icds: &Icds) -> Option<Check> {
    if !nvidia.present() {
        return None;
    }
    let caps = nvidia.capabilities.as_deref().unwrap_or("not set");
    let missing =
        |summary: String, cure: String| Some(Check::new("container", Status::Missing, summary).cure(cure));
    if nvidia.graphics_left_out() || nvidia.vulkan_library.is_err() {
        let summary = format!("{CAPABILITIES}={caps}; {NVIDIA_VULKAN} is not here");
        return missing(summary, format!("start the container with {CAPABILITIES_CURE}"));
    }
    if !icds.found.iter().any(machine::Icd::is_nvidia) && std::path::Path::new(NVIDIA_MOUNTED_ICD).is_file() {
        let summary = format!("NVIDIA's ICD file is at {NVIDIA_MOUNTED_ICD}, outside the search");
        return missing(summary, format!("export VK_DRIVER_FILES={NVIDIA_MOUNTED_ICD}"));
    }
    Some(Check::new(
        "container",
        Status::Ok,
        format!("NVIDIA driver {} ({CAPABILITIES}={caps})", nvidia.kernel_driver.as_deref().unwrap_or("?")),
    ))
}

fn verdicts(
    gpus: &[(GpuInfo, Interop)],
    cuda: &Result<Vec<CudaDevice>, String>,
    nvrtc: bool,
    layer: bool,
    window: bool,
) -> Vec<Verdict> {
    let twin = cuda.as_ref().ok().and_then(|d| {
        d.iter().find_map(|c| gpus.iter().find(|(g, i)| g.uuid == c.uuid && i.shares(g)).map(|(g, _)| (c, g)))
    });
    let cuda_why = match (twin, cuda) {
        (Some((c, g)), _) => format!("CUDA device {} renders into Vulkan device {}", c.ordinal, g.index),
        (None, Err(e)) => one_line(e),
        (None, Ok(_)) => "no CUDA device pairs with a Vulkan device that shares frames".into(),
    };
    let first = gpus.first().map(|(g, _)| g);
    let device = first.map_or("no Vulkan device".to_string(), |g| format!("on {}", g.name));
    let headless = twin.is_some() || first.is_some();
    let serve_why =
        if twin.is_some() { "CUDA frames, as headless".to_string() } else { format!("CPU frames {device}") };
    vec![
        Verdict { what: Use::CudaHeadless, works: twin.is_some(), why: cuda_why.clone() },
        Verdict { what: Use::CpuHeadless, works: first.is_some(), why: device.clone() },
        Verdict { what: Use::Serve, works: headless, why: if headless { serve_why } else { device.clone() } },
        Verdict {
            what: Use::Window,
            works: window && headless,
            why: if window { device.clone() } else { "no display".into() },
        },
        Verdict {
            what: Use::Kernel,
            works: twin.is_some() && nvrtc,
            why: match (twin.is_some(), nvrtc) {
                (true, true) => "NVRTC compiles, CUDA runs it".into(),
                (true, false) => "no NVRTC".into(),
                (false, _) => cuda_why,
            },
        },
        Verdict {
            what: Use::Validate,
            works: layer && headless,
            why: if layer { device } else { "no validation layer".into() },
        },
    ]
}

/// "1.4.309" from a packed Vulkan version.
fn version_text(v: u32) -> String {
    format!("{}.{}.{}", vk::api_version_major(v), vk::api_version_minor(v), vk::api_version_patch(v))
}

/// The first line of `text`.
fn one_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(what: Use, works: bool) -> Verdict {
        Verdict { what, works, why: String::new() }
    }

    #[test]
    fn the_exit_code_says_how_far_it_gets() {
        let report = |v: Vec<Verdict>| Report { checks: vec![], verdicts: v };
        assert_eq!(
            report(vec![verdict(Use::CudaHeadless, true), verdict(Use::CpuHeadless, true)]).exit_code(),
            0
        );
        assert_eq!(
            report(vec![verdict(Use::CudaHeadless, false), verdict(Use::CpuHeadless, true)]).exit_code(),
            1
        );
        assert_eq!(
            report(vec![verdict(Use::CudaHeadless, false), verdict(Use::CpuHeadless, false)]).exit_code(),
            2
        );
    }

    #[test]
    fn the_report_names_uses_in_the_front_ends_words() {
        let mut missing = Check::new("NVRTC", Status::Missing, "no libnvrtc");
        missing.details.push("looked in /x".into());
        let report = Report {
            checks: vec![missing.cure("install it")],
            verdicts: vec![Verdict { what: Use::Kernel, works: false, why: "no NVRTC".into() }],
        };
        let text = report.render(&|u| format!("<{u:?}>"));
        assert!(
            text.contains("[no] NVRTC: no libnvrtc\n       looked in /x\n       -> install it\n"),
            "{text}"
        );
        assert!(text.contains("<Kernel>  no   no NVRTC"), "{text}");
    }

    #[test]
    fn versions_read_as_people_write_them() {
        assert_eq!(version_text(vk::make_api_version(0, 1, 4, 309)), "1.4.309");
    }
}
