//! serverStatus's `network`, `asserts` and `mem` sections: what the connections moved, how many
//! commands failed, and the process's memory, as mongod reports them (monitoring exporters and
//! `db.serverStatus()` dashboards read these three first).

use crate::wire::{Header, OP_COMPRESSED};
use bson::{doc, Document};
use std::sync::atomic::{AtomicI64, Ordering};

/// Counters the connections update; read by serverStatus.
#[derive(Debug, Default)]
pub struct Traffic {
    /// Bytes as they crossed the socket (compressed when OP_COMPRESSED).
    physical_in: AtomicI64,
    physical_out: AtomicI64,
    /// Bytes of the messages as if uncompressed (mongod's `bytesIn`/`bytesOut`).
    logical_in: AtomicI64,
    logical_out: AtomicI64,
    requests: AtomicI64,
    /// Commands that failed with the user's error (mongod's `user` asserts), and internal
    /// errors (`regular`: a handler that failed unexpectedly, code 1 InternalError).
    user_asserts: AtomicI64,
    regular_asserts: AtomicI64,
}

/// A framed message's length as if uncompressed: an OP_COMPRESSED message carries its original
/// body size (after the original opcode) in its own body.
pub fn logical_len(header: &Header, body: &[u8]) -> i64 {
    let physical = (Header::LEN + body.len()) as i64;
    if header.op_code != OP_COMPRESSED || body.len() < 8 {
        return physical;
    }
    let size = i32::from_le_bytes([body[4], body[5], body[6], body[7]]);
    Header::LEN as i64 + i64::from(size.max(0))
}

impl Traffic {
    /// One request read: its header and body as received.
    pub fn received(&self, header: &Header, body: &[u8]) {
        let physical = (Header::LEN + body.len()) as i64;
        self.physical_in.fetch_add(physical, Ordering::Relaxed);
        self.logical_in
            .fetch_add(logical_len(header, body), Ordering::Relaxed);
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    /// One reply written: the whole framed message.
    pub fn sent(&self, message: &[u8]) {
        self.physical_out
            .fetch_add(message.len() as i64, Ordering::Relaxed);
        let logical = match message.get(..Header::LEN) {
            Some(h) => logical_len(
                &Header::parse(h.try_into().expect("16 bytes")),
                &message[Header::LEN..],
            ),
            None => message.len() as i64,
        };
        self.logical_out.fetch_add(logical, Ordering::Relaxed);
    }

    /// A command's reply: an `ok: 0` reply is an assert, internal (code 1) or the user's.
    pub fn replied(&self, reply: &Document) {
        let failed = match reply.get("ok") {
            Some(bson::Bson::Double(v)) => *v == 0.0,
            Some(bson::Bson::Int32(v)) => *v == 0,
            Some(bson::Bson::Int64(v)) => *v == 0,
            _ => false,
        };
        if !failed {
            return;
        }
        let counter = if reply.get_i32("code") == Ok(1) {
            &self.regular_asserts
        } else {
            &self.user_asserts
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A handler that panicked: an internal error.
    pub fn internal_error(&self) {
        self.regular_asserts.fetch_add(1, Ordering::Relaxed);
    }

    pub fn network(&self) -> Document {
        let l = |a: &AtomicI64| a.load(Ordering::Relaxed);
        doc! {
            "bytesIn": l(&self.logical_in),
            "bytesOut": l(&self.logical_out),
            "physicalBytesIn": l(&self.physical_in),
            "physicalBytesOut": l(&self.physical_out),
            "numRequests": l(&self.requests),
        }
    }

    /// mongod's five counters; flashdoc raises no `msg` or `warning` asserts (it logs warnings
    /// instead), and its counters do not roll over (64 bits).
    pub fn asserts(&self) -> Document {
        let l = |a: &AtomicI64| a.load(Ordering::Relaxed);
        doc! {
            "regular": l(&self.regular_asserts),
            "warning": 0i64,
            "msg": 0i64,
            "user": l(&self.user_asserts),
            "tripwire": 0i64,
            "rollovers": 0i64,
        }
    }
}

/// The process's virtual and resident sizes in pages, and the page's size in bytes
/// (`/proc/self/statm`).
fn statm() -> (Option<i64>, Option<i64>, i64) {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let mut pages = statm.split_whitespace().map(|v| v.parse::<i64>().ok());
    let (virt, resident) = (pages.next().flatten(), pages.next().flatten());
    // SAFETY: sysconf reads a constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as i64;
    (virt, resident, page)
}

/// The process's resident memory in MB (-1 where `/proc` cannot tell), for the log.
pub fn resident_mb() -> i64 {
    let (_, resident, page) = statm();
    resident.map_or(-1, |r| (r * page) >> 20)
}

/// The process's memory in MB, as mongod's `mem` section (`/proc/self/statm`).
pub fn memory() -> Document {
    let (virt, resident, page) = statm();
    let mb = |p: i64| (p * page) >> 20;
    match (virt, resident) {
        (Some(v), Some(r)) => doc! {
            "bits": 64i32,
            "resident": mb(r) as i32,
            "virtual": mb(v) as i32,
            "supported": true,
        },
        _ => doc! { "bits": 64i32, "supported": false },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(len: usize, op_code: i32) -> Header {
        let mut raw = [0u8; Header::LEN];
        raw[..4].copy_from_slice(&((Header::LEN + len) as i32).to_le_bytes());
        raw[12..].copy_from_slice(&op_code.to_le_bytes());
        Header::parse(&raw)
    }

    #[test]
    fn compressed_messages_count_their_original_size() {
        let t = Traffic::default();
        let mut body = vec![0u8; 30];
        body[..4].copy_from_slice(&crate::wire::OP_MSG.to_le_bytes());
        body[4..8].copy_from_slice(&500i32.to_le_bytes());
        t.received(&header(body.len(), OP_COMPRESSED), &body);
        t.received(&header(20, crate::wire::OP_MSG), &[0u8; 20]);
        let n = t.network();
        assert_eq!(n.get_i64("physicalBytesIn"), Ok(16 + 30 + 16 + 20));
        assert_eq!(n.get_i64("bytesIn"), Ok(16 + 500 + 16 + 20));
        assert_eq!(n.get_i64("numRequests"), Ok(2));
    }

    #[test]
    fn failed_replies_are_user_or_internal_asserts() {
        let t = Traffic::default();
        t.replied(&doc! {"ok": 1.0});
        t.replied(&doc! {"ok": 0.0, "code": 26});
        t.replied(&doc! {"ok": 0, "code": 2});
        t.replied(&doc! {"ok": 0.0, "code": 1});
        t.internal_error();
        let a = t.asserts();
        assert_eq!(a.get_i64("user"), Ok(2));
        assert_eq!(a.get_i64("regular"), Ok(2));
    }

    #[test]
    fn memory_reads_this_process() {
        let m = memory();
        assert_eq!(m.get_bool("supported"), Ok(true));
        assert!(m.get_i32("resident").unwrap() > 0);
        assert!(m.get_i32("virtual").unwrap() >= m.get_i32("resident").unwrap());
    }
}
