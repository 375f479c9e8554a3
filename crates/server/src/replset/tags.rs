//! Tag sets: members' `tags` (string values, for read preferences' `tag_sets` and for write
//! concern modes) and `settings.getLastErrorModes`, the modes a write concern may name
//! (`w: "<mode>"`): `{mode: {tag: n}}` is met once the members that applied a write carry at
//! least `n` distinct values of `tag`, for every tag the mode names (mongod's rule).

use bson::{Bson, Document};
use docdb::{DocError, DocResult};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// A count in a configuration: a whole number from 0 to 1000.
pub(super) fn count(v: &Bson) -> Option<usize> {
    let n = query::compare::Num::of(v)?.as_f64();
    (n >= 0.0 && n.fract() == 0.0 && n <= 1000.0).then_some(n as usize)
}

/// The tags of the member with `_id` `id` in `config` (empty if it has none).
pub fn tags_of(config: &Document, id: u64) -> Document {
    config
        .get_array("members")
        .into_iter()
        .flatten()
        .filter_map(Bson::as_document)
        .find(|m| member_id(m) == Some(id))
        .and_then(|m| m.get_document("tags").ok().cloned())
        .unwrap_or_default()
}

fn member_id(m: &Document) -> Option<u64> {
    count(m.get("_id")?).map(|n| n as u64)
}

/// The mode `name` of `config`, or UnknownReplWriteConcern (79).
fn mode_of(config: &Document, name: &str) -> DocResult<Document> {
    config
        .get_document("settings")
        .ok()
        .and_then(|s| s.get_document("getLastErrorModes").ok())
        .and_then(|m| m.get_document(name).ok())
        .cloned()
        .ok_or_else(|| {
            DocError::with_code(
                79,
                "UnknownReplWriteConcern",
                format!("No write concern mode named '{name}' found in replica set configuration"),
            )
        })
}

/// Whether the write concern mode `name` exists in `config` (else 79).
pub fn check_mode(config: &Document, name: &str) -> DocResult<()> {
    mode_of(config, name).map(drop)
}

/// The test a write's applied members must pass for mode `name`.
pub fn enough(config: &Document, name: &str) -> DocResult<repl::Enough> {
    let mode: Vec<(String, usize)> = mode_of(config, name)?
        .iter()
        .map(|(tag, n)| (tag.clone(), count(n).unwrap_or(usize::MAX)))
        .collect();
    let tags: HashMap<u64, Document> = config
        .get_array("members")
        .into_iter()
        .flatten()
        .filter_map(Bson::as_document)
        .filter_map(|m| Some((member_id(m)?, m.get_document("tags").ok()?.clone())))
        .collect();
    Ok(Arc::new(move |ids: &[u64]| {
        mode.iter().all(|(tag, n)| {
            let values: BTreeSet<&str> = ids
                .iter()
                .filter_map(|id| tags.get(id)?.get_str(tag).ok())
                .collect();
            values.len() >= *n
        })
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn config() -> Document {
        doc! {
            "members": [
                {"_id": 0, "tags": {"dc": "east", "rack": "a"}},
                {"_id": 1, "tags": {"dc": "east", "rack": "b"}},
                {"_id": 2, "tags": {"dc": "west"}},
            ],
            "settings": {"getLastErrorModes": {"twoDCs": {"dc": 2}, "twoRacks": {"rack": 2}}},
        }
    }

    #[test]
    fn a_mode_is_met_by_distinct_tag_values_among_the_members_that_applied() {
        let c = config();
        let two_dcs = enough(&c, "twoDCs").unwrap();
        assert!(!two_dcs(&[0, 1]), "both in east");
        assert!(two_dcs(&[1, 2]));
        let two_racks = enough(&c, "twoRacks").unwrap();
        assert!(!two_racks(&[0, 2]));
        assert!(two_racks(&[0, 1]));
        assert_eq!(enough(&c, "nope").err().unwrap().code, 79);
        assert_eq!(tags_of(&c, 2), doc! {"dc": "west"});
        assert!(tags_of(&c, 7).is_empty());
    }
}
