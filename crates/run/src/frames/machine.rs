//! What this machine gives vkcuda before a device is open: the driver
//! manifests (ICD files) the Vulkan loader reads and where it looks for
//! them, NVIDIA's driver and its graphics library, a container's driver
//! capabilities, a display, and the package manager a cure can name. Read
//! by the start-up errors' cures ([`cure_for_vulkan`]) and by `doctor`.

use std::ffi::CString;
use std::fmt;
use std::path::{Path, PathBuf};

pub use crate::error::usage::SEE_DOCTOR;
use crate::frames::loader::{self, Libraries, Library, Origin, BUNDLE_DIR, LOADER};

/// NVIDIA's Vulkan driver, which its ICD file names.
pub const NVIDIA_VULKAN: &str = "libGLX_nvidia.so.0";
/// Where NVIDIA's container toolkit can mount the driver's ICD file, outside the loader's search.
pub const NVIDIA_MOUNTED_ICD: &str = "/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json";
/// The container variable that says which of NVIDIA's driver libraries were mounted.
pub const CAPABILITIES: &str = "NVIDIA_DRIVER_CAPABILITIES";
/// The capabilities a container needs for Vulkan (and CUDA).
pub const CAPABILITIES_CURE: &str = "NVIDIA_DRIVER_CAPABILITIES=compute,graphics,utility (or all)";

/// One driver manifest the loader reads.
#[derive(Clone, Debug)]
pub struct Icd {
    /// The JSON file.
    pub file: PathBuf,
    /// Its `ICD.library_path`, or why it has none.
    pub library: Result<String, String>,
    /// Whether that library loads here (`dlopen`), or what the dynamic linker said.
    pub loads: Result<(), String>,
}

impl Icd {
    /// Whether this manifest names NVIDIA's driver.
    pub fn is_nvidia(&self) -> bool {
        self.library.as_deref().is_ok_and(|l| l.contains("nvidia"))
    }
}

/// Where the loader looks for driver manifests, and what it finds.
#[derive(Clone, Debug)]
pub struct Icds {
    /// The variable that replaces the search (`VK_DRIVER_FILES`, `VK_ICD_FILENAMES`), if set.
    pub variable: Option<(&'static str, String)>,
    /// The folders (or files) searched, in the loader's order.
    pub searched: Vec<PathBuf>,
    /// The manifests found there.
    pub found: Vec<Icd>,
}

/// The package manager this machine has, for the cures to name (never `apt` where there is none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packages {
    /// Debian, Ubuntu.
    Apt,
    /// Fedora, RHEL and its rebuilds.
    Dnf,
    /// None this knows (a container with no package manager, or one that is not ours to use).
    None,
}

impl Packages {
    /// This machine's.
    pub fn here() -> Self {
        let on_path = |tool: &str| {
            std::env::var_os("PATH")
                .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        };
        if on_path("apt-get") {
            Packages::Apt
        } else if on_path("dnf") {
            Packages::Dnf
        } else {
            Packages::None
        }
    }

    /// How to install `what` (`(apt package, dnf package)`), or `None` with no package manager.
    fn install(self, apt: &str, dnf: &str) -> Option<String> {
        match self {
            Packages::Apt => Some(format!("apt install {apt}")),
            Packages::Dnf => Some(format!("dnf install {dnf}")),
            Packages::None => None,
        }
    }
}

/// NVIDIA's driver as a process sees it, before CUDA or Vulkan is asked.
#[derive(Clone, Debug)]
pub struct Nvidia {
    /// The kernel driver's version line (`/proc/driver/nvidia/version`), where it is loaded.
    pub kernel_driver: Option<String>,
    /// Whether [`NVIDIA_VULKAN`] loads, or what the dynamic linker said.
    pub vulkan_library: Result<(), String>,
    /// The container's [`CAPABILITIES`], where it is set.
    pub capabilities: Option<String>,
    /// glvnd's EGL vendor files ([`egl_vendors`]).
    pub egl_vendors: Vec<PathBuf>,
}

impl Nvidia {
    /// This machine's.
    pub fn here() -> Self {
        let kernel_driver = std::fs::read_to_string("/proc/driver/nvidia/version")
            .ok()
            .and_then(|t| t.lines().next().map(str::to_owned))
            .or_else(|| Path::new("/dev/nvidiactl").exists().then(|| "/dev/nvidiactl is there".into()));
        Nvidia {
            kernel_driver,
            vulkan_library: loads(NVIDIA_VULKAN),
            capabilities: std::env::var(CAPABILITIES).ok(),
            egl_vendors: egl_vendors(),
        }
    }

