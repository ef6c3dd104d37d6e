//! What a run occupies: the process's resident memory and the GPU memory in
//! use, read after warm-up and at the end, so long runs show they are stable.

use vkcuda::cuda::CudaDevice;

/// One reading.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footprint {
    /// Resident set size of this process, in bytes.
    pub resident: u64,
    /// Device memory in use on the CUDA device (all processes), in bytes, when CUDA is there.
    pub gpu_used: Option<u64>,
}

/// Reads the footprint now; `cuda` is the device whose memory to read.
pub fn now(cuda: Option<&CudaDevice>) -> Footprint {
    Footprint { resident: resident().unwrap_or(0), gpu_used: cuda.and_then(gpu_used) }
}

fn resident() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

fn gpu_used(device: &CudaDevice) -> Option<u64> {
    // The primary context: the producer's, already active, so this creates nothing.
    let ctx = cudarc::driver::CudaContext::new(device.ordinal).ok()?;
    ctx.bind_to_thread().ok()?;
    let memory = crate::cuda::driver::memory_info()?;
    Some((memory.total - memory.free) as u64)
}

/// "52.1 → 52.3 MB" for readings of bytes.
pub fn change(bytes: &[u64]) -> String {
    let mb: Vec<String> = bytes.iter().map(|b| format!("{:.1}", *b as f64 / 1e6)).collect();
    format!("{} MB", mb.join(" → "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_resident_size() {
        let f = now(None);
        assert!(f.resident > 1_000_000, "{f:?}");
        assert_eq!(f.gpu_used, None);
        assert_eq!(change(&[52_100_000, 52_300_000]), "52.1 → 52.3 MB");
    }
}
