//! The scene kernels: `shaders/scenes.cu`, embedded in the binary, compiled
//! by NVRTC for the device's architecture at run time, PTX cached on disk.
//!
//! Cache key: the source, the contract header, the architecture, NVRTC's version and the options.
//! Each entry carries a checksum of its PTX; an entry that fails it, or that
//! the driver refuses, is compiled again and replaced (written atomically).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use cudarc::driver::{
    sys, CudaContext, CudaFunction, CudaModule, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;

use crate::error::usage::{Field, Message};
use crate::kernel::nvrtc;
use crate::scene::{FrameArgs, Scene, SceneKind};
use vkcuda::interop::{CudaTarget, LinearFrame};
use vkcuda::Format;

/// The kernels' source.
pub const SOURCE: &str = include_str!("../../../../shaders/scenes.cu");

/// FNV-1a, 64-bit: a stable hash for cache keys and checksums.
pub fn fnv1a(parts: &[&[u8]]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for part in parts {
        for &b in *part {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        h = (h ^ 0xff).wrapping_mul(0x0000_0100_0000_01b3); // part separator
    }
    h
}

const HEADER: &str = "// vkcuda-ptx checksum ";

/// Where the PTX cache lives by default.
pub fn default_cache_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("VKCUDA_CACHE_DIR") {
        return d.into();
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("vkcuda")
}

/// A kernel's CUDA source, and the name it goes by.
#[derive(Clone, Copy, Debug)]
pub struct KernelSource<'a> {
    /// Its file's name (for NVRTC, the log and the cache entry's name).
    pub name: &'a str,
    /// Its text.
    pub text: &'a str,
}

/// `source` (the file `shaders/{source.name}`) compiled by NVRTC for
/// `ctx`'s device and loaded, through the one PTX cache ([`cached`]).
pub fn cached_module(
    ctx: &Arc<CudaContext>,
    cache_dir: &Path,
    source: KernelSource<'_>,
) -> Result<Arc<CudaModule>> {
    let KernelSource { name, text: source } = source;
    let compile = |arch: &str| -> Result<String> {
        let options = [format!("--gpu-architecture={arch}")];
        let version = nvrtc::version()?;
        Ok(nvrtc::compile(source, name, &options).map_err(|e| anyhow!("NVRTC {version} ({arch}): {e}"))?.ptx)
    };
    let label = format!("shaders/{name}");
    cached(ctx, cache_dir, KernelSource { name: &label, text: source }, &compile)
}

/// The one PTX cache, of the built-in kernels (the scenes, the feed's
/// packing kernel) and your own ([`crate::kernel::user`]): `source` (its
/// name in the log) for `ctx`'s device, loaded from
/// `cache_dir` when it holds an entry of the same source, kernel contract
/// (`shaders/vkcuda.h`), architecture and NVRTC version that the driver
/// loads; else `compile(arch)` (`arch`: `sm_XY`) makes the PTX, which is
/// kept. An entry that is corrupt, or that the driver refuses (a driver
/// older than the NVRTC that wrote it), is compiled again.
pub fn cached(
    ctx: &Arc<CudaContext>,
    cache_dir: &Path,
    source: KernelSource<'_>,
    compile: &dyn Fn(&str) -> Result<String>,
) -> Result<Arc<CudaModule>> {
    let KernelSource { name: label, text: source } = source;
    let version = nvrtc::version()?;
    let (major, minor) = ctx.compute_capability().context("reading the compute capability")?;
    let arch = format!("sm_{major}{minor}");
    let key = fnv1a(&[source.as_bytes(), nvrtc::HEADER.as_bytes(), arch.as_bytes(), version.as_bytes()]);
    let stem = Path::new(label).file_stem().map_or("kernel".into(), |s| s.to_string_lossy());
    let path = cache_dir.join(format!("{stem}-{key:016x}.ptx"));
    if let Some(ptx) = read_cached(&path) {
        match ctx.load_module(Ptx::from_src(ptx)) {
            Ok(module) => return Ok(module),
            Err(e) => {
                log::warn!("cached PTX {} refused by the driver ({e}); compiling again", path.display())
            }
        }
    } else if path.exists() {
        log::warn!("cached PTX {} is corrupt; compiling again", path.display());
    }
    let started = std::time::Instant::now();
    let ptx = compile(&arch)?;
    // Through `log`: the CLI's logger prints it ("vkcuda: compiled shaders/scenes.cu ..."); a
    // Python viewer, which installs none, stays quiet.
    log::info!("compiled {label} with NVRTC {version} for {arch} in {:.0?}", started.elapsed());
    if let Err(e) = write_cached(&path, &ptx) {
        log::warn!("cannot cache PTX in {}: {e} (continuing)", path.display());
    }
    ctx.load_module(Ptx::from_src(ptx)).with_context(|| format!("loading the compiled PTX of {label}"))
}