    /// Whether an NVIDIA GPU's driver is here.
    pub fn present(&self) -> bool {
        self.kernel_driver.is_some()
    }

    /// Whether the container's capabilities leave out the graphics libraries (Vulkan's among them).
    pub fn graphics_left_out(&self) -> bool {
        self.capabilities.as_deref().is_some_and(|c| {
            let caps: Vec<&str> = c.split(',').map(str::trim).collect();
            !caps.iter().any(|c| *c == "graphics" || *c == "all")
        })
    }
}

/// glvnd's EGL vendor files (`10_nvidia.json` and the like): the ones
/// `__EGL_VENDOR_LIBRARY_FILENAMES` names, else those in
/// `__EGL_VENDOR_LIBRARY_DIRS` or glvnd's default folders.
pub fn egl_vendors() -> Vec<PathBuf> {
    if let Ok(files) = std::env::var("__EGL_VENDOR_LIBRARY_FILENAMES") {
        return files.split(':').map(PathBuf::from).filter(|f| f.is_file()).collect();
    }
    let dirs = std::env::var("__EGL_VENDOR_LIBRARY_DIRS").unwrap_or_else(|_| EGL_VENDOR_DIRS.into());
    dirs.split(':').flat_map(|d| manifests(Path::new(d))).collect()
}

/// Where glvnd's libEGL (the system's, and the bundled one) looks for vendor files.
pub const EGL_VENDOR_DIRS: &str = "/etc/glvnd/egl_vendor.d:/usr/share/glvnd/egl_vendor.d";
/// Where NVIDIA's container toolkit can mount the driver's EGL vendor file, outside that search.
pub const NVIDIA_MOUNTED_EGL_VENDOR: &str = "/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json";

/// Whether `library` (a bare name or a path) loads here; it stays loaded (never closed:
/// a driver's library may not survive being unloaded).
pub fn loads(library: &str) -> Result<(), String> {
    let c = CString::new(library).map_err(|_| format!("{library:?} holds a NUL"))?;
    // SAFETY: `c` is NUL-terminated; loading runs the library's initialisers, as its use would.
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
    if handle.is_null() {
        return Err(loader::last_dl_error());
    }
    Ok(())
}

impl Icds {
    /// The loader's search, as the loader documents it for Linux
    /// (LoaderInterfaceArchitecture.md, "Linux Driver Discovery").
    pub fn here() -> Self {
        let var = |name: &'static str| std::env::var(name).ok().filter(|v| !v.is_empty()).map(|v| (name, v));
        let variable = var("VK_DRIVER_FILES").or_else(|| var("VK_ICD_FILENAMES"));
        let searched: Vec<PathBuf> = match &variable {
            Some((_, list)) => list.split(':').map(PathBuf::from).collect(),
            None => default_search(),
        };
        let mut found = Vec::new();
        for place in &searched {
            for file in manifests(place) {
                found.push(read_icd(file));
            }
        }
        Icds { variable, searched, found }
    }
}

/// The folders the loader searches with no variable set.
fn default_search() -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    let env_or = |name: &str, default: PathBuf| std::env::var_os(name).map(PathBuf::from).unwrap_or(default);
    let list_or = |name: &str, default: &str| -> Vec<PathBuf> {
        std::env::var(name).unwrap_or_else(|_| default.into()).split(':').map(PathBuf::from).collect()
    };
    let mut dirs = vec![env_or("XDG_CONFIG_HOME", home.join(".config"))];
    dirs.extend(list_or("XDG_CONFIG_DIRS", "/etc/xdg"));
    dirs.push("/etc".into());
    dirs.push(env_or("XDG_DATA_HOME", home.join(".local/share")));
    dirs.extend(list_or("XDG_DATA_DIRS", "/usr/local/share:/usr/share"));
    dirs.into_iter().map(|d| d.join("vulkan/icd.d")).collect()
}

/// The manifests at `place`: the file itself, or the folder's `.json` files in name order.
fn manifests(place: &Path) -> Vec<PathBuf> {
    if place.is_file() {
        return vec![place.to_path_buf()];
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(place)
        .map(|d| {
            d.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "json")).collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// One manifest: its library, and whether that loads.
fn read_icd(file: PathBuf) -> Icd {
    let library = std::fs::read_to_string(&file)
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).map_err(|e| e.to_string()))
        .and_then(|json| {
            json["ICD"]["library_path"]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| "no ICD.library_path".into())
        });
    let loads = match &library {
        Ok(lib) => loads(&relative_to(&file, lib)),
        Err(e) => Err(e.clone()),
    };
    Icd { file, library, loads }
}

