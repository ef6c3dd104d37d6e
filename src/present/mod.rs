//! Consumers: what Vulkan does with a ready shared image. Headless copies it
//! into an offscreen target (what a presenter would do) and reads some frames back.

pub mod offscreen;
pub mod readback;
pub mod window;
