//! The limits that keep the server up whatever its clients do: how many connections it takes
//! (sized from the machine's memory), how long a connection may sit unauthenticated, idle, or
//! halfway through a message, how large a message may be before its connection authenticated,
//! how many cursors one connection may keep open, and the pipeline stages' memory budgets
//! (`query::aggregate::budget`, set from the server's parameters).

use crate::client::ConnInfo;
use crate::config::{Authorization, Parameters};
use query::aggregate::budget::{self, Budget};
use std::time::Duration;

/// The largest message a connection may send before it authenticates (when authorization is
/// on): `hello` with its client metadata (at most 512 bytes by the handshake spec),
/// `saslStart` and `saslContinue` fit many times over. A larger header closes the connection
/// before any of its body is read.
pub const PRE_AUTH_MESSAGE_BYTES: usize = 64 << 10;

/// How long a message begun by an authenticated connection (or any, without authorization)
/// may go without a byte arriving before the connection is closed (a slow-loris sender).
pub const STALLED_MESSAGE: Duration = Duration::from_secs(30);

/// How long a connection may wait for its next message's bytes, and how large that message may
/// be, as things stand on the connection now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Patience {
    /// Until its first byte (None: forever).
    pub idle: Option<Duration>,
    /// Once it has begun: the whole message, or each next byte.
    pub rest: Rest,
    /// The largest message accepted now.
    pub max_message: usize,
    /// Why the connection is closed when `idle` runs out (for the log).
    pub idle_reason: &'static str,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rest {
    /// The rest of the message must arrive within this of its first byte.
    Whole(Duration),
    /// Each read must bring a byte within this.
    EachByte(Duration),
}

impl Patience {
    /// An unauthenticated connection, with authorization on, gets
    /// `unauthenticatedConnectionTimeoutSecs` for each whole message (a driver's monitoring
    /// connection, which never authenticates, sends `hello` every 10 s) and
    /// [`PRE_AUTH_MESSAGE_BYTES`]; any other waits `idleConnectionTimeoutSecs` (0: forever)
    /// between messages, [`STALLED_MESSAGE`] per byte within one, up to maxMessageSizeBytes.
    pub fn now(authorization: Authorization, info: &ConnInfo, p: &Parameters) -> Patience {
        if authorization == Authorization::Enabled && !info.auth.lock().is_authenticated() {
            let limit = Duration::from_secs(p.unauthenticated_connection_timeout_secs);
            return Patience {
                idle: Some(limit),
                rest: Rest::Whole(limit),
                max_message: PRE_AUTH_MESSAGE_BYTES,
                idle_reason: "not authenticated within unauthenticatedConnectionTimeoutSecs",
            };
        }
        Patience {
            idle: (p.idle_connection_timeout_secs > 0)
                .then(|| Duration::from_secs(p.idle_connection_timeout_secs)),
            rest: Rest::EachByte(STALLED_MESSAGE),
            max_message: crate::wire::MAX_MESSAGE_SIZE as usize,
            idle_reason: "idle for idleConnectionTimeoutSecs",
        }
    }
}

/// Makes the query crate's memory budgets the parameters' (at startup and on setParameter).
pub fn apply_budgets(p: &Parameters) {
    budget::set_limit(
        Budget::Group,
        p.internal_document_source_group_max_memory_bytes,
    );
    budget::set_limit(
        Budget::LookupCache,
        p.internal_document_source_lookup_cache_size_bytes,
    );
    budget::set_limit(
        Budget::GraphLookup,
        p.internal_document_source_graph_lookup_max_memory_bytes,
    );
    budget::set_limit(
        Budget::Blocking,
        p.internal_query_max_blocking_sort_memory_usage_bytes,
    );
    budget::set_disk_use_default(p.allow_disk_use_by_default);
}

/// The clock of one message's arrival under a [`Patience`].
pub struct MessageClock {
    patience: Patience,
    waiting_since: std::time::Instant,
    first_byte: Option<std::time::Instant>,
    last_byte: std::time::Instant,
}

/// A message body is read in chunks that at most double what has arrived, so a header
/// declaring 48 MB that is followed by nothing costs one chunk, not 48 MB.
pub const BODY_CHUNK: usize = 64 << 10;

