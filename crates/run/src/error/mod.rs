//! Floor 1, the run's errors: why a run ended badly, by cause
//! ([`failure`]), and the messages that name a part of a run's description
//! ([`usage`]), each front end wording them in its own terms. May import the
//! core and floor 1 alone.

pub mod failure;
pub mod usage;
