//! What a command's scans examine: each scan's counters ([`ExecStats`]), and the per-thread
//! watch the server keeps around a command to sum them (the profiler's `keysExamined`,
//! `docsExamined` and `planSummary`). Every scan kind counts here: the cursor's and the
//! `$near` scan's.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What the scans one command ran examined (the profiler's `keysExamined`, `docsExamined`
/// and `planSummary`), collected per thread while an [`ExecWatch`] lives.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExecTotals {
    pub keys_examined: u64,
    pub docs_examined: u64,
    /// The first scan's plan, as mongod summarizes it (`COLLSCAN`, `IXSCAN { a: 1 }`).
    pub plan_summary: Option<String>,
}

struct Watched {
    stats: Arc<ExecStats>,
    keys_before: u64,
    docs_before: u64,
    summary: Arc<str>,
}

/// Scans a watch follows at most (a command runs a bounded number: one per `$lookup` input
/// document at worst; past this the totals stop growing rather than the list).
const MAX_WATCHED: usize = 4096;

thread_local! {
    static WATCHED: std::cell::RefCell<Option<Vec<Watched>>> = const { std::cell::RefCell::new(None) };
}

/// Collects the scans this thread runs until dropped (nested watches restore the outer one).
pub struct ExecWatch {
    outer: Option<Vec<Watched>>,
}

/// Starts collecting this thread's scans (the server does, around each command).
pub fn watch() -> ExecWatch {
    let outer = WATCHED.with(|w| w.borrow_mut().replace(Vec::new()));
    ExecWatch { outer }
}

impl ExecWatch {
    /// What the scans examined since they were registered.
    pub fn totals(&self) -> ExecTotals {
        WATCHED.with(|w| {
            let mut t = ExecTotals::default();
            for s in w.borrow().iter().flatten() {
                t.keys_examined += s.stats.keys_examined.load(Ordering::Relaxed) - s.keys_before;
                t.docs_examined += s.stats.docs_examined.load(Ordering::Relaxed) - s.docs_before;
                t.plan_summary.get_or_insert_with(|| s.summary.to_string());
            }
            t
        })
    }
}

impl Drop for ExecWatch {
    fn drop(&mut self) {
        let outer = self.outer.take();
        WATCHED.with(|w| *w.borrow_mut() = outer);
    }
}

pub(crate) fn register(stats: &Arc<ExecStats>, summary: &Arc<str>) {
    WATCHED.with(|w| {
        if let Some(list) = w.borrow_mut().as_mut() {
            if list.len() < MAX_WATCHED {
                list.push(Watched {
                    stats: stats.clone(),
                    keys_before: stats.keys_examined.load(Ordering::Relaxed),
                    docs_before: stats.docs_examined.load(Ordering::Relaxed),
                    summary: summary.clone(),
                });
            }
        }
    })
}

#[derive(Default, Debug)]
pub struct ExecStats {
    pub keys_examined: AtomicU64,
    pub docs_examined: AtomicU64,
    /// Documents that passed the filter (all examined ones when there is none).
    pub matched: AtomicU64,
}
