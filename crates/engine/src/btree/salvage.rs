//! Salvage (WiredTiger `bt_salvage.c`, for leaves): a leaf whose image fails its checks is
//! given up, the rest of the tree kept. `flashdoc repair` runs it on every table.

use super::tree::Table;
use crate::error::{Error, Result};

/// A leaf whose image failed its checks: its entries are lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LostLeaf {
    /// Where the bad image was in the table's file.
    pub offset: u64,
    pub size: u32,
    /// A key that routed to the leaf (its range's lower bound when it was made).
    pub route: Vec<u8>,
    /// The check that failed, naming the file and offset.
    pub why: String,
}

impl Table {
    /// Reads every leaf image that is not resident; each one that fails its checksum or its
    /// decoding (or an overflow block it references does) is replaced by an empty page, which
    /// the next checkpoint writes, and its blocks are freed. The other leaves, and every
    /// resident page, are kept as they are. Returns the leaves given up, in key order. An I/O
    /// error (not damage) stops the salvage and is returned.
    pub fn salvage(&self) -> Result<Vec<LostLeaf>> {
        // No reconciliation, split or checkpoint moves a leaf while it is looked at.
        let _held = self.structure_exclusive();
        let mut lost = Vec::new();
        for leaf in self.leaves() {
            let mut st = leaf.latch();
            let addr = match (st.page(), st.addr()) {
                (None, Some(addr)) => addr,
                _ => continue,
            };
            match self.read_leaf_page(addr) {
                Ok(_) => {}
                Err(e @ (Error::Checksum { .. } | Error::Corrupt { .. })) => {
                    for bad in st.salvage_empty() {
                        self.file.free(bad);
                    }
                    drop(st);
                    self.list_dirty(&leaf);
                    lost.push(LostLeaf {
                        offset: addr.offset,
                        size: addr.size,
                        route: leaf.route().to_vec(),
                        why: e.to_string(),
                    });
                }
                Err(e) => return Err(e),
            }
        }
        Ok(lost)
    }
}
