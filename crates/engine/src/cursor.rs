//! A range cursor that fetches entries in batches from wherever they live, remembering only
//! the last key it returned. Pages are latched only while a batch is copied out.

use crate::error::Result;
use crate::kv::{Direction, KvPair};
use std::collections::VecDeque;
use std::ops::Bound;

/// Entries copied per fetch.
const BATCH: usize = 256;

type Fetch =
    dyn FnMut(Bound<&[u8]>, Bound<&[u8]>, bool, usize, &mut Vec<KvPair>) -> Result<()> + Send;

pub struct BatchedCursor {
    lower: Bound<Vec<u8>>,
    upper: Bound<Vec<u8>>,
    reverse: bool,
    buf: VecDeque<KvPair>,
    done: bool,
    fetch: Box<Fetch>,
}

impl BatchedCursor {
    /// `fetch(lo, hi, reverse, limit, out)` appends up to `limit` entries of (lo, hi) in order.
    pub fn new(
        lower: Bound<Vec<u8>>,
        upper: Bound<Vec<u8>>,
        direction: Direction,
        fetch: impl FnMut(Bound<&[u8]>, Bound<&[u8]>, bool, usize, &mut Vec<KvPair>) -> Result<()>
            + Send
            + 'static,
    ) -> Self {
        BatchedCursor {
            lower,
            upper,
            reverse: direction == Direction::Reverse,
            buf: VecDeque::new(),
            done: false,
            fetch: Box::new(fetch),
        }
    }

    fn refill(&mut self) -> Result<()> {
        let mut out = Vec::with_capacity(BATCH);
        (self.fetch)(
            as_ref(&self.lower),
            as_ref(&self.upper),
            self.reverse,
            BATCH,
            &mut out,
        )?;
        if out.len() < BATCH {
            self.done = true;
        }
        if let Some((k, _)) = out.last() {
            // Continue strictly after the last key returned.
            if self.reverse {
                self.upper = Bound::Excluded(k.clone());
            } else {
                self.lower = Bound::Excluded(k.clone());
            }
        }
        self.buf.extend(out);
        Ok(())
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl Iterator for BatchedCursor {
    type Item = Result<KvPair>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() && !self.done {
            if let Err(e) = self.refill() {
                self.done = true;
                return Some(Err(e));
            }
        }
        self.buf.pop_front().map(Ok)
    }
}

/// True when (lo, hi) can hold no key (BTreeMap::range would panic on it).
pub fn empty_range(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a >= b
        }
        _ => false,
    }
}
