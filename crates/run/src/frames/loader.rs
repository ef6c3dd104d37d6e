//! Which Vulkan loader, and which of glvnd's libraries, the process uses:
//! the system's first, always; where the system has none, the copies bundled
//! with vkcuda's wheel (the folder [`BUNDLE_DIR`] beside the Python module or
//! the CLI binary that holds this code; `scripts/bundle-libs.sh` builds them).
//!
//! Why glvnd: NVIDIA's Vulkan driver (`libGLX_nvidia.so.0`) opens glvnd's
//! `libEGL.so.1`, which needs `libGLdispatch.so.0`, by name inside
//! `vkCreateInstance`, and returns no `vkCreateInstance` without it (the
//! loader then says "Could not get 'vkCreateInstance' via
//! 'vk_icdGetInstanceProcAddr'"). A CUDA container mounts the driver but
//! has neither, nor a loader (docs/results/2026-12-02-node). Loaded here
//! with `RTLD_GLOBAL` before the loader, the driver's later `dlopen` by name
//! finds them already in the process.
//!
//! Decided once per process ([`libraries`]): a library, once loaded, stays.

use std::ffi::{c_void, CStr, CString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The Vulkan loader's name, as the dynamic linker finds it.
pub const LOADER: &str = "libvulkan.so.1";
/// glvnd's libraries NVIDIA's Vulkan driver needs, in load order (libEGL needs the dispatch).
pub const GLVND: [&str; 2] = ["libGLdispatch.so.0", "libEGL.so.1"];
/// The folder of the bundled libraries, beside the module or binary holding this code
/// (the wheel's `vkcuda/_libs`; its CLI is `vkcuda/_bin/vkcuda`, hence also `../_libs`).
pub const BUNDLE_DIR: &str = "_libs";
/// The environment variable that names a Vulkan loader to use instead (its path).
pub const LOADER_VARIABLE: &str = "VKCUDA_LIBVULKAN";

/// Where a library the process uses comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The one [`LOADER_VARIABLE`] names.
    Chosen,
    /// The system's: the dynamic linker found it by name.
    System,
    /// The copy bundled with vkcuda, where the system has none.
    Bundled,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::Chosen => "named by VKCUDA_LIBVULKAN",
            Origin::System => "the system's",
            Origin::Bundled => "bundled with vkcuda",
        })
    }
}

/// One library: where it was found, or why it could not be loaded.
#[derive(Clone, Debug)]
pub enum Library {
    /// Loaded (or, for [`Origin::Chosen`], to be loaded by the instance) from `path`.
    Found {
        /// Whose copy it is.
        origin: Origin,
        /// The file (as the dynamic linker resolved it, where it says).
        path: PathBuf,
    },
    /// Neither the system nor the bundle has it.
    Missing {
        /// What the dynamic linker said for the system's.
        why: String,
    },
}

impl Library {
    /// Whether the process has it.
    pub fn found(&self) -> bool {
        matches!(self, Library::Found { .. })
    }
}

impl fmt::Display for Library {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Library::Found { origin, path } => write!(f, "{origin}: {}", path.display()),
            Library::Missing { why } => write!(f, "missing ({why})"),
        }
    }
}

/// The libraries this process starts Vulkan with.
#[derive(Clone, Debug)]
pub struct Libraries {
    /// The Vulkan loader.
    pub loader: Library,
    /// glvnd's libraries ([`GLVND`], in that order).
    pub glvnd: Vec<(&'static str, Library)>,
    /// The bundle's folder, where this build has one.
    pub bundle: Option<PathBuf>,
}

impl Libraries {
    /// The loader's path for `Instance::with_loader`: `None` for the system's (loaded by name).
    pub fn loader_path(&self) -> Option<&Path> {
        match &self.loader {
            Library::Found { origin: Origin::System, .. } | Library::Missing { .. } => None,
            Library::Found { path, .. } => Some(path),
        }
    }

