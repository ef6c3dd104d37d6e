//! Messages that name a part of a run's description (its size, format,
//! output folder …) as a type, not as a front end's flag: each front end
//! words the part in its own terms ([`Vocabulary`]: `--size 640x480` for the
//! CLI, `a 640x480 frame` for Python), so no layer below a front end names a
//! flag, and no Python user reads one.

use std::fmt;

/// The end of every start-up error that a missing piece of the machine
/// causes: where the whole picture of what this machine has is.
pub const SEE_DOCTOR: &str = "run `vkcuda doctor` (or `python -m vkcuda doctor`) for what this machine has";

/// A part of a run's description that a message can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// The shared frames' size.
    Size,
    /// The size the draw pass draws into (headless).
    TargetSize,
    /// The shared frames' pixel format.
    Format,
    /// The shared frames' layout (CUDA array or linear buffer).
    Layout,
    /// How many shared frames rotate.
    Buffers,
    /// The folder frames are written to.
    Out,
    /// The Vulkan device asked for.
    Gpu,
    /// Every GPU at once.
    AllGpus,
    /// Who renders (a producer's name as value).
    Producer,
    /// The user's kernel file.
    Kernel,
    /// Running without a window (a hint's subject).
    Headless,
}

/// One piece of a [`Message`]: words, or a field and its value ("" for none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Words, the same in every front end.
    Text(String),
    /// A field, worded by the front end, with its value.
    Field(Field, String),
}

/// A message whose fields each front end words ([`Message::worded`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message(pub Vec<Piece>);

impl Message {
    /// An empty message.
    pub fn new() -> Self {
        Self::default()
    }

    /// Then words.
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.0.push(Piece::Text(text.into()));
        self
    }

    /// Then a field with its value.
    pub fn field(mut self, field: Field, value: impl fmt::Display) -> Self {
        self.0.push(Piece::Field(field, value.to_string()));
        self
    }

    /// Then `other`'s pieces.
    pub fn then(mut self, other: Message) -> Self {
        self.0.extend(other.0);
        self
    }

    /// The message in `words`' terms.
    pub fn worded(&self, words: &dyn Vocabulary) -> String {
        self.0
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.clone(),
                Piece::Field(f, v) => words.field(*f, v),
            })
            .collect()
    }
}

impl From<String> for Message {
    fn from(text: String) -> Self {
        Message::new().text(text)
    }
}

impl From<&str> for Message {
    fn from(text: &str) -> Self {
        Message::new().text(text)
    }
}

impl fmt::Display for Message {
    /// In plain terms (no front end's): `size 640x480`, `format rgba8`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.worded(&Plain))
    }
}

impl std::error::Error for Message {}

/// How a front end names each [`Field`].
pub trait Vocabulary {
    /// `field` with `value` ("" for none), e.g. `--size 640x480`.
    fn field(&self, field: Field, value: &str) -> String;
}

/// Fields by their plain names: what `Display` shows.
pub struct Plain;

impl Vocabulary for Plain {
    fn field(&self, field: Field, value: &str) -> String {
        let name = match field {
            Field::Size => "size",
            Field::TargetSize => "target size",
            Field::Format => "format",
            Field::Layout => "layout",
            Field::Buffers => "buffers",
            Field::Out => "output folder",
            Field::Gpu => "GPU",
            Field::AllGpus => "all GPUs",
            Field::Producer => "producer",
            Field::Kernel => "kernel",
            Field::Headless => "headless",
        };
        match value {
            "" => name.to_string(),
            v => format!("{name} {v}"),
        }
    }
}

/// A problem with what the run was asked to do (its description's values),
/// not with the machine: the CLI's exit code 2.
#[derive(Debug)]
pub struct UsageError(pub Message);

impl UsageError {
    /// A usage error saying `message`.
    pub fn new(message: impl Into<Message>) -> Self {
        Self(message.into())
    }
}

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for UsageError {}

/// Test only: fields as flags of their lower-cased names (`--size 8x8`).
#[cfg(test)]
pub(crate) struct Flags;

#[cfg(test)]
impl Vocabulary for Flags {
    fn field(&self, field: Field, value: &str) -> String {
        format!("--{} {value}", format!("{field:?}").to_lowercase()).trim_end().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::failure::worded;

    #[test]
    fn each_front_end_words_the_fields() {
        let m = Message::new().field(Field::Size, "8x8").text(": exceeds ").field(Field::Headless, "");
        assert_eq!(m.to_string(), "size 8x8: exceeds headless");
        assert_eq!(m.worded(&Flags), "--size 8x8: exceeds --headless");
        // Inside a chain, under context, and as a usage error.
        let e = anyhow::Error::new(UsageError::new(m.clone())).context("starting");
        assert_eq!(worded(&e, &Flags), "starting: --size 8x8: exceeds --headless");
        assert_eq!(format!("{e:#}"), "starting: size 8x8: exceeds headless");
        let e = anyhow::Error::new(m).context("building");
        assert_eq!(worded(&e, &Flags), "building: --size 8x8: exceeds --headless");
        assert!(e.downcast_ref::<UsageError>().is_none());
    }
}
