//! Block images: the 24-byte header, checksums and compression around a page payload, the
//! address cookie that names a block, and the file's descriptor block (WiredTiger
//! `block_write.c`, `block_read.c`, `block_addr.c`). Pure functions of bytes: no I/O here.
//!
//! ```text
//! header (24 bytes): magic "FDBK" u32, page kind u8, compressor u8, reserved u16,
//!                    stored payload length u32, uncompressed length u32,
//!                    crc32c u32 (of the header with this field zero, then the stored payload),
//!                    reserved u32
//! payload (compressed or not), zero padding to the next allocation unit
//! ```

use crate::codec::Reader;
use crate::config::{Compressor, ALLOC_UNIT};
use crate::error::{Error, Result};
use placement::PageKind;
use serde::{Deserialize, Serialize};

/// Where a block lives and what it must checksum to (WiredTiger's address cookie).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Addr {
    pub offset: u64,
    pub size: u32,
    pub checksum: u32,
}

impl Addr {
    pub const ENCODED_LEN: usize = 16;
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.checksum.to_le_bytes());
    }
    /// Reads an encoded address (a truncated payload is an error, not a panic).
    pub fn read(r: &mut Reader) -> std::result::Result<Addr, String> {
        Ok(Addr::decode(r.bytes(Addr::ENCODED_LEN)?))
    }
    /// The extent the block occupies.
    pub fn extent(&self) -> (u64, u64) {
        (self.offset, self.size as u64)
    }
    pub fn decode(b: &[u8]) -> Addr {
        Addr {
            offset: u64::from_le_bytes(b[0..8].try_into().unwrap()),
            size: u32::from_le_bytes(b[8..12].try_into().unwrap()),
            checksum: u32::from_le_bytes(b[12..16].try_into().unwrap()),
        }
    }
}

const BLOCK_MAGIC: u32 = 0x4644_424b; // "FDBK"
pub const BLOCK_HEADER: usize = 24;
const DESC_MAGIC: &[u8; 8] = b"FDBFILE1";
/// The descriptor's bytes that its checksum covers (magic, version, allocation unit).
pub const DESC_CHECKED: usize = 20;

/// The descriptor block every table file starts with: magic, format version, allocation
/// unit, crc32c of those 16 bytes.
pub fn descriptor_block() -> Vec<u8> {
    let mut desc = vec![0u8; ALLOC_UNIT as usize];
    desc[..8].copy_from_slice(DESC_MAGIC);
    desc[8..12].copy_from_slice(&1u32.to_le_bytes()); // format version
    desc[12..16].copy_from_slice(&(ALLOC_UNIT as u32).to_le_bytes());
    let sum = crc32c::crc32c(&desc[..16]);
    desc[16..20].copy_from_slice(&sum.to_le_bytes());
    desc
}

/// Whether the first bytes of a file are a flashdoc descriptor block.
pub fn descriptor_ok(desc: &[u8; DESC_CHECKED]) -> bool {
    &desc[..8] == DESC_MAGIC
        && crc32c::crc32c(&desc[..16]) == u32::from_le_bytes(desc[16..20].try_into().unwrap())
}

/// A block image ready to be written: header + payload, padded to the allocation unit.
pub struct BlockImage {
    pub buf: Vec<u8>,
    pub checksum: u32,
}

/// Serializes a page into a block image, compressing the payload when that saves at least one
/// allocation unit (WiredTiger keeps the uncompressed image otherwise).
pub fn build_block(kind: PageKind, payload: &[u8], compressor: Compressor) -> Result<BlockImage> {
    let raw_size = round_up(BLOCK_HEADER + payload.len());
    let mut compressed: Option<(u8, Vec<u8>)> = None;
    if compressor != Compressor::None && raw_size > ALLOC_UNIT as usize {
        let c = compress(compressor, payload)?;
        if round_up(BLOCK_HEADER + c.len()) + (ALLOC_UNIT as usize) <= raw_size {
            compressed = Some((compressor_code(compressor), c));
        }
    }
    let (code, stored): (u8, &[u8]) = match &compressed {
        Some((code, c)) => (*code, c.as_slice()),
        None => (0, payload),
    };
    let total = round_up(BLOCK_HEADER + stored.len());
    let mut buf = Vec::with_capacity(total);
    buf.extend_from_slice(&BLOCK_MAGIC.to_le_bytes());
    buf.push(kind as u8);
    buf.push(code);
    buf.extend_from_slice(&[0, 0]);
    buf.extend_from_slice(&(stored.len() as u32).to_le_bytes());
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(&[0; 4]); // checksum, filled below
    buf.extend_from_slice(&[0; 4]);
    buf.extend_from_slice(stored);
    let checksum = crc32c::crc32c(&buf);
    buf[16..20].copy_from_slice(&checksum.to_le_bytes());
    buf.resize(total, 0);
    Ok(BlockImage { buf, checksum })
}

pub fn round_up(n: usize) -> usize {
    n.div_ceil(ALLOC_UNIT as usize) * ALLOC_UNIT as usize
}

