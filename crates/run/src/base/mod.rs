//! Floor 1, what a run is made of and measured by: what a frame shows
//! ([`scene`], its [`kernels`], [`nvrtc`], your own kernel ([`userkernel`])
//! and its [`reload`], the [`director`] of scenes and ticks), time and
//! counts ([`clock`], [`stats`], [`footprint`]), files ([`outfile`],
//! [`encode`]), the run's vocabulary ([`kinds`], [`size`], [`usage`]),
//! which CUDA device is which Vulkan device ([`pairing`]), the [`logger`],
//! the driver's fault reports in the kernel log ([`xid`]),
//! and test-only fault injection ([`inject`]). Nothing here knows a device
//! that is open, a frame in flight or a session.

pub mod clock;
#[cfg(test)]
pub mod diagram;
pub mod director;
pub mod driver;
pub mod encode;
pub mod failure;
pub mod footprint;
pub mod inject;
pub mod kernels;
pub mod kinds;
pub mod logger;
pub mod nvrtc;
pub mod outfile;
pub mod pairing;
pub mod reload;
pub mod scene;
pub mod size;
pub mod stats;
pub mod usage;
pub mod userkernel;
pub mod xid;
