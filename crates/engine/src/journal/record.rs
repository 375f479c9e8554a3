//! The payload of a journal record: what the engine logs (a write batch, a table's creation or
//! drop). `format.rs` frames these bytes in a journal file; this file gives them meaning.
//!
//! ```text
//! batch  : u8 1, varint op count, then per op:
//!          u8 1 = delete | 0 = put, varint table id, varint key length, key,
//!          (put only) varint value length, value
//! create : u8 2, varint table id, varint body length, body = JSON [name, table config]
//! drop   : u8 3, varint table id
//! ```

use crate::codec::{put_varint, Reader};
use crate::config::TableConfig;
use crate::kv::{TableId, WriteBatch};

const REC_BATCH: u8 = 1;
const REC_CREATE: u8 = 2;
const REC_DROP: u8 = 3;

/// A decoded journal record.
#[derive(Debug)]
pub enum Record {
    Batch(WriteBatch),
    Create {
        id: TableId,
        name: String,
        config: TableConfig,
    },
    Drop {
        id: TableId,
    },
}

pub fn encode_batch(batch: &WriteBatch) -> Vec<u8> {
    let size: usize = batch
        .ops
        .iter()
        .map(|o| o.key.len() + o.value.as_ref().map_or(0, |v| v.len()) + 12)
        .sum();
    let mut buf = Vec::with_capacity(size + 8);
    buf.push(REC_BATCH);
    put_varint(&mut buf, batch.ops.len() as u64);
    for op in &batch.ops {
        buf.push(op.value.is_none() as u8);
        put_varint(&mut buf, op.table as u64);
        put_varint(&mut buf, op.key.len() as u64);
        buf.extend_from_slice(&op.key);
        if let Some(v) = &op.value {
            put_varint(&mut buf, v.len() as u64);
            buf.extend_from_slice(v);
        }
    }
    buf
}

pub fn encode_create(id: TableId, name: &str, config: &TableConfig) -> Vec<u8> {
    let mut rec = vec![REC_CREATE];
    put_varint(&mut rec, id as u64);
    let body = serde_json::to_vec(&(name, config)).expect("a table config serializes");
    put_varint(&mut rec, body.len() as u64);
    rec.extend_from_slice(&body);
    rec
}

pub fn encode_drop(id: TableId) -> Vec<u8> {
    let mut rec = vec![REC_DROP];
    put_varint(&mut rec, id as u64);
    rec
}

/// Decodes a record; a malformed one is an error naming what is wrong.
pub fn decode(rec: &[u8]) -> Result<Record, String> {
    let mut r = Reader::new(rec);
    let record = match r.u8()? {
        REC_BATCH => Record::Batch(decode_batch(&mut r)?),
        REC_CREATE => {
            let id = r.varint()? as TableId;
            let len = r.varint()? as usize;
            let (name, config): (String, TableConfig) =
                serde_json::from_slice(r.bytes(len)?).map_err(|e| e.to_string())?;
            Record::Create { id, name, config }
        }
        REC_DROP => Record::Drop {
            id: r.varint()? as TableId,
        },
        t => return Err(format!("unknown record type {t}")),
    };
    if !r.done() {
        return Err("trailing bytes".into());
    }
    Ok(record)
}

fn decode_batch(r: &mut Reader) -> Result<WriteBatch, String> {
    let n = r.varint()?;
    let mut b = WriteBatch::new();
    for _ in 0..n {
        let del = r.u8()? == 1;
        let table = r.varint()? as TableId;
        let kl = r.varint()? as usize;
        let key = r.bytes(kl)?.to_vec();
        if del {
            b.delete(table, key);
        } else {
            let vl = r.varint()? as usize;
            b.put(table, key, r.bytes(vl)?.to_vec());
        }
    }
    Ok(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_truncations_are_errors() {
        let mut b = WriteBatch::new();
        b.put(3, b"k1".to_vec(), b"v1".to_vec());
        b.delete(4, b"k2".to_vec());
        let enc = encode_batch(&b);
        match decode(&enc).unwrap() {
            Record::Batch(d) => {
                assert_eq!(d.ops.len(), 2);
                assert_eq!((d.ops[0].table, &d.ops[0].key[..]), (3, &b"k1"[..]));
                assert_eq!(d.ops[0].value.as_deref(), Some(&b"v1"[..]));
                assert_eq!((d.ops[1].table, d.ops[1].value.is_none()), (4, true));
            }
            other => panic!("{other:?}"),
        }
        for cut in 0..enc.len() {
            assert!(decode(&enc[..cut]).is_err(), "cut at {cut}");
        }
        let c = encode_create(7, "t", &TableConfig::collection());
        assert!(
            matches!(decode(&c).unwrap(), Record::Create { id: 7, ref name, .. } if name == "t")
        );
        assert!(matches!(
            decode(&encode_drop(9)).unwrap(),
            Record::Drop { id: 9 }
        ));
        assert!(decode(&[9]).is_err());
    }
}