/// Reads a cache entry; `None` if it is missing or fails its checksum.
pub fn read_cached(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let (first, ptx) = text.split_once('\n')?;
    let sum = u64::from_str_radix(first.strip_prefix(HEADER)?, 16).ok()?;
    (fnv1a(&[ptx.as_bytes()]) == sum).then(|| ptx.to_string())
}

/// Writes a cache entry atomically (temporary file, then rename).
pub fn write_cached(path: &Path, ptx: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, format!("{HEADER}{:016x}\n{ptx}", fnv1a(&[ptx.as_bytes()])))?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    Ok(())
}

/// Where a kernel writes its frame, and in which format: the `Out` struct
/// of `shaders/scenes.cu`, passed by value (same fields, same C layout).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Out {
    surface: u64,
    pointer: u64,
    pitch: u64,
    format: i32,
    pad: i32,
}

// SAFETY: plain old data of the C struct's layout (four 8-byte fields' worth, no pointers Rust owns).
unsafe impl DeviceRepr for Out {}

impl Out {
    /// What the core hands the producer for a frame: a surface (array) or a pointer and pitch (buffer).
    pub fn shared(target: CudaTarget, format: Format) -> Self {
        match target {
            CudaTarget::Array { surface, .. } => Self::new(surface, 0, 0, format),
            CudaTarget::Buffer(LinearFrame { pointer, pitch, .. }) => Self::new(0, pointer, pitch, format),
        }
    }

    /// Packed rows of `format` at `pointer` in device memory `width` pixels wide (the staging baseline).
    pub fn linear(pointer: sys::CUdeviceptr, width: u32, format: Format) -> Self {
        Self::new(0, pointer, u64::from(width) * u64::from(format.bytes_per_pixel()), format)
    }

    fn new(surface: u64, pointer: u64, pitch: u64, format: Format) -> Self {
        let format = Format::ALL.iter().position(|f| *f == format).unwrap_or(0) as i32;
        Self { surface, pointer, pitch, format, pad: 0 }
    }
}

/// The loaded scene kernels: `[gradient, julia]`, and the fault kernel.
pub struct SceneKernels {
    _module: Arc<CudaModule>,
    scenes: [CudaFunction; 2],
    fault: CudaFunction,
}

impl SceneKernels {
    /// Compiles (or takes from `cache_dir`) and loads the kernels for `ctx`'s device.
    pub fn load(ctx: &Arc<CudaContext>, cache_dir: &Path) -> Result<Self> {
        nvrtc::version().map_err(|e| {
            anyhow::Error::new(Message::new().text(format!("{e:#}, or run ")).field(Field::Producer, "cpu"))
        })?;
        Self::from_module(cached_module(ctx, cache_dir, KernelSource { name: "scenes.cu", text: SOURCE })?)
    }

    fn from_module(module: Arc<CudaModule>) -> Result<Self> {
        let f = |k: SceneKind| module.load_function(k.kernel_name());
        Ok(Self {
            scenes: [f(SceneKind::Gradient)?, f(SceneKind::Julia)?],
            fault: module.load_function("fault")?,
            _module: module,
        })
    }

