//! Range reads: a cursor's batches copied out of the leaves, one latched leaf at a time.

use super::tree::{Located, Table};
use crate::error::Result;
use crate::kv::KvPair;
use crate::leaf::retired_backoff;
use crate::leaf_page::LeafPage;
use std::ops::Bound;

/// Copies up to `limit` entries of (lo, hi) as a reader at commit number `at` sees them,
/// starting from the proper end, leaf by leaf.
pub fn fetch_range(
    t: &Table,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    reverse: bool,
    limit: usize,
    at: u64,
    out: &mut Vec<KvPair>,
) -> Result<()> {
    if reverse {
        let mut pos: Bound<Vec<u8>> = own(hi);
        let mut retired = 0;
        loop {
            let loc = match &pos {
                Bound::Unbounded => t.locate_last(),
                Bound::Included(k) => t.locate(k),
                Bound::Excluded(k) => t.locate_before(k),
            };
            if !copy_leaf(t, &loc, (lo, as_ref(&pos)), true, limit, at, out)? {
                retired_backoff(retired);
                retired += 1;
                continue;
            }
            if out.len() >= limit {
                return Ok(());
            }
            match loc.lower {
                None => return Ok(()),
                Some(l) => {
                    let below_range = match lo {
                        Bound::Unbounded => false,
                        Bound::Included(a) | Bound::Excluded(a) => a >= l.as_slice(),
                    };
                    if below_range {
                        return Ok(());
                    }
                    pos = Bound::Excluded(l);
                }
            }
        }
    } else {
        let mut pos: Bound<Vec<u8>> = own(lo);
        let mut retired = 0;
        loop {
            let loc = match &pos {
                Bound::Unbounded => t.locate(&[]),
                Bound::Included(k) | Bound::Excluded(k) => t.locate(k),
            };
            if !copy_leaf(t, &loc, (as_ref(&pos), hi), false, limit, at, out)? {
                retired_backoff(retired);
                retired += 1;
                continue;
            }
            if out.len() >= limit {
                return Ok(());
            }
            match loc.upper {
                None => return Ok(()),
                Some(u) => {
                    let past_range = match hi {
                        Bound::Unbounded => false,
                        Bound::Included(b) => u.as_slice() > b,
                        Bound::Excluded(b) => u.as_slice() >= b,
                    };
                    if past_range {
                        return Ok(());
                    }
                    pos = Bound::Included(u);
                }
            }
        }
    }
}

/// Copies the entries of `range` from the leaf `loc` found, latched and resident, until `out`
/// holds `limit`. Returns false if the leaf was retired meanwhile (the caller looks again).
fn copy_leaf(
    t: &Table,
    loc: &Located,
    range: (Bound<&[u8]>, Bound<&[u8]>),
    reverse: bool,
    limit: usize,
    at: u64,
    out: &mut Vec<KvPair>,
) -> Result<bool> {
    let mut st = loc.leaf.latch();
    if loc.leaf.is_retired() {
        return Ok(false);
    }
    t.ensure_loaded(&mut st)?;
    let page = st.page().expect("a loaded leaf is resident");
    copy_range(page, range.0, range.1, reverse, limit - out.len(), at, out);
    Ok(true)
}

fn own(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Copies the entries of a latched leaf that fall in (lo, hi) as a reader at `at` sees them,
/// in the given direction, at most `limit` of them.
fn copy_range(
    page: &LeafPage,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    reverse: bool,
    limit: usize,
    at: u64,
    out: &mut Vec<(Vec<u8>, Vec<u8>)>,
) {
    if crate::cursor::empty_range(lo, hi) || limit == 0 {
        return;
    }
    let it = page
        .range(lo, hi, reverse, at)
        .map(|(k, v)| (k.to_vec(), v.bytes().to_vec()));
    out.extend(it.take(limit));
}
