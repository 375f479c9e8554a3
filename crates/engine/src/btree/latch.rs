//! A table's two latches as types (WiredTiger's `WT_ASSERT_SPINLOCK_OWNED`, made static): a
//! guard proves that its holder has the latch, and the functions whose rules need the latch
//! take the guard as an argument, so a call without it does not compile. Each guard names its
//! table, and a function given another table's guard panics.
//!
//! - `structure` (`StructureShared`, `StructureExclusive`; rules in `tree.rs`): reconciliation
//!   takes either (`HoldsStructure`); writing the internal pages, ending a checkpoint's cut on
//!   the table and releasing its pages take it exclusively.
//! - `writers` (`WritersShared`, `WritersExclusive`): writers of the table hold it shared while
//!   they apply a batch (`Table::apply`); a compaction holds it exclusively while it copies
//!   the table, so no write lands in the copy's source after it was read. Readers never take
//!   it. Its guards own their hold (they outlive a borrow of the table).

use super::tree::Table;
use parking_lot::{ArcRwLockReadGuard, ArcRwLockWriteGuard, RawRwLock, RwLockReadGuard};
use parking_lot::{RwLock, RwLockWriteGuard};
use std::sync::Arc;

/// The table's `structure` latch, held shared.
pub struct StructureShared<'a> {
    table: &'a Table,
    _hold: RwLockReadGuard<'a, ()>,
}

/// The table's `structure` latch, held exclusively.
pub struct StructureExclusive<'a> {
    table: &'a Table,
    _hold: RwLockWriteGuard<'a, ()>,
}

mod sealed {
    /// Only this file's guards prove a hold.
    pub trait Sealed {}
}

/// A hold of a table's `structure` latch, shared or exclusive.
pub trait HoldsStructure: sealed::Sealed {
    /// The table whose latch is held.
    fn holds(&self) -> &Table;
}

impl sealed::Sealed for StructureShared<'_> {}
impl sealed::Sealed for StructureExclusive<'_> {}

impl HoldsStructure for StructureShared<'_> {
    fn holds(&self) -> &Table {
        self.table
    }
}

impl HoldsStructure for StructureExclusive<'_> {
    fn holds(&self) -> &Table {
        self.table
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

impl WritersShared {
    /// Whether this is a hold of `table`'s latch.
    pub fn is_of(&self, table: &Table) -> bool {
        Arc::ptr_eq(
            ArcRwLockReadGuard::rwlock(&self.hold),
            &table.latches.writers,
        )
    }
}

impl WritersExclusive {
    /// Whether this is a hold of `table`'s latch.
    pub fn is_of(&self, table: &Table) -> bool {
        Arc::ptr_eq(
            ArcRwLockWriteGuard::rwlock(&self.hold),
            &table.latches.writers,
        )
    }
}

impl Table {
    /// Takes `structure` shared, waiting for it.
    pub fn structure_shared(&self) -> StructureShared<'_> {
        StructureShared {
            table: self,
            _hold: self.latches.structure.read(),
        }
    }

    /// Takes `structure` shared if no one holds it exclusively (nor waits to).
    pub fn try_structure_shared(&self) -> Option<StructureShared<'_>> {
        Some(StructureShared {
            table: self,
            _hold: self.latches.structure.try_read()?,
        })
    }

    /// Takes `structure` exclusively, waiting for it.
    pub fn structure_exclusive(&self) -> StructureExclusive<'_> {
        StructureExclusive {
            table: self,
            _hold: self.latches.structure.write(),
        }
    }

    /// Takes `writers` shared, waiting for it.
    pub fn writers_shared(&self) -> WritersShared {
        WritersShared {
            hold: self.latches.writers.read_arc(),
        }
    }

    /// Takes `writers` exclusively, waiting for it.
    pub fn writers_exclusive(&self) -> WritersExclusive {
        WritersExclusive {
            hold: self.latches.writers.write_arc(),
        }
    }

    /// Asserts that `held` is this table's `structure` latch.
    pub(super) fn assert_structure(&self, held: &impl HoldsStructure) {
        assert!(
            std::ptr::eq(held.holds(), self),
            "table {} is changed under the structure latch of table {}",
            self.id,
            held.holds().id
        );
    }
}

/// The latches' storage in a table: what `Table` keeps, and only this file takes.
pub(super) struct Latches {
    pub(super) structure: RwLock<()>,
    pub(super) writers: Arc<RwLock<()>>,
}

impl Latches {
    pub(super) fn new() -> Latches {
        Latches {
            structure: RwLock::new(()),
            writers: Arc::new(RwLock::new(())),
        }
    }
}
