//! The wire-message parser: `Header::parse`/`validate` and `parse_request`, including
//! OP_MSG checksums and OP_COMPRESSED (snappy, zlib, zstd) with honest and dishonest sizes.
//!
//! Input: one mode byte, then
//! - mode % 4 == 0: a raw message (16-byte header, then the body) parsed as is;
//! - mode % 4 == 1: an OP_MSG body whose CRC-32C checksum is appended (so it verifies);
//! - mode % 4 == 2: OP_COMPRESSED: a compressor byte, a size-delta byte and an opcode byte,
//!   then the inner body, which is compressed here so the decompressor sees a valid stream;
//!   the declared size is the true one plus a small signed delta (when the delta byte's high
//!   bit is set, a corrupted byte is also flipped in the compressed stream);
//! - mode % 4 == 3: OP_COMPRESSED with the compressed bytes taken from the input as they are.
#![no_main]

use libfuzzer_sys::fuzz_target;
use server::wire::{
    msg_reply, parse_request, Compressor, Header, Request, OP_COMPRESSED, OP_MSG, OP_QUERY,
};
use std::io::Write;

fn compress(comp: Compressor, data: &[u8]) -> Vec<u8> {
    match comp {
        Compressor::Noop => data.to_vec(),
        Compressor::Snappy => snap::raw::Encoder::new().compress_vec(data).unwrap(),
        Compressor::Zlib => {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        }
        Compressor::Zstd => zstd::bulk::compress(data, 1).unwrap(),
    }
}

fn header(len: usize, op_code: i32) -> Header {
    Header {
        length: len as i32,
        request_id: 7,
        response_to: 0,
        op_code,
    }
}

/// Parses, and for an OP_MSG that parsed, checks that the reply encoder's output parses back
/// to the same body (byte for byte) under the compressor it came with.
fn parse(h: &Header, body: &[u8]) {
    let _ = h.validate();
    if let Ok(Request::Msg {
        body, compressor, ..
    }) = parse_request(h, body)
    {
        let want = bson::to_vec(&body).unwrap();
        let reply = msg_reply(&body, 1, 2, 0, compressor);
        let h2 = Header::parse(reply[..16].try_into().unwrap());
        assert_eq!(h2.validate().unwrap(), reply.len() - 16);
        match parse_request(&h2, &reply[16..]) {
            Ok(Request::Msg { body: again, .. }) => {
                assert_eq!(bson::to_vec(&again).unwrap(), want)
            }
            other => panic!("a reply did not parse back: {other:?}"),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 4 {
        0 => {
            if rest.len() < 16 {
                return;
            }
            let h = Header::parse(rest[..16].try_into().unwrap());
            parse(&h, &rest[16..]);
        }
        1 => {
            let mut body = rest.to_vec();
            if body.len() >= 4 {
                body[0] |= 1; // checksumPresent
            }
            let h = header(16 + body.len() + 4, OP_MSG);
            let mut whole = Vec::new();
            for x in [h.length, h.request_id, h.response_to, h.op_code] {
                whole.extend_from_slice(&x.to_le_bytes());
            }
            whole.extend_from_slice(&body);
            body.extend_from_slice(&crc32c::crc32c(&whole).to_le_bytes());
            parse(&h, &body);
        }
        _ => {
            if rest.len() < 3 {
                return;
            }
            let (comp_id, delta, op) = (rest[0] % 5, rest[1], rest[2]);
            let inner = &rest[3..];
            let original = match op % 3 {
                0 => OP_MSG,
                1 => OP_QUERY,
                _ => op as i32,
            };
            let (packed, size) = if mode % 4 == 2 {
                let comp = Compressor::from_id(comp_id).unwrap_or(Compressor::Zstd);
                let mut packed = compress(comp, inner);
                if delta & 0x80 != 0 && !packed.is_empty() {
                    let i = inner.len() % packed.len();
                    packed[i] ^= delta;
                }
                let d = (delta & 0x7f) as i64 - 64;
                let size = if delta & 0x80 != 0 {
                    inner.len() as i64
                } else {
                    inner.len() as i64 + d
                };
                (packed, size as i32)
            } else {
                // Raw compressed bytes; the size is a full i32 from the input's tail, when
                // there is one (this is where lying declared sizes come from).
                let size = match inner.len().checked_sub(4) {
                    Some(n) => i32::from_le_bytes(inner[n..].try_into().unwrap()),
                    None => inner.len() as i32,
                };
                (inner.to_vec(), size)
            };
            let mut body = Vec::new();
            body.extend_from_slice(&original.to_le_bytes());
            body.extend_from_slice(&size.to_le_bytes());
            body.push(comp_id);
            body.extend_from_slice(&packed);
            let h = header(16 + body.len(), OP_COMPRESSED);
            parse(&h, &body);
        }
    }
});
