//! Space: the database header, each table's namespace details (MMAPv1's `NamespaceDetails`),
//! extents and records.
//!
//! - Data files double in size ([`crate::pool::file_size`]); extents are carved from the end
//!   of the last one, or reused from the list of extents dropped tables gave back.
//! - A table's extents are chained; records are carved from its newest extent's tail.
//! - A record's size is a power of two (its padding); a freed record goes on its table's free
//!   list for its size class, linked through its own bytes, and is reused first.

use crate::loc::{class_size, DiskLoc, CLASSES, FREE_MARK, MAX_CLASS, MIN_CLASS, RECORD_HEADER};
use crate::pool::{file_size, Pool, PAGE};
use engine::{Error, Result};

const MAGIC: &[u8; 8] = b"FDMMAPV1";
/// Where the catalog table's details live in the header page.
pub const CATALOG_DETAILS: DiskLoc = DiskLoc {
    file: 0,
    offset: 64,
};
/// Encoded size of [`Details`].
pub const DETAILS_LEN: usize = 4 + 3 * 8 + 4 + 4 + 8 + CLASSES * 8;
/// An extent's header: the next extent of its table, its length, its table.
pub const EXTENT_HEADER: u32 = 16;
pub const FIRST_EXTENT: u32 = 64 * 1024;
pub const MAX_EXTENT: u32 = 16 << 20;

/// The database header (file 0, page 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub file_count: u32,
    /// Bytes in use in the last data file.
    pub tail_used: u32,
    pub next_table_id: u32,
    /// Extents of dropped tables, chained through their headers.
    pub free_extents: DiskLoc,
}

impl Header {
    pub fn encode(&self) -> Vec<u8> {
        let mut b = MAGIC.to_vec();
        b.extend_from_slice(&self.file_count.to_le_bytes());
        b.extend_from_slice(&self.tail_used.to_le_bytes());
        b.extend_from_slice(&self.next_table_id.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&self.free_extents.encode());
        b
    }
    pub fn decode(b: &[u8]) -> Result<Header> {
        if &b[..8] != MAGIC {
            return Err(Error::Corrupt {
                file: "mmapv1.0".into(),
                offset: 0,
                what: "no database header (not an mmapv1 data file)".into(),
            });
        }
        let u = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Ok(Header {
            file_count: u(8),
            tail_used: u(12),
            next_table_id: u(16),
            free_extents: DiskLoc::decode(&b[24..32]),
        })
    }
    pub fn store(&self, pool: &mut Pool) -> Result<()> {
        pool.write(DiskLoc::new(0, 0), &self.encode())
    }
}

/// A table's namespace details: its index root, extents, record count and free lists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Details {
    pub id: u32,
    pub root: DiskLoc,
    pub first_extent: DiskLoc,
    pub tail_extent: DiskLoc,
    pub tail_used: u32,
    pub tail_len: u32,
    pub entries: u64,
    /// Free list heads by size class (`MIN_CLASS` first).
    pub free: [DiskLoc; CLASSES],
}

impl Details {
    pub fn new(id: u32) -> Details {
        Details {
            id,
            root: DiskLoc::NULL,
            first_extent: DiskLoc::NULL,
            tail_extent: DiskLoc::NULL,
            tail_used: 0,
            tail_len: 0,
            entries: 0,
            free: [DiskLoc::NULL; CLASSES],
        }
    }
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(DETAILS_LEN);
        b.extend_from_slice(&self.id.to_le_bytes());
        for l in [self.root, self.first_extent, self.tail_extent] {
            b.extend_from_slice(&l.encode());
        }
        b.extend_from_slice(&self.tail_used.to_le_bytes());
        b.extend_from_slice(&self.tail_len.to_le_bytes());
        b.extend_from_slice(&self.entries.to_le_bytes());
        for l in &self.free {
            b.extend_from_slice(&l.encode());
        }
        debug_assert_eq!(b.len(), DETAILS_LEN);
        b
    }
    pub fn decode(b: &[u8]) -> Details {
        let u = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let mut free = [DiskLoc::NULL; CLASSES];
        for (i, f) in free.iter_mut().enumerate() {
            *f = DiskLoc::decode(&b[44 + i * 8..]);
        }
        Details {
            id: u(0),
            root: DiskLoc::decode(&b[4..]),
            first_extent: DiskLoc::decode(&b[12..]),
            tail_extent: DiskLoc::decode(&b[20..]),
            tail_used: u(28),
            tail_len: u(32),
            entries: u64::from_le_bytes(b[36..44].try_into().expect("8 bytes")),
            free,
        }
    }
}

