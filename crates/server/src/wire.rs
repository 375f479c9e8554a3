//! MongoDB wire messages: the 16-byte header, OP_MSG (2013), the legacy OP_QUERY (2004) /
//! OP_REPLY (1) handshake, and OP_COMPRESSED (2012). Parsing never trusts a length: every
//! field is bounds-checked and a bad message is an error, never a panic.

use bson::{raw::ErrorKind, Document, RawDocument};
use std::collections::HashSet;
use std::fmt;

pub const OP_REPLY: i32 = 1;
pub const OP_QUERY: i32 = 2004;
pub const OP_COMPRESSED: i32 = 2012;
pub const OP_MSG: i32 = 2013;

/// mongod's limits, advertised in the handshake.
pub const MAX_BSON_OBJECT_SIZE: i32 = 16 * 1024 * 1024;
pub const MAX_MESSAGE_SIZE: i32 = 48_000_000;
pub const MAX_WRITE_BATCH_SIZE: i32 = 100_000;

const CHECKSUM_PRESENT: u32 = 1;
pub const MORE_TO_COME: u32 = 1 << 1;
const EXHAUST_ALLOWED: u32 = 1 << 16;
/// Flag bits a receiver must understand (the low 16); others are optional.
const REQUIRED_MASK: u32 = 0xffff;

/// A message that could not be decoded, with the code mongod answers it with (most are
/// ProtocolError 17; a few have codes of their own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    pub code: i32,
    pub code_name: &'static str,
    pub message: String,
}

