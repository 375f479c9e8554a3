//! flashdoc's server-side JavaScript: run one JavaScript function over BSON values, with a heap
//! limit and an interrupt (docs/query.md, "Server-side JavaScript").
//!
//! The engine is QuickJS (through the `rquickjs` crate). Each thread keeps one runtime and one
//! context for its life, with the functions it compiled cached by their source, so a `$where`
//! over a million documents compiles once and creates no runtime per document. Values cross as
//! BSON ([`convert`]), so nothing JavaScript holds outlives a call except the thread's globals.
//!
//! Limits: the runtime's heap is capped per call ([`Limits::heap_bytes`]: a function that
//! allocates past it fails with [`JsError::OutOfMemory`]), its stack too, and QuickJS asks the
//! interrupt handler every few thousand instructions whether to stop: it asks the caller's
//! [`Stop`] (the operation's `maxTimeMS` deadline and `killOp` flag), and so does the shell's
//! `sleep`, so neither a loop nor a sleep can hold a thread past its operation's end.

mod convert;
mod engine;
mod heap;

pub use convert::MAX_DEPTH;
pub use engine::{run, Call, Func, Kind, Outcome};

use std::sync::Arc;

/// Whether the running operation must stop (its time budget is spent or it was killed).
pub type Stop = Arc<dyn Fn() -> bool + Send + Sync>;

/// What one call may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The runtime's heap, in bytes (mongod's `jsHeapLimitMB`).
    pub heap_bytes: usize,
    /// The JavaScript stack, in bytes (deep recursion fails with a stack overflow).
    pub stack_bytes: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            heap_bytes: 256 << 20,
            stack_bytes: 256 << 10,
        }
    }
}

/// Why a call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JsError {
    /// The source is not JavaScript (or not a function where a function is needed).
    Compile(String),
    /// The function threw: the exception's name, message and stack.
    Exception(String),
    /// The caller's [`Stop`] said stop while the function ran.
    Interrupted,
    /// The function reached the heap limit.
    OutOfMemory,
    /// A value could not cross between JavaScript and BSON.
    Conversion(String),
}

impl std::fmt::Display for JsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JsError::Compile(m) => write!(f, "SyntaxError: {m}"),
            JsError::Exception(m) => f.write_str(m),
            JsError::Interrupted => f.write_str("JavaScript execution interrupted"),
            JsError::OutOfMemory => f.write_str("Out of memory"),
            JsError::Conversion(m) => write!(f, "cannot convert value: {m}"),
        }
    }
}

impl std::error::Error for JsError {}

#[cfg(test)]
mod tests;