fn compressor_code(c: Compressor) -> u8 {
    match c {
        Compressor::None => 0,
        Compressor::Snappy => 1,
        Compressor::Zlib => 2,
        Compressor::Zstd => 3,
    }
}

fn compress(c: Compressor, data: &[u8]) -> Result<Vec<u8>> {
    use std::io::Write;
    let err = |e: std::io::Error| Error::io(format!("{} compression", c.name()), e);
    Ok(match c {
        Compressor::None => data.to_vec(),
        Compressor::Snappy => snap::raw::Encoder::new()
            .compress_vec(data)
            .map_err(|e| err(std::io::Error::other(e)))?,
        Compressor::Zlib => {
            let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(6));
            enc.write_all(data).map_err(err)?;
            enc.finish().map_err(err)?
        }
        // zstd level 6: MongoDB's built-in zstd level.
        Compressor::Zstd => zstd::bulk::compress(data, 6).map_err(err)?,
    })
}

fn decompress(code: u8, data: &[u8], mem_len: usize) -> std::result::Result<Vec<u8>, String> {
    use std::io::Read;
    let out = match code {
        0 => data.to_vec(),
        1 => snap::raw::Decoder::new()
            .decompress_vec(data)
            .map_err(|e| format!("snappy: {e}"))?,
        2 => {
            let mut out = Vec::with_capacity(mem_len);
            flate2::read::ZlibDecoder::new(data)
                .read_to_end(&mut out)
                .map_err(|e| format!("zlib: {e}"))?;
            out
        }
        3 => zstd::bulk::decompress(data, mem_len).map_err(|e| format!("zstd: {e}"))?,
        c => return Err(format!("unknown compressor code {c}")),
    };
    if out.len() != mem_len {
        return Err(format!(
            "decompressed to {} bytes, expected {mem_len}",
            out.len()
        ));
    }
    Ok(out)
}

/// Why a block read from disk was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum BadBlock {
    /// Not the block the address names: wrong magic, length or checksum.
    Checksum,
    /// The block checks but its payload does not decompress.
    Payload(String),
}

/// Checks a block read from `addr` and returns its page kind and uncompressed payload. The
/// checksum field of `buf` is zeroed in place while it is checked.
pub fn parse_block(
    buf: &mut [u8],
    addr: Addr,
) -> std::result::Result<(PageKind, Vec<u8>), BadBlock> {
    if buf.len() < BLOCK_HEADER || u32::from_le_bytes(buf[0..4].try_into().unwrap()) != BLOCK_MAGIC
    {
        return Err(BadBlock::Checksum);
    }
    let stored_len = u32::from_le_bytes(buf[8..12].try_into().unwrap()) as usize;
    let mem_len = u32::from_le_bytes(buf[12..16].try_into().unwrap()) as usize;
    let sum = u32::from_le_bytes(buf[16..20].try_into().unwrap());
    if BLOCK_HEADER + stored_len > buf.len() || sum != addr.checksum {
        return Err(BadBlock::Checksum);
    }
    buf[16..20].copy_from_slice(&[0; 4]);
    if crc32c::crc32c(&buf[..BLOCK_HEADER + stored_len]) != sum {
        return Err(BadBlock::Checksum);
    }
    let kind = PageKind::from_u8(buf[4]).ok_or(BadBlock::Checksum)?;
    let payload = decompress(
        buf[5],
        &buf[BLOCK_HEADER..BLOCK_HEADER + stored_len],
        mem_len,
    )
    .map_err(BadBlock::Payload)?;
    Ok((kind, payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_kept_only_when_it_saves_a_unit() {
        let zeros = vec![0u8; 30000];
        for c in Compressor::ALL {
            let img = build_block(PageKind::Leaf, &zeros, c).unwrap();
            if c == Compressor::None {
                assert_eq!(img.buf.len(), 32768);
            } else {
                assert_eq!(img.buf.len(), 4096, "{c:?}");
            }
        }
        // Incompressible data stays uncompressed.
        let mut x = 1u64;
        let noise: Vec<u8> = (0..30000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let img = build_block(PageKind::Leaf, &noise, Compressor::Zstd).unwrap();
        assert_eq!(img.buf[5], 0);
    }

    #[test]
    fn a_block_parses_back_and_a_flipped_byte_is_refused() {
        let img = build_block(PageKind::Leaf, b"hello", Compressor::None).unwrap();
        let addr = Addr {
            offset: 4096,
            size: img.buf.len() as u32,
            checksum: img.checksum,
        };
        let mut buf = img.buf.clone();
        assert_eq!(
            parse_block(&mut buf, addr).unwrap(),
            (PageKind::Leaf, b"hello".to_vec())
        );
        let mut buf = img.buf.clone();
        buf[BLOCK_HEADER] ^= 1;
        assert_eq!(parse_block(&mut buf, addr), Err(BadBlock::Checksum));
        assert!(descriptor_ok(
            descriptor_block()[..DESC_CHECKED].try_into().unwrap()
        ));
    }
}
