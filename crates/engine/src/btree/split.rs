//! Splits in the tree's structure (WiredTiger `bt_split.c`): a leaf retired by reconciliation
//! is replaced in its parent by its pieces, and internal nodes grown past their maximum split,
//! up to the root (which grows the tree by one level).

use super::tree::{Child, Internal, Table};
use crate::leaf::Leaf;
use crate::page;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

impl Table {
    /// Puts `new` in place of the retired `old` in its parent, then splits internal nodes
    /// that grew past their maximum, up to the root.
    pub(super) fn replace_leaf(&self, old: &Arc<Leaf>, new: Vec<(Vec<u8>, Arc<Leaf>)>) {
        let mut root = self.root.write();
        let split = self.internal_split;
        let max = self.cfg.internal_page_max as usize;
        let mut siblings = replace_in(&mut root, old, new, split, max, &self.leaf_ids);
        // While the root splits (a very wide split can leave even a new root too large), grow
        // the tree by one level over the old root and its new siblings.
        while let Some(pieces) = siblings {
            let old_root = std::mem::replace(
                &mut *root,
                Internal {
                    keys: Vec::new(),
                    children: Vec::new(),
                    level: 0,
                    addr: None,
                    dirty: AtomicBool::new(true),
                    page_id: 0,
                },
            );
            let level = old_root.level + 1;
            let mut keys = vec![Vec::new()];
            let mut children = vec![Child::Node(Box::new(old_root))];
            for (k, n) in pieces {
                keys.push(k);
                children.push(Child::Node(n));
            }
            *root = Internal {
                keys,
                children,
                level,
                addr: None,
                dirty: AtomicBool::new(true),
                page_id: self.leaf_ids.fetch_add(1, Ordering::Relaxed),
            };
            siblings = (root.image_len() > max && root.children.len() > 2)
                .then(|| split_node(&mut root, split, &self.leaf_ids));
        }
    }
}

/// Replaces `old` under `node`; returns new right siblings of `node` if it had to split.
fn replace_in(
    node: &mut Internal,
    old: &Arc<Leaf>,
    new: Vec<(Vec<u8>, Arc<Leaf>)>,
    split: usize,
    max: usize,
    ids: &AtomicU64,
) -> Option<Vec<(Vec<u8>, Box<Internal>)>> {
    node.mark_dirty();
    let i = node.child_for(old.route());
    match &mut node.children[i] {
        Child::Node(c) => {
            let siblings = replace_in(c, old, new, split, max, ids)?;
            for (j, (k, n)) in siblings.into_iter().enumerate() {
                node.keys.insert(i + 1 + j, k);
                node.children.insert(i + 1 + j, Child::Node(n));
            }
        }
        Child::Leaf(l) => {
            assert!(
                Arc::ptr_eq(l, old),
                "the retired leaf is where its route leads"
            );
            let mut it = new.into_iter();
            let (_, first) = it.next().expect("at least one replacement");
            node.children[i] = Child::Leaf(first);
            for (j, (k, l)) in it.enumerate() {
                node.keys.insert(i + 1 + j, k);
                node.children.insert(i + 1 + j, Child::Leaf(l));
            }
        }
    }
    (node.image_len() > max && node.children.len() > 1).then(|| split_node(node, split, ids))
}

/// Cuts an oversized node: keeps the first piece in place, returns the others.
fn split_node(node: &mut Internal, split: usize, ids: &AtomicU64) -> Vec<(Vec<u8>, Box<Internal>)> {
    let total = node.image_len();
    let pieces = total.div_ceil(split).max(2);
    let target = total.div_ceil(pieces);
    let mut cuts = Vec::new();
    let mut acc = 5;
    for (i, k) in node.keys.iter().enumerate() {
        let e = page::internal_entry_len(k.len());
        if i > 0 && acc + e > target && cuts.len() + 1 < pieces {
            cuts.push(i);
            acc = 5;
        }
        acc += e;
    }
    let mut out = Vec::new();
    for &c in cuts.iter().rev() {
        let mut keys = node.keys.split_off(c);
        let children = node.children.split_off(c);
        let sep = std::mem::take(&mut keys[0]);
        out.push((
            sep,
            Box::new(Internal {
                keys,
                children,
                level: node.level,
                addr: None,
                dirty: AtomicBool::new(true),
                page_id: ids.fetch_add(1, Ordering::Relaxed),
            }),
        ));
    }
    out.reverse();
    node.mark_dirty();
    out
}
