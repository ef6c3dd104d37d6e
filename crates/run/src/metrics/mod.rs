//! Floor 1, time and counts: the [`clock`]s GPU times are placed on, small
//! [`stats`], and a run's memory [`footprint`]. May import the core and
//! floor 1 alone.

pub mod clock;
pub mod footprint;
pub mod stats;
