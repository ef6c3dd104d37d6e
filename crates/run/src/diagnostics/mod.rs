//! Floor 1, what tells a run's story: the [`logger`] of the core's records,
//! the driver's fault reports in the kernel log ([`xid`]), test-only fault
//! injection ([`inject`]) and the generated protocol diagram of docs/sync.md
//! (`diagram`, a test). May import the core and floor 1 alone.

#[cfg(test)]
pub mod diagram;
pub mod inject;
pub mod logger;
pub mod xid;
