//! The logical session cache: the sessions (`lsid`) that commands carried, kept as mongod's
//! local cache keeps them for `$listLocalSessions`. A session enters on its first use, its
//! `lastUse` moves on every use, `endSessions` removes it, and one unused for
//! `logicalSessionTimeoutMinutes` (30) expires. The cache is bounded as mongod's
//! (`maxSessions`, 1 000 000): past it a new session is refused (TooManyLogicalSessions).

use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, DateTime, Document};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use docdb::{DocError, DocResult};

/// mongod's `logicalSessionTimeoutMinutes` (what `hello` reports).
pub const TIMEOUT_MINUTES: i32 = 30;
/// mongod's `maxSessions` default.
pub const MAX_SESSIONS: usize = 1_000_000;

/// One cached session: its owner's digest and name, and when it was last used.
#[derive(Clone, Debug)]
struct Record {
    uid: [u8; 32],
    /// `user@db` of an authenticated owner.
    user: Option<String>,
    last_use: DateTime,
}

#[derive(Default)]
pub struct Sessions {
    by_id: Mutex<HashMap<Vec<u8>, Record>>,
    /// When expired sessions were last dropped (ms since the epoch): a sweep walks the whole
    /// cache, so a command that uses a known session never sweeps, and a new session sweeps at
    /// most once a second (or when the cache is full).
    swept_ms: AtomicI64,
}

/// mongod's digest of a session's owner: SHA-256 of `user@db`, or of nothing when no user is
/// authenticated.
pub fn user_digest(owner: Option<&(String, String)>) -> [u8; 32] {
    let name = owner.map(|(u, d)| format!("{u}@{d}")).unwrap_or_default();
    Sha256::digest(name.as_bytes()).into()
}

/// The UUID of an `lsid` (`{id: UUID}`), if it is one.
pub fn session_id(lsid: &Bson) -> Option<&[u8]> {
    match lsid.as_document()?.get("id")? {
        Bson::Binary(b) if b.subtype == BinarySubtype::Uuid && b.bytes.len() == 16 => {
            Some(&b.bytes)
        }
        _ => None,
    }
}

impl Sessions {
    /// Records a use of session `id` by `owner` (the connection's authenticated user) at `now`.
    pub fn touch(
        &self,
        id: &[u8],
        owner: Option<&(String, String)>,
        now: DateTime,
    ) -> DocResult<()> {
        let mut by_id = self.by_id.lock();
        if let Some(r) = by_id.get_mut(id) {
            r.last_use = now;
            return Ok(());
        }
        let now_ms = now.timestamp_millis();
        let last_sweep_ms = self.swept_ms.load(Ordering::Relaxed);
        if by_id.len() >= MAX_SESSIONS || now_ms.saturating_sub(last_sweep_ms) >= SWEEP_EVERY_MS {
            expire(&mut by_id, now);
            self.swept_ms.store(now_ms, Ordering::Relaxed);
        }
        if by_id.len() >= MAX_SESSIONS {
            return Err(DocError::with_code(
                261,
                "TooManyLogicalSessions",
                format!("Unable to add session into the cache because the number of active sessions is too high (the limit is {MAX_SESSIONS})"),
            ));
        }
        let record = Record {
            uid: user_digest(owner),
            user: owner.map(|(u, d)| format!("{u}@{d}")),
            last_use: now,
        };
        by_id.insert(id.to_vec(), record);
        Ok(())
    }

    /// `endSessions`: the sessions leave the cache.
    pub fn end(&self, ids: &[&[u8]]) {
        let mut by_id = self.by_id.lock();
        for id in ids {
            by_id.remove(*id);
        }
    }

    /// The cached sessions as `$listLocalSessions` lists them: every one, or those whose
    /// owner's digest is among `owners`.
    pub fn list(&self, owners: Option<&[[u8; 32]]>, now: DateTime) -> Vec<Document> {
        let mut by_id = self.by_id.lock();
        expire(&mut by_id, now);
        let mut out: Vec<(DateTime, Document)> = by_id
            .iter()
            .filter(|(_, r)| owners.is_none_or(|o| o.contains(&r.uid)))
            .map(|(id, r)| (r.last_use, listed(id, r)))
            .collect();
        out.sort_by_key(|(t, _)| *t);
        out.into_iter().map(|(_, d)| d).collect()
    }
}

