//! Floor 3, what a consumer does with a ready frame, on an open device and
//! its frames alone: headless copies it into an offscreen target
//! ([`offscreen`], what a presenter would do) and reads some frames back
//! ([`readback`], to whatever takes them); a window draws it
//! ([`compute_draw`], the one draw: a compute shader) and copies the drawing
//! into a swapchain image ([`to_swapchain`], [`swapchain`]) or puts it in the
//! window through the CPU ([`cpu`]), and presents it ([`window`], opened by
//! [`open`]); [`watch`] draws it at each size its watchers (a browser view's
//! clients) want, as RGBA8 or as I420 planes for their encoders, and reads
//! those back. [`notice`] writes a message over a frame in host memory, the
//! last one a window keeps ([`held`]) after a kernel's fault.

pub mod compute_draw;
pub mod cpu;
mod frame_sets;
pub mod held;
pub mod image;
pub mod notice;
pub mod offscreen;
pub mod open;
pub mod readback;
pub mod shader_copy;
pub mod swapchain;
pub mod to_swapchain;
pub mod watch;
pub mod window;
pub mod x11;
