//! Floor 4, a run: the producers on their threads ([`producer`], and the
//! [`feed`] of frames a caller hands in), a run's description and its
//! interop objects ([`setup`]), the [`session`] that follows the producer
//! and stops, a window's frame loop ([`screen`]), the PNG writer pool
//! ([`sink`]) and a dump folder's frames ([`dumpdir`]), and a consumer
//! loop's span and clock ([`measure`]).

pub mod child;
pub mod dumpdir;
pub mod feed;
pub mod measure;
pub mod producer;
pub mod screen;
pub mod session;
pub mod setup;
pub mod sink;