/// A new database's header: one data file, its first page the header. File 0 may exist
/// already, all zeros: an earlier open created it and stopped before its first write-back.
pub fn format(pool: &mut Pool) -> Result<Header> {
    if pool.file_count() == 0 {
        pool.create_file(0)?;
    }
    let h = Header {
        file_count: 1,
        tail_used: PAGE as u32,
        next_table_id: 1,
        free_extents: DiskLoc::NULL,
    };
    h.store(pool)?;
    Ok(h)
}

fn extent_len(pool: &mut Pool, ext: DiskLoc) -> Result<u32> {
    pool.read_u32(ext.plus(8))
}

/// What is taken of a free extent of `free` bytes for a request of `len`: `len` when at least
/// [`FIRST_EXTENT`] would be left (the rest stays free), else all of it (a smaller rest would
/// be an extent no table starts with).
pub fn taken_of_free(free: u32, len: u32) -> u32 {
    debug_assert!(free >= len);
    if free - len >= FIRST_EXTENT {
        len
    } else {
        free
    }
}

/// An extent of at least `len` bytes: the first dropped one large enough (split when it is
/// larger by at least a first extent, so that a table growing after another's drop or
/// compaction gets the size its doubling asks for), or new space at the end of the last data
/// file (a new, doubled, file when it does not fit).
fn alloc_extent(pool: &mut Pool, h: &mut Header, len: u32, table: u32) -> Result<DiskLoc> {
    let mut prev = DiskLoc::NULL;
    let mut cur = h.free_extents;
    while !cur.is_null() {
        let mut next = DiskLoc::decode(&pool.read(cur, 8)?);
        let cur_len = extent_len(pool, cur)?;
        if cur_len >= len {
            let taken = taken_of_free(cur_len, len);
            if taken < cur_len {
                // The rest takes this extent's place in the free list.
                let rest = cur.plus(taken);
                write_extent_header(pool, rest, next, cur_len - taken, 0)?;
                next = rest;
            }
            if prev.is_null() {
                h.free_extents = next;
            } else {
                pool.write(prev, &next.encode())?;
            }
            write_extent_header(pool, cur, DiskLoc::NULL, taken, table)?;
            return Ok(cur);
        }
        (prev, cur) = (cur, next);
    }
    let mut last = h.file_count - 1;
    if u64::from(h.tail_used) + u64::from(len) > file_size(last) {
        // The rest of the last file stays unused, as MMAPv1 left it.
        loop {
            last += 1;
            pool.create_file(last)?;
            h.file_count = last + 1;
            h.tail_used = 0;
            if u64::from(len) <= file_size(last) {
                break;
            }
        }
    }
    let ext = DiskLoc::new(last, h.tail_used);
    h.tail_used += len;
    write_extent_header(pool, ext, DiskLoc::NULL, len, table)?;
    Ok(ext)
}

fn write_extent_header(
    pool: &mut Pool,
    ext: DiskLoc,
    next: DiskLoc,
    len: u32,
    table: u32,
) -> Result<()> {
    let mut b = next.encode().to_vec();
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&table.to_le_bytes());
    pool.write(ext, &b)
}

/// The size of the extent a table whose tail extent is `tail_len` bytes (0: none yet) asks
/// for to hold a record of `need` bytes: twice the previous one's size, within
/// [`FIRST_EXTENT`]..[`MAX_EXTENT`] (MMAPv1 grew extents the same way), and room for the record.
pub fn next_extent_len(tail_len: u32, need: u32) -> u32 {
    let doubled = if tail_len == 0 {
        FIRST_EXTENT
    } else {
        (tail_len.saturating_mul(2)).min(MAX_EXTENT)
    };
    let min = (need + EXTENT_HEADER).div_ceil(PAGE as u32) * PAGE as u32;
    doubled.max(min)
}

/// The lengths of the free extents, in the order `alloc_extent` tries them.
pub fn free_extent_lens(pool: &mut Pool, h: &Header) -> Result<Vec<u32>> {
    let mut lens = Vec::new();
    let mut cur = h.free_extents;
    while !cur.is_null() {
        lens.push(extent_len(pool, cur)?);
        cur = DiskLoc::decode(&pool.read(cur, 8)?);
    }
    Ok(lens)
}

/// Gives the table a new tail extent with room for `need` bytes ([`next_extent_len`]).
fn grow(pool: &mut Pool, h: &mut Header, d: &mut Details, need: u32) -> Result<()> {
    let len = next_extent_len(d.tail_len, need);
    let ext = alloc_extent(pool, h, len, d.id)?;
    let len = extent_len(pool, ext)?;
    if d.tail_extent.is_null() {
        d.first_extent = ext;
    } else {
        pool.write(d.tail_extent, &ext.encode())?;
    }
    d.tail_extent = ext;
    d.tail_len = len;
    d.tail_used = EXTENT_HEADER;
    Ok(())
}

