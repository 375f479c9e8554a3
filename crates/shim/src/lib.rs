//! `libflashdoc_shim.so`: loaded with `LD_PRELOAD` into an unmodified WiredTiger-based server
//! (mongod, a MongoDB-wire server on WiredTiger, or a WiredTiger program), it
//! - records what the process writes under its database directory as a flashdoc event trace
//!   (FDEVTR02, `placement::trace`): file creates with kinds, writes, renames, truncations,
//!   removals, punched holes and checkpoints;
//! - optionally runs a placement policy online and sets each write's Linux write-life hint
//!   (`F_SET_RW_HINT`) to the stream the policy chose.
//!
//! Every call is passed through unchanged: same bytes, offset and order, the same result and
//! `errno`. Configuration is by `FLASHDOC_SHIM_*` variables; `docs/shim.md` is the manual
//! (what is interposed, the checkpoint rule, how hints are serialized with writes, what the
//! shim cannot see).
//!
//! Layout: [`config`] parses the variables (file kinds by `placement::classify`),
//! [`checkpoint`] detects checkpoints, [`recorder`] turns calls into events (pure logic), [`hint`] serializes
//! hint changes with writes, [`sys`] makes the shim's own system calls, and `interpose` (not in
//! the unit-test build, whose harness must not interpose itself) defines the C library's
//! symbols; `variadic.c` defines the variadic ones (`open`, `openat`, `fcntl` and kin).

pub mod checkpoint;
pub mod config;
pub mod hint;
pub mod recorder;
pub mod sys;

#[cfg(not(test))]
mod interpose;
