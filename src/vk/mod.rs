//! The Vulkan side: instance, device (picked by CUDA's UUID, or the
//! integrator's, adopted), the exportable shared images and timeline
//! semaphores, and the barriers around every Vulkan use of them.

pub mod device;
pub mod frame;
pub mod instance;
pub mod memory;
pub mod shared_buffer;
pub mod shared_image;
pub mod timeline;

use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The longest any CPU wait on the GPU may take before it becomes an error
/// that names what was awaited (a hung producer must never hang the app).
pub const WAIT_TIMEOUT: Duration = Duration::from_secs(10);

/// Turns on the device features the interop needs: timeline semaphores and
/// synchronization2 (both core in Vulkan 1.3).
pub fn enable_required_features(
    v12: &mut ash::vk::PhysicalDeviceVulkan12Features<'_>,
    v13: &mut ash::vk::PhysicalDeviceVulkan13Features<'_>,
) {
    v12.timeline_semaphore = ash::vk::TRUE;
    v13.synchronization2 = ash::vk::TRUE;
}

/// How often a long wait checks whether it was cancelled.
const SLICE: Duration = Duration::from_millis(50);

/// Waits for `what` by calling `poll(slice)` (which blocks at most `slice`
/// and says whether the wait is over) until it is over, `cancelled()` says
/// the other side failed, or [`WAIT_TIMEOUT`] passes: a hung GPU becomes an
/// error that names what was awaited ([`Error::TimedOut`], or
/// [`Error::Cancelled`]), never a hang. `poll`'s own errors pass through (any
/// error type an [`Error`] converts into: the application's `anyhow` too).
pub fn bounded_wait<E: From<Error>>(
    what: &dyn Fn() -> String,
    cancelled: &dyn Fn() -> bool,
    mut poll: impl FnMut(Duration) -> Result<bool, E>,
) -> Result<(), E> {
    let deadline = Instant::now() + WAIT_TIMEOUT;
    loop {
        if poll(SLICE)? {
            return Ok(());
        }
        if cancelled() {
            return Err(Error::Cancelled { what: what() }.into());
        }
        if Instant::now() >= deadline {
            return Err(Error::TimedOut { what: what(), after: WAIT_TIMEOUT }.into());
        }
    }
}