    /// The lines saying which bundled libraries are in use (none where the system had them all).
    pub fn bundled_notice(&self) -> Vec<String> {
        let mut lines = Vec::new();
        if let Library::Found { origin: Origin::Bundled, path } = &self.loader {
            lines.push(format!(
                "the system has no Vulkan loader ({LOADER}): using the one bundled with vkcuda ({})",
                path.display()
            ));
        }
        let glvnd: Vec<&str> = self
            .glvnd
            .iter()
            .filter(|(_, l)| matches!(l, Library::Found { origin: Origin::Bundled, .. }))
            .map(|(name, _)| *name)
            .collect();
        if !glvnd.is_empty() {
            lines.push(format!(
                "the system has no {} (glvnd, which NVIDIA's Vulkan driver opens): using the bundled copies",
                glvnd.join(", ")
            ));
        }
        lines
    }
}

/// The process's libraries, found (and loaded) on the first call; the
/// bundled ones in use are said once, on standard error.
pub fn libraries() -> &'static Libraries {
    static LIBRARIES: OnceLock<Libraries> = OnceLock::new();
    LIBRARIES.get_or_init(|| {
        let found = find(std::env::var_os(LOADER_VARIABLE).map(PathBuf::from));
        for line in found.bundled_notice() {
            eprintln!("vkcuda: {line}");
        }
        found
    })
}

/// Loads glvnd's libraries and finds the loader: the chosen one, else the system's, else the bundle's.
fn find(chosen: Option<PathBuf>) -> Libraries {
    let bundle = bundle_dir();
    // glvnd first: the driver looks for it when the instance is made, not when the loader loads.
    let glvnd = GLVND.iter().map(|name| (*name, load_global(name, bundle.as_deref()))).collect();
    let loader = match chosen {
        Some(path) => Library::Found { origin: Origin::Chosen, path },
        None => load_global(LOADER, bundle.as_deref()),
    };
    Libraries { loader, glvnd, bundle }
}

/// `name` from the system, else from `bundle`, loaded for the whole process.
fn load_global(name: &str, bundle: Option<&Path>) -> Library {
    let system = match open(name) {
        Ok(path) => return Library::Found { origin: Origin::System, path },
        Err(why) => why,
    };
    let Some(file) = bundle.map(|dir| dir.join(name)).filter(|f| f.is_file()) else {
        return Library::Missing { why: system };
    };
    match open(&file.to_string_lossy()) {
        Ok(path) => Library::Found { origin: Origin::Bundled, path },
        Err(why) => Library::Missing { why: format!("{system}; the bundled copy: {why}") },
    }
}

/// `dlopen`s `name` (a bare name or a path) for good, with `RTLD_GLOBAL`; the file it resolved to.
fn open(name: &str) -> Result<PathBuf, String> {
    let c = CString::new(name).map_err(|_| format!("{name:?} holds a NUL"))?;
    // SAFETY: `c` is a NUL-terminated string; loading runs the library's initialisers, which
    // is what using it means (the loader and glvnd are made to be loaded this way).
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    if handle.is_null() {
        return Err(last_dl_error());
    }
    Ok(resolved_path(handle).unwrap_or_else(|| PathBuf::from(name)))
}

/// The file a `dlopen` handle was loaded from.
fn resolved_path(handle: *mut c_void) -> Option<PathBuf> {
    let mut map: *mut libc::c_void = std::ptr::null_mut();
    // SAFETY: `handle` is a live handle from dlopen; RTLD_DI_LINKMAP writes a `struct link_map *`.
    let r = unsafe { libc::dlinfo(handle, libc::RTLD_DI_LINKMAP, (&mut map as *mut *mut c_void).cast()) };
    if r != 0 || map.is_null() {
        return None;
    }
    // `struct link_map` starts with `l_addr` (an address), then `l_name` (a C string).
    let map = map.cast::<LinkMap>();
    // SAFETY: dlinfo gave a live link map of a loaded object (never unloaded: we keep it).
    let name = unsafe { (*map).l_name };
    // SAFETY: l_name is a NUL-terminated string the dynamic linker owns for the object's life.
    let text = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
    (!text.is_empty()).then(|| PathBuf::from(text))
}

/// The head of glibc's `struct link_map` (`<link.h>`): the fields read here.
#[repr(C)]
struct LinkMap {
    l_addr: usize,
    l_name: *const libc::c_char,
}

/// What `dlerror` says now (right after the `dlopen` that failed, on the same thread).
pub(crate) fn last_dl_error() -> String {
    // SAFETY: dlerror returns NULL or a string valid until the next dl* call on this thread.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        return "not found".into();
    }
    // SAFETY: non-null, NUL-terminated, read before any other dl* call.
    unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
}

