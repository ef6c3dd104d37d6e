//! Your own kernel (`--kernel FILE`): one `extern "C" __global__` entry
//! point taking a `vk_frame` by value (`shaders/vkcuda.h`), compiled by NVRTC
//! for the device, launched once per frame in place of the built-in scene.
//! `vkcuda check-kernel FILE` compiles it against the same contract without a
//! GPU (a virtual architecture: PTX only).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;

use crate::base::size::Size;
use crate::kernel::nvrtc::{self, CompileError, Program};
use crate::scene::director::Pointer;
use crate::scene::kernels::{self, KernelSource, Out};

/// The entry point's name unless `--entry` says otherwise.
pub const DEFAULT_ENTRY: &str = "render";

/// The architecture `check-kernel` compiles for unless `--arch` says
/// otherwise: virtual (PTX), so no GPU is needed.
pub const DEFAULT_CHECK_ARCH: &str = "compute_75";

/// The most `--param` values a kernel gets.
pub const PARAMS: usize = 8;

/// What a user kernel is, as the command line names it.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KernelSpec {
    /// The source file.
    pub file: PathBuf,
    /// The entry point.
    pub entry: String,
    /// `vk_frame::params`.
    pub params: [f32; PARAMS],
    /// Threads per block (x, y).
    pub block: (u32, u32),
    /// Time runs on the wall clock (the viewer), not at a fixed 60 frames per second.
    pub live: bool,
}

/// `vk_frame` of `shaders/vkcuda.h`: same fields, same C layout.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct KernelFrame {
    target: Out,
    width: i32,
    height: i32,
    index: u32,
    time: f32,
    dt: f32,
    mouse_x: f32,
    mouse_y: f32,
    buttons: u32,
    params: [f32; PARAMS],
}

// SAFETY: plain old data of the C struct's layout (no pointers Rust owns).
unsafe impl DeviceRepr for KernelFrame {}

/// The moment a frame shows.
#[derive(Clone, Copy, Debug)]
pub struct FrameTime {
    /// Seconds since the first frame.
    pub time: f32,
    /// Seconds since the previous frame.
    pub dt: f32,
}

impl FrameTime {
    /// Headless and bench: a fixed 60 frames per second, so dumps repeat exactly.
    pub fn fixed(index: u64) -> Self {
        Self { time: index as f32 / 60.0, dt: 1.0 / 60.0 }
    }
}

/// A kernel's clock: fixed steps, or the wall clock from the first frame.
#[derive(Debug)]
pub struct KernelClock {
    live: bool,
    start: Option<std::time::Instant>,
    last: f32,
}

impl KernelClock {
    /// `live`: the wall clock (the viewer).
    pub fn new(live: bool) -> Self {
        Self { live, start: None, last: 0.0 }
    }

    /// The time of frame `index`.
    pub fn at(&mut self, index: u64) -> FrameTime {
        if !self.live {
            return FrameTime::fixed(index);
        }
        let time = self.start.get_or_insert_with(std::time::Instant::now).elapsed().as_secs_f32();
        let dt = if index == 0 { 0.0 } else { time - self.last };
        self.last = time;
        FrameTime { time, dt }
    }
}

/// A version of the kernel, loaded, not yet running.
pub struct Version {
    module: Arc<CudaModule>,
    function: CudaFunction,
}

/// A loaded user kernel.
pub struct UserKernel {
    module: Arc<CudaModule>,
    function: CudaFunction,
    spec: KernelSpec,
    /// Modules swapped out, each with an event recorded on the stream after
    /// its last launch: unloading a module whose kernel may still run is
    /// undefined, so each is unloaded once its event has completed.
    retired: VecDeque<(Arc<CudaModule>, CudaEvent)>,
    /// `sm_XY` of the device.
    pub arch: String,
}

