//! Reconciliation (WiredTiger `src/reconcile`): a dirty leaf page — its image merged with its
//! changes — becomes new block(s). It writes the page's new overflow values and its image, cut
//! into pieces of at most the split size, each to a new extent, and returns what happened as
//! data ([`Reconciled`], each piece with its image, from which the page is rebuilt in memory).
//! It never frees the old image and never touches the tree: the tree applies the result
//! (`Table::apply_reconciled`), which frees, retires and edits the parent.

use crate::block::{build_block, Addr, BlockFile};
use crate::config::TableConfig;
use crate::error::Result;
use crate::leaf_page::{LeafPage, ValueRef};
use crate::page::{LeafWriter, StoredValue};
use placement::{PageKind, WriteCause};
use std::sync::atomic::{AtomicU64, Ordering};

/// The outcome of reconciling one leaf.
#[derive(Debug, PartialEq, Eq)]
pub enum Reconciled {
    /// Nothing to write: the page was clean.
    Clean,
    /// One new image replaces the old one.
    Replace(Piece),
    /// The page no longer fits one image: these pieces, in key order, replace it.
    Split(Vec<Piece>),
}

/// One new image: the separator key it starts at (unused for the first piece), the address it
/// was written to, its logical page id (the first piece keeps the page's), and its payload.
#[derive(Debug, PartialEq, Eq)]
pub struct Piece {
    pub separator: Vec<u8>,
    pub addr: Addr,
    pub page_id: u64,
    pub image: Vec<u8>,
}

/// What reconciling a table's leaves needs.
pub struct Reconciler<'a> {
    pub file: &'a BlockFile,
    pub cfg: &'a TableConfig,
    /// The largest image a piece may have (WiredTiger's split size).
    pub leaf_split: usize,
    /// Where new logical page ids come from.
    pub page_ids: &'a AtomicU64,
}

impl Reconciler<'_> {
    /// Writes `page` (dirty, resident) as new block(s), each entry as a reader at `at` sees it
    /// (`LATEST`, or a checkpoint's cut). Overflow values are written once and their addresses
    /// kept in the page. On an error, the leaf images already written are freed and the page
    /// stays dirty.
    pub fn leaf(
        &self,
        page: &mut LeafPage,
        page_id: u64,
        cause: WriteCause,
        at: u64,
    ) -> Result<Reconciled> {
        for (data, a) in page.unwritten_overflow(at) {
            let img = build_block(PageKind::Overflow, data, self.cfg.compressor)?;
            *a = Some(self.file.write(&img, PageKind::Overflow, false, 0, cause)?);
        }
        let chunks = self.chunk(page, at);
        let mut pieces: Vec<Piece> = Vec::with_capacity(chunks.len());
        for (i, (separator, payload)) in chunks.into_iter().enumerate() {
            // The first piece keeps the page's identity; further pieces are new pages.
            let pid = if i == 0 {
                page_id
            } else {
                self.page_ids.fetch_add(1, Ordering::Relaxed)
            };
            let res = build_block(PageKind::Leaf, &payload, self.cfg.compressor)
                .and_then(|img| self.file.write(&img, PageKind::Leaf, false, pid, cause));
            match res {
                Ok(addr) => pieces.push(Piece {
                    separator,
                    addr,
                    page_id: pid,
                    image: payload,
                }),
                Err(e) => {
                    for p in pieces {
                        self.file.free(p.addr);
                    }
                    return Err(e);
                }
            }
        }
        debug_assert!(!pieces.is_empty());
        Ok(if pieces.len() == 1 {
            Reconciled::Replace(pieces.pop().expect("one piece"))
        } else {
            Reconciled::Split(pieces)
        })
    }

    /// Cuts a page into payloads of about equal size, each at most the split size (unless a
    /// single entry is larger). Returns (separator, payload); the first separator is unused.
    fn chunk(&self, page: &LeafPage, at: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
        let pc = self.cfg.prefix_compression;
        fn stored(v: ValueRef<'_>) -> StoredValue<'_> {
            match v {
                ValueRef::Inline(b) => StoredValue::Inline(b),
                ValueRef::Overflow { data, addr } => StoredValue::Overflow {
                    addr: addr.expect("overflow written before its leaf"),
                    len: data.len() as u64,
                },
            }
        }
        // Size without prefix compression bounds the real size from above.
        let probe = LeafWriter::new(false);
        let total: usize = 4 + page
            .entries(at)
            .map(|(k, v)| probe.entry_len(k, &stored(v)))
            .sum::<usize>();
        let pieces = total.div_ceil(self.leaf_split).max(1);
        let target = total.div_ceil(pieces);
        let mut out = Vec::with_capacity(pieces);
        // A piece ends before it passes the split size, or holds one entry larger than that.
        let piece_bytes = |len: usize| len.min(self.leaf_split) + 64;
        let mut w = LeafWriter::with_capacity(pc, piece_bytes(total));
        let mut sep: Vec<u8> = Vec::new();
        let mut prev_key: &[u8] = &[];
        for (k, v) in page.entries(at) {
            let sv = stored(v);
            if !w.is_empty()
                && (w.len() >= target || w.len() + w.entry_len(k, &sv) > self.leaf_split)
                && out.len() + 1 < pieces * 2
            {
                out.push((
                    std::mem::take(&mut sep),
                    std::mem::replace(&mut w, LeafWriter::with_capacity(pc, piece_bytes(target)))
                        .finish(),
                ));
                sep = separator(prev_key, k);
            }
            w.push(k, &sv);
            prev_key = k;
        }
        out.push((sep, w.finish()));
        out
    }
}

