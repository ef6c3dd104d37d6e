//! Floor 4, a running job's frames offered to other processes (issue 75):
//! so far its door. [`name`] the names a job shares under ([`ShareName`]);
//! [`dir`] the folder they live in ([`ShareDir`]: `vkcuda/` under
//! `$XDG_RUNTIME_DIR` or a path given, this user's, mode 0700), who holds a
//! name's socket and the [`list`] of live ones; [`handshake`] the GPU and
//! driver both ends must share ([`GpuIdentity`]) and the words when they do
//! not; [`door`] the job's socket ([`Door`]: a peer's uid by `SO_PEERCRED`,
//! the greeting's version, the handshake, each wait bounded) and a viewer's
//! way in ([`enter`]). What goes through the door once a viewer is in (the
//! offer of [`crate::drive::child::offer`], the leases) is the protocol above.

pub mod dir;
pub mod door;
pub mod handshake;
pub mod name;
#[cfg(test)]
mod tests;

pub use dir::{list, Listed, ShareDir};
pub use door::{enter, Door, Knock, Refusal, Visitor, Why, HANDSHAKE_WITHIN};
pub use handshake::{GpuIdentity, Mismatch, Role};
pub use name::ShareName;
