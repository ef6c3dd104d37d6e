//! Consumers: what Vulkan does with a ready shared image. Headless copies it
//! into an offscreen target (what a presenter would do) and reads some frames
//! back; the window draws it ([`draw`]) into a swapchain image ([`swapchain`])
//! and presents it ([`window`]); a window's frame loop runs through its
//! [`screen`].

pub mod cpu;
pub mod draw;
pub mod image;
pub mod offscreen;
pub mod open;
pub mod readback;
pub mod screen;
pub mod shader_copy;
pub mod swapchain;
pub mod window;
pub mod x11;
