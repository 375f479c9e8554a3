//! A table's two latches as types (WiredTiger's `WT_ASSERT_SPINLOCK_OWNED`, made static): a
//! guard proves that its holder has the latch, and the functions whose rules need the latch
//! take the guard as an argument, so a call without it does not compile. Each guard names the
//! latch it holds, and a function given another table's guard panics (`Table`'s methods take
//! the guards and check them; this file knows nothing of a table but its id).
//!
//! - `structure` (`StructureShared`, `StructureExclusive`; rules in `tree.rs`): reconciliation
//!   takes either (`HoldsStructure`); writing the internal pages, ending a checkpoint's cut on
//!   the table and releasing its pages take it exclusively.
//! - `writers` (`WritersShared`, `WritersExclusive`): writers of the table hold it shared while
//!   they apply a batch (`Table::apply`); a compaction holds it exclusively while it copies
//!   the table, so no write lands in the copy's source after it was read. Readers never take
//!   it. Its guards own their hold (they outlive a borrow of the table).

use parking_lot::{ArcRwLockReadGuard, ArcRwLockWriteGuard, RawRwLock, RwLockReadGuard};
use parking_lot::{RwLock, RwLockWriteGuard};
use std::sync::Arc;

/// A table's two latches: what `Table` keeps, and only this file takes. Knows its table's id,
/// which every guard carries for the message of a mismatch.
pub struct Latches {
    table: u32,
    structure: RwLock<()>,
    writers: Arc<RwLock<()>>,
}

/// The table's `structure` latch, held shared.
pub struct StructureShared<'a> {
    latches: &'a Latches,
    _hold: RwLockReadGuard<'a, ()>,
}

/// The table's `structure` latch, held exclusively.
pub struct StructureExclusive<'a> {
    latches: &'a Latches,
    _hold: RwLockWriteGuard<'a, ()>,
}

mod sealed {
    /// Only this file's guards prove a hold.
    pub trait Sealed {}
}

/// A hold of a table's `structure` latch, shared or exclusive.
pub trait HoldsStructure: sealed::Sealed {
    /// The latches of the table whose `structure` is held.
    fn latches(&self) -> &Latches;
    /// That table's id.
    fn table(&self) -> u32 {
        self.latches().table
    }
}

impl sealed::Sealed for StructureShared<'_> {}
impl sealed::Sealed for StructureExclusive<'_> {}

impl HoldsStructure for StructureShared<'_> {
    fn latches(&self) -> &Latches {
        self.latches
    }
}

impl HoldsStructure for StructureExclusive<'_> {
    fn latches(&self) -> &Latches {
        self.latches
    }
}

/// The table's `writers` latch, held shared (a batch applying to it).
pub struct WritersShared {
    hold: ArcRwLockReadGuard<RawRwLock, ()>,
}

/// The table's `writers` latch, held exclusively (a compaction copying it).
pub struct WritersExclusive {
    hold: ArcRwLockWriteGuard<RawRwLock, ()>,
}

impl Latches {
    pub(super) fn new(table: u32) -> Latches {
        Latches {
            table,
            structure: RwLock::new(()),
            writers: Arc::new(RwLock::new(())),
        }
    }

    /// Takes `structure` shared, waiting for it.
    pub(super) fn structure_shared(&self) -> StructureShared<'_> {
        StructureShared {
            latches: self,
            _hold: self.structure.read(),
        }
    }

    /// Takes `structure` shared if no one holds it exclusively (nor waits to).
    pub(super) fn try_structure_shared(&self) -> Option<StructureShared<'_>> {
        Some(StructureShared {
            latches: self,
            _hold: self.structure.try_read()?,
        })
    }

    /// Takes `structure` exclusively, waiting for it.
    pub(super) fn structure_exclusive(&self) -> StructureExclusive<'_> {
        StructureExclusive {
            latches: self,
            _hold: self.structure.write(),
        }
    }

    /// Takes `writers` shared, waiting for it.
    pub(super) fn writers_shared(&self) -> WritersShared {
        WritersShared {
            hold: self.writers.read_arc(),
        }
    }

    /// Takes `writers` exclusively, waiting for it.
    pub(super) fn writers_exclusive(&self) -> WritersExclusive {
        WritersExclusive {
            hold: self.writers.write_arc(),
        }
    }

    /// Whether `held` is a hold of these latches' `structure`.
    pub(super) fn holds_structure(&self, held: &impl HoldsStructure) -> bool {
        std::ptr::eq(held.latches(), self)
    }

    /// Whether `held` is a shared hold of these latches' `writers`.
    pub(super) fn holds_writers(&self, held: &WritersShared) -> bool {
        Arc::ptr_eq(ArcRwLockReadGuard::rwlock(&held.hold), &self.writers)
    }

    /// Whether `held` is an exclusive hold of these latches' `writers`.
    pub(super) fn excludes_writers(&self, held: &WritersExclusive) -> bool {
        Arc::ptr_eq(ArcRwLockWriteGuard::rwlock(&held.hold), &self.writers)
    }
}

