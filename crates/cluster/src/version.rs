//! Chunk versions: (epoch, major, minor), as MongoDB 3.6 routes with them. The epoch names
//! one incarnation of a sharded collection; a migration bumps the major version (data moved to
//! another shard), a split or merge the minor one (bounds changed, data stayed). A shard's
//! version is the highest version among the chunks it owns; a request is write-compatible with
//! it when epoch and major agree (3.6's `isWriteCompatibleWith`).

use bson::{oid::ObjectId, Bson, Timestamp};
use docdb::{DocError, DocResult};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChunkVersion {
    pub epoch: ObjectId,
    pub major: u32,
    pub minor: u32,
}

impl ChunkVersion {
    /// The version a router sends for an unsharded collection (and a shard that owns no chunk
    /// of a collection has, with the collection's epoch).
    pub fn unsharded() -> ChunkVersion {
        ChunkVersion {
            epoch: ObjectId::from_bytes([0; 12]),
            major: 0,
            minor: 0,
        }
    }
    pub fn is_unsharded(&self) -> bool {
        *self == ChunkVersion::unsharded()
    }
    pub fn new(epoch: ObjectId, major: u32, minor: u32) -> ChunkVersion {
        ChunkVersion {
            epoch,
            major,
            minor,
        }
    }
    /// `lastmod` as config.chunks stores it.
    pub fn lastmod(&self) -> Bson {
        Bson::Timestamp(Timestamp {
            time: self.major,
            increment: self.minor,
        })
    }
    /// `shardVersion` as a 3.6 router sends it: `[Timestamp(major, minor), epoch]`.
    pub fn to_bson(&self) -> Bson {
        Bson::Array(vec![self.lastmod(), Bson::ObjectId(self.epoch)])
    }
    pub fn from_bson(v: &Bson) -> DocResult<ChunkVersion> {
        let bad = || DocError::failed_to_parse(format!("malformed shardVersion {v}"));
        let Bson::Array(a) = v else { return Err(bad()) };
        match (a.first(), a.get(1)) {
            (Some(Bson::Timestamp(t)), Some(Bson::ObjectId(e))) => {
                Ok(ChunkVersion::new(*e, t.time, t.increment))
            }
            _ => Err(bad()),
        }
    }
    pub fn from_lastmod(lastmod: &Bson, epoch: ObjectId) -> DocResult<ChunkVersion> {
        match lastmod {
            Bson::Timestamp(t) => Ok(ChunkVersion::new(epoch, t.time, t.increment)),
            other => Err(DocError::failed_to_parse(format!(
                "chunk lastmod must be a Timestamp, not {other}"
            ))),
        }
    }
    pub fn is_write_compatible(&self, other: &ChunkVersion) -> bool {
        self.epoch == other.epoch && self.major == other.major
    }
    /// Order within one epoch.
    pub fn older_than(&self, other: &ChunkVersion) -> bool {
        (self.major, self.minor) < (other.major, other.minor)
    }
    pub fn next_minor(&self) -> ChunkVersion {
        ChunkVersion::new(self.epoch, self.major, self.minor + 1)
    }
    pub fn next_major(&self) -> ChunkVersion {
        ChunkVersion::new(self.epoch, self.major + 1, 0)
    }
}

impl std::fmt::Display for ChunkVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}|{}||{}", self.major, self.minor, self.epoch)
    }
}

/// StaleConfig (13388) as a shard answers it, with `vReceived` / `vWanted` (mongod's fields).
pub fn stale_config(ns: &str, received: &ChunkVersion, wanted: &ChunkVersion) -> DocError {
    let mut extra = bson::Document::new();
    extra.insert("ns", ns);
    extra.insert("vReceived", received.lastmod());
    extra.insert("vReceivedEpoch", received.epoch);
    extra.insert("vWanted", wanted.lastmod());
    extra.insert("vWantedEpoch", wanted.epoch);
    DocError {
        code: STALE_CONFIG,
        code_name: "StaleConfig",
        message: format!(
            "version mismatch detected for {ns}: received {received}, shard has {wanted}"
        ),
        extra: Some(Box::new(extra)),
    }
}

pub const STALE_CONFIG: i32 = 13388;
/// StaleEpoch: the collection was dropped and recreated (or resharded) meanwhile.
pub const STALE_EPOCH: i32 = 150;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_round_trip_and_compatibility() {
        let e = ObjectId::new();
        let v = ChunkVersion::new(e, 3, 7);
        assert_eq!(ChunkVersion::from_bson(&v.to_bson()).unwrap(), v);
        assert!(v.is_write_compatible(&ChunkVersion::new(e, 3, 1)));
        assert!(!v.is_write_compatible(&v.next_major()));
        assert!(!v.is_write_compatible(&ChunkVersion::new(ObjectId::new(), 3, 7)));
        assert!(v.older_than(&v.next_minor()) && v.next_minor().older_than(&v.next_major()));
        assert!(ChunkVersion::unsharded().is_unsharded());
        assert!(ChunkVersion::from_bson(&Bson::Int32(1)).is_err());
    }
}
