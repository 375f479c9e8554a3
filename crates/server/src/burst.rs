//! Memory that a burst of closed connections leaves behind, and how the server gets it back.
//!
//! Each plain-TCP connection runs on a thread of its own (`conn`), and the allocator (mimalloc)
//! gives each thread its own pages. What a connection writes stays in the engine's cache, in
//! records allocated on the connection's thread, until a checkpoint reconciles it into new
//! pages. When the thread ends, those few live records keep its pages (abandoned, not free):
//! 1 000 connections that inserted 15 documents each left 6 200 abandoned pages, 83 MB resident
//! 10 s after they closed against 26 MB idle, and the memory came back only at the next timed
//! checkpoint, 40 s later (to 42 MB). A checkpoint right after the burst (the `fsync` command)
//! brought it back at once. So when a burst of connections has closed, the housekeeping task
//! asks for a checkpoint: it moves the records the gone threads allocated into the
//! checkpointing thread's pages, and theirs empty. Then it has the allocator return the emptied
//! pages at once ([`return_freed_pages`]): mimalloc gives a freed page back to the system only
//! when some thread next frees, abandons or collects a page, and when the checkpoint comes after
//! the last connection has gone nothing may do that for a minute (3.3x idle in the load test,
//! docs/server.md, "Connections and memory").

use std::sync::OnceLock;

/// How the process's allocator gives back, now, the pages freed since it last did (set by the
/// binary that chose the allocator: `crates/cli` for mimalloc).
static RETURN_FREED_PAGES: OnceLock<fn()> = OnceLock::new();

/// Tells the server how to make the allocator return its freed pages to the system at once
/// (the first call wins). Without it, [`return_freed_pages`] does nothing: the allocator
/// returns them on its own schedule.
pub fn set_return_freed_pages(release: fn()) {
    let _ = RETURN_FREED_PAGES.set(release);
}

/// Has the allocator return the pages freed so far, if the binary said how (see
/// [`set_return_freed_pages`]).
pub fn return_freed_pages() {
    if let Some(release) = RETURN_FREED_PAGES.get() {
        release();
    }
}

/// The fewest connections that must have closed since the peak before a checkpoint is asked
/// for: a handful of clients coming and going is ordinary traffic, and the timed checkpoint
/// takes care of what they leave.
pub const MIN_CLOSED: i64 = 64;

/// Fewer closes than this in one tick mean the burst's closing is over.
const SETTLED_CLOSES: i64 = 8;

/// A burst of connections that has closed, as [`BurstWatch`] saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClosedBurst {
    /// The most connections open since the previous burst.
    pub peak: i64,
    /// The connections open now.
    pub open: i64,
}

/// Watches the number of open connections, one reading per housekeeping tick (with the most
/// that were open since the previous one, so a burst shorter than a tick is seen), for a burst
/// that has closed.
#[derive(Debug, Default)]
pub struct BurstWatch {
    /// The most connections open since the last checkpoint it asked for.
    peak: i64,
    /// The reading of the previous tick.
    last: i64,
}

impl BurstWatch {
    /// Takes this tick's number of open connections and the most open since the previous
    /// tick; a burst when one has closed: at least [`MIN_CLOSED`] connections and at least
    /// half of the peak closed, and fewer than [`SETTLED_CLOSES`] closed since the previous
    /// tick (the closing is over, so the checkpoint does not run amid it; a few connections
    /// that keep coming and going, as hostile or health-check clients do, must not put it off
    /// for ever).
    pub fn closed_burst(&mut self, open: i64, most: i64) -> Option<ClosedBurst> {
        let settled = self.last - open < SETTLED_CLOSES;
        self.last = open;
        self.peak = self.peak.max(most).max(open);
        let closed = self.peak - open;
        if settled && closed >= MIN_CLOSED && open <= self.peak / 2 {
            let burst = ClosedBurst {
                peak: self.peak,
                open,
            };
            self.peak = open;
            return Some(burst);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readings(watch: &mut BurstWatch, open: &[i64]) -> Vec<bool> {
        open.iter()
            .map(|&n| watch.closed_burst(n, n).is_some())
            .collect()
    }

    #[test]
    fn a_closed_burst_is_seen_once_when_the_closing_stops() {
        let mut w = BurstWatch::default();
        let seen = readings(&mut w, &[20, 1000, 1000, 600, 100, 9, 9, 9, 8, 9]);
        assert_eq!(
            seen,
            [false, false, false, false, false, false, true, false, false, false]
        );
    }

    #[test]
    fn a_few_connections_still_closing_after_a_burst_do_not_put_it_off() {
        // Hostile clients reconnecting: after the burst, two or three close every tick.
        let mut w = BurstWatch::default();
        let seen = readings(&mut w, &[1000, 1000, 40, 37, 35, 32]);
        assert_eq!(seen, [false, false, false, true, false, false]);
    }

    #[test]
    fn ordinary_coming_and_going_is_not_a_burst() {
        let mut w = BurstWatch::default();
        let open: Vec<i64> = (0..200).map(|i| 40 + (i * 7) % 30).collect();
        assert!(readings(&mut w, &open).iter().all(|&b| !b));
        // Fewer than MIN_CLOSED gone, even if that is most of them.
        let mut w = BurstWatch::default();
        assert!(readings(&mut w, &[MIN_CLOSED - 1 + 2, 2, 2, 2])
            .iter()
            .all(|&b| !b));
    }

    #[test]
    fn half_of_the_peak_must_have_closed() {
        let mut w = BurstWatch::default();
        assert!(readings(&mut w, &[1000, 700, 700, 700]).iter().all(|&b| !b));
        assert_eq!(readings(&mut w, &[500, 500]), [false, true]);
    }

    /// Connections that opened and closed between two ticks count by the most that were open.
    #[test]
    fn a_burst_within_one_tick_is_seen() {
        let mut w = BurstWatch::default();
        assert_eq!(w.closed_burst(1, 1), None);
        assert_eq!(
            w.closed_burst(1, 201),
            Some(ClosedBurst { peak: 201, open: 1 })
        );
        assert_eq!(w.closed_burst(1, 1), None);
    }

    #[test]
    fn a_second_burst_is_measured_from_where_the_first_left_off() {
        let mut w = BurstWatch::default();
        assert_eq!(readings(&mut w, &[300, 10, 10]), [false, false, true]);
        assert_eq!(readings(&mut w, &[50, 10, 10]), [false, false, false]);
        assert_eq!(readings(&mut w, &[200, 20, 20]), [false, false, true]);
    }
}
