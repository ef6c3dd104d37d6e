//! Floor 4, driving a run: the producers on their threads ([`producer`], in
//! a process of their own ([`child`]), and the [`feed`] of frames a caller
//! hands in), a run's description and its interop objects ([`setup`]), the
//! [`session`] that follows the producer and stops, a window's frame loop
//! ([`screen`]), the PNG writer pool ([`sink`]) and a dump folder's frames
//! ([`dumpdir`]), a consumer loop's span and clock ([`measure`]), a run
//! driven to its end ([`to_end`]: the consume loop, the summary, signals,
//! which side of a failure is its cause), and a running job's frames offered
//! to other processes ([`share`]: its door). May import every floor.

pub mod child;
pub mod dumpdir;
pub mod feed;
pub mod measure;
pub mod producer;
pub mod screen;
pub mod session;
pub mod setup;
pub mod share;
pub mod sink;
pub mod to_end;
