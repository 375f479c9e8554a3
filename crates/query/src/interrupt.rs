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
//!   it): CursorKilled (237); or
//! - something it ran failed where no error can be returned ([`Interrupt::fail`]: a `$where`
//!   that threw, deep in a matcher that answers true or false): that error.
//!
//! The server makes a command's interrupt its thread's [`Interrupt::current`] while the command
//! runs, so code that cannot be handed one (server-side JavaScript, `crate::js`) reaches it.
//!
//! The budget counts only time the operation is running: a cursor's owner [`Interrupt::pause`]s
//! it when a batch has been sent and [`Interrupt::resume`]s it at the next getMore, so time
//! spent waiting for the client is not charged, as in mongod.
//!
//! Clones share state: the clone inside a cursor's iterator and the one the server keeps see
//! the same budget and the same kill flag.

use crate::error::{DocError, DocResult};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

#[derive(Clone, Default)]
pub struct Interrupt {
    inner: Option<Arc<Inner>>,
}

/// Why an operation was killed (`Inner::killed`).
const RUNNING: u8 = 0;
const KILLED_OP: u8 = 1;
const KILLED_CURSOR: u8 = 2;
const FAILED: u8 = 3;

/// `deadline` while the operation is paused (not running, so not charged).
const PAUSED: u64 = u64::MAX;

struct Inner {
    killed: AtomicU8,
    /// Whether the operation has a time budget at all (fixed at creation): without one, a
    /// check is one atomic load and reads no clock.
    limited: bool,
    /// When the budget runs out, in nanoseconds since [`epoch`]; [`PAUSED`] while paused.
    deadline: AtomicU64,
    /// The budget left while paused. Taken only by `pause` and `resume` (once per batch),
    /// and by a check while paused; never per document.
    left_while_paused: Mutex<Duration>,
    /// The error of [`Interrupt::fail`] (set before `killed` becomes [`FAILED`]).
    failure: Mutex<Option<DocError>>,
}

thread_local! {
    /// The interrupt of the operation this thread runs ([`Interrupt::set_current`]).
    static CURRENT: RefCell<Option<Interrupt>> = const { RefCell::new(None) };
}

/// The clock deadlines are counted on (the first use of an interrupt with a budget).
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_nanos() -> u64 {
    u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(PAUSED - 1)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(PAUSED - 1)
}

