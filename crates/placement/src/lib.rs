//! The vocabulary every physical write of flashdoc is described in, and what is decided from
//! it.
//!
//! The engine reports each write, each extent that no durable checkpoint can reach any more,
//! each checkpoint and each file create/remove as an [`Event`] to an [`Observer`]. Placement
//! [`policy`] objects choose a stream for each write from this stream of events alone, so
//! the same policy code runs online in the engine and offline on a [`trace`] file. The
//! [`trim`] batcher turns `Free` events into batched TRIMs. [`synth`] generates a
//! WiredTiger-like event stream; [`sim`] (feature `sim`) replays events with a policy on the
//! `ssd` crate's simulated device. See `docs/placement.md`.

mod cache;
pub mod classify;
pub mod event;
pub mod import;
pub mod observer;
pub mod policy;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
pub mod synth;
pub mod trace;
pub mod trim;

pub use event::{Event, FileId, FileKind, PageKind, WriteCause, WriteEvent};
pub use observer::{CollectingObserver, NoopObserver, Observer, Tee, TraceObserver};
pub use policy::{make_policy, PlacementConfig, Policy, POLICY_NAMES};
pub use trim::{TrimBatcher, TrimExtent, TrimWhen};
