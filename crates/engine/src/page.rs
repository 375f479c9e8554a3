//! On-disk page payloads (inside a block, after the block header).
//!
//! ```text
//! leaf     : u32 entry count, then per entry:
//!            varint prefix (bytes shared with the previous key; 0 without prefix compression),
//!            varint suffix length, suffix,
//!            u8 value tag: 0 = inline → varint length, bytes
//!                          1 = overflow → 16-byte address, varint value length
//! internal : u32 child count, u8 child level (0 = children are leaves), then per child:
//!            varint key length, key (the child's lower bound; empty for the first child),
//!            16-byte address
//! (The extent-list payload is the block manager's: `block/extent.rs`.)
//! ```

use crate::block::Addr;
use crate::codec::{put_varint, varint_len, Reader};

/// A value as a leaf page stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoredValue<'a> {
    Inline(&'a [u8]),
    Overflow { addr: Addr, len: u64 },
}

/// Builds a leaf payload entry by entry.
pub struct LeafWriter {
    pub buf: Vec<u8>,
    count: u32,
    prev_key: Vec<u8>,
    prefix_compression: bool,
}

impl LeafWriter {
    pub fn new(prefix_compression: bool) -> Self {
        Self::with_capacity(prefix_compression, 4)
    }
    /// A writer whose buffer holds `bytes` before it grows (a page of known size is built
    /// without reallocating as it fills).
    pub fn with_capacity(prefix_compression: bool, bytes: usize) -> Self {
        let mut buf = Vec::with_capacity(bytes.max(4));
        buf.resize(4, 0);
        LeafWriter {
            buf,
            count: 0,
            prev_key: Vec::new(),
            prefix_compression,
        }
    }
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// Encoded size of an entry if it were added now (for chunking).
    pub fn entry_len(&self, key: &[u8], value: &StoredValue) -> usize {
        let p = self.prefix(key);
        let s = key.len() - p;
        varint_len(p as u64)
            + varint_len(s as u64)
            + s
            + 1
            + match value {
                StoredValue::Inline(v) => varint_len(v.len() as u64) + v.len(),
                StoredValue::Overflow { len, .. } => Addr::ENCODED_LEN + varint_len(*len),
            }
    }
    fn prefix(&self, key: &[u8]) -> usize {
        if !self.prefix_compression {
            return 0;
        }
        let p = key
            .iter()
            .zip(&self.prev_key)
            .take_while(|(a, b)| a == b)
            .count();
        // WiredTiger's prefix_compression_min: a prefix under 4 bytes is not worth encoding.
        if p < 4 {
            0
        } else {
            p
        }
    }
    pub fn push(&mut self, key: &[u8], value: &StoredValue) {
        let p = self.prefix(key);
        put_varint(&mut self.buf, p as u64);
        put_varint(&mut self.buf, (key.len() - p) as u64);
        self.buf.extend_from_slice(&key[p..]);
        match value {
            StoredValue::Inline(v) => {
                self.buf.push(0);
                put_varint(&mut self.buf, v.len() as u64);
                self.buf.extend_from_slice(v);
            }
            StoredValue::Overflow { addr, len } => {
                self.buf.push(1);
                addr.encode(&mut self.buf);
                put_varint(&mut self.buf, *len);
            }
        }
        if self.prefix_compression {
            self.prev_key.clear();
            self.prev_key.extend_from_slice(key);
        }
        self.count += 1;
    }
    pub fn finish(mut self) -> Vec<u8> {
        self.buf[0..4].copy_from_slice(&self.count.to_le_bytes());
        self.buf
    }
}

/// Where one leaf entry lies in its payload: the key's prefix length (bytes shared with the
/// previous key), the suffix's byte range, and the value.
pub struct RawEntry {
    pub prefix: usize,
    pub suffix: std::ops::Range<usize>,
    pub value: RawValue,
}

/// A leaf entry's value, by position in the payload.
pub enum RawValue {
    Inline(std::ops::Range<usize>),
    Overflow { addr: Addr, len: u64 },
}

/// Walks a leaf payload, calling `f` with each entry's position in order: the offset index of
/// an in-memory page is built from it without copying a key or a value.
pub fn walk_leaf(payload: &[u8], mut f: impl FnMut(RawEntry)) -> Result<(), String> {
    let mut r = Reader::new(payload);
    let n = r.u32()?;
    for _ in 0..n {
        let prefix = r.varint()? as usize;
        let s = r.varint()? as usize;
        let at = r.pos();
        r.bytes(s)?;
        let value = match r.u8()? {
            0 => {
                let l = r.varint()? as usize;
                let at = r.pos();
                r.bytes(l)?;
                RawValue::Inline(at..at + l)
            }
            1 => RawValue::Overflow {
                addr: Addr::read(&mut r)?,
                len: r.varint()?,
            },
            t => return Err(format!("unknown value tag {t}")),
        };
        f(RawEntry {
            prefix,
            suffix: at..at + s,
            value,
        });
    }
    if !r.done() {
        return Err("trailing bytes after the last leaf entry".into());
    }
    Ok(())
}