/// A manifest's library path as the loader reads it: a relative path is relative to the manifest.
fn relative_to(manifest: &Path, library: &str) -> String {
    if library.contains('/') && !library.starts_with('/') {
        manifest.parent().unwrap_or(Path::new(".")).join(library).to_string_lossy().into_owned()
    } else {
        library.to_owned()
    }
}

/// The Khronos validation layer's name.
const VALIDATION_LAYER: &std::ffi::CStr = c"VK_LAYER_KHRONOS_validation";

/// The loader's entry points (for its version and layers, even where no instance starts).
pub fn entry(libraries: &Libraries) -> Option<ash::Entry> {
    if !libraries.loader.found() {
        return None;
    }
    match libraries.loader_path() {
        // SAFETY: the loader the process already loaded (or was told to use), loaded again.
        Some(path) => unsafe { ash::Entry::load_from(path) }.ok(),
        // SAFETY: as above: the system's, already loaded by name.
        None => unsafe { ash::Entry::load() }.ok(),
    }
}

/// A layer's versions, as the loader lists them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerVersion {
    /// The Vulkan version it was written for (`VK_MAKE_API_VERSION`).
    pub spec: u32,
    /// Its own build's.
    pub implementation: u32,
}

/// The validation layer's versions, where the loader lists it.
pub fn validation_layer(entry: &ash::Entry) -> Option<LayerVersion> {
    // SAFETY: a plain query of a loaded loader.
    let layers = unsafe { entry.enumerate_instance_layer_properties() }.ok()?;
    let layer = layers.iter().find(|l| l.layer_name_as_c_str() == Ok(VALIDATION_LAYER))?;
    Some(LayerVersion { spec: layer.spec_version, implementation: layer.implementation_version })
}

/// How to install the validation layer here.
pub fn cure_for_layer() -> String {
    match Packages::here().install("vulkan-validationlayers", "vulkan-validation-layers") {
        Some(install) => format!("{install}, or set VK_LAYER_PATH to a folder with its manifest"),
        None => {
            "the Vulkan SDK's (or a distribution's) VK_LAYER_KHRONOS_validation: set VK_LAYER_PATH to the \
                 folder with its manifest (VkLayer_khronos_validation.json)"
                .into()
        }
    }
}

/// What this machine lacks for Vulkan to start, and its cure, for a start-up error.
#[derive(Clone, Debug)]
pub struct Cure(pub String);

impl fmt::Display for Cure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {SEE_DOCTOR}", self.0)
    }
}

/// Why Vulkan did not start here (no loader, no driver, a driver that does not load), and the
/// cure for this machine. `libraries` is what the process loaded.
pub fn cure_for_vulkan(libraries: &Libraries) -> Cure {
    let packages = Packages::here();
    if let Library::Missing { .. } = libraries.loader {
        return Cure(match (&libraries.bundle, packages.install("libvulkan1", "vulkan-loader")) {
            (Some(dir), _) => format!(
                "the system has no Vulkan loader ({LOADER}) and the copy bundled with vkcuda is not in {}: \
                 reinstall vkcuda",
                dir.display()
            ),
            (None, Some(install)) => format!(
                "the system has no Vulkan loader ({LOADER}): {install}, or pip install vkcuda's wheel, which \
                 bundles one"
            ),
            (None, None) => format!(
                "the system has no Vulkan loader ({LOADER}): install your distribution's, or vkcuda's wheel \
                 (pip install), which bundles one, or name one with VKCUDA_LIBVULKAN"
            ),
        });
    }
    cure_for_driver(&Icds::here(), &Nvidia::here(), libraries, packages)
}

/// The loader is there; why it starts no driver.
fn cure_for_driver(icds: &Icds, nvidia: &Nvidia, libraries: &Libraries, packages: Packages) -> Cure {
    if let Some((name, value)) = &icds.variable {
        if icds.found.is_empty() {
            return Cure(format!(
                "{name}={value} names no driver manifest that exists: unset it or correct it"
            ));
        }
    }
    if nvidia.present() {
        return Cure(cure_for_nvidia(icds, nvidia, libraries));
    }
    let broken: Vec<String> = icds
        .found
        .iter()
        .filter_map(|i| i.loads.as_ref().err().map(|e| format!("{} ({e})", i.file.display())))
        .collect();
    if !broken.is_empty() {
        return Cure(format!("the driver manifests' libraries do not load: {}", broken.join("; ")));
    }
    let mesa = packages.install("mesa-vulkan-drivers", "mesa-vulkan-drivers");
    Cure(match mesa {
        Some(install) => {
            format!("no Vulkan driver is installed (no NVIDIA GPU here): Mesa's lavapipe: {install}")
        }
        None => {
            "no Vulkan driver is installed (no NVIDIA GPU here): install Mesa's Vulkan drivers (lavapipe)"
                .into()
        }
    })
}