#[cfg(test)]
mod tests {
    //! Each function a latch's rule binds refuses another table's guard.

    use super::super::tree::{Table, TreeShared};
    use super::*;
    use crate::block::BlockFile;
    use crate::cache::Cache;
    use crate::config::{Allocation, TableConfig};
    use crate::io::{FileRole, Io};
    use placement::{FileKind, WriteCause};
    use std::sync::atomic::AtomicU64;

    /// Two new tables of one engine (ids 1 and 2), in `dir`.
    fn two_tables(dir: &std::path::Path) -> (Table, Table) {
        let io = Arc::new(Io::quiet());
        let shared = TreeShared {
            cache: Arc::new(Cache::new(64 << 20, 80, 95, 5, 20)),
            txns: Arc::new(crate::txn::Txns::default()),
            leaf_ids: Arc::new(AtomicU64::new(1)),
        };
        let table = |id: u32| {
            let file = BlockFile::create(
                &dir.join(format!("t{id}.fdb")),
                FileRole::of(FileKind::Collection),
                Allocation::best(),
                io.clone(),
            )
            .unwrap();
            let cfg = TableConfig::collection();
            Table::new(id, format!("t{id}"), cfg, file, shared.clone())
        };
        (table(1), table(2))
    }

    #[test]
    fn a_tables_own_guards_are_taken() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = two_tables(dir.path());
        let held = a.structure_exclusive();
        assert!(a.try_structure_shared().is_none(), "held exclusively");
        assert!(b.try_structure_shared().is_some(), "another table's latch");
        let leaf = a.leaf_for(b"k");
        assert_eq!(
            a.reconcile(&held, &leaf, WriteCause::Other).unwrap().len(),
            1
        );
        assert!(a.write_internal_pages(&held).unwrap().is_some());
        drop(held);
        let writing = a.writers_shared();
        assert!(a.latches.holds_writers(&writing) && !b.latches.holds_writers(&writing));
        let mut st = leaf.latch();
        a.apply(&writing, &mut st, b"k", Some(b"v"), 1, 0);
        assert!(st.is_dirty());
    }

    #[test]
    #[should_panic(expected = "under the structure latch of table 2")]
    fn reconciliation_refuses_another_tables_structure_latch() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = two_tables(dir.path());
        let leaf = a.leaf_for(b"k");
        let _ = a.reconcile(&b.structure_shared(), &leaf, WriteCause::Other);
    }

    #[test]
    #[should_panic(expected = "under the structure latch of table 2")]
    fn internal_pages_refuse_another_tables_structure_latch() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = two_tables(dir.path());
        let _ = a.write_internal_pages(&b.structure_exclusive());
    }

    #[test]
    #[should_panic(expected = "under the structure latch of table 2")]
    fn a_cut_does_not_end_under_another_tables_structure_latch() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = two_tables(dir.path());
        a.open_cut(5);
        a.close_cut(&b.structure_exclusive());
    }

    #[test]
    #[should_panic(expected = "under the structure latch of table 2")]
    fn pages_are_not_released_under_another_tables_structure_latch() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = two_tables(dir.path());
        a.release_cache(&b.structure_exclusive());
    }

    #[test]
    #[should_panic(expected = "table 1 is copied while its writers go on")]
    fn a_copy_refuses_another_tables_writers_latch() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = two_tables(dir.path());
        a.assert_writers_excluded(&a.writers_exclusive());
        a.assert_writers_excluded(&b.writers_exclusive());
    }

    #[test]
    #[should_panic(expected = "under another table's writers latch")]
    fn a_batch_refuses_another_tables_writers_latch() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = two_tables(dir.path());
        let leaf = a.leaf_for(b"k");
        let mut st = leaf.latch();
        a.apply(&b.writers_shared(), &mut st, b"k", Some(b"v"), 1, 0);
    }
}
