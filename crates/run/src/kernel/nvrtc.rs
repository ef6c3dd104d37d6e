//! NVRTC, the run-time CUDA compiler: compiles a source with the kernel
//! contract (`shaders/vkcuda.h`) as its one built-in header, to PTX (and,
//! for a real architecture, to the device's machine code, which loads
//! without the driver's PTX compiler). Needs no
//! GPU: `vkcuda check-kernel` runs anywhere `libnvrtc.so` loads (PyPI's
//! `nvidia-cuda-nvrtc` wheel ships it).

use std::ffi::{c_char, CString};
use std::path::Path;

use anyhow::{anyhow, bail, Result};
use cudarc::nvrtc::{result, sys};

use crate::error::usage::SEE_DOCTOR;
use crate::UsageError;

/// The kernel contract, given to every compile as `"vkcuda.h"`.
pub const HEADER: &str = include_str!("../../../../shaders/vkcuda.h");

/// What a compile made.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Program {
    /// The PTX (its entry points' signatures are read from it).
    pub ptx: String,
    /// The machine code (CUBIN), when compiled for a real architecture (`sm_XY`):
    /// loading it skips the driver's PTX compiler (docs/kernels.md).
    pub cubin: Option<Vec<u8>>,
}

/// Why a compile produced no PTX.
#[derive(Debug)]
pub enum CompileError {
    /// The source has errors: NVRTC's log, each diagnostic as `FILE:LINE: ...`.
    Source(String),
    /// NVRTC itself failed (not loadable, out of memory, bad options).
    Nvrtc(anyhow::Error),
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompileError::Source(log) => write!(f, "the kernel does not compile:\n{}", log.trim_end()),
            CompileError::Nvrtc(e) => write!(f, "{e:#}"),
        }
    }
}

impl std::error::Error for CompileError {}

/// Where the CUDA toolkit keeps NVRTC, outside the default library path.
pub const TOOLKIT_LIBS: &str = "/usr/local/cuda/targets/x86_64-linux/lib";

/// Makes sure NVRTC can be loaded, with what to do if not.
pub fn load() -> Result<()> {
    // SAFETY: only tries to dlopen the library under its usual names.
    if !unsafe { sys::is_culib_present() } {
        bail!("libnvrtc.so (the CUDA run-time compiler) was not found: {}; {SEE_DOCTOR}", cure());
    }
    Ok(())
}

/// How to get NVRTC loaded on this machine: the toolkit's folder where it has one.
pub fn cure() -> String {
    let toolkit = Path::new(TOOLKIT_LIBS);
    if ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"].iter().any(|f| toolkit.join(f).exists()) {
        format!("the CUDA toolkit's NVRTC is in {TOOLKIT_LIBS}: add it to LD_LIBRARY_PATH")
    } else {
        "install the CUDA toolkit's NVRTC (e.g. apt install cuda-nvrtc-13-0, or pip install \
         nvidia-cuda-nvrtc) and add its folder to LD_LIBRARY_PATH"
            .into()
    }
}

/// NVRTC's version, "major.minor" (part of every PTX cache key).
pub fn version() -> Result<String> {
    load()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two out-pointers to locals.
    let r = unsafe { sys::nvrtcVersion(&mut major, &mut minor) };
    r.result().map_err(|e| anyhow!("nvrtcVersion: {e:?}"))?;
    Ok(format!("{major}.{minor}"))
}

/// Compiles `source`, named `name` in diagnostics (a file's path), with
/// `options` (e.g. `--gpu-architecture=sm_90`, `--include-path=DIR`), to PTX
/// and, for a real architecture, CUBIN.
pub fn compile(source: &str, name: &str, options: &[String]) -> Result<Program, CompileError> {
    load().map_err(CompileError::Nvrtc)?;
    let nul = |s: &str, what: &str| {
        CString::new(s).map_err(|_| CompileError::Nvrtc(anyhow!("{what} contains a NUL byte")))
    };
    let (src, file) = (nul(source, name)?, nul(name, "the file name")?);
    let (header, include) = (nul(HEADER, "vkcuda.h")?, nul("vkcuda.h", "")?);
    let headers = [header.as_ptr()];
    let includes = [include.as_ptr()];
    let mut program = std::ptr::null_mut();
    // SAFETY: every pointer points into a CString alive until the program is destroyed below.
    let created = unsafe {
        sys::nvrtcCreateProgram(
            &mut program,
            src.as_ptr(),
            file.as_ptr(),
            1,
            headers.as_ptr(),
            includes.as_ptr(),
        )
    };
    created.result().map_err(|e| CompileError::Nvrtc(anyhow!("nvrtcCreateProgram: {e:?}")))?;
    // SAFETY: `program` was created above and is destroyed once, at the end.
    let compiled = unsafe { result::compile_program(program, options) };
    // SAFETY: as above.
    let log = unsafe { result::get_program_log(program) }.map(|l| text(&l)).unwrap_or_default();
    let made = match compiled {
        // SAFETY: as above; the program compiled.
        Ok(()) => unsafe { result::get_ptx(program) }
            .map(|p| Program { ptx: text(&p), cubin: cubin(program) })
            .map_err(|e| CompileError::Nvrtc(anyhow!("nvrtcGetPTX: {e:?}"))),
        Err(_) if !log.trim().is_empty() => Err(CompileError::Source(diagnostics(&log))),
        Err(e) => Err(CompileError::Nvrtc(anyhow!("nvrtcCompileProgram: {e:?}"))),
    };
    // SAFETY: created above, not destroyed before.
    let _ = unsafe { result::destroy_program(program) };
    made
}

