//! Floor 1, your kernel (`--kernel FILE`): [`nvrtc`], the run-time compiler
//! with the kernel contract as its one header; the kernel's source, entry
//! point and check ([`user`]); its hot [`reload`] in the viewer. May import
//! the core and floor 1 alone.

pub mod nvrtc;
pub mod reload;
pub mod user;
