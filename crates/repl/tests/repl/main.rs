//! crates/repl's end-to-end tests: members of a set on the in-process network (or TCP), driven
//! through `ReplNode` as the server will drive them. One binary, so the harness is shared.

mod cluster;
mod common;
mod membership;
mod random;
mod tcp;