fn expired() -> DocError {
    DocError::with_code(50, "MaxTimeMSExpired", "operation exceeded time limit")
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
        let budget = max_time.unwrap_or_default();
        let deadline = now_nanos().saturating_add(nanos(budget)).min(PAUSED - 1);
        Interrupt {
            inner: Some(Arc::new(Inner {
                killed: AtomicU8::new(RUNNING),
                limited: max_time.is_some(),
                deadline: AtomicU64::new(deadline),
                left_while_paused: Mutex::new(budget),
                failure: Mutex::new(None),
            })),
        }
    }

    /// Whether the operation has a time budget (`maxTimeMS`).
    pub fn has_budget(&self) -> bool {
        self.inner.as_ref().is_some_and(|i| i.limited)
    }

    /// Fails if the operation should stop. The hot path of every scan: an atomic load, and
    /// with a budget a second one and a clock read (vDSO, no system call); no lock.
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
            FAILED => {
                let failure = inner.failure.lock().clone();
                return Err(failure.expect("a failed interrupt holds its error"));
            }
            _ => {
                return Err(DocError::with_code(
                    11601,
                    "Interrupted",
                    "operation was interrupted",
                ))
            }
        }
        if !inner.limited {
            return Ok(());
        }
        let deadline = inner.deadline.load(Ordering::Acquire);
        let spent = if deadline == PAUSED {
            inner.left_while_paused.lock().is_zero()
        } else {
            now_nanos() >= deadline
        };
        if spent {
            return Err(expired());
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

    /// Someone asked the operation to stop ([`Interrupt::kill`] or [`Interrupt::kill_cursor`]).
    pub fn is_killed(&self) -> bool {
        self.inner
            .as_ref()
            .is_some_and(|i| i.killed.load(Ordering::Relaxed) != RUNNING)
    }

    /// The cursor of this operation was killed ([`Interrupt::kill_cursor`]).
    pub fn cursor_killed(&self) -> bool {
        self.inner
            .as_ref()
            .is_some_and(|i| i.killed.load(Ordering::Relaxed) == KILLED_CURSOR)
    }

    /// Stops the operation with `error` at its next yield point (the first reason stays).
    pub fn fail(&self, error: DocError) {
        if let Some(i) = &self.inner {
            let mut failure = i.failure.lock();
            if i.killed.load(Ordering::Relaxed) == RUNNING {
                *failure = Some(error);
                drop(failure);
                self.kill_with(FAILED);
            }
        }
    }

    /// The interrupt of the operation this thread runs, if one was made current.
    pub fn current() -> Option<Interrupt> {
        CURRENT.with(|c| c.borrow().clone())
    }

    /// Makes `interrupt` this thread's current one; returns the one it replaces (to put back
    /// when the operation ends).
    pub fn set_current(interrupt: Option<Interrupt>) -> Option<Interrupt> {
        CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), interrupt))
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
        let Some(i) = self.inner.as_ref().filter(|i| i.limited) else {
            return;
        };
        let mut left = i.left_while_paused.lock();
        let deadline = i.deadline.swap(PAUSED, Ordering::AcqRel);
        if deadline != PAUSED {
            *left = Duration::from_nanos(deadline.saturating_sub(now_nanos()));
        }
    }

    /// Removes the time budget while keeping the kill flag: a tailable awaitData cursor's
    /// `maxTimeMS` bounds its find only (its getMores' `maxTimeMS` is how long they wait for
    /// documents), as in mongod.
    pub fn lift_budget(&self) {
        let Some(i) = self.inner.as_ref().filter(|i| i.limited) else {
            return;
        };
        let mut left = i.left_while_paused.lock();
        *left = Duration::from_nanos(PAUSED - 1);
        if i.deadline.load(Ordering::Acquire) != PAUSED {
            i.deadline.store(PAUSED - 1, Ordering::Release);
        }
    }

    /// Starts charging time again.
    pub fn resume(&self) {
        let Some(i) = self.inner.as_ref().filter(|i| i.limited) else {
            return;
        };
        let left = i.left_while_paused.lock();
        if i.deadline.load(Ordering::Acquire) == PAUSED {
            let deadline = now_nanos().saturating_add(nanos(*left)).min(PAUSED - 1);
            i.deadline.store(deadline, Ordering::Release);
        }
    }

    /// Wraps an iterator so that reading every item is a yield point: the check comes before
    /// the item is read, the first failed check is yielded as an error, and nothing more is
    /// read after it.
    pub fn wrap<I, T>(&self, mut it: I) -> impl Iterator<Item = DocResult<T>> + Send
    where
        I: Iterator<Item = DocResult<T>> + Send,
        T: Send,
    {
        let me = self.clone();
        let mut failed = false;
        std::iter::from_fn(move || {
            if failed {
                return None;
            }
            if let Err(e) = me.check() {
                failed = true;
                return Some(Err(e));
            }
            it.next()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn a_lifted_budget_never_expires_but_kills_still_stop() {
        let i = Interrupt::new(Some(Duration::from_millis(1)));
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(i.check().unwrap_err().code, 50);
        i.pause();
        i.lift_budget();
        i.resume();
        assert!(i.check().is_ok());
        i.pause();
        assert!(i.check().is_ok());
        i.kill_cursor();
        assert_eq!(i.check().unwrap_err().code, 237);
    }

    #[test]
    fn a_spent_budget_stays_spent_through_pause_and_resume() {
        assert!(Interrupt::none().check().is_ok());
        let i = Interrupt::new(Some(Duration::ZERO));
        assert_eq!(i.check().unwrap_err().code, 50);
        i.pause();
        assert_eq!(i.check().unwrap_err().code, 50);
        i.resume();
        assert_eq!(i.check().unwrap_err().code, 50);
    }

    #[test]
    fn pause_keeps_the_budget_left_and_resume_charges_it_again() {
        let hour = Duration::from_secs(3600);
        let i = Interrupt::new(Some(hour));
        i.pause();
        let left = *i.inner.as_ref().unwrap().left_while_paused.lock();
        assert!(left > Duration::ZERO && left <= hour);
        assert_eq!(
            i.inner.as_ref().unwrap().deadline.load(Ordering::Relaxed),
            PAUSED
        );
        i.pause(); // a second pause changes nothing
        assert_eq!(*i.inner.as_ref().unwrap().left_while_paused.lock(), left);
        i.resume();
        let deadline = i.inner.as_ref().unwrap().deadline.load(Ordering::Relaxed);
        assert!(deadline != PAUSED && deadline >= nanos(left));
        assert!(i.check().is_ok());
        // Without a budget, pause and resume have nothing to account.
        let unlimited = Interrupt::new(None);
        unlimited.pause();
        assert!(unlimited.check().is_ok());
    }

    #[test]
    fn a_failure_is_the_next_checks_error_and_the_first_reason_stays() {
        let i = Interrupt::new(None);
        i.fail(DocError::with_code(139, "JSInterpreterFailure", "boom"));
        assert_eq!(i.check().unwrap_err().code, 139);
        assert!(i.is_killed());
        i.kill();
        i.fail(DocError::with_code(2, "BadValue", "second"));
        assert_eq!(i.check().unwrap_err().code, 139);
        let killed = Interrupt::new(None);
        killed.kill();
        killed.fail(DocError::with_code(139, "JSInterpreterFailure", "late"));
        assert_eq!(killed.check().unwrap_err().code, 11601);
        // The thread's current interrupt is set and put back.
        assert!(Interrupt::set_current(Some(i.clone())).is_none());
        assert_eq!(Interrupt::current(), Some(i.clone()));
        assert_eq!(Interrupt::set_current(None), Some(i));
        assert!(Interrupt::current().is_none());
    }

    /// A killed operation stops pulling from its source: the item in flight is replaced by
    /// the error, and nothing after it is read (a kill is not only a flag that flips).
    #[test]
    fn a_killed_iteration_stops_reading_its_source() {
        let pulled = Arc::new(AtomicUsize::new(0));
        let counter = pulled.clone();
        let source = (0..1000).map(move |n| {
            counter.fetch_add(1, Ordering::Relaxed);
            Ok::<i32, DocError>(n)
        });
        let op = Interrupt::new(Some(Duration::from_secs(3600)));
        let killer = op.clone(); // what killOp holds: a clone sharing the flag
        let mut it = op.wrap(source);
        assert_eq!(it.next().unwrap().unwrap(), 0);
        assert_eq!(it.next().unwrap().unwrap(), 1);
        killer.kill();
        assert_eq!(it.next().unwrap().unwrap_err().code, 11601);
        assert!(it.next().is_none());
        assert_eq!(pulled.load(Ordering::Relaxed), 2);
        assert_eq!(op.check().unwrap_err().code, 11601);
    }
}
