//! `compact`: a table rewritten densely into fresh extents (MMAPv1's `compact` command): every
//! live record copied once, in key order, into new records of its size class, the index
//! rebuilt bucket by bucket, then the old extents handed to the free extent list. The table's
//! writers wait meanwhile (the engine's lock); a snapshot reader's next batch finds the same
//! values at their new locations.

use crate::btree::{Tree, BUCKET_PAYLOAD, BUCKET_SIZE};
use crate::db::Inner;
use crate::loc::{class_size, size_class, DiskLoc};
use crate::pool::Pool;
use crate::space::{self, Details, EXTENT_HEADER};
use crate::state::{State, CATALOG};
use engine::{CompactStats, Error, Result, TableId};
use std::ops::Bound;

/// The bytes of a table's extents.
fn extent_bytes(pool: &mut Pool, d: &Details) -> Result<u64> {
    let mut total = 0;
    let mut cur = d.first_extent;
    while !cur.is_null() {
        total += u64::from(pool.read_u32(cur.plus(8))?);
        cur = DiskLoc::decode(&pool.read(cur, 8)?);
    }
    Ok(total)
}

fn entries(st: &mut State, table: TableId) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    if table == CATALOG || !st.tables.contains_key(&table) {
        return Err(Error::NoSuchTable(format!("id {table}")));
    }
    let mut locs = Vec::new();
    st.tree(table)?.range(
        Bound::Unbounded,
        Bound::Unbounded,
        false,
        usize::MAX,
        &mut locs,
    )?;
    locs.into_iter()
        .map(|(k, loc)| Ok((k, space::read_record(&mut st.pool, loc)?)))
        .collect()
}

/// Rewrites the table and returns what it did.
pub(crate) fn compact(inner: &Inner, table: TableId) -> Result<CompactStats> {
    let (stats, seq) = inner.batch_for_compact(|st, _, _| {
        let live = entries(st, table)?;
        let old = st.tables[&table].details.clone();
        let bytes_before = extent_bytes(&mut st.pool, &old)?;
        let mut fresh = Details::new(table);
        let mut tree = Tree {
            pool: &mut st.pool,
            header: &mut st.header,
            details: &mut fresh,
        };
        tree.create()?;
        for (k, v) in &live {
            let class = size_class(v.len()).expect("a stored value fits a class");
            let loc = space::alloc_record(tree.pool, tree.header, tree.details, class)?;
            space::write_record(tree.pool, loc, v)?;
            tree.upsert(k, loc)?;
            tree.details.entries += 1;
        }
        let bytes_after = extent_bytes(&mut st.pool, &fresh)?;
        space::release_extents(&mut st.pool, &mut st.header, &old)?;
        let t = st.tables.get_mut(&table).expect("checked");
        t.details = fresh;
        t.details_dirty = true;
        Ok(CompactStats {
            bytes_before,
            bytes_after,
            bytes_written: bytes_after,
            bytes_freed: bytes_before,
        })
    })?;
    inner.after_compact(seq)?;
    Ok(stats)
}

/// The bytes of the extents a table holding `bytes` of records and buckets is given.
fn extents_for(bytes: u64) -> u64 {
    let (mut total, mut held, mut next) = (0u64, 0u64, u64::from(space::FIRST_EXTENT));
    while held < bytes {
        total += next;
        held += next - u64::from(EXTENT_HEADER);
        next = (next * 2).min(u64::from(space::MAX_EXTENT));
    }
    total
}

/// What `compact` would do: the table's extents now, and a dense copy's size (its records at
/// their size classes, its index in full buckets).
pub(crate) fn estimate(inner: &Inner, table: TableId) -> Result<CompactStats> {
    let mut st = inner.state.lock();
    let live = entries(&mut st, table)?;
    let d = st.tables[&table].details.clone();
    let bytes_before = extent_bytes(&mut st.pool, &d)?;
    let records: u64 = live
        .iter()
        .map(|(_, v)| u64::from(class_size(size_class(v.len()).expect("fits"))))
        .sum();
    // Keys inserted in order leave every bucket but the last half full (a split at the byte
    // midpoint); the copy's extents double from the first size until they hold it all.
    let index: u64 = live.iter().map(|(k, _)| 2 + k.len() as u64 + 8).sum();
    let buckets = index.div_ceil(BUCKET_PAYLOAD as u64 / 2).max(1);
    let bytes_after = extents_for(records + buckets * BUCKET_SIZE as u64);
    Ok(CompactStats {
        bytes_before,
        bytes_after,
        bytes_written: 0,
        bytes_freed: bytes_before.saturating_sub(bytes_after),
    })
}
