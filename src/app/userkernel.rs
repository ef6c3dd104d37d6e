//! Your own kernel (`--kernel FILE`): one `extern "C" __global__` entry
//! point taking a `vk_frame` by value (`shaders/vkcuda.h`), compiled by NVRTC
//! for the device, launched once per frame in place of the built-in scene.
//! `vkcuda check-kernel FILE` compiles it against the same contract without a
//! GPU (a virtual architecture: PTX only).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;

use crate::app::kernels::Out;
use crate::app::nvrtc::{self, CompileError};

/// The entry point's name unless `--entry` says otherwise.
pub const DEFAULT_ENTRY: &str = "render";

/// The architecture `check-kernel` compiles for unless `--arch` says
/// otherwise: virtual (PTX), so no GPU is needed.
pub const DEFAULT_CHECK_ARCH: &str = "compute_75";

/// The most `--param` values a kernel gets.
pub const PARAMS: usize = 8;

/// What a user kernel is, as the command line names it.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelSpec {
    /// The source file.
    pub file: PathBuf,
    /// The entry point.
    pub entry: String,
    /// `vk_frame::params`.
    pub params: [f32; PARAMS],
    /// Threads per block (x, y).
    pub block: (u32, u32),
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

/// The moment a frame shows and the input it sees.
#[derive(Clone, Copy, Debug)]
pub struct FrameTime {
    /// Seconds since the first frame.
    pub time: f32,
    /// Seconds since the previous frame.
    pub dt: f32,
    /// The pointer in frame pixels, and the buttons held (viewer); `None` elsewhere.
    pub mouse: Option<(f32, f32, u32)>,
}

impl FrameTime {
    /// Headless and bench: a fixed 60 frames per second, so dumps repeat exactly.
    pub fn fixed(index: u64) -> Self {
        Self { time: index as f32 / 60.0, dt: 1.0 / 60.0, mouse: None }
    }
}

/// A loaded user kernel.
pub struct UserKernel {
    _module: Arc<CudaModule>,
    function: CudaFunction,
    spec: KernelSpec,
}

impl UserKernel {
    /// Compiles `spec`'s file for `ctx`'s device and loads its entry point.
    pub fn load(ctx: &Arc<CudaContext>, spec: &KernelSpec) -> Result<Self> {
        let (major, minor) = ctx.compute_capability().context("reading the compute capability")?;
        let started = std::time::Instant::now();
        let ptx = compile_checked(&spec.file, &spec.entry, &format!("sm_{major}{minor}"))?;
        log::info!("compiled {} for sm_{major}{minor} in {:.0?}", spec.file.display(), started.elapsed());
        let module = ctx.load_module(Ptx::from_src(ptx)).context("loading the kernel's PTX")?;
        let function = module.load_function(&spec.entry).context("finding the kernel's entry point")?;
        Ok(Self { _module: module, function, spec: spec.clone() })
    }

    /// Enqueues frame `index` of `width` × `height` into `target`.
    pub fn launch(
        &self,
        stream: &CudaStream,
        target: Out,
        (width, height): (u32, u32),
        index: u64,
        at: FrameTime,
    ) -> Result<()> {
        let (mouse_x, mouse_y, buttons) = at.mouse.unwrap_or((-1.0, -1.0, 0));
        let frame = KernelFrame {
            target,
            width: width as i32,
            height: height as i32,
            index: index as u32,
            time: at.time,
            dt: at.dt,
            mouse_x,
            mouse_y,
            buttons,
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
pub fn compile_checked(file: &Path, entry: &str, arch: &str) -> Result<String> {
    let source = nvrtc::read_source(file)?;
    let name = file.display().to_string();
    let options = [format!("--gpu-architecture={arch}"), nvrtc::include_path(file)];
    let ptx = nvrtc::compile(&source, &name, &options)?;
    let frame = std::mem::size_of::<KernelFrame>();
    match nvrtc::entry_params(&ptx, entry) {
        None => Err(CompileError::Source(format!(
            "{name}: error: no extern \"C\" __global__ function `{entry}` (the entry point: --entry)"
        ))
        .into()),
        Some(p) if p == [frame] => Ok(ptx),
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
    fn the_frame_has_the_headers_layout() {
        // vk_target (32 bytes), 8 four-byte fields, 8 floats: 96 bytes, 8-aligned.
        assert_eq!(std::mem::size_of::<KernelFrame>(), 96);
        assert_eq!(std::mem::align_of::<KernelFrame>(), 8);
        assert_eq!(std::mem::offset_of!(KernelFrame, width), 32);
        assert_eq!(std::mem::offset_of!(KernelFrame, params), 64);
    }
}
