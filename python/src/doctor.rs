//! `vkcuda.doctor()` and `python -m vkcuda doctor`: the run layer's
//! checklist ([`vkcuda_run::frames::doctor`]), its uses named as Python asks for them.

use pyo3::prelude::*;
use vkcuda_run::frames::doctor::{examine, Use};

/// A use, as a Python user asks for it.
fn use_name(what: Use) -> &'static str {
    match what {
        Use::CudaHeadless => "Viewer(headless=True), CUDA tensors",
        Use::CpuHeadless => "Viewer(headless=True), host arrays",
        Use::Serve => "Viewer(serve=...)",
        Use::Window => "Viewer() in a window",
        Use::Kernel => "your own kernel (the CLI's)",
        Use::Validate => "Viewer(validate=True)",
    }
}

/// The checklist as text, and the exit code `vkcuda doctor` gives it
/// (0: CUDA frames headless; 1: only the CPU's; 2: no Vulkan device).
#[pyfunction]
pub fn doctor(py: Python<'_>) -> (String, u8) {
    let report = py.detach(examine);
    (report.render(&|u| use_name(u).to_string()), report.exit_code())
}
