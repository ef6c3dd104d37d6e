//! vkcuda-serve: watch a run from a browser or a notebook, over the links
//! people really watch through (an `ssh -L` tunnel, a VPN, JupyterHub's
//! proxy). The run's consumer draws each frame at what every watching client
//! wants (the run layer's [`vkcuda_run::present::watch`]: a compute pass
//! writes I420 planes for an encoder, or RGBA8 rows for exact pixels); the
//! [`Hub`] hands each drawing to encoder threads ([`encode`]: JPEG, VP8
//! ([`vp8`]), PNG or raw) and keeps each client's newest frame until its own
//! link (the crate's `link` module) has room for it; each client's [`ladder`] picks codec,
//! size, quality and rate to hold its latency, and a picture that stops is
//! sent once more, exact. The [`server`] serves the page, with its one
//! client module (client.js) embedded in the binary.
//!
//! Front ends (the CLI's `--serve`, the Python module's `serve=`) stand on
//! this beside the run layer: they bind the [`address`] before any GPU work,
//! give the run's consumer the hub as its watchers, and say what the page's
//! keys and pointer act on ([`protocol::Controls`]); the notebook widget joins
//! the hub without the server and speaks the same [`protocol`].

pub mod address;
pub mod encode;
pub(crate) mod header;
pub(crate) mod hub;
pub mod ladder;
pub(crate) mod link;
pub mod protocol;
pub mod server;
pub mod strips;
pub(crate) mod view;
pub mod vp8;

pub use address::{Address, Bound, ServeError};
pub use hub::{Hub, Joined};
pub use protocol::Controls;
pub use server::Server;
pub use view::View;
