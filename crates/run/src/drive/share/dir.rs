//! The folder of shared names: `vkcuda/` under `$XDG_RUNTIME_DIR` (the
//! user's own runtime folder, mode 0700, gone at logout) or under a path
//! given, one socket `NAME.sock` per job sharing. A folder another user owns,
//! or one others may enter, is refused: its sockets would be theirs to take.

use std::ffi::OsString;
use std::fs::{DirBuilder, Metadata};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use rustix::io::Errno;
use rustix::net::{AddressFamily, SocketAddrUnix, SocketFlags, SocketType};

use super::name::ShareName;

/// The environment variable naming the user's runtime folder.
pub const RUNTIME_DIR: &str = "XDG_RUNTIME_DIR";

/// The folder the names live in, inside the runtime folder or the path given.
const FOLDER: &str = "vkcuda";

/// The socket file's ending after the name.
const SOCKET: &str = ".sock";

/// The folder of names, made and checked (this user's, mode 0700).
#[derive(Clone, Debug)]
pub struct ShareDir {
    path: PathBuf,
}

impl ShareDir {
    /// `vkcuda/` inside `$XDG_RUNTIME_DIR`.
    pub fn runtime() -> Result<Self> {
        Self::in_runtime(std::env::var_os(RUNTIME_DIR))
    }

    /// `vkcuda/` inside `runtime` (the variable's value), or the error naming the variable.
    fn in_runtime(runtime: Option<OsString>) -> Result<Self> {
        match runtime.filter(|dir| !dir.is_empty()) {
            Some(dir) => Self::at(Path::new(&dir)),
            None => bail!(
                "{RUNTIME_DIR} is not set (a login session sets it, a container or a cron job often \
                 does not): set it to a folder of your own, or give one (ShareDir::at takes a path)"
            ),
        }
    }

    /// `vkcuda/` inside `path` (a folder that exists), made mode 0700 if it is not there.
    pub fn at(path: &Path) -> Result<Self> {
        let meta = std::fs::metadata(path).with_context(|| format!("the folder {}", path.display()))?;
        if !meta.is_dir() {
            bail!("{} is not a folder", path.display());
        }
        let dir = path.join(FOLDER);
        match DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("making {}", dir.display())),
        }
        // Not followed: a link there could point at a folder of anyone's.
        let meta =
            std::fs::symlink_metadata(&dir).with_context(|| format!("the folder {}", dir.display()))?;
        Self::check(&dir, &meta)?;
        Ok(Self { path: dir })
    }

    /// The folder is a folder, this user's, and closed to others.
    fn check(dir: &Path, meta: &Metadata) -> Result<()> {
        let shown = dir.display();
        if !meta.is_dir() {
            bail!("{shown} is not a folder (a link or a file): remove it, and it is made again");
        }
        let (owner, me) = (meta.uid(), rustix::process::geteuid().as_raw());
        if owner != me {
            bail!(
                "{shown} belongs to uid {owner}, not to this process's uid {me}: another user's \
                 folder; give a folder of your own, or remove it (its owner can)"
            );
        }
        let mode = meta.mode() & 0o777;
        if mode & 0o077 != 0 {
            bail!("{shown} is open to others (mode {mode:o}): close it with `chmod 700 {shown}`");
        }
        Ok(())
    }

    /// The folder itself.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where `name`'s socket is.
    pub fn socket(&self, name: &ShareName) -> PathBuf {
        self.path.join(format!("{name}{SOCKET}"))
    }
}

/// Who holds a socket's file, found by connecting without waiting.
#[derive(Debug)]
pub enum Holder {
    /// A job listens: the connection, and its pid as `SO_PEERCRED` tells it.
    Live {
        /// The job's pid, where `SO_PEERCRED` told it.
        pid: Option<u32>,
        /// The connection made (a viewer goes on with it; a probe drops it).
        connection: OwnedFd,
    },
    /// A job listens but its queue of connections is full (`EAGAIN`): live, pid unknown.
    Busy,
    /// Nobody listens (a dead job's socket: `ECONNREFUSED`), or the file is not a socket.
    Stale,
    /// No file there.
    Missing,
}