/// The shortest key `s` with `prev < s <= next` (WiredTiger's internal-key truncation).
pub(crate) fn separator(prev: &[u8], next: &[u8]) -> Vec<u8> {
    let common = prev.iter().zip(next).take_while(|(a, b)| a == b).count();
    next[..(common + 1).min(next.len())].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Allocation;
    use crate::io::{FileRole, Io};
    use crate::leaf_page::Value;
    use crate::txn::LATEST;
    use placement::FileKind;
    use std::sync::Arc;

    #[test]
    fn separators_are_shortest_between_neighbours() {
        assert_eq!(separator(b"apple", b"apricot"), b"apr".to_vec());
        assert_eq!(separator(b"", b"b"), b"b".to_vec());
        assert_eq!(separator(b"ab", b"abc"), b"abc".to_vec());
    }

    #[test]
    fn a_page_comes_back_as_data_one_image_or_pieces_in_key_order() {
        let dir = tempfile::tempdir().unwrap();
        let io = Arc::new(Io::quiet());
        let file = BlockFile::create(
            &dir.path().join("t"),
            FileRole::of(FileKind::Collection),
            Allocation::best(),
            io,
        )
        .unwrap();
        let cfg = TableConfig {
            compressor: crate::config::Compressor::None,
            ..TableConfig::collection().with_leaf_page_max(4096)
        };
        let ids = AtomicU64::new(100);
        let r = Reconciler {
            file: &file,
            cfg: &cfg,
            leaf_split: cfg.split_size(cfg.leaf_page_max),
            page_ids: &ids,
        };
        let mut small = LeafPage::empty();
        small.apply(b"a", Some(Value::Inline(vec![1; 10])), 1, 0);
        assert!(matches!(
            r.leaf(&mut small, 7, WriteCause::Other, LATEST).unwrap(),
            Reconciled::Replace(_)
        ));
        let mut big = LeafPage::empty();
        for i in 0..100u32 {
            big.apply(
                format!("key{i:04}").as_bytes(),
                Some(Value::Inline(vec![2; 200])),
                u64::from(i) + 1,
                u64::from(i),
            );
        }
        let Reconciled::Split(pieces) = r.leaf(&mut big, 8, WriteCause::Other, LATEST).unwrap()
        else {
            panic!("a 20 KB page in 4 KB leaves splits");
        };
        assert!(pieces.len() >= 5);
        assert_eq!(pieces[0].page_id, 8, "the first piece keeps the page id");
        assert!(pieces
            .windows(2)
            .all(|w| w[0].separator < w[1].separator || w[0].separator.is_empty()));
        assert!(pieces.iter().all(|p| p.addr.size as usize <= 4096));
    }
}
