//! Python's words for the run layer's fields
//! ([`vkcuda_run::error::usage::Vocabulary`]): a frame's size, the `out=` and `gpu=`
//! arguments, never a CLI flag.

use vkcuda_run::error::usage::{Field, Vocabulary};

/// Fields as a Python user meets them: `a 640x480 frame`, `out='frames'`.
pub struct Python;

impl Vocabulary for Python {
    fn field(&self, field: Field, value: &str) -> String {
        match (field, value) {
            (Field::Size | Field::TargetSize, v) => format!("a {v} frame"),
            (Field::Format, v) => format!("{v} frames"),
            (Field::Layout, v) => format!("in the {v} layout"),
            (Field::Buffers, _) => "frames in flight".into(),
            (Field::Out, v) => format!("out={v:?}"),
            (Field::Gpu, v) => format!("gpu={v:?}"),
            (Field::AllGpus, _) => "every GPU".into(),
            (Field::Producer, v) => format!("the {v} producer"),
            (Field::Kernel, _) => "a kernel".into(),
            (Field::Headless, _) => "headless: vkcuda.Viewer(headless=True)".into(),
        }
    }
}

/// `e` and its causes in Python's words, for people (see [`vkcuda_run::for_people`]).
pub fn said(e: &anyhow::Error) -> String {
    vkcuda_run::for_people(&vkcuda_run::error::failure::worded(e, &Python))
}