/// A record of size class `class` for the table: from its free list, else from its tail
/// extent, else from a new extent. The record's header says its size, its length 0.
pub fn alloc_record(
    pool: &mut Pool,
    h: &mut Header,
    d: &mut Details,
    class: u8,
) -> Result<DiskLoc> {
    assert!(
        (MIN_CLASS..=MAX_CLASS).contains(&class),
        "size class {class}"
    );
    let size = class_size(class);
    let slot = usize::from(class - MIN_CLASS);
    let head = d.free[slot];
    let loc = if !head.is_null() {
        let hdr = pool.read(head, 16)?;
        let used = u32::from_le_bytes(hdr[4..8].try_into().expect("4 bytes"));
        let got = u32::from_le_bytes(hdr[..4].try_into().expect("4 bytes"));
        if used != FREE_MARK || got != size {
            return Err(corrupt(
                head,
                "a free list holds a record in use or of another size",
            ));
        }
        d.free[slot] = DiskLoc::decode(&hdr[8..16]);
        head
    } else {
        if d.tail_extent.is_null() || d.tail_used + size > d.tail_len {
            grow(pool, h, d, size)?;
        }
        let loc = d.tail_extent.plus(d.tail_used);
        d.tail_used += size;
        loc
    };
    let mut hdr = size.to_le_bytes().to_vec();
    hdr.extend_from_slice(&0u32.to_le_bytes());
    pool.write(loc, &hdr)?;
    Ok(loc)
}

/// Puts the record at `loc` on its size class's free list.
pub fn free_record(pool: &mut Pool, d: &mut Details, loc: DiskLoc) -> Result<()> {
    let size = pool.read_u32(loc)?;
    let class = size.trailing_zeros() as u8;
    if !size.is_power_of_two() || !(MIN_CLASS..=MAX_CLASS).contains(&class) {
        return Err(corrupt(loc, "a record whose size is not a size class"));
    }
    let slot = usize::from(class - MIN_CLASS);
    let mut b = size.to_le_bytes().to_vec();
    b.extend_from_slice(&FREE_MARK.to_le_bytes());
    b.extend_from_slice(&d.free[slot].encode());
    pool.write(loc, &b)?;
    d.free[slot] = loc;
    Ok(())
}

/// The record's allocated size (its header's first field).
pub fn record_size(pool: &mut Pool, loc: DiskLoc) -> Result<u32> {
    pool.read_u32(loc)
}

/// The value a record holds.
pub fn read_record(pool: &mut Pool, loc: DiskLoc) -> Result<Vec<u8>> {
    let hdr = pool.read(loc, RECORD_HEADER as usize)?;
    let size = u32::from_le_bytes(hdr[..4].try_into().expect("4 bytes"));
    let used = u32::from_le_bytes(hdr[4..8].try_into().expect("4 bytes"));
    if used == FREE_MARK || used + RECORD_HEADER > size {
        return Err(corrupt(
            loc,
            "an index entry points to a free or damaged record",
        ));
    }
    pool.read(loc.plus(RECORD_HEADER), used as usize)
}

/// Writes `value` into the record at `loc`, which must have room for it.
pub fn write_record(pool: &mut Pool, loc: DiskLoc, value: &[u8]) -> Result<()> {
    let size = pool.read_u32(loc)?;
    assert!(
        value.len() as u64 + u64::from(RECORD_HEADER) <= u64::from(size),
        "a {}-byte value written into a {size}-byte record",
        value.len()
    );
    let mut b = Vec::with_capacity(value.len() + 4);
    b.extend_from_slice(&(value.len() as u32).to_le_bytes());
    b.extend_from_slice(value);
    pool.write(loc.plus(4), &b)
}

/// The bytes of a table's extents, used or not (MMAPv1's `storageSize`).
pub fn extent_bytes(pool: &mut Pool, d: &Details) -> Result<u64> {
    let mut total = 0;
    let mut cur = d.first_extent;
    while !cur.is_null() {
        total += u64::from(extent_len(pool, cur)?);
        cur = DiskLoc::decode(&pool.read(cur, 8)?);
    }
    Ok(total)
}

/// Hands every extent of a dropped table to the database's free extent list.
pub fn release_extents(pool: &mut Pool, h: &mut Header, d: &Details) -> Result<()> {
    let mut cur = d.first_extent;
    while !cur.is_null() {
        let next = DiskLoc::decode(&pool.read(cur, 8)?);
        let len = extent_len(pool, cur)?;
        write_extent_header(pool, cur, h.free_extents, len, 0)?;
        h.free_extents = cur;
        cur = next;
    }
    Ok(())
}

fn corrupt(loc: DiskLoc, what: &str) -> Error {
    Error::Corrupt {
        file: format!("mmapv1.{}", loc.file).into(),
        offset: u64::from(loc.offset),
        what: what.into(),
    }
}