impl MessageClock {
    pub fn start(patience: Patience) -> MessageClock {
        let now = std::time::Instant::now();
        MessageClock {
            patience,
            waiting_since: now,
            first_byte: None,
            last_byte: now,
        }
    }

    pub fn patience(&self) -> &Patience {
        &self.patience
    }

    /// Bytes arrived.
    pub fn progress(&mut self) {
        let now = std::time::Instant::now();
        self.first_byte.get_or_insert(now);
        self.last_byte = now;
    }

    /// How long a read may wait before the connection has run out of patience (None: forever).
    pub fn remaining(&self) -> Option<Duration> {
        let (since, limit) = match (self.first_byte, self.patience.rest) {
            (None, _) => (self.waiting_since, self.patience.idle?),
            (Some(first), Rest::Whole(d)) => (first, d),
            (Some(_), Rest::EachByte(d)) => (self.last_byte, d),
        };
        Some(limit.saturating_sub(since.elapsed()))
    }

    /// Why the connection is closed, if its patience ran out.
    pub fn expired(&self) -> Option<&'static str> {
        if self.remaining()? > Duration::ZERO {
            return None;
        }
        Some(match (self.first_byte, self.patience.rest) {
            (None, _) => self.patience.idle_reason,
            (Some(_), Rest::Whole(_)) => {
                "message not received within unauthenticatedConnectionTimeoutSecs"
            }
            (Some(_), Rest::EachByte(_)) => "message stalled: no byte for 30 s",
        })
    }

    /// Checks a header's declared length against what the connection may send now.
    pub fn admit(&self, message_len: usize) -> Result<(), String> {
        if message_len > self.patience.max_message {
            return Err(format!(
                "a {message_len}-byte message before authentication (at most {} bytes until the connection authenticates)",
                self.patience.max_message
            ));
        }
        Ok(())
    }
}

/// The size of the next chunk of a `len`-byte body of which `have` bytes arrived.
pub fn next_chunk(len: usize, have: usize) -> usize {
    (len - have).min(have.max(BODY_CHUNK))
}

#[cfg(test)]
mod clock_tests {
    use super::*;

    fn patience(idle: Option<Duration>, rest: Rest) -> Patience {
        Patience {
            idle,
            rest,
            max_message: PRE_AUTH_MESSAGE_BYTES,
            idle_reason: "idle",
        }
    }

    #[test]
    fn a_silent_connection_runs_out_after_its_idle_limit_and_a_begun_message_after_its_rest() {
        let short = Duration::from_millis(30);
        let mut c = MessageClock::start(patience(Some(short), Rest::EachByte(short)));
        assert_eq!(c.expired(), None);
        std::thread::sleep(short * 2);
        assert_eq!(c.expired(), Some("idle"));
        c.progress();
        assert_eq!(
            c.expired(),
            None,
            "a byte arrived: the per-byte clock restarts"
        );
        std::thread::sleep(short * 2);
        assert!(c.expired().unwrap().contains("stalled"));
        let forever = MessageClock::start(patience(None, Rest::EachByte(short)));
        assert_eq!(forever.remaining(), None);
    }

    #[test]
    fn a_whole_message_limit_counts_from_its_first_byte() {
        let short = Duration::from_millis(30);
        let mut c = MessageClock::start(patience(None, Rest::Whole(short)));
        c.progress();
        std::thread::sleep(short / 2);
        c.progress();
        std::thread::sleep(short);
        assert!(c.expired().unwrap().contains("unauthenticated"));
    }

    #[test]
    fn headers_past_the_bound_are_refused_and_bodies_grow_by_doubling() {
        let c = MessageClock::start(patience(None, Rest::Whole(Duration::from_secs(1))));
        assert!(c.admit(PRE_AUTH_MESSAGE_BYTES).is_ok());
        assert!(c.admit(48_000_000).is_err());
        assert_eq!(next_chunk(48_000_000, 0), BODY_CHUNK);
        assert_eq!(next_chunk(48_000_000, 1 << 20), 1 << 20);
        assert_eq!(next_chunk(100, 60), 40);
    }
}
