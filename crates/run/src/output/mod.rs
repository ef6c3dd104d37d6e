//! Floor 1, what a run writes: a frame as a PNG or OpenEXR file's bytes
//! ([`frame_file`]), and the other output files, refused before a run when
//! they cannot be written ([`outfile`]). May import the core and floor 1 alone.

pub mod frame_file;
pub mod outfile;
