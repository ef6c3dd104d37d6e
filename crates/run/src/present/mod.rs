//! Floor 3, what a consumer does with a ready frame, on an open device and
//! its frames alone: headless copies it into an offscreen target
//! ([`offscreen`], what a presenter would do) and reads some frames back
//! ([`readback`], to whatever takes them); a window draws it ([`draw`]) into
//! a swapchain image ([`swapchain`]) or through the CPU ([`cpu`]) and
//! presents it ([`window`], opened by [`open`]); [`watch`] draws it with
//! [`compute_draw`] at each size its watchers (a browser view's clients) want,
//! as RGBA8 or as I420 planes for their encoders, and reads those back.
//! [`notice`] writes a message over a frame in host memory (the CPU path's
//! window after a kernel's fault).

pub mod compute_draw;
pub mod cpu;
pub mod draw;
mod frame_sets;
pub mod image;
pub mod notice;
pub mod offscreen;
pub mod open;
pub mod readback;
pub mod shader_copy;
pub mod swapchain;
pub mod watch;
pub mod window;
pub mod x11;
