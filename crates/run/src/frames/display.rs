//! Before a window: is there a display server, and can the window system's
//! client libraries be loaded? winit loads them at run time and panics when
//! one is missing; this says which one, and which package has it.

use std::ffi::CString;
use std::path::PathBuf;

use crate::error::usage::{Field, Message};
use crate::UsageError;

/// The window systems winit may use here, in the order it tries them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Server {
    /// `WAYLAND_DISPLAY`'s socket.
    Wayland(PathBuf),
    /// `DISPLAY`, and its local socket when it names one.
    X11(String, Option<PathBuf>),
}

/// A client library winit (or softbuffer) loads, and its Debian/Ubuntu package.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ClientLib {
    /// The name `dlopen` is given.
    lib: &'static str,
    /// The package that installs it.
    package: &'static str,
}

/// The client libraries winit (and softbuffer) load for each window system,
/// with the Debian/Ubuntu package of each.
const WAYLAND_LIBS: &[ClientLib] = &[
    ClientLib { lib: "libwayland-client.so.0", package: "libwayland-client0" },
    ClientLib { lib: "libwayland-cursor.so.0", package: "libwayland-cursor0" },
    ClientLib { lib: "libxkbcommon.so.0", package: "libxkbcommon0" },
];
const X11_LIBS: &[ClientLib] = &[
    ClientLib { lib: "libX11.so.6", package: "libx11-6" },
    ClientLib { lib: "libX11-xcb.so.1", package: "libx11-xcb1" },
    ClientLib { lib: "libxcb.so.1", package: "libxcb1" },
    ClientLib { lib: "libXcursor.so.1", package: "libxcursor1" },
    ClientLib { lib: "libXi.so.6", package: "libxi6" },
    ClientLib { lib: "libXrandr.so.2", package: "libxrandr2" },
    ClientLib { lib: "libxkbcommon.so.0", package: "libxkbcommon0" },
    ClientLib { lib: "libxkbcommon-x11.so.0", package: "libxkbcommon-x11-0" },
];

/// The display servers the environment names (`WAYLAND_DISPLAY`, `DISPLAY`).
pub fn named() -> Vec<Server> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    let mut out = Vec::new();
    if let Some(w) = var("WAYLAND_DISPLAY") {
        let path = PathBuf::from(&w);
        let runtime = var("XDG_RUNTIME_DIR").map(PathBuf::from).unwrap_or_default();
        out.push(Server::Wayland(if path.is_absolute() { path } else { runtime.join(path) }));
    }
    if let Some(d) = var("DISPLAY") {
        // ":N" and "unix:N" (optionally ".screen") are local sockets; "host:N" is TCP.
        let local = d.strip_prefix("unix:").or_else(|| d.strip_prefix(':'));
        let socket = local.and_then(|n| n.split('.').next()).filter(|n| n.parse::<u32>().is_ok());
        out.push(Server::X11(d.clone(), socket.map(|n| PathBuf::from(format!("/tmp/.X11-unix/X{n}")))));
    }
    out
}

/// Whether the server's socket is there (`None`: a TCP display, not checked).
/// Only whether it exists: a test connection that hangs up at once can make
/// Xvfb refuse winit's connection right after it (docs/viewer.md).
fn listening(server: &Server) -> Option<bool> {
    match server {
        Server::Wayland(p) | Server::X11(_, Some(p)) => Some(p.exists()),
        Server::X11(_, None) => None,
    }
}

/// The first of `libs` that cannot be loaded, with its package.
fn missing(libs: &[ClientLib]) -> Option<ClientLib> {
    libs.iter().copied().find(|l| {
        let Ok(name) = CString::new(l.lib) else { return true };
        // SAFETY: dlopen with a NUL-terminated name. Loading runs the library's initialisers,
        // as winit's own dlopen would a moment later. The handle is kept (the libraries stay
        // loaded, as they would for winit): unloading X libraries and loading them again made
        // winit's connection to the X server fail now and then (2 of 12 starts).
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL) };
        handle.is_null()
    })
}

/// Checks that a window can be opened: a display server is named and listens,
/// and its client libraries load. The error says what is missing and how to
/// get it (a usage error: exit code 2).
pub fn check() -> Result<(), UsageError> {
    let servers = named();
    if servers.is_empty() {
        return Err(UsageError::new(
            Message::new()
                .text("no display: neither WAYLAND_DISPLAY nor DISPLAY is set: run ")
                .field(Field::Headless, "")
                .text(", or in a desktop session (or a virtual one: Xvfb, weston)"),
        ));
    }
    let mut problems = Vec::new();
    for server in &servers {
        let (what, libs) = match server {
            Server::Wayland(p) => (format!("WAYLAND_DISPLAY ({})", p.display()), WAYLAND_LIBS),
            Server::X11(d, _) => (format!("DISPLAY={d}"), X11_LIBS),
        };
        if listening(server) == Some(false) {
            let socket = match server {
                Server::Wayland(p) | Server::X11(_, Some(p)) => p.display().to_string(),
                Server::X11(d, None) => d.clone(),
            };
            problems.push(format!("{what} is set but there is no server socket at {socket}"));
            continue;
        }
        match missing(libs) {
            // One usable window system is enough: winit tries each.
            None => return Ok(()),
            Some(ClientLib { lib, package }) => problems
                .push(format!("{what}: {lib} cannot be loaded (Debian/Ubuntu: apt install {package})")),
        }
    }
    Err(no_window(&problems.join("; ")))
}

/// "Cannot open a window: `why`", and how to run without one.
pub fn no_window(why: &str) -> UsageError {
    UsageError::new(
        Message::new().text(format!("cannot open a window: {why}; or run ")).field(Field::Headless, ""),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_named_with_its_package() {
        assert_eq!(
            missing(&[ClientLib { lib: "libvkcuda-no-such-library.so.9", package: "no-such-package" }])
                .map(|m| m.package),
            Some("no-such-package")
        );
        assert_eq!(missing(&[ClientLib { lib: "libc.so.6", package: "libc6" }]), None);
    }
}