/// Who holds the socket at `path`. The connect does not wait (a Unix
/// socket's connect either completes or fails at once when non-blocking),
/// so a probe is bounded by nothing the other process does.
pub fn probe(path: &Path) -> Result<Holder> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Holder::Missing),
        Err(e) => return Err(e).with_context(|| format!("the socket {}", path.display())),
        Ok(meta) if !meta.file_type().is_socket() => return Ok(Holder::Stale),
        Ok(_) => {}
    }
    let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
    let fd = rustix::net::socket_with(AddressFamily::UNIX, SocketType::STREAM, flags, None)?;
    let address = SocketAddrUnix::new(path).with_context(|| format!("the socket path {}", path.display()))?;
    match rustix::net::connect(&fd, &address) {
        Ok(()) => {}
        Err(Errno::CONNREFUSED) => return Ok(Holder::Stale),
        Err(Errno::NOENT) => return Ok(Holder::Missing),
        Err(Errno::AGAIN) => return Ok(Holder::Busy),
        Err(e) => return Err(e).with_context(|| format!("connecting to {}", path.display())),
    }
    // The listener's credentials, as they were when it listened.
    let pid = rustix::net::sockopt::socket_peercred(&fd).ok().map(|c| c.pid.as_raw_nonzero().get() as u32);
    Ok(Holder::Live { pid, connection: fd })
}

/// A name with a live job behind it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    /// The name.
    pub name: ShareName,
    /// The job's pid, where its socket told it.
    pub pid: Option<u32>,
}

/// The names in `dir` with a live job behind them, by name (stale sockets
/// and files of no name are skipped; [`super::door::Door::open`] replaces a stale one).
pub fn list(dir: &ShareDir) -> Result<Vec<Listed>> {
    let mut live = Vec::new();
    let entries =
        std::fs::read_dir(dir.path()).with_context(|| format!("listing {}", dir.path().display()))?;
    for entry in entries {
        let entry = entry?;
        let file = entry.file_name();
        let Some(name) = file.to_str().and_then(|f| f.strip_suffix(SOCKET)) else { continue };
        let Ok(name) = ShareName::new(name) else { continue };
        match probe(&entry.path())? {
            Holder::Live { pid, .. } => live.push(Listed { name, pid }),
            Holder::Busy => live.push(Listed { name, pid: None }),
            Holder::Stale | Holder::Missing => {}
        }
    }
    live.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(live)
}

#[cfg(test)]
mod tests {
    use super::super::tests::Scratch;
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn the_folder_is_made_closed_and_a_folder_open_to_others_refused() {
        let scratch = Scratch::new("dir");
        let dir = ShareDir::at(scratch.path()).expect("a share folder");
        assert_eq!(dir.path(), scratch.path().join(FOLDER));
        let mode = std::fs::metadata(dir.path()).expect("its mode").permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "made mode {mode:o}");
        // Opened to the group: refused, with the cure.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o750)).expect("chmod");
        let refused = format!("{:#}", ShareDir::at(scratch.path()).expect_err("a folder open to others"));
        assert!(refused.contains("open to others (mode 750)"), "{refused}");
        assert!(refused.contains("chmod 700"), "{refused}");
    }

    #[test]
    fn a_folder_of_another_user_is_refused() {
        super::super::tests::require_root("a folder of another user");
        let scratch = Scratch::new("owner");
        let dir = ShareDir::at(scratch.path()).expect("a share folder");
        std::os::unix::fs::chown(dir.path(), Some(65534), Some(65534)).expect("chown");
        let refused = format!("{:#}", ShareDir::at(scratch.path()).expect_err("another user's folder"));
        assert!(refused.contains("belongs to uid 65534"), "{refused}");
    }

    #[test]
    fn without_the_runtime_variable_the_error_names_it_and_at() {
        let refused = format!("{:#}", ShareDir::in_runtime(None).expect_err("no variable"));
        assert!(refused.contains(RUNTIME_DIR) && refused.contains("ShareDir::at"), "{refused}");
        let empty = format!("{:#}", ShareDir::in_runtime(Some(OsString::new())).expect_err("empty"));
        assert!(empty.contains(RUNTIME_DIR), "{empty}");
        let scratch = Scratch::new("runtime");
        let dir = ShareDir::in_runtime(Some(scratch.path().into())).expect("the variable's folder");
        assert_eq!(dir.path(), scratch.path().join(FOLDER));
    }
}
