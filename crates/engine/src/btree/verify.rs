//! `verify`: every block of a table read back and checked (WiredTiger `bt_vrfy.c`).

use super::tree::{collect_internal_addrs, Table};
use crate::error::Result;
use crate::page::{self, StoredValue};
use placement::PageKind;

impl Table {
    /// Reads every block of the tree from the file and checks it: checksums, page kinds, key
    /// order. Internal pages and the on-disk image of resident leaves are read too, so a
    /// corrupted block is found even while its page is cached. Returns the number of entries.
    pub fn verify(&self) -> Result<u64> {
        {
            // Read under the root latch: a checkpoint rewriting internal pages (and freeing
            // the old ones) waits, so no address read here is free space.
            let root = self.root.read();
            let mut internal = Vec::new();
            collect_internal_addrs(&root, &mut internal);
            for addr in internal {
                let (kind, _) = self.file.read(addr)?;
                if kind == PageKind::Leaf {
                    return Err(self.corrupt(addr.offset, "expected an internal page".into()));
                }
            }
        }
        let mut n = 0u64;
        let mut prev: Option<Vec<u8>> = None;
        for leaf in self.leaves() {
            let st = leaf.latch();
            if let (Some(_), Some(addr)) = (st.page(), st.addr()) {
                let (kind, _) = self.file.read(addr)?;
                if kind != PageKind::Leaf {
                    return Err(self.corrupt(addr.offset, "expected a leaf".into()));
                }
            }
            let mut check_keys = |keys: &mut dyn Iterator<Item = Vec<u8>>| -> Result<()> {
                for k in keys {
                    if let Some(p) = &prev {
                        if *p >= k {
                            return Err(self.corrupt(0, "keys out of order".into()));
                        }
                    }
                    prev = Some(k);
                    n += 1;
                }
                Ok(())
            };
            match (st.page(), st.addr()) {
                (Some(p), _) => {
                    check_keys(&mut p.entries(crate::txn::LATEST).map(|(k, _)| k.to_vec()))?
                }
                (None, Some(addr)) => {
                    let (kind, payload) = self.file.read(addr)?;
                    if kind != PageKind::Leaf {
                        return Err(self.corrupt(addr.offset, "expected a leaf".into()));
                    }
                    let mut keys = Vec::new();
                    let mut ovfl = Vec::new();
                    page::decode_leaf(&payload, |k, v| {
                        if let StoredValue::Overflow { addr, .. } = v {
                            ovfl.push(addr);
                        }
                        keys.push(k);
                    })
                    .map_err(|w| self.corrupt(addr.offset, w))?;
                    for a in ovfl {
                        self.file.read(a)?;
                    }
                    check_keys(&mut keys.into_iter())?;
                }
                (None, None) => unreachable!("a leaf is resident or on disk"),
            }
        }
        Ok(n)
    }
}
