//! `none`: the original WiredTiger — every write on stream 0 (seed 000 Table 2 "Original").

use super::Policy;
use crate::event::{Event, WriteEvent};

#[derive(Debug, Default, Clone, Copy)]
pub struct NonePolicy;

impl Policy for NonePolicy {
    fn name(&self) -> &'static str {
        "none"
    }
    fn place(&mut self, _w: &WriteEvent) -> u8 {
        0
    }
    fn observe(&mut self, _ev: &Event) {}
}
