//! Two seams a layer above docdb uses without changing its API (a sharded cluster's shard
//! does both, see the `cluster` crate):
//!
//! - **An ownership filter for the calls made on this thread.** [`with_ownership`] installs a
//!   predicate for the duration of a closure; every query planned inside it (find, count,
//!   distinct, aggregate, and the document selection of update, delete and findAndModify)
//!   keeps only the documents the predicate accepts, before sort, skip and limit. A cursor
//!   keeps the filter it was planned with for its whole life (getMore runs on other threads).
//!   A shard hides its orphans this way: documents of ranges it does not own.
//! - **A write hook on every document write.** [`WriteHook::before`] runs inside the write
//!   primitive, after unique-key checks and before the engine batch is applied: it may refuse
//!   the write, add entries to the same atomic batch, and hand back a token that is told
//!   whether the batch was applied.

use bson::Document;
use engine::WriteBatch;
use parking_lot::RwLock;
use query::error::DocResult;
use std::cell::RefCell;
use std::sync::Arc;

/// A document predicate: `true` keeps the document.
#[derive(Clone)]
pub struct OwnershipFilter(Arc<dyn Fn(&Document) -> bool + Send + Sync>);

impl OwnershipFilter {
    pub fn new(f: impl Fn(&Document) -> bool + Send + Sync + 'static) -> Self {
        OwnershipFilter(Arc::new(f))
    }
    pub fn keeps(&self, doc: &Document) -> bool {
        (self.0)(doc)
    }
}

impl std::fmt::Debug for OwnershipFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OwnershipFilter")
    }
}

thread_local! {
    static OWNERSHIP: RefCell<Option<OwnershipFilter>> = const { RefCell::new(None) };
}

/// Runs `body` with `filter` applied to every query it plans on this thread; the previous
/// filter (if any) is restored afterwards, also when `body` panics.
pub fn with_ownership<T>(filter: OwnershipFilter, body: impl FnOnce() -> T) -> T {
    struct Restore(Option<OwnershipFilter>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let prev = self.0.take();
            OWNERSHIP.with(|o| *o.borrow_mut() = prev);
        }
    }
    let prev = OWNERSHIP.with(|o| o.borrow_mut().replace(filter));
    let _restore = Restore(prev);
    body()
}

/// The filter installed on this thread, if any.
pub(crate) fn current_ownership() -> Option<OwnershipFilter> {
    OWNERSHIP.with(|o| o.borrow().clone())
}

/// Told the outcome of one document write.
pub trait WriteToken: Send {
    /// `applied`: the engine batch was written; otherwise it failed and nothing changed.
    fn finish(self: Box<Self>, applied: bool);
}

/// Sees every document write of the database (insert: `old` none; delete: `new` none).
pub trait WriteHook: Send + Sync {
    /// Refuse the write with an error, or let it go on (optionally adding to its batch and
    /// returning a token for its outcome).
    fn before(
        &self,
        ns: &str,
        old: Option<&Document>,
        new: Option<&Document>,
        batch: &mut WriteBatch,
    ) -> DocResult<Option<Box<dyn WriteToken>>>;
}

/// The hooks a database's collections share.
#[derive(Default)]
pub struct Hooks {
    write: RwLock<Option<Arc<dyn WriteHook>>>,
    /// A replica-set member's oplog, which logs every write in the write's own batch.
    oplog: Option<Arc<crate::oplog::Oplog>>,
    /// The open transactions, whose keys a plain document write must not overwrite.
    txns: Option<Arc<crate::txn::Txns>>,
}

impl Hooks {
    pub fn new(
        oplog: Option<Arc<crate::oplog::Oplog>>,
        txns: Option<Arc<crate::txn::Txns>>,
    ) -> Hooks {
        Hooks {
            write: RwLock::default(),
            oplog,
            txns,
        }
    }
    pub fn oplog(&self) -> Option<&Arc<crate::oplog::Oplog>> {
        self.oplog.as_ref()
    }
    pub fn txns(&self) -> Option<&Arc<crate::txn::Txns>> {
        self.txns.as_ref()
    }
    pub fn set_write_hook(&self, hook: Option<Arc<dyn WriteHook>>) {
        *self.write.write() = hook;
    }
    pub fn write_hook(&self) -> Option<Arc<dyn WriteHook>> {
        self.write.read().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn ownership_is_scoped_and_restored() {
        assert!(current_ownership().is_none());
        let outer = OwnershipFilter::new(|d| d.get_i32("a") == Ok(1));
        with_ownership(outer, || {
            assert!(current_ownership().unwrap().keeps(&doc! {"a": 1}));
            with_ownership(OwnershipFilter::new(|_| false), || {
                assert!(!current_ownership().unwrap().keeps(&doc! {"a": 1}));
            });
            assert!(current_ownership().unwrap().keeps(&doc! {"a": 1}));
        });
        assert!(current_ownership().is_none());
        let r = std::panic::catch_unwind(|| {
            with_ownership(OwnershipFilter::new(|_| true), || panic!("boom"))
        });
        assert!(r.is_err());
        assert!(current_ownership().is_none());
    }
}