impl UserKernel {
    /// Compiles `spec`'s file for `ctx`'s device (or takes `program`,
    /// compiled for it before) and loads its entry point. A file that
    /// includes nothing but `vkcuda.h` goes through the one PTX cache in
    /// `cache_dir` ([`kernels::cached`]); one that includes other files is
    /// compiled every time (the cache's key could not see them change).
    pub fn load(
        ctx: &Arc<CudaContext>,
        spec: &KernelSpec,
        program: Option<Program>,
        cache_dir: &Path,
    ) -> Result<Self> {
        let (major, minor) = ctx.compute_capability().context("reading the compute capability")?;
        let arch = format!("sm_{major}{minor}");
        let Version { module, function } = match program {
            Some(program) => Self::module(ctx, &spec.entry, program)?,
            None => {
                let source = nvrtc::read_source(&spec.file)?;
                let compile = |arch: &str| Ok(compile_source(&spec.file, &source, &spec.entry, arch)?.ptx);
                let label = spec.file.display().to_string();
                match cacheable(&source) {
                    true => {
                        let source = KernelSource { name: &label, text: &source };
                        let module = kernels::cached(ctx, cache_dir, source, &compile)?;
                        let function =
                            module.load_function(&spec.entry).context("finding the kernel's entry point")?;
                        Version { module, function }
                    }
                    false => {
                        let started = std::time::Instant::now();
                        let program = compile_source(&spec.file, &source, &spec.entry, &arch)?;
                        log::info!("compiled {label} for {arch} in {:.0?}", started.elapsed());
                        Self::module(ctx, &spec.entry, program)?
                    }
                }
            }
        };
        Ok(Self { module, function, spec: spec.clone(), retired: VecDeque::new(), arch })
    }

    /// Loads a new version of the kernel, to be swapped in by [`UserKernel::swap`].
    pub fn load_version(&self, ctx: &Arc<CudaContext>, program: Program) -> Result<Version> {
        Self::module(ctx, &self.spec.entry, program)
    }

    /// Swaps in a loaded version (between frames: the launches already on
    /// `stream` keep the old one, which is unloaded after them).
    pub fn swap(&mut self, version: Version, stream: &CudaStream) -> Result<()> {
        let after = stream.context().new_event(None).context("cuEventCreate (retiring a kernel version)")?;
        after.record(stream).context("cuEventRecord (retiring a kernel version)")?;
        self.retired.push_back((std::mem::replace(&mut self.module, version.module), after));
        self.function = version.function;
        Ok(())
    }

    /// Unloads the swapped-out versions whose last launch has ended; returns
    /// how many stay loaded. A faulted stream's events never complete: those
    /// versions stay until the producer ends.
    pub fn unload_finished(&mut self) -> usize {
        while self.retired.front().is_some_and(|(_, after)| after.is_complete()) {
            self.retired.pop_front();
        }
        self.retired.len()
    }

    /// Loads the machine code when there is some (a PTX of a compile for a
    /// virtual architecture goes through the driver's PTX compiler).
    fn module(ctx: &Arc<CudaContext>, entry: &str, program: Program) -> Result<Version> {
        let image = match program.cubin {
            Some(cubin) => Ptx::from_binary(cubin),
            None => Ptx::from_src(program.ptx),
        };
        let module = ctx.load_module(image).context("loading the kernel")?;
        let function = module.load_function(entry).context("finding the kernel's entry point")?;
        Ok(Version { module, function })
    }

    /// Whether its time runs on the wall clock (the viewer).
    pub fn live(&self) -> bool {
        self.spec.live
    }