    /// Test only: enqueues a kernel that traps (the stream and context are lost after it).
    pub fn launch_fault(&self, stream: &CudaStream) -> Result<()> {
        let cfg = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (1, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the kernel takes no arguments; it traps on purpose.
        unsafe { stream.launch_builder(&self.fault).launch(cfg) }.context("launching the fault kernel")?;
        Ok(())
    }

    /// Enqueues one frame of `scene` into `out`.
    pub fn launch(&self, stream: &CudaStream, scene: &Scene, args: &FrameArgs, out: Out) -> Result<()> {
        let (w, h) = (scene.width as i32, scene.height as i32);
        let cfg = LaunchConfig {
            grid_dim: (scene.width.div_ceil(16), scene.height.div_ceil(16), 1),
            block_dim: (16, 16, 1),
            shared_mem_bytes: 0,
        };
        let which = match scene.kind {
            SceneKind::Gradient => 0,
            SceneKind::Julia => 1,
        };
        let mut b = stream.launch_builder(&self.scenes[which]);
        b.arg(&out).arg(&w).arg(&h).arg(&args.tick);
        if scene.kind == SceneKind::Julia {
            b.arg(&args.cr).arg(&args.ci).arg(&args.step).arg(&scene.cost);
        }
        // SAFETY: the arguments match the kernel's signature in shaders/scenes.cu (`Out` has the
        // C struct's layout), and the target covers w × h pixels of its format.
        unsafe { b.launch(cfg) }.with_context(|| format!("launching the {} kernel", scene.kind))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_round_trip_and_corruption() {
        let dir = std::env::temp_dir().join(format!("vkcuda-cache-test-{}", std::process::id()));
        let path = dir.join("x.ptx");
        write_cached(&path, ".version 8.0\n.target sm_90\n").unwrap();
        assert_eq!(read_cached(&path).as_deref(), Some(".version 8.0\n.target sm_90\n"));
        // Flip one byte of the PTX: the checksum must catch it.
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 2;
        bytes[last] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        assert_eq!(read_cached(&path), None);
        std::fs::write(&path, "garbage").unwrap();
        assert_eq!(read_cached(&path), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_scenes_compile_against_the_contract() {
        if let Err(e) = nvrtc::load() {
            println!("skipped: {e}");
            return;
        }
        let virtual_arch = ["--gpu-architecture=compute_75".to_string()];
        let program = nvrtc::compile(SOURCE, "scenes.cu", &virtual_arch).unwrap();
        assert!(program.cubin.is_none(), "a virtual architecture has no machine code");
        let real = nvrtc::compile(SOURCE, "scenes.cu", &["--gpu-architecture=sm_75".to_string()]).unwrap();
        assert!(real.cubin.is_some_and(|c| c.starts_with(b"\x7fELF")), "a real one has a CUBIN (ELF)");
        let ptx = program.ptx;
        // `Out` (vk_target) is 32 bytes, as the Rust mirror.
        assert_eq!(std::mem::size_of::<Out>(), 32);
        assert_eq!(nvrtc::entry_params(&ptx, "gradient"), Some(vec![32, 4, 4, 4]));
        assert_eq!(nvrtc::entry_params(&ptx, "julia"), Some(vec![32, 4, 4, 4, 4, 4, 4, 4]));
        assert_eq!(nvrtc::entry_params(&ptx, "fault"), Some(vec![]));
    }

    #[test]
    fn keys_depend_on_every_part() {
        let a = fnv1a(&[b"src", b"sm_90", b"13.0"]);
        assert_ne!(a, fnv1a(&[b"src", b"sm_80", b"13.0"]));
        assert_ne!(a, fnv1a(&[b"src", b"sm_90", b"12.8"]));
        assert_ne!(fnv1a(&[b"ab", b"c"]), fnv1a(&[b"a", b"bc"]));
    }
}