/// NVIDIA's driver is here; what keeps its Vulkan driver from starting.
fn cure_for_nvidia(icds: &Icds, nvidia: &Nvidia, libraries: &Libraries) -> String {
    if nvidia.graphics_left_out() || nvidia.vulkan_library.is_err() {
        let caps = nvidia.capabilities.as_deref().unwrap_or("not set");
        return format!(
            "NVIDIA's Vulkan driver ({NVIDIA_VULKAN}) is not in this container ({CAPABILITIES}={caps}): start \
             the container with {CAPABILITIES_CURE}; nothing inside it can add the driver's graphics libraries"
        );
    }
    if !icds.found.iter().any(Icd::is_nvidia) {
        return if Path::new(NVIDIA_MOUNTED_ICD).is_file() {
            format!("NVIDIA's driver manifest is at {NVIDIA_MOUNTED_ICD}, where the loader does not look: export VK_DRIVER_FILES={NVIDIA_MOUNTED_ICD}")
        } else {
            format!(
                "no driver manifest names NVIDIA's Vulkan driver: write /etc/vulkan/icd.d/nvidia_icd.json \
                 ({{\"file_format_version\": \"1.0.1\", \"ICD\": {{\"library_path\": \"{NVIDIA_VULKAN}\", \
                 \"api_version\": \"1.3\"}}}}) or point VK_DRIVER_FILES at one"
            )
        };
    }
    let missing: Vec<&str> = libraries.glvnd.iter().filter(|(_, l)| !l.found()).map(|(n, _)| *n).collect();
    if !missing.is_empty() {
        let from = if libraries.bundle.is_some() {
            "reinstall vkcuda (its wheel bundles them)"
        } else {
            "install glvnd (libegl1 and libglvnd0 on Debian/Ubuntu), or vkcuda's wheel, which bundles them"
        };
        return format!("NVIDIA's Vulkan driver needs glvnd's {}, missing here: {from}", missing.join(", "));
    }
    if !nvidia.egl_vendors.iter().any(|v| v.to_string_lossy().contains("nvidia")) {
        return if Path::new(NVIDIA_MOUNTED_EGL_VENDOR).is_file() {
            format!(
                "NVIDIA's EGL vendor file is at {NVIDIA_MOUNTED_EGL_VENDOR}, where glvnd does not look: export \
                 __EGL_VENDOR_LIBRARY_FILENAMES={NVIDIA_MOUNTED_EGL_VENDOR}"
            )
        } else {
            format!(
                "glvnd finds no NVIDIA EGL vendor file (10_nvidia.json) in {EGL_VENDOR_DIRS}: NVIDIA's Vulkan driver \
                 needs it; {CAPABILITIES_CURE} mounts it in a container"
            )
        };
    }
    let bundled = matches!(libraries.loader, Library::Found { origin: Origin::Bundled, .. });
    format!(
        "NVIDIA's Vulkan driver is here but did not start (VK_LOADER_DEBUG=error,driver says why){}",
        if bundled {
            format!("; the loader in use is vkcuda's bundled one ({BUNDLE_DIR}/{LOADER})")
        } else {
            String::new()
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn libraries(loader: Library) -> Libraries {
        let system = || Library::Found { origin: Origin::System, path: "/usr/lib/x".into() };
        Libraries {
            loader,
            glvnd: vec![("libGLdispatch.so.0", system()), ("libEGL.so.1", system())],
            bundle: None,
        }
    }

    fn nvidia(capabilities: Option<&str>, vulkan: bool) -> Nvidia {
        Nvidia {
            kernel_driver: Some("NVRM version: 580".into()),
            vulkan_library: if vulkan { Ok(()) } else { Err("libGLX_nvidia.so.0: cannot open".into()) },
            capabilities: capabilities.map(str::to_owned),
            egl_vendors: vec!["/usr/share/glvnd/egl_vendor.d/10_nvidia.json".into()],
        }
    }

    fn icds(found: Vec<Icd>) -> Icds {
        Icds { variable: None, searched: default_search(), found }
    }

    fn nvidia_icd() -> Icd {
        Icd {
            file: "/usr/share/vulkan/icd.d/nvidia_icd.json".into(),
            library: Ok(NVIDIA_VULKAN.into()),
            loads: Ok(()),
        }
    }

    #[test]
    fn a_container_without_graphics_is_told_to_start_with_it() {
        let cure = cure_for_driver(
            &icds(vec![]),
            &nvidia(Some("compute,utility"), false),
            &libraries(Library::Missing { why: String::new() }),
            Packages::None,
        );
        assert!(cure.0.contains("NVIDIA_DRIVER_CAPABILITIES=compute,utility"), "{cure}");
        assert!(cure.0.contains(CAPABILITIES_CURE), "{cure}");
        assert!(cure.to_string().ends_with(SEE_DOCTOR), "{cure}");
    }

    #[test]
    fn missing_glvnd_is_named_with_the_wheel_as_its_cure() {
        let mut libs =
            libraries(Library::Found { origin: Origin::System, path: "/usr/lib/libvulkan.so.1".into() });
        libs.glvnd[1].1 = Library::Missing { why: "libEGL.so.1: cannot open".into() };
        let cure =
            cure_for_driver(&icds(vec![nvidia_icd()]), &nvidia(Some("all"), true), &libs, Packages::Apt);
        assert!(cure.0.contains("libEGL.so.1") && cure.0.contains("wheel"), "{cure}");
        assert!(!cure.0.contains("libGLdispatch"), "{cure}");
    }

    #[test]
    fn no_driver_without_nvidia_names_mesa_and_apt_only_where_there_is_apt() {
        let libs = libraries(Library::Found { origin: Origin::System, path: "/x".into() });
        let no_gpu = Nvidia {
            kernel_driver: None,
            vulkan_library: Err(String::new()),
            capabilities: None,
            egl_vendors: vec![],
        };
        let apt = cure_for_driver(&icds(vec![]), &no_gpu, &libs, Packages::Apt);
        assert!(apt.0.contains("apt install mesa-vulkan-drivers"), "{apt}");
        let none = cure_for_driver(&icds(vec![]), &no_gpu, &libs, Packages::None);
        assert!(!none.0.contains("apt"), "{none}");
    }

    #[test]
    fn no_nvidia_egl_vendor_file_is_named() {
        let libs = libraries(Library::Found { origin: Origin::System, path: "/x".into() });
        let mut gpu = nvidia(Some("all"), true);
        gpu.egl_vendors = vec!["/usr/share/glvnd/egl_vendor.d/50_mesa.json".into()];
        let cure = cure_for_driver(&icds(vec![nvidia_icd()]), &gpu, &libs, Packages::Apt);
        assert!(cure.0.contains("no NVIDIA EGL vendor file (10_nvidia.json)"), "{cure}");
    }

    #[test]
    fn a_variable_that_names_nothing_is_said() {
        let libs = libraries(Library::Found { origin: Origin::System, path: "/x".into() });
        let set = Icds {
            variable: Some(("VK_DRIVER_FILES", "/nonexistent.json".into())),
            searched: vec![],
            found: vec![],
        };
        let cure = cure_for_driver(&set, &nvidia(None, true), &libs, Packages::Apt);
        assert!(cure.0.contains("VK_DRIVER_FILES=/nonexistent.json"), "{cure}");
    }

    #[test]
    fn graphics_is_left_out_only_where_the_capabilities_say_so() {
        assert!(nvidia(Some("compute,utility"), true).graphics_left_out());
        assert!(!nvidia(Some("compute, graphics"), true).graphics_left_out());
        assert!(!nvidia(Some("all"), true).graphics_left_out());
        assert!(!nvidia(None, true).graphics_left_out());
    }

    #[test]
    fn a_manifest_folder_is_read_in_name_order() {
        let dir = std::env::temp_dir().join(format!("vkcuda-icd-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("b.json"), r#"{"ICD": {"library_path": "libvkcuda-none.so"}}"#).unwrap();
        std::fs::write(dir.join("a.json"), r#"{"ICD": {}}"#).unwrap();
        std::fs::write(dir.join("c.txt"), "").unwrap();
        let found: Vec<Icd> = manifests(&dir).into_iter().map(read_icd).collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found.len(), 2);
        assert!(found[0].library.is_err());
        assert_eq!(found[1].library.as_deref(), Ok("libvkcuda-none.so"));
        assert!(found[1].loads.is_err());
    }
}
