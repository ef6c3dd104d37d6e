//! Floor 1, the run's vocabulary: the [`kinds`] of run (who produces and
//! where, how a headless run consumes, the hand-over, the present path) and
//! a frame's or window's [`size`]. May import the core and floor 1 alone.

pub mod kinds;
pub mod size;
