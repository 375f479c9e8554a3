//! The limits that keep the server up whatever its clients do: how many connections it takes
//! (sized from the machine's memory), how long a connection may sit unauthenticated, idle, or
//! halfway through a message, how large a message may be before its connection authenticated,
//! how many cursors one connection may keep open, and the pipeline stages' memory budgets
//! (`query::aggregate::budget`, set from the server's parameters).

use crate::client::ConnInfo;
use crate::config::{Authorization, Parameters};
use crate::state::ServerState;
use query::aggregate::budget::{self, Budget};
use std::time::Duration;

/// What one connection costs, for sizing the default connection limit: its thread's touched
/// stack and the allocator's per-thread cache, the buffers of a message in flight and its
/// reply, and its share of the kernel's socket buffers. Measured at 1 000 CRUD connections:
/// about 190 KB each (docs/server.md, "Connections and memory"); 1 MiB leaves room for a
/// deeper stack and larger messages.
pub const CONNECTION_BYTES: u64 = 1 << 20;

/// The share of the machine's memory the default limit lets connections take (the cache takes
/// half, as WiredTiger's does).
const CONNECTION_MEMORY_SHARE: u64 = 4;

/// Descriptors kept for data files, the journal and the listeners.
const RESERVED_DESCRIPTORS: u64 = 512;

/// mongod's ceiling, and the floor below which a small machine would refuse its own tools.
const MOST_CONNECTIONS: u64 = 65_536;
const FEWEST_CONNECTIONS: u64 = 64;

/// The default `net.maxIncomingConnections`: as many connections as a quarter of the machine's
/// memory holds at [`CONNECTION_BYTES`] each, no more than the open-file hard limit allows
/// (less descriptors for the data), between 64 and mongod's 65 536.
pub fn default_max_connections() -> u32 {
    connections_for(total_memory_bytes(), open_file_hard_limit())
}

fn connections_for(memory: Option<u64>, descriptors: Option<u64>) -> u32 {
    let by_memory = memory.map_or(MOST_CONNECTIONS, |m| {
        m / CONNECTION_MEMORY_SHARE / CONNECTION_BYTES
    });
    let by_files = descriptors.map_or(MOST_CONNECTIONS, |d| d.saturating_sub(RESERVED_DESCRIPTORS));
    let n = by_memory
        .min(by_files)
        .clamp(FEWEST_CONNECTIONS, MOST_CONNECTIONS);
    u32::try_from(n).expect("clamped to 65 536")
}

/// The machine's memory (`/proc/meminfo`), or the cgroup's limit if lower.
fn total_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    Some(cgroup.map_or(kib * 1024, |c| c.min(kib * 1024)))
}

/// The open-file hard limit (the server raises its soft limit to it at start).
fn open_file_hard_limit() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct passed.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } == 0;
    (ok && lim.rlim_max != libc::RLIM_INFINITY).then_some(lim.rlim_max)
}

/// How many cursors one connection may have open (the default of `maxCursorsPerConnection`).
/// An open cursor holds what its command has not returned yet (an aggregate's whole result,
/// a find's scan position); a client that opens cursors and never exhausts nor kills them
/// would otherwise pin memory until `cursorTimeoutMillis`. A driver opens one per query and
/// closes it when the query's results are read, so a connection rarely has more than a few;
/// 1 000 is far above that and bounds one connection's leak to 1 000 results.
pub const MAX_CURSORS_PER_CONNECTION: u64 = 1_000;

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
    pub fn now(state: &ServerState, info: &ConnInfo) -> Patience {
        let auth_on = state.config().security.authorization == Authorization::Enabled;
        let p = state.params();
        if auth_on && !info.auth.lock().is_authenticated() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_connection_limit_follows_memory_and_descriptors() {
        const GIB: u64 = 1 << 30;
        // A quarter of 24 GiB at 1 MiB each.
        assert_eq!(connections_for(Some(24 * GIB), Some(1 << 20)), 6144);
        // The descriptors bind first on a small hard limit.
        assert_eq!(connections_for(Some(24 * GIB), Some(4096)), 4096 - 512);
        // Never below 64, never above mongod's 65 536.
        assert_eq!(connections_for(Some(GIB / 8), None), 64);
        assert_eq!(connections_for(Some(1 << 50), None), 65_536);
        assert_eq!(connections_for(None, None), 65_536);
        let here = default_max_connections();
        assert!((64..=65_536).contains(&here), "{here}");
    }
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
