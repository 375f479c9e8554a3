//! Defaults sized from the machine: the connection limit from its memory and descriptors, the
//! per-connection cursor cap. The configuration takes its defaults from here and `limits`
//! enforces them, so neither needs the other.

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

/// The machine's memory (`/proc/meminfo`'s `MemTotal`), as `hostInfo` reports it.
pub fn machine_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib: u64 = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// The memory the server may use: the machine's, or the cgroup's limit if lower.
fn total_memory_bytes() -> Option<u64> {
    let machine = machine_memory_bytes()?;
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok());
    Some(cgroup.map_or(machine, |c| c.min(machine)))
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
