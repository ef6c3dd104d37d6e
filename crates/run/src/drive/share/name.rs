//! A shared job's name: what `vkcuda attach NAME` types and the socket's
//! file is named after, so it is held to what a file name and a command
//! line carry without quoting.

use std::fmt;

use anyhow::{bail, Result};

/// The longest name (a socket's path must fit `sun_path`'s 108 bytes with its folder).
pub const MAX_NAME: usize = 64;

/// A validated name: 1 to [`MAX_NAME`] of `A-Z a-z 0-9 . _ -`, not starting with `.`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShareName(String);

/// What a name may be, in the words every refusal ends with.
const ALLOWED: &str = "a name is 1 to 64 of the letters A-Z a-z, the digits 0-9 and `.`, `_`, `-`, \
                       and does not start with `.`";

impl ShareName {
    /// `name` if it is allowed, else an error saying what is.
    pub fn new(name: &str) -> Result<Self> {
        if name.is_empty() {
            bail!("an empty name: {ALLOWED}");
        }
        if name.len() > MAX_NAME {
            bail!(
                "the name `{}…` has {} characters: {ALLOWED}",
                name.chars().take(16).collect::<String>(),
                name.len()
            );
        }
        if let Some(bad) = name.chars().find(|&c| !(c.is_ascii_alphanumeric() || "._-".contains(c))) {
            bail!("the name `{}` holds {bad:?}: {ALLOWED}", name.escape_debug());
        }
        if name.starts_with('.') {
            bail!("the name `{name}` starts with `.` (a hidden file): {ALLOWED}");
        }
        Ok(Self(name.to_owned()))
    }

    /// The name as typed.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ShareName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_allowed_and_refused() {
        for good in ["train", "run-1.2_b", "A", &"x".repeat(MAX_NAME)] {
            assert_eq!(ShareName::new(good).expect(good).as_str(), good);
        }
        for (bad, says) in [
            ("", "an empty name"),
            (".hidden", "starts with `.`"),
            ("a/b", "'/'"),
            ("a b", "' '"),
            ("é", "'é'"),
            (&"x".repeat(MAX_NAME + 1), "65 characters"),
        ] {
            let refused = format!("{}", ShareName::new(bad).expect_err(bad));
            assert!(refused.contains(says), "{bad:?}: {refused}");
            assert!(
                refused.contains("1 to 64 of the letters"),
                "{bad:?} does not say what is allowed: {refused}"
            );
        }
    }
}
