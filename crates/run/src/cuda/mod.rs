//! Floor 1, CUDA beyond the core's imports: the driver calls the run layer
//! makes ([`driver`]: events, stream queries, device memory) and which CUDA
//! device is which Vulkan device ([`pairing`]). May import the core and
//! floor 1 alone.

pub mod driver;
pub mod pairing;
