//! The B+tree (WiredTiger `src/btree`): one [`Table`] per table file.
//!
//! | file | job |
//! | --- | --- |
//! | `tree.rs` | the tree: descent, page reads, updates, applying reconciliation results, internal pages |
//! | `latch.rs` | the table's `structure` and `writers` latches as guards the functions that need them take |
//! | `split.rs` | structure changes: a split leaf's pieces into its parent, internal splits up to the root |
//! | `scan.rs` | range reads for cursors |
//! | `verify.rs` | every block read back and checked |
//! | `salvage.rs` | leaves whose image fails its checks given up, the rest kept (`flashdoc repair`) |
//! | `bulk.rs` | a new table from entries in key order, each leaf written once (compaction) |

mod bulk;
mod latch;
mod salvage;
mod scan;
mod split;
mod tree;
mod verify;

pub use bulk::bulk_load_size;
pub use latch::{
    HoldsStructure, StructureExclusive, StructureShared, WritersExclusive, WritersShared,
};
pub use salvage::LostLeaf;
pub use scan::fetch_range;
pub use tree::{Located, Table, TreeShared, MAX_KEY_LEN};
