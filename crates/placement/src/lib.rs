//! The vocabulary every physical write of flashdoc is described in.
//!
//! The engine reports each write, each extent that no durable checkpoint can reach any more,
//! each checkpoint and each file create/remove as an [`Event`] to an [`Observer`]. Placement
//! policies (a later issue) choose a stream for each write from this stream of events alone, so
//! the same policy code runs online in the engine and offline on a [`trace`] file.

pub mod event;
pub mod observer;
pub mod trace;

pub use event::{Event, FileId, FileKind, PageKind, WriteEvent};
pub use observer::{CollectingObserver, NoopObserver, Observer, TraceObserver};
