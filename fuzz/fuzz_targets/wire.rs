//! The wire-message parser: `Header::parse`/`validate` and `parse_request`, including
//! OP_MSG checksums and OP_COMPRESSED (snappy, zlib, zstd) with honest and dishonest sizes.
//!
//! Input: one mode byte, then
//! - mode % 5 == 0: a raw message (16-byte header, then the body) parsed as is;
//! - mode % 5 == 1: an OP_MSG body whose CRC-32C checksum is appended (so it verifies);
//! - mode % 5 == 2: OP_COMPRESSED: a compressor byte, a size-delta byte and an opcode byte,
//!   then the inner body, which is compressed here so the decompressor sees a valid stream;
//!   the declared size is the true one plus a small signed delta (when the delta byte's high
//!   bit is set, a corrupted byte is also flipped in the compressed stream);
//! - mode % 5 == 3: OP_COMPRESSED with the compressed bytes taken from the input as they are;
//! - mode % 5 == 4: deep structure: an OP_MSG whose body (or a document-sequence document)
//!   nests documents and arrays up to 1 023 levels (a u16 depth, a shape byte), written byte
//!   by byte so nothing recursive builds it, with a flag byte that may break one length; or,
//!   with the flag's high bit, a message of up to 1 023 one-byte sequence sections.
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
        // Each document of a message is held to 200 levels on its own; merging a sequence's
        // documents into the body as an array adds two (found by this target: a 199-level
        // sequence document). Such a body is fine to run, but as a reply it would be deeper
        // than a message may carry, so the round trip is checked only within the limit.
        if server::wire::check_document(&want).is_err() {
            return;
        }
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

/// A document nested `depth` levels (shape bits pick document or array), as bytes, laid out
/// from the outside in (no level is copied: level k from the inside is 5 + 8k bytes long).
fn nested_bytes(depth: usize, shape: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + 9 * depth);
    for i in 0..depth {
        let k = (depth - i) as i32;
        out.extend_from_slice(&(5 + 8 * k).to_le_bytes());
        if shape >> (i % 8) & 1 == 1 {
            out.extend_from_slice(b"\x040\0");
        } else {
            out.extend_from_slice(b"\x03a\0");
        }
    }
    out.extend_from_slice(&[5, 0, 0, 0, 0]);
    out.resize(out.len() + depth, 0);
    out
}

fn deep(rest: &[u8]) {
    if rest.len() < 4 {
        return;
    }
    // Up to 1 023 levels: five times the 200 the server allows (the check is iterative, so
    // more levels only cost time), in messages small enough to keep thousands of runs a
    // second; the seeds hold a 4 000-level message.
    let depth = (u16::from_le_bytes([rest[0], rest[1]]) % 1024) as usize;
    let (shape, flags) = (rest[2], rest[3]);
    let mut body = vec![0u8; 4];
    if flags & 0x80 != 0 {
        // Many sequence sections (the identifiers were once compared pairwise).
        body.push(0);
        body.extend_from_slice(&bson::to_vec(&bson::doc! {"insert": "c", "$db": "d"}).unwrap());
        for i in 0..depth {
            let id = format!("s{}", if flags & 1 != 0 { i % 7 } else { i });
            body.push(1);
            body.extend_from_slice(&(4 + id.len() as i32 + 1).to_le_bytes());
            body.extend_from_slice(id.as_bytes());
            body.push(0);
        }
    } else {
        let mut cmd = bson::to_vec(&bson::doc! {"find": "c", "$db": "d"}).unwrap();
        let nested = nested_bytes(depth, shape);
        // {find, $db, filter: <nested>} spliced by hand.
        cmd.pop();
        cmd.push(0x03);
        cmd.extend_from_slice(b"filter\0");
        cmd.extend_from_slice(&nested);
        cmd.push(0);
        let n = cmd.len() as i32;
        cmd[..4].copy_from_slice(&n.to_le_bytes());
        if flags & 1 != 0 {
            body.push(0);
            body.extend_from_slice(&bson::to_vec(&bson::doc! {"insert": "c", "$db": "d"}).unwrap());
            body.push(1);
            body.extend_from_slice(&(4 + 10 + cmd.len() as i32).to_le_bytes());
            body.extend_from_slice(b"documents\0");
            body.extend_from_slice(&cmd);
        } else {
            body.push(0);
            body.extend_from_slice(&cmd);
        }
        if flags & 2 != 0 && body.len() > 12 {
            // Break one length somewhere in the nesting.
            let at = 5 + (rest.len() * 7919) % (body.len() - 9);
            body[at] ^= flags;
        }
    }
    let h = header(16 + body.len(), OP_MSG);
    parse(&h, &body);
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 5 {
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
        4 => deep(rest),
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
            let (packed, size) = if mode % 5 == 2 {
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
