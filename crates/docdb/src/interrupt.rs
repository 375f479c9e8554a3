//! Interrupting an operation: one mechanism, checked at yield points.
//!
//! An [`Interrupt`] travels with an operation (a find and the cursor it leaves behind, an
//! aggregate, a count, an update or delete statement). Long loops call [`Interrupt::check`] at
//! their yield points: once per document examined by a scan (collection or index), once per
//! document going through a pipeline stage, once per document a write statement visits, once
//! per document put in a reply batch. A check fails when
//! - the operation's time budget (`maxTimeMS`) is spent: MaxTimeMSExpired (50); or
//! - someone killed it ([`Interrupt::kill`], what `killOp` does): Interrupted (11601); or
//! - its cursor was killed ([`Interrupt::kill_cursor`], `killCursors` while a getMore reads
//!   it): CursorKilled (237).
//!
//! The budget counts only time the operation is running: a cursor's owner [`Interrupt::pause`]s
//! it when a batch has been sent and [`Interrupt::resume`]s it at the next getMore, so time
//! spent waiting for the client is not charged, as in mongod.
//!
//! Clones share state: the clone inside a cursor's iterator and the one the server keeps see
//! the same budget and the same kill flag.

use crate::error::{DocError, DocResult};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Default)]
pub struct Interrupt {
    inner: Option<Arc<Inner>>,
}

/// Why an operation was killed (`Inner::killed`).
const RUNNING: u8 = 0;
const KILLED_OP: u8 = 1;
const KILLED_CURSOR: u8 = 2;

struct Inner {
    killed: AtomicU8,
    budget: Mutex<Budget>,
}

struct Budget {
    /// None: no time limit (killable only).
    remaining: Option<Duration>,
    /// When the current running stretch began (None while paused).
    running_since: Option<Instant>,
}

impl std::fmt::Debug for Interrupt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Interrupt")
    }
}

impl PartialEq for Interrupt {
    fn eq(&self, other: &Self) -> bool {
        match (&self.inner, &other.inner) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Interrupt {
    /// Never interrupted (no time limit, not killable).
    pub fn none() -> Interrupt {
        Interrupt { inner: None }
    }

    /// Killable, with an optional time budget (`maxTimeMS`); running from now.
    pub fn new(max_time: Option<Duration>) -> Interrupt {
        Interrupt {
            inner: Some(Arc::new(Inner {
                killed: AtomicU8::new(RUNNING),
                budget: Mutex::new(Budget {
                    remaining: max_time,
                    running_since: Some(Instant::now()),
                }),
            })),
        }
    }

    /// Fails if the operation should stop. Cheap: an atomic load, and a clock read when a
    /// budget is set.
    pub fn check(&self) -> DocResult<()> {
        let Some(inner) = &self.inner else {
            return Ok(());
        };
        match inner.killed.load(Ordering::Relaxed) {
            RUNNING => {}
            KILLED_CURSOR => {
                return Err(DocError::with_code(
                    237,
                    "CursorKilled",
                    "cursor was killed",
                ))
            }
            _ => {
                return Err(DocError::with_code(
                    11601,
                    "Interrupted",
                    "operation was interrupted",
                ))
            }
        }
        let b = inner.budget.lock();
        if let Some(rem) = b.remaining {
            let used = b.running_since.map(|s| s.elapsed()).unwrap_or_default();
            if used >= rem {
                return Err(DocError::with_code(
                    50,
                    "MaxTimeMSExpired",
                    "operation exceeded time limit",
                ));
            }
        }
        Ok(())
    }

    /// Asks the operation to stop at its next yield point.
    pub fn kill(&self) {
        self.kill_with(KILLED_OP);
    }

    /// Asks the operation reading a cursor to stop because the cursor was killed.
    pub fn kill_cursor(&self) {
        self.kill_with(KILLED_CURSOR);
    }

    /// The cursor of this operation was killed ([`Interrupt::kill_cursor`]).
    pub fn cursor_killed(&self) -> bool {
        self.inner
            .as_ref()
            .is_some_and(|i| i.killed.load(Ordering::Relaxed) == KILLED_CURSOR)
    }

    fn kill_with(&self, why: u8) {
        if let Some(i) = &self.inner {
            // The first reason stays.
            let _ = i
                .killed
                .compare_exchange(RUNNING, why, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// Stops charging time (a cursor waiting for its next getMore).
    pub fn pause(&self) {
        if let Some(i) = &self.inner {
            let mut b = i.budget.lock();
            if let (Some(since), Some(rem)) = (b.running_since.take(), b.remaining) {
                b.remaining = Some(rem.saturating_sub(since.elapsed()));
            }
        }
    }

    /// Starts charging time again.
    pub fn resume(&self) {
        if let Some(i) = &self.inner {
            let mut b = i.budget.lock();
            if b.running_since.is_none() {
                b.running_since = Some(Instant::now());
            }
        }
    }

    /// Wraps an iterator so that every item is a yield point: the first failed check is
    /// yielded as an error, and the iteration ends after it.
    pub fn wrap<I, T>(&self, it: I) -> impl Iterator<Item = DocResult<T>> + Send
    where
        I: Iterator<Item = DocResult<T>> + Send,
        T: Send,
    {
        let me = self.clone();
        let mut failed = false;
        it.map_while(move |item| {
            if failed {
                return None;
            }
            if let Err(e) = me.check() {
                failed = true;
                return Some(Err(e));
            }
            Some(item)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_kill_and_pause() {
        assert!(Interrupt::none().check().is_ok());
        let i = Interrupt::new(Some(Duration::ZERO));
        assert_eq!(i.check().unwrap_err().code, 50);
        let i = Interrupt::new(Some(Duration::from_secs(3600)));
        assert!(i.check().is_ok());
        i.pause();
        i.resume();
        assert!(i.check().is_ok());
        i.clone().kill();
        assert_eq!(i.check().unwrap_err().code, 11601);
        let killed = Interrupt::new(None);
        killed.kill();
        let v: Vec<DocResult<i32>> = killed.wrap(vec![Ok(1), Ok(2)].into_iter()).collect();
        assert_eq!(v.len(), 1);
        assert!(v[0].is_err());
    }
}
