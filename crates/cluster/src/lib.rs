//! flashdoc's sharded cluster (docs/sharding.md): a router that drivers talk to as to a
//! mongos, shards that are flashdoc servers with shard-side commands, and the metadata in
//! etcd. Both roles plug into the server through its command hook (`server::hook`); the
//! server knows nothing of this crate.
//!
//! - `version`, `shardkey`, `meta`, `store`: chunk versions, shard keys, the metadata
//!   documents and the store they live in (etcd, or memory for the in-process lab cluster);
//! - `split`: where chunks split (default, HASS static and dynamic, oracle, load);
//! - `shard`: the shard side (version checks, orphan filtering, access statistics,
//!   `splitVector`, migrations as donor and recipient, range deletion, retryable writes);
//! - `router`: targeting, scatter-gather with merged sorts and aggregation, writes, cursors,
//!   admin commands, the `config` database, auto-split and the balancer;
//! - `transport`: how the router and shards send each other commands (TCP, or in process),
//!   authenticated as the internal user when the cluster has a key file;
//! - `users`: the cluster's users, in the metadata store, for the router's authentication.
pub mod meta;
pub mod replset_conn;
pub mod router;
pub mod shard;
pub mod shardkey;
pub mod split;
pub mod store;
pub mod transport;
pub mod users;
pub mod version;

/// A numeric field as i64 (any BSON number; 0 when absent or not a number).
pub(crate) fn int_field(v: Option<&bson::Bson>) -> i64 {
    num_field(v) as i64
}

/// A numeric field as f64 (0 when absent or not a number).
pub(crate) fn num_field(v: Option<&bson::Bson>) -> f64 {
    v.and_then(query::compare::Num::of)
        .map(|n| n.as_f64())
        .unwrap_or(0.0)
}
pub mod config;