    /// Enqueues frame `index` of `size` into `target`, at time `at`, with the
    /// pointer where `pointer` says.
    pub fn launch(
        &self,
        stream: &CudaStream,
        target: Out,
        size: Size,
        index: u64,
        at: FrameTime,
        pointer: Pointer,
    ) -> Result<()> {
        let Size { width, height } = size;
        // Frame pixels, at the pixel's centre as VK_PIXEL's x + 0.5 would be; -1 off the frame.
        let (mouse_x, mouse_y) = pointer.at.map_or((-1.0, -1.0), |(x, y)| (x as f32 + 0.5, y as f32 + 0.5));
        let frame = KernelFrame {
            target,
            width: width as i32,
            height: height as i32,
            index: index as u32,
            time: at.time,
            dt: at.dt,
            mouse_x,
            mouse_y,
            buttons: pointer.buttons,
            params: self.spec.params,
        };
        let (bx, by) = self.spec.block;
        let cfg = LaunchConfig {
            grid_dim: (width.div_ceil(bx), height.div_ceil(by), 1),
            block_dim: (bx, by, 1),
            shared_mem_bytes: 0,
        };
        let mut launch = stream.launch_builder(&self.function);
        launch.arg(&frame);
        // SAFETY: compile_checked made sure the entry takes exactly one parameter of
        // `vk_frame`'s size, which `KernelFrame` mirrors; the target covers the frame.
        unsafe { launch.launch(cfg) }.with_context(|| format!("launching {}", self.spec.entry))?;
        Ok(())
    }
}

/// Compiles `file` for `arch` (`sm_90`, or a virtual `compute_75`) and checks
/// its entry point: present, and taking one `vk_frame`. Errors name
/// `FILE:LINE` (a [`CompileError::Source`]).
pub fn compile_checked(file: &Path, entry: &str, arch: &str) -> Result<Program> {
    compile_source(file, &nvrtc::read_source(file)?, entry, arch)
}

/// Whether a kernel's PTX may be cached by its source alone: it includes
/// no file but the kernel contract (`vkcuda.h`).
pub fn cacheable(source: &str) -> bool {
    source
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix('#').map(str::trim_start))
        .filter_map(|d| d.strip_prefix("include"))
        .all(|name| matches!(name.trim(), "\"vkcuda.h\"" | "<vkcuda.h>"))
}

/// [`compile_checked`] of `source`, read from `file` (which names it in errors
/// and whose folder is on the include path).
fn compile_source(file: &Path, source: &str, entry: &str, arch: &str) -> Result<Program> {
    let name = file.display().to_string();
    let options = [format!("--gpu-architecture={arch}"), nvrtc::include_path(file)];
    let program = nvrtc::compile(source, &name, &options)?;
    let frame = std::mem::size_of::<KernelFrame>();
    match nvrtc::entry_params(&program.ptx, entry) {
        None => Err(CompileError::Source(format!(
            "{name}: error: no extern \"C\" __global__ function `{entry}` (the entry point asked for)"
        ))
        .into()),
        Some(p) if p == [frame] => Ok(program),
        Some(p) => Err(CompileError::Source(format!(
            "{name}: error: `{entry}` must take one vk_frame by value ({frame} bytes; see shaders/vkcuda.h), \
             not parameters of {p:?} bytes"
        ))
        .into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_kernel_that_includes_nothing_but_the_contract_is_cached() {
        assert!(cacheable("#include \"vkcuda.h\"\nextern \"C\" __global__ void k(vk_frame f) {}"));
        assert!(cacheable("  #  include <vkcuda.h>\n"));
        assert!(!cacheable("#include \"vkcuda.h\"\n#include \"noise.h\"\n"));
        assert!(!cacheable("#include \"../common/vkcuda.h\""));
    }

    #[test]
    fn the_frame_has_the_headers_layout() {
        // vk_target (32 bytes), 8 four-byte fields, 8 floats: 96 bytes, 8-aligned.
        assert_eq!(std::mem::size_of::<KernelFrame>(), 96);
        assert_eq!(std::mem::align_of::<KernelFrame>(), 8);
        assert_eq!(std::mem::offset_of!(KernelFrame, width), 32);
        assert_eq!(std::mem::offset_of!(KernelFrame, params), 64);
    }
}
