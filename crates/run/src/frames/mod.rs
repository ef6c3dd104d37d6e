//! Floor 2, an open device and one frame on its Vulkan side: opening the
//! device ([`gpu`]) with the process's Vulkan loader ([`loader`]), what the
//! machine gives Vulkan and CUDA before that ([`machine`], and the whole
//! checklist, [`doctor`]), the consumer's frame loop and what a consumer is
//! ([`consumer`]), and whether there is a window system ([`display`]).
//! Nothing here knows a producer, a run's description or a session.

pub mod consumer;
pub mod display;
pub mod doctor;
pub mod gpu;
pub mod loader;
pub mod machine;