/// A session as mongod's `LogicalSessionRecord`.
fn listed(id: &[u8], r: &Record) -> Document {
    let uuid = Binary {
        subtype: BinarySubtype::Uuid,
        bytes: id.to_vec(),
    };
    let uid = Binary {
        subtype: BinarySubtype::Generic,
        bytes: r.uid.to_vec(),
    };
    let mut d = doc! {"_id": {"id": uuid, "uid": uid}, "lastUse": r.last_use};
    if let Some(name) = &r.user {
        d.insert("user", doc! {"name": name});
    }
    d
}

/// Drops the sessions unused for the timeout.
/// How often a new session may sweep the cache for expired ones.
const SWEEP_EVERY_MS: i64 = 1_000;

fn expire(by_id: &mut HashMap<Vec<u8>, Record>, now: DateTime) {
    let timeout = Duration::from_secs(60 * TIMEOUT_MINUTES as u64).as_millis() as i64;
    let oldest = now.timestamp_millis().saturating_sub(timeout);
    by_id.retain(|_, r| r.last_use.timestamp_millis() >= oldest);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> DateTime {
        DateTime::from_millis(ms)
    }

    #[test]
    fn a_session_is_listed_from_its_first_use_until_it_ends() {
        let s = Sessions::default();
        let (a, b) = ([1u8; 16], [2u8; 16]);
        s.touch(&a, None, at(1_000)).unwrap();
        s.touch(&b, None, at(2_000)).unwrap();
        s.touch(&a, None, at(3_000)).unwrap();
        let all = s.list(None, at(3_000));
        assert_eq!(all.len(), 2);
        let first = all[0].get_document("_id").unwrap();
        assert_eq!(
            first.get("id"),
            Some(&Bson::Binary(Binary {
                subtype: BinarySubtype::Uuid,
                bytes: b.to_vec()
            }))
        );
        assert_eq!(all[1].get_datetime("lastUse").unwrap(), &at(3_000));
        assert!(!all[0].contains_key("user"));
        s.end(&[&a]);
        assert_eq!(s.list(None, at(3_000)).len(), 1);
    }

    #[test]
    fn sessions_are_listed_by_owner_and_expire_unused() {
        let s = Sessions::default();
        let alice = ("alice".to_string(), "admin".to_string());
        s.touch(&[1u8; 16], Some(&alice), at(0)).unwrap();
        s.touch(&[2u8; 16], None, at(0)).unwrap();
        let mine = s.list(Some(&[user_digest(Some(&alice))]), at(0));
        assert_eq!(mine.len(), 1);
        assert_eq!(
            mine[0].get_document("user").unwrap(),
            &doc! {"name": "alice@admin"}
        );
        let anonymous = s.list(Some(&[user_digest(None)]), at(0));
        assert_eq!(anonymous.len(), 1);
        // SHA-256 of the empty string, as mongod's digest for no user.
        assert_eq!(user_digest(None)[..4], [0xe3, 0xb0, 0xc4, 0x42]);
        let late = 60_000 * i64::from(TIMEOUT_MINUTES) + 1;
        assert!(s.list(None, at(late)).is_empty());
    }

    #[test]
    fn an_lsid_is_a_document_with_a_uuid() {
        let id = Binary {
            subtype: BinarySubtype::Uuid,
            bytes: vec![7; 16],
        };
        assert_eq!(
            session_id(&Bson::Document(doc! {"id": id})),
            Some(&[7u8; 16][..])
        );
        assert_eq!(session_id(&Bson::Document(doc! {"id": 1})), None);
        assert_eq!(session_id(&Bson::Int32(1)), None);
    }

    #[test]
    fn a_new_session_sweeps_expired_ones_but_a_known_one_does_not() {
        let s = Sessions::default();
        let late = 60_000 * i64::from(TIMEOUT_MINUTES) + 1;
        s.touch(&[1u8; 16], None, at(0)).unwrap();
        s.touch(&[2u8; 16], None, at(late)).unwrap();
        assert_eq!(
            s.by_id.lock().len(),
            1,
            "the new session's sweep dropped the expired one"
        );
        s.touch(&[3u8; 16], None, at(late + 1)).unwrap();
        s.touch(&[2u8; 16], None, at(2 * late + 2)).unwrap();
        assert_eq!(
            s.by_id.lock().len(),
            2,
            "a known session's use does not sweep"
        );
    }
}