/// The compiled program's CUBIN; `None` for a virtual architecture (PTX only).
fn cubin(program: sys::nvrtcProgram) -> Option<Vec<u8>> {
    let mut size = 0usize;
    // SAFETY: `program` has compiled; `size` is a local out-parameter.
    unsafe { sys::nvrtcGetCUBINSize(program, &mut size) }.result().ok()?;
    if size == 0 {
        return None;
    }
    let mut bytes = vec![0u8; size];
    // SAFETY: `bytes` holds the `size` bytes NVRTC said the CUBIN takes.
    unsafe { sys::nvrtcGetCUBIN(program, bytes.as_mut_ptr().cast()) }.result().ok()?;
    Some(bytes)
}

/// A C string buffer from NVRTC as text (up to its NUL).
fn text(buffer: &[c_char]) -> String {
    let bytes: Vec<u8> = buffer.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// NVRTC writes `FILE(LINE): error: ...`; compilers and editors read
/// `FILE:LINE: error: ...`. Other lines are kept as they are.
pub fn diagnostics(log: &str) -> String {
    let mut out = String::new();
    for line in log.lines() {
        let converted = line.split_once("): ").and_then(|(head, rest)| {
            let (file, number) = head.rsplit_once('(')?;
            number.parse::<u32>().ok()?;
            Some(format!("{file}:{number}: {rest}"))
        });
        out.push_str(converted.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// The include path for a kernel file: its own folder, so `#include "x.h"`
/// next to it works as it would with nvcc.
pub fn include_path(file: &Path) -> String {
    let dir = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    format!("--include-path={}", dir.display())
}

/// The byte sizes of the parameters of `.entry name(...)` in `ptx`, or
/// `None` if the PTX has no such entry.
pub fn entry_params(ptx: &str, name: &str) -> Option<Vec<usize>> {
    let start = ptx.find(&format!(".entry {name}("))?;
    let rest = &ptx[start..];
    let body = &rest[rest.find('(')? + 1..rest.find(')')?];
    let sizes = body
        .split(',')
        .filter(|p| p.contains(".param"))
        .map(|p| match (p.rfind('['), p.rfind(']')) {
            (Some(a), Some(b)) if a < b => p[a + 1..b].trim().parse().unwrap_or(0),
            _ => {
                // A scalar: .param .u64 name / .b32 / .f32 ...
                let bits: usize = p
                    .split_whitespace()
                    .find_map(|w| w.trim_start_matches('.').get(1..).and_then(|n| n.parse().ok()))
                    .unwrap_or(0);
                bits / 8
            }
        })
        .collect();
    Some(sizes)
}

/// Reads a kernel file, saying which one could not be read.
pub fn read_source(file: &Path) -> Result<String> {
    std::fs::read_to_string(file)
        .map_err(|e| UsageError::new(format!("reading the kernel {}: {e}", file.display())).into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diagnostics_name_file_and_line() {
        let log = "k.cu(12): error: identifier \"q\" is undefined\n\n1 error detected in the compilation of \"k.cu\".\n";
        let d = diagnostics(log);
        assert!(d.starts_with("k.cu:12: error: identifier \"q\" is undefined\n"), "{d}");
        assert!(d.contains("1 error detected"), "{d}");
        assert_eq!(diagnostics("dir(x)/k.cu(7): warning: w"), "dir(x)/k.cu:7: warning: w\n");
    }

    #[test]
    fn entry_params_reads_ptx_signatures() {
        let ptx = ".visible .entry render(\n\t.param .align 8 .b8 render_param_0[96]\n)\n{\n}\n\
                   .visible .entry two(\n\t.param .u64 two_param_0,\n\t.param .u32 two_param_1\n)\n";
        assert_eq!(entry_params(ptx, "render"), Some(vec![96]));
        assert_eq!(entry_params(ptx, "two"), Some(vec![8, 4]));
        assert_eq!(entry_params(ptx, "missing"), None);
    }
}
