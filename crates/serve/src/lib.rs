//! vkcuda-serve: watch a run from a browser. The run's consumer draws each
//! frame at every watching client's canvas size on the GPU (the run layer's
//! [`vkcuda_run::present::watch`]), the [`hub`] hands each drawing to encoder
//! threads ([`encode`]: JPEG, or raw RGBA for exact pixels) and keeps each
//! client's newest frame, and the [`server`] sends it once the client has
//! acknowledged the last, with the page embedded in the binary.
//!
//! Front ends (the CLI's `--serve`, the Python module's `serve=`) stand on
//! this beside the run layer: they bind the [`address`] before any GPU work,
//! give the run's consumer the hub as its watchers, and say what the page's
//! keys and pointer act on ([`protocol::Controls`]); the notebook widget joins
//! the hub without the server and speaks the same [`protocol`].

pub mod address;
pub mod controls;
pub mod encode;
pub mod hub;
pub mod protocol;
pub mod server;
pub mod view;

pub use address::{Address, Bound, ServeError};
pub use controls::RunControls;
pub use hub::Hub;
pub use protocol::Controls;
pub use server::Server;
pub use view::View;