/// The bundle's folder: [`BUNDLE_DIR`] beside the file holding this code, or one folder up.
pub fn bundle_dir() -> Option<PathBuf> {
    let me = this_file()?;
    let dir = me.parent()?;
    let found = [dir.join(BUNDLE_DIR), dir.join("..").join(BUNDLE_DIR)].into_iter().find(|d| d.is_dir())?;
    // Said in messages: `.../vkcuda/_libs`, not `.../vkcuda/_bin/../_libs`.
    Some(std::fs::canonicalize(&found).unwrap_or(found))
}

/// The module or binary this code was loaded from (`dladdr` of a function of its own).
fn this_file() -> Option<PathBuf> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    let here = this_file as *const c_void;
    // SAFETY: `here` is an address in this object; dladdr fills `info` on success.
    let r = unsafe { libc::dladdr(here, info.as_mut_ptr()) };
    if r == 0 {
        return std::env::current_exe().ok();
    }
    // SAFETY: dladdr returned non-zero, so it filled `info`.
    let fname = unsafe { info.assume_init() }.dli_fname;
    if fname.is_null() {
        return std::env::current_exe().ok();
    }
    // SAFETY: dli_fname is a NUL-terminated path the dynamic linker owns.
    let path = PathBuf::from(unsafe { CStr::from_ptr(fname) }.to_string_lossy().into_owned());
    // A binary's own entry can be its name as started (relative, or bare): the kernel's path wins.
    if path.is_absolute() {
        Some(path)
    } else {
        std::env::current_exe().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_library_nobody_has_is_missing_with_the_linkers_words() {
        let dir = std::env::temp_dir();
        let lib = load_global("libvkcuda-no-such-library.so.9", Some(&dir));
        match lib {
            Library::Missing { why } => assert!(why.contains("libvkcuda-no-such-library"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_bundle_is_used_where_the_system_has_none() {
        // A real shared object under a name the system does not have: libc, copied.
        let bundle = std::env::temp_dir().join(format!("vkcuda-bundle-{}", std::process::id()));
        std::fs::create_dir_all(&bundle).unwrap();
        let libc_path = open("libc.so.6").expect("libc is loaded");
        std::fs::copy(&libc_path, bundle.join("libvkcuda-bundled-test.so.1")).unwrap();
        let lib = load_global("libvkcuda-bundled-test.so.1", Some(&bundle));
        std::fs::remove_dir_all(&bundle).unwrap();
        match lib {
            Library::Found { origin: Origin::Bundled, path } => {
                assert!(path.ends_with("libvkcuda-bundled-test.so.1"), "{path:?}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_systems_copy_comes_first() {
        let lib = load_global("libc.so.6", Some(Path::new("/nonexistent")));
        assert!(matches!(lib, Library::Found { origin: Origin::System, .. }), "{lib:?}");
    }

    #[test]
    fn a_chosen_loader_is_taken_as_named_and_said() {
        let libs = find(Some(PathBuf::from("/opt/my/libvulkan.so.1")));
        assert_eq!(libs.loader_path(), Some(Path::new("/opt/my/libvulkan.so.1")));
        assert!(libs.bundled_notice().iter().all(|l| !l.contains("Vulkan loader")));
    }

    #[test]
    fn the_notice_names_each_bundled_library() {
        let bundled = |p: &str| Library::Found { origin: Origin::Bundled, path: PathBuf::from(p) };
        let libs = Libraries {
            loader: bundled("/w/_libs/libvulkan.so.1"),
            glvnd: vec![
                ("libGLdispatch.so.0", bundled("/w/_libs/libGLdispatch.so.0")),
                ("libEGL.so.1", bundled("/w/_libs/libEGL.so.1")),
            ],
            bundle: Some(PathBuf::from("/w/_libs")),
        };
        let notice = libs.bundled_notice().join("\n");
        assert!(notice.contains("using the one bundled with vkcuda (/w/_libs/libvulkan.so.1)"), "{notice}");
        assert!(notice.contains("libGLdispatch.so.0, libEGL.so.1"), "{notice}");
        assert_eq!(libs.loader_path(), Some(Path::new("/w/_libs/libvulkan.so.1")));
    }
}