/// Decodes a leaf payload, calling `f(key, value)` for each entry in order.
pub fn decode_leaf(payload: &[u8], mut f: impl FnMut(Vec<u8>, StoredValue)) -> Result<(), String> {
    let mut prev: Vec<u8> = Vec::new();
    let mut bad_prefix = None;
    walk_leaf(payload, |e| {
        if bad_prefix.is_some() {
            return;
        }
        if e.prefix > prev.len() {
            bad_prefix = Some(e.prefix);
            return;
        }
        let mut key = Vec::with_capacity(e.prefix + e.suffix.len());
        key.extend_from_slice(&prev[..e.prefix]);
        key.extend_from_slice(&payload[e.suffix]);
        let value = match e.value {
            RawValue::Inline(v) => StoredValue::Inline(&payload[v]),
            RawValue::Overflow { addr, len } => StoredValue::Overflow { addr, len },
        };
        prev.clear();
        prev.extend_from_slice(&key);
        f(key, value);
    })?;
    match bad_prefix {
        Some(p) => Err(format!("key prefix {p} longer than the previous key")),
        None => Ok(()),
    }
}

/// Encodes an internal page.
pub fn encode_internal<'a>(level: u8, children: impl Iterator<Item = (&'a [u8], Addr)>) -> Vec<u8> {
    let mut buf = vec![0u8; 4];
    buf.push(level);
    let mut n = 0u32;
    for (key, addr) in children {
        put_varint(&mut buf, key.len() as u64);
        buf.extend_from_slice(key);
        addr.encode(&mut buf);
        n += 1;
    }
    buf[0..4].copy_from_slice(&n.to_le_bytes());
    buf
}

/// Encoded size of one internal-page entry.
pub fn internal_entry_len(key_len: usize) -> usize {
    varint_len(key_len as u64) + key_len + Addr::ENCODED_LEN
}

pub type InternalChildren = Vec<(Vec<u8>, Addr)>;

pub fn decode_internal(payload: &[u8]) -> Result<(u8, InternalChildren), String> {
    let mut r = Reader::new(payload);
    let n = r.u32()?;
    let level = r.u8()?;
    let mut out = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let l = r.varint()? as usize;
        let key = r.bytes(l)?.to_vec();
        out.push((key, Addr::read(&mut r)?));
    }
    if !r.done() || n == 0 {
        return Err("malformed internal page".into());
    }
    Ok((level, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaf_round_trip_with_prefix_compression() {
        for pc in [false, true] {
            let mut w = LeafWriter::new(pc);
            let keys: Vec<Vec<u8>> = (0..50)
                .map(|i| format!("user{:08}", i * 7).into_bytes())
                .collect();
            let ovfl = Addr {
                offset: 8192,
                size: 4096,
                checksum: 9,
            };
            for (i, k) in keys.iter().enumerate() {
                if i == 3 {
                    w.push(
                        k,
                        &StoredValue::Overflow {
                            addr: ovfl,
                            len: 99999,
                        },
                    );
                } else {
                    w.push(k, &StoredValue::Inline(k));
                }
            }
            let buf = w.finish();
            let mut got = Vec::new();
            decode_leaf(&buf, |k, v| got.push((k, format!("{v:?}")))).unwrap();
            assert_eq!(got.len(), 50);
            for (i, (k, _)) in got.iter().enumerate() {
                assert_eq!(k, &keys[i]);
            }
            assert!(got[3].1.contains("Overflow"));
            if pc {
                let mut plain = LeafWriter::new(false);
                for k in &keys {
                    plain.push(k, &StoredValue::Inline(k));
                }
                assert!(buf.len() < plain.finish().len());
            }
        }
    }

    #[test]
    fn truncated_pages_are_errors_not_panics() {
        let mut w = LeafWriter::new(true);
        w.push(b"abcdefgh", &StoredValue::Inline(b"v"));
        w.push(b"abcdefgz", &StoredValue::Inline(b"w"));
        let buf = w.finish();
        for cut in 0..buf.len() {
            assert!(decode_leaf(&buf[..cut], |_, _| {}).is_err());
        }
        let ints = encode_internal(
            0,
            [(
                &b""[..],
                Addr {
                    offset: 4096,
                    size: 4096,
                    checksum: 1,
                },
            )]
            .into_iter(),
        );
        assert!(decode_internal(&ints[..ints.len() - 1]).is_err());
    }
}
