//! The CLI's words for the run layer's fields: its flags
//! ([`vkcuda_run::error::usage::Vocabulary`]).

use vkcuda_run::error::usage::{Field, Vocabulary};
use vkcuda_run::frames::doctor::Use;

/// Fields as the command line spells them: `--size 640x480`.
pub struct Flags;

impl Vocabulary for Flags {
    fn field(&self, field: Field, value: &str) -> String {
        let flag = match field {
            Field::Size => "--size",
            Field::TargetSize => "--target-size",
            Field::Format => "--format",
            Field::Layout => "--layout",
            Field::Buffers => "--buffers",
            Field::Out => "--out",
            Field::Gpu => "--gpu",
            Field::AllGpus => "--gpu all",
            Field::Producer => "--producer",
            Field::Kernel => "--kernel",
            // "run with --headless", as the messages say it.
            Field::Headless => "with --headless",
        };
        match value {
            "" => flag.to_string(),
            v => format!("{flag} {v}"),
        }
    }
}

/// `e` and its causes in the CLI's words, for people (see [`vkcuda_run::for_people`]).
pub fn said(e: &anyhow::Error) -> String {
    vkcuda_run::for_people(&vkcuda_run::error::failure::worded(e, &Flags))
}

/// A use `vkcuda doctor` judges, as the command line asks for it.
pub fn use_name(what: Use) -> &'static str {
    match what {
        Use::CudaHeadless => "--headless (CUDA)",
        Use::CpuHeadless => "--headless --producer cpu",
        Use::Serve => "--serve",
        Use::Window => "the viewer's window",
        Use::Kernel => "--kernel",
        Use::Validate => "--validate",
    }
}