impl WireError {
    pub fn protocol(message: impl Into<String>) -> WireError {
        WireError {
            code: 17,
            code_name: "ProtocolError",
            message: message.into(),
        }
    }
    fn with_code(code: i32, code_name: &'static str, message: impl Into<String>) -> WireError {
        WireError {
            code,
            code_name,
            message: message.into(),
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for WireError {}

fn err<T>(msg: impl Into<String>) -> Result<T, WireError> {
    Err(WireError::protocol(msg))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub length: i32,
    pub request_id: i32,
    pub response_to: i32,
    pub op_code: i32,
}

impl Header {
    pub const LEN: usize = 16;
    pub fn parse(b: &[u8; 16]) -> Header {
        let i = |o: usize| i32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        Header {
            length: i(0),
            request_id: i(4),
            response_to: i(8),
            op_code: i(12),
        }
    }
    /// Checks the declared length before anything is allocated for the body.
    pub fn validate(&self) -> Result<usize, WireError> {
        if self.length < Header::LEN as i32 {
            return err(format!(
                "message length {} is shorter than its header",
                self.length
            ));
        }
        if self.length > MAX_MESSAGE_SIZE {
            return err(format!(
                "message length {} exceeds maxMessageSizeBytes {MAX_MESSAGE_SIZE}",
                self.length
            ));
        }
        Ok(self.length as usize - Header::LEN)
    }
}

/// A request, decoded.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// OP_MSG: the body with every document sequence merged in as an array.
    Msg {
        flags: u32,
        body: Document,
        /// The compressor the request came with (replies mirror it).
        compressor: Option<Compressor>,
    },
    /// Legacy OP_QUERY (only the handshake and auth commands are served over it).
    Query { collection: String, query: Document },
}

impl Request {
    pub fn wants_reply(&self) -> bool {
        match self {
            Request::Msg { flags, .. } => flags & MORE_TO_COME == 0,
            Request::Query { .. } => true,
        }
    }
    pub fn exhaust_allowed(&self) -> bool {
        matches!(self, Request::Msg { flags, .. } if flags & EXHAUST_ALLOWED != 0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compressor {
    Noop,
    Snappy,
    Zlib,
    Zstd,
}

impl Compressor {
    pub fn id(self) -> u8 {
        match self {
            Compressor::Noop => 0,
            Compressor::Snappy => 1,
            Compressor::Zlib => 2,
            Compressor::Zstd => 3,
        }
    }
    pub fn from_id(id: u8) -> Option<Compressor> {
        Some(match id {
            0 => Compressor::Noop,
            1 => Compressor::Snappy,
            2 => Compressor::Zlib,
            3 => Compressor::Zstd,
            _ => return None,
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Compressor::Noop => "noop",
            Compressor::Snappy => "snappy",
            Compressor::Zlib => "zlib",
            Compressor::Zstd => "zstd",
        }
    }
    pub fn from_name(s: &str) -> Option<Compressor> {
        Some(match s {
            "snappy" => Compressor::Snappy,
            "zlib" => Compressor::Zlib,
            "zstd" => Compressor::Zstd,
            "noop" => Compressor::Noop,
            _ => return None,
        })
    }
    fn compress(self, data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        match self {
            Compressor::Noop => data.to_vec(),
            Compressor::Snappy => snap::raw::Encoder::new()
                .compress_vec(data)
                .expect("snappy compresses any input"),
            Compressor::Zlib => {
                let mut e =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(6));
                e.write_all(data).expect("in-memory write");
                e.finish().expect("in-memory write")
            }
            Compressor::Zstd => zstd::bulk::compress(data, 6).expect("zstd compresses any input"),
        }
    }
    /// Decompresses to exactly `size` bytes. A declared size is not trusted for allocation:
    /// a few compressed bytes could otherwise make the server reserve 48 MB each; buffers grow
    /// with what actually decompresses, which is bounded by `size`.
    fn decompress(self, data: &[u8], size: usize) -> Result<Vec<u8>, WireError> {
        use std::io::Read;
        let start = size.min(data.len().saturating_mul(8).saturating_add(4096));
        let bounded = |r: &mut dyn Read, what: &str| -> Result<Vec<u8>, WireError> {
            let mut out = Vec::with_capacity(start);
            r.take(size as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| WireError::protocol(format!("{what}: {e}")))?;
            Ok(out)
        };
        let out = match self {
            Compressor::Noop => data.to_vec(),
            Compressor::Snappy => {
                // The stream's own length preamble sizes the output buffer: check it against
                // the declared size before anything is allocated.
                let n = snap::raw::decompress_len(data)
                    .map_err(|e| WireError::protocol(format!("snappy: {e}")))?;
                if n != size {
                    return err(format!(
                        "OP_COMPRESSED declared {size} bytes but its snappy stream holds {n}"
                    ));
                }
                // Snappy expands at most ~21× (a 3-byte copy of 64 bytes): a stream declaring
                // more than 64× its length is lying, and is refused before the allocation.
                if n > data.len().saturating_mul(64).saturating_add(64) {
                    return err(format!(
                        "snappy stream of {} bytes cannot hold the {n} it declares",
                        data.len()
                    ));
                }
                snap::raw::Decoder::new()
                    .decompress_vec(data)
                    .map_err(|e| WireError::protocol(format!("snappy: {e}")))?
            }
            Compressor::Zlib => bounded(&mut flate2::read::ZlibDecoder::new(data), "zlib")?,
            Compressor::Zstd => {
                let mut d = zstd::stream::read::Decoder::with_buffer(data)
                    .map_err(|e| WireError::protocol(format!("zstd: {e}")))?;
                bounded(&mut d, "zstd")?
            }
        };
        if out.len() != size {
            return err(format!(
                "OP_COMPRESSED declared {size} bytes but held {}",
                out.len()
            ));
        }
        Ok(out)
    }
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.b.len() - self.pos < n {
            return err(format!("message truncated at byte {}", self.pos));
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn i32(&mut self) -> Result<i32, WireError> {
        Ok(i32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.take(1)?[0])
    }
    fn cstring(&mut self) -> Result<String, WireError> {
        let rest = &self.b[self.pos..];
        let end = rest
            .iter()
            .position(|&c| c == 0)
            .ok_or_else(|| WireError::protocol("unterminated C string"))?;
        let s = std::str::from_utf8(&rest[..end])
            .map_err(|_| WireError::protocol("C string is not UTF-8"))?
            .to_string();
        self.pos += end + 1;
        Ok(s)
    }
    /// One BSON document, length-checked, validated and decoded.
    fn document(&mut self) -> Result<Document, WireError> {
        if self.b.len() - self.pos < 5 {
            return err("truncated BSON document");
        }
        let len = i32::from_le_bytes(self.b[self.pos..self.pos + 4].try_into().unwrap());
        if len > MAX_BSON_INTERNAL_SIZE {
            return Err(WireError::with_code(
                10334,
                "BSONObjectTooLarge",
                format!(
                    "BSONObj size: {len} is invalid. Size must be between 0 and {MAX_BSON_INTERNAL_SIZE}(16MB)"
                ),
            ));
        }
        if len < 5 {
            return err(format!("invalid BSON document length {len}"));
        }
        decode_document(self.take(len as usize)?)
    }
    fn done(&self) -> bool {
        self.pos == self.b.len()
    }
}

pub use query::limits::MAX_BSON_DEPTH;
/// The largest document a message may carry: a user document's 16 MB plus room for the command
/// around it (mongod's BSONObjMaxInternalSize). A stored document is held to 16 MB by the
/// document layer, which answers BSONObjectTooLarge (10334) as mongod does.
pub const MAX_BSON_INTERNAL_SIZE: i32 = MAX_BSON_OBJECT_SIZE + 16 * 1024;

/// Decodes one document a message carries: [`check_document`] first, then the decoder, which
/// reads the bytes in place (no copy) and checks every string's UTF-8 once.
pub fn decode_document(raw: &[u8]) -> Result<Document, WireError> {
    check_document(raw)?;
    let invalid = |e: bson::raw::Error| match e.kind {
        // The decoder does not say which field: walk again, on this rare path only, to name it.
        ErrorKind::Utf8EncodingError(_) => walk_document(raw, true)
            .err()
            .unwrap_or_else(|| invalid_utf8("(unknown)")),
        _ => WireError::protocol(format!("invalid BSON: {e}")),
    };
    Document::try_from(RawDocument::from_bytes(raw).map_err(invalid)?).map_err(invalid)
}

/// Walks a BSON document's bytes without recursion and refuses nesting deeper than
/// [`MAX_BSON_DEPTH`] before any recursive decoder sees it (a deep document would otherwise
/// exhaust a worker thread's stack). Only the structure is checked here; the decoder checks
/// the rest (UTF-8 included, once).
pub fn check_document(b: &[u8]) -> Result<(), WireError> {
    walk_document(b, false)
}

/// [`check_document`]'s walk; with `check_utf8` it also refuses a key or string that is not
/// UTF-8, naming the field.
fn walk_document(b: &[u8], check_utf8: bool) -> Result<(), WireError> {
    let bad = || WireError::protocol("invalid BSON: malformed element");
    let mut pos = 4usize;
    let mut depth = 1usize;
    let need = |pos: usize, n: usize| {
        if b.len().saturating_sub(pos) < n {
            Err(bad())
        } else {
            Ok(())
        }
    };
    let i32_at = |pos: usize| -> Result<usize, WireError> {
        need(pos, 4)?;
        let v = i32::from_le_bytes(b[pos..pos + 4].try_into().unwrap());
        usize::try_from(v).map_err(|_| bad())
    };
    let cstr_end = |pos: usize| -> Result<usize, WireError> {
        b[pos.min(b.len())..]
            .iter()
            .position(|&c| c == 0)
            .map(|i| pos + i + 1)
            .ok_or_else(bad)
    };
    while depth > 0 {
        need(pos, 1)?;
        let t = b[pos];
        pos += 1;
        if t == 0 {
            depth -= 1;
            continue;
        }
        let key_start = pos;
        pos = cstr_end(pos)?;
        let key = &b[key_start..pos - 1];
        let field = || String::from_utf8_lossy(key).into_owned();
        if check_utf8 && std::str::from_utf8(key).is_err() {
            return Err(invalid_utf8(&field()));
        }
        pos += match t {
            0x01 | 0x09 | 0x11 | 0x12 => 8,
            0x02 | 0x0D | 0x0E => {
                let n = i32_at(pos)?;
                if n == 0 || b.len() < pos + 4 + n {
                    return Err(bad());
                }
                // The string's bytes, without its terminating NUL.
                if check_utf8 && std::str::from_utf8(&b[pos + 4..pos + 4 + n - 1]).is_err() {
                    return Err(invalid_utf8(&field()));
                }
                4 + n
            }
            0x03 | 0x04 => {
                depth += 1;
                if depth > MAX_BSON_DEPTH {
                    return Err(WireError::with_code(
                        15,
                        "Overflow",
                        format!("BSON document nested deeper than {MAX_BSON_DEPTH} levels"),
                    ));
                }
                4
            }
            0x05 => 5 + i32_at(pos)?,
            0x06 | 0x0A | 0x7F | 0xFF => 0,
            0x07 => 12,
            0x08 => 1,
            0x0B => {
                let e = cstr_end(pos)?;
                cstr_end(e)? - pos
            }
            0x0C => 4 + i32_at(pos)? + 12,
            0x0F => i32_at(pos)?,
            0x10 => 4,
            0x13 => 16,
            _ => return Err(bad()),
        };
        need(pos, 0)?;
    }
    Ok(())
}

/// flashdoc's documents hold Rust strings, which are UTF-8: a string that is not is refused,
/// naming the field (mongod would store the bytes as they are; see docs/security.md).
fn invalid_utf8(field: &str) -> WireError {
    WireError::with_code(
        2,
        "BadValue",
        format!(
            "field '{field}' holds a string that is not valid UTF-8; flashdoc stores strings as UTF-8 and refuses invalid bytes"
        ),
    )
}

/// Decodes a message body (after the header).
pub fn parse_request(header: &Header, body: &[u8]) -> Result<Request, WireError> {
    match header.op_code {
        OP_MSG => parse_msg(body, None, Some(header)),
        OP_QUERY => parse_query(body),
        OP_COMPRESSED => {
            let mut c = Cursor { b: body, pos: 0 };
            let original = c.i32()?;
            let size = c.i32()?;
            if !(0..=MAX_MESSAGE_SIZE).contains(&size) {
                return err(format!(
                    "OP_COMPRESSED uncompressed size {size} is out of range"
                ));
            }
            let id = c.u8()?;
            let comp = Compressor::from_id(id)
                .ok_or_else(|| WireError::protocol(format!("unknown compressor id {id}")))?;
            let inner = comp.decompress(&body[c.pos..], size as usize)?;
            match original {
                OP_MSG => parse_msg(&inner, Some(comp), None),
                OP_QUERY => parse_query(&inner),
                o => err(format!("OP_COMPRESSED wraps unsupported opcode {o}")),
            }
        }
        o => err(format!("unsupported opcode {o}")),
    }
}

fn parse_msg(
    body: &[u8],
    compressor: Option<Compressor>,
    header: Option<&Header>,
) -> Result<Request, WireError> {
    let mut c = Cursor { b: body, pos: 0 };
    let flags = c.i32()? as u32;
    let unknown_required = flags & REQUIRED_MASK & !(CHECKSUM_PRESENT | MORE_TO_COME);
    if unknown_required != 0 {
        return err(format!(
            "OP_MSG has unknown required flag bits {unknown_required:#x}"
        ));
    }
    let mut end = body.len();
    if flags & CHECKSUM_PRESENT != 0 {
        if body.len() < 8 {
            return err("OP_MSG too short for its checksum");
        }
        end -= 4;
        // The checksum covers the whole message before it, header included.
        if let Some(h) = header {
            let want = u32::from_le_bytes(body[end..].try_into().unwrap());
            let mut whole = Vec::with_capacity(Header::LEN + end);
            whole.extend_from_slice(&h.length.to_le_bytes());
            whole.extend_from_slice(&h.request_id.to_le_bytes());
            whole.extend_from_slice(&h.response_to.to_le_bytes());
            whole.extend_from_slice(&h.op_code.to_le_bytes());
            whole.extend_from_slice(&body[..end]);
            if crc32c::crc32c(&whole) != want {
                return err("OP_MSG checksum mismatch");
            }
        }
    }
    let mut c = Cursor {
        b: &body[..end],
        pos: c.pos,
    };
    let mut main: Option<Document> = None;
    let mut sequences: Vec<(String, Vec<Document>)> = Vec::new();
    // A set, not a scan of the earlier ones: a message may hold a hundred thousand sections.
    let mut seen_ids: HashSet<String> = HashSet::new();
    while !c.done() {
        match c.u8()? {
            0 => {
                if main.is_some() {
                    return Err(WireError::with_code(
                        40430,
                        "Location40430",
                        "Multiple body sections in message",
                    ));
                }
                main = Some(c.document()?);
            }
            1 => {
                let start = c.pos;
                let size = c.i32()?;
                if size < 5 || (size as usize) > c.b.len() - start {
                    return err(format!("invalid document sequence size {size}"));
                }
                let stop = start + size as usize;
                let id = c.cstring()?;
                if c.pos > stop {
                    return err(format!(
                        "document sequence identifier runs past its size {size}"
                    ));
                }
                let mut docs = Vec::new();
                let mut sc = Cursor {
                    b: &c.b[..stop],
                    pos: c.pos,
                };
                while !sc.done() {
                    docs.push(sc.document()?);
                }
                c.pos = stop;
                if !seen_ids.insert(id.clone()) {
                    return err(format!("document sequence {id:?} appears twice"));
                }
                sequences.push((id, docs));
            }
            k => return err(format!("unknown OP_MSG section kind {k}")),
        }
    }
    let mut body = main.ok_or_else(|| WireError::protocol("OP_MSG has no body section"))?;
    for (id, docs) in sequences {
        if body.contains_key(&id) {
            return err(format!(
                "field {id:?} is both in the body and a document sequence"
            ));
        }
        body.insert(
            id,
            docs.into_iter()
                .map(bson::Bson::Document)
                .collect::<Vec<_>>(),
        );
    }
    Ok(Request::Msg {
        flags,
        body,
        compressor,
    })
}

fn parse_query(body: &[u8]) -> Result<Request, WireError> {
    let mut c = Cursor { b: body, pos: 0 };
    let _flags = c.i32()?;
    let collection = c.cstring()?;
    let _skip = c.i32()?;
    let _n = c.i32()?;
    let mut query = c.document()?;
    // Some drivers wrap the command as {$query: {...}, $readPreference: ...}.
    if let Ok(inner) = query.get_document("$query") {
        query = inner.clone();
    }
    Ok(Request::Query { collection, query })
}

fn header_bytes(len: usize, request_id: i32, response_to: i32, op: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&(len as i32).to_le_bytes());
    out.extend_from_slice(&request_id.to_le_bytes());
    out.extend_from_slice(&response_to.to_le_bytes());
    out.extend_from_slice(&op.to_le_bytes());
    out
}

/// A reply document's bytes. A document BSON cannot hold (a field name with a NUL byte, which
/// a computed document could have) becomes an error reply instead of a panic.
fn encode_reply(doc: &Document) -> Vec<u8> {
    let mut b = Vec::with_capacity(256);
    if let Err(e) = doc.to_writer(&mut b) {
        b.clear();
        bson::doc! {
            "ok": 0.0,
            "errmsg": format!("the reply cannot be encoded as BSON: {e}"),
            "code": 1,
            "codeName": "InternalError",
        }
        .to_writer(&mut b)
        .expect("a plain error document encodes");
    }
    b
}

/// A message ready to be written: the length its header declares is its own, and it holds at
/// least a header. A client reads exactly the declared length, so a wrong one desynchronizes
/// the connection from this message on.
fn sealed(frame: Vec<u8>) -> Vec<u8> {
    assert!(
        frame.len() >= Header::LEN,
        "a {}-byte frame has no header",
        frame.len()
    );
    let declared = i32::from_le_bytes(frame[..4].try_into().expect("4 bytes"));
    assert_eq!(
        usize::try_from(declared).ok(),
        Some(frame.len()),
        "the header declares {declared} bytes for a {}-byte frame",
        frame.len()
    );
    frame
}

/// An OP_MSG body: `flags`, then one body section (kind 0) holding `doc`, a BSON document
/// whose own length prefix is its length (the client parses the section by it).
fn body_section(flags: u32, doc: &[u8]) -> Vec<u8> {
    assert!(doc.len() >= 5, "a {}-byte BSON document", doc.len());
    let own = i32::from_le_bytes(doc[..4].try_into().expect("4 bytes"));
    assert_eq!(
        usize::try_from(own).ok(),
        Some(doc.len()),
        "a reply document declaring {own} bytes holds {}",
        doc.len()
    );
    let mut body = Vec::with_capacity(5 + doc.len());
    body.extend_from_slice(&flags.to_le_bytes());
    body.push(0);
    body.extend_from_slice(doc);
    body
}

/// An OP_MSG reply with one body section, compressed when the request was.
pub fn msg_reply(
    doc: &Document,
    request_id: i32,
    response_to: i32,
    flags: u32,
    compressor: Option<Compressor>,
) -> Vec<u8> {
    let body = body_section(flags, &encode_reply(doc));
    sealed(match compressor {
        Some(comp) => {
            let packed = comp.compress(&body);
            let len = Header::LEN + 9 + packed.len();
            let mut out = header_bytes(len, request_id, response_to, OP_COMPRESSED);
            out.extend_from_slice(&OP_MSG.to_le_bytes());
            out.extend_from_slice(&(body.len() as i32).to_le_bytes());
            out.push(comp.id());
            out.extend_from_slice(&packed);
            out
        }
        None => {
            let mut out = header_bytes(Header::LEN + body.len(), request_id, response_to, OP_MSG);
            out.extend_from_slice(&body);
            out
        }
    })
}

/// A legacy OP_REPLY holding one document.
pub fn op_reply(doc: &Document, request_id: i32, response_to: i32) -> Vec<u8> {
    let d = encode_reply(doc);
    let len = Header::LEN + 20 + d.len();
    let mut out = header_bytes(len, request_id, response_to, OP_REPLY);
    out.extend_from_slice(&0i32.to_le_bytes()); // responseFlags
    out.extend_from_slice(&0i64.to_le_bytes()); // cursorID
    out.extend_from_slice(&0i32.to_le_bytes()); // startingFrom
    out.extend_from_slice(&1i32.to_le_bytes()); // numberReturned
    out.extend_from_slice(&d);
    sealed(out)
}

/// Builds an OP_MSG request (tests and the Rust-side tools use it).
pub fn msg_request(
    body: &Document,
    sequences: &[(&str, &[Document])],
    request_id: i32,
    flags: u32,
) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&flags.to_le_bytes());
    b.push(0);
    body.to_writer(&mut b).unwrap();
    for (id, docs) in sequences {
        b.push(1);
        let start = b.len();
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(id.as_bytes());
        b.push(0);
        for d in *docs {
            d.to_writer(&mut b).unwrap();
        }
        let size = (b.len() - start) as i32;
        b[start..start + 4].copy_from_slice(&size.to_le_bytes());
    }
    let mut out = header_bytes(Header::LEN + b.len(), request_id, 0, OP_MSG);
    out.extend_from_slice(&b);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    /// The header of a request whose body (all after the header) is `body`.
    fn header(op_code: i32, body: &[u8]) -> Header {
        Header {
            length: 16 + body.len() as i32,
            request_id: 1,
            response_to: 0,
            op_code,
        }
    }

    fn split(msg: &[u8]) -> (Header, &[u8]) {
        let h = Header::parse(msg[..16].try_into().unwrap());
        (h, &msg[16..])
    }

    #[test]
    fn op_msg_with_a_document_sequence_merges_it() {
        let docs = [doc! {"_id": 1}, doc! {"_id": 2}];
        let m = msg_request(
            &doc! {"insert": "c", "$db": "d"},
            &[("documents", &docs)],
            7,
            0,
        );
        let (h, body) = split(&m);
        assert_eq!(h.validate().unwrap(), body.len());
        let Request::Msg { body, .. } = parse_request(&h, body).unwrap() else {
            panic!()
        };
        assert_eq!(body.get_array("documents").unwrap().len(), 2);
    }

    #[test]
    fn compressed_round_trip_for_every_compressor() {
        for comp in [
            Compressor::Noop,
            Compressor::Snappy,
            Compressor::Zlib,
            Compressor::Zstd,
        ] {
            let reply = msg_reply(&doc! {"ok": 1.0, "x": "y".repeat(300)}, 1, 2, 0, Some(comp));
            let (h, body) = split(&reply);
            assert_eq!(h.op_code, OP_COMPRESSED);
            let Request::Msg {
                body, compressor, ..
            } = parse_request(&h, body).unwrap()
            else {
                panic!()
            };
            assert_eq!(compressor, Some(comp));
            assert_eq!(body.get_f64("ok").unwrap(), 1.0);
        }
    }

    #[test]
    fn checksum_is_verified() {
        let mut m = msg_request(&doc! {"ping": 1, "$db": "admin"}, &[], 1, CHECKSUM_PRESENT);
        let sum = crc32c::crc32c(&{
            let mut x = m.clone();
            let l = (x.len() + 4) as i32;
            x[..4].copy_from_slice(&l.to_le_bytes());
            x
        });
        let l = (m.len() + 4) as i32;
        m[..4].copy_from_slice(&l.to_le_bytes());
        m.extend_from_slice(&sum.to_le_bytes());
        let (h, body) = split(&m);
        assert!(parse_request(&h, body).is_ok());
        let mut bad = m.clone();
        let n = bad.len();
        bad[n - 1] ^= 1;
        let (h, body) = split(&bad);
        assert!(parse_request(&h, body)
            .unwrap_err()
            .message
            .contains("checksum"));
    }

    #[test]
    fn malformed_input_is_an_error_never_a_panic() {
        let good = msg_request(
            &doc! {"find": "c", "$db": "d"},
            &[("x", &[doc! {"a": 1}])],
            1,
            0,
        );
        let (h, body) = split(&good);
        for cut in 0..body.len() {
            let _ = parse_request(&h, &body[..cut]);
        }
        for i in 0..body.len() {
            let mut b = body.to_vec();
            b[i] ^= 0xff;
            let _ = parse_request(&h, &b);
        }
        assert!(Header {
            length: 3,
            request_id: 0,
            response_to: 0,
            op_code: OP_MSG
        }
        .validate()
        .is_err());
        assert!(Header {
            length: i32::MAX,
            request_id: 0,
            response_to: 0,
            op_code: OP_MSG
        }
        .validate()
        .is_err());
        assert!(parse_request(
            &Header {
                length: 20,
                request_id: 0,
                response_to: 0,
                op_code: 2002
            },
            &[0; 4]
        )
        .is_err());
    }

    #[test]
    fn sequence_identifier_longer_than_its_section_is_an_error() {
        // Found by fuzz/fuzz_targets/wire.rs: a kind-1 section whose size (5) ends inside its
        // identifier left the cursor past the section's end (an overflow panic).
        let mut b = Vec::new();
        b.extend_from_slice(&0u32.to_le_bytes());
        b.push(0);
        doc! {"insert": "c", "$db": "d"}.to_writer(&mut b).unwrap();
        b.push(1);
        b.extend_from_slice(&5i32.to_le_bytes());
        b.extend_from_slice(b"documents\0");
        let h = header(OP_MSG, &b);
        assert!(parse_request(&h, &b)
            .unwrap_err()
            .message
            .contains("runs past"));
    }

    #[test]
    fn snappy_length_preamble_is_checked_before_allocating() {
        // Found by fuzz/fuzz_targets/wire.rs: a 5-byte snappy stream declaring ~3 GB made the
        // decoder allocate that much although OP_COMPRESSED declared 12 bytes.
        let mut b = Vec::new();
        b.extend_from_slice(&OP_MSG.to_le_bytes());
        b.extend_from_slice(&12i32.to_le_bytes());
        b.push(Compressor::Snappy.id());
        b.extend_from_slice(&[0xf5, 0xff, 0xe9, 0x87, 0x0c]); // varint 3_237_642_229
        let h = header(OP_COMPRESSED, &b);
        assert!(parse_request(&h, &b)
            .unwrap_err()
            .message
            .contains("snappy"));
    }

    #[test]
    fn a_reply_bson_cannot_hold_becomes_an_error_reply() {
        let mut d = Document::new();
        d.insert("a\0b", 1);
        let r = msg_reply(&d, 1, 2, 0, None);
        let (h, b) = split(&r);
        let Request::Msg { body, .. } = parse_request(&h, b).unwrap() else {
            panic!()
        };
        assert_eq!(body.get_i32("code").unwrap(), 1);
    }

    #[test]
    #[should_panic(expected = "the header declares 40 bytes for a 41-byte frame")]
    fn a_frame_declares_its_own_length() {
        let mut frame = header_bytes(40, 1, 2, OP_MSG);
        frame.extend_from_slice(&[0; 25]);
        sealed(frame);
    }

    #[test]
    #[should_panic(expected = "has no header")]
    fn a_frame_holds_a_header() {
        sealed(vec![4, 0, 0, 0]);
    }

    #[test]
    #[should_panic(expected = "declaring 6 bytes holds 5")]
    fn a_body_section_holds_the_document_it_declares() {
        body_section(0, &[6, 0, 0, 0, 0]);
    }

    #[test]
    #[should_panic(expected = "a 3-byte BSON document")]
    fn a_body_section_holds_a_whole_document() {
        body_section(0, &[3, 0, 0]);
    }

    #[test]
    fn every_reply_frame_is_sealed_at_its_length() {
        let d = doc! {"ok": 1.0, "x": "y".repeat(1000)};
        for comp in [
            None,
            Some(Compressor::Noop),
            Some(Compressor::Snappy),
            Some(Compressor::Zlib),
            Some(Compressor::Zstd),
        ] {
            let r = msg_reply(&d, 1, 2, 0, comp);
            assert_eq!(
                i32::from_le_bytes(r[..4].try_into().unwrap()) as usize,
                r.len()
            );
        }
        let r = op_reply(&d, 1, 2);
        assert_eq!(
            i32::from_le_bytes(r[..4].try_into().unwrap()) as usize,
            r.len()
        );
    }

    #[test]
    fn a_declared_size_is_not_allocated_up_front() {
        // 48 MB declared, a few bytes sent: refused (zlib, zstd: short stream; snappy: the
        // preamble claims more than the stream could hold) without reserving 48 MB.
        for comp in [Compressor::Zlib, Compressor::Zstd, Compressor::Snappy] {
            let packed = comp.compress(b"tiny");
            let err = comp.decompress(&packed, 48_000_000).unwrap_err();
            assert!(
                err.message.contains("declared") || err.message.contains("cannot hold"),
                "{err}"
            );
        }
        let mut lying = Vec::new();
        lying.extend_from_slice(&[0x80, 0xd8, 0xf1, 0x16]); // varint 48 000 000
        lying.extend_from_slice(&[0x00, 0x61]);
        let err = Compressor::Snappy
            .decompress(&lying, 48_000_000)
            .unwrap_err();
        assert!(err.message.contains("cannot hold"), "{err}");
    }

    #[test]
    fn deeply_nested_documents_are_refused_before_decoding() {
        // 100 000 levels of {a: {a: …}} would overflow a recursive decoder's stack.
        let depth = 100_000;
        let mut inner = vec![5u8, 0, 0, 0, 0];
        for _ in 0..depth {
            let mut d = Vec::with_capacity(inner.len() + 8);
            d.extend_from_slice(&[0; 4]);
            d.push(0x03);
            d.extend_from_slice(b"a\0");
            d.extend_from_slice(&inner);
            d.push(0);
            let n = d.len() as i32;
            d[..4].copy_from_slice(&n.to_le_bytes());
            inner = d;
        }
        let mut body = vec![0u8; 4];
        body.push(0);
        body.extend_from_slice(&inner);
        let h = header(OP_MSG, &body);
        let e = parse_request(&h, &body).unwrap_err();
        assert!(e.message.contains("nested deeper"), "{e}");
        assert_eq!(e.code, 15);
        // 150 levels are fine.
        let mut d = doc! {"x": 1};
        for _ in 0..150 {
            d = doc! {"a": d};
        }
        let m = msg_request(&doc! {"find": "c", "filter": d, "$db": "x"}, &[], 1, 0);
        let (h, b) = split(&m);
        assert!(parse_request(&h, b).is_ok());
    }

    #[test]
    fn invalid_utf8_is_refused_naming_the_field() {
        let mut raw = Vec::new();
        doc! {"insert": "c", "$db": "d", "name": "xx"}
            .to_writer(&mut raw)
            .unwrap();
        let at = raw.windows(2).position(|w| w == b"xx").unwrap();
        raw[at] = 0xff;
        let mut b = vec![0u8; 4];
        b.push(0);
        b.extend_from_slice(&raw);
        let h = header(OP_MSG, &b);
        let e = parse_request(&h, &b).unwrap_err();
        assert_eq!(e.code, 2);
        assert!(e.message.contains("'name'"), "{e}");
    }

    #[test]
    fn two_body_sections_are_40430() {
        let mut b = Vec::new();
        b.extend_from_slice(&0u32.to_le_bytes());
        for _ in 0..2 {
            b.push(0);
            doc! {"ping": 1, "$db": "admin"}.to_writer(&mut b).unwrap();
        }
        let h = header(OP_MSG, &b);
        assert_eq!(parse_request(&h, &b).unwrap_err().code, 40430);
    }

    #[test]
    fn a_hundred_thousand_sequence_sections_parse_in_one_pass() {
        // Each identifier was once compared with every earlier one (quadratic: two such 692 KB
        // messages froze new connections for seconds). Distinct ids parse; a repeat is refused.
        let mut b = Vec::new();
        b.extend_from_slice(&0u32.to_le_bytes());
        b.push(0);
        doc! {"insert": "c", "$db": "d"}.to_writer(&mut b).unwrap();
        let n = 100_000;
        for i in 0..n {
            let id = format!("s{i}");
            b.push(1);
            b.extend_from_slice(&(4 + id.len() as i32 + 1).to_le_bytes());
            b.extend_from_slice(id.as_bytes());
            b.push(0);
        }
        let h = header(OP_MSG, &b);
        let Request::Msg { body, .. } = parse_request(&h, &b).unwrap() else {
            panic!()
        };
        assert_eq!(body.len(), 2 + n);
        b.push(1);
        b.extend_from_slice(&7i32.to_le_bytes());
        b.extend_from_slice(b"s7\0");
        let h = Header {
            length: 16 + b.len() as i32,
            ..h
        };
        assert!(parse_request(&h, &b).unwrap_err().message.contains("twice"));
    }

    #[test]
    fn a_document_over_the_internal_maximum_is_bson_object_too_large() {
        let big =
            doc! {"insert": "c", "$db": "d", "x": "a".repeat(MAX_BSON_INTERNAL_SIZE as usize)};
        let m = msg_request(&big, &[], 1, 0);
        let (h, b) = split(&m);
        assert_eq!(parse_request(&h, b).unwrap_err().code, 10334);
    }

    #[test]
    fn legacy_query_unwraps_dollar_query() {
        let mut b = Vec::new();
        b.extend_from_slice(&0i32.to_le_bytes());
        b.extend_from_slice(b"admin.$cmd\0");
        b.extend_from_slice(&0i32.to_le_bytes());
        b.extend_from_slice(&(-1i32).to_le_bytes());
        doc! {"$query": {"isMaster": 1}}.to_writer(&mut b).unwrap();
        let h = header(OP_QUERY, &b);
        let Request::Query { collection, query } = parse_request(&h, &b).unwrap() else {
            panic!()
        };
        assert_eq!(collection, "admin.$cmd");
        assert!(query.contains_key("isMaster"));
    }
}
