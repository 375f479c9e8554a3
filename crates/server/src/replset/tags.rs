//! Tag sets: members' `tags` (string values, for read preferences' `tag_sets` and for write
//! concern modes) and `settings.getLastErrorModes`, the modes a write concern may name
//! (`w: "<mode>"`): `{mode: {tag: n}}` is met once the members that applied a write carry at
//! least `n` distinct values of `tag`, for every tag the mode names (mongod's rule).

use super::config::invalid;
use bson::{Bson, Document};
use docdb::{DocError, DocResult};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

/// A member's `tags`: a document of strings.
pub fn member_tags(v: &Bson, at: &str) -> DocResult<Document> {
    let Bson::Document(tags) = v else {
        return Err(invalid(format!("{at} must be an object")));
    };
    if let Some((k, _)) = tags.iter().find(|(_, v)| !matches!(v, Bson::String(_))) {
        return Err(invalid(format!("{at}.{k} must be a string")));
    }
    Ok(tags.clone())
}

/// `settings.getLastErrorModes`: `{mode: {tag: positive integer}}`.
pub fn modes(v: &Bson) -> DocResult<Document> {
    let Bson::Document(modes) = v else {
        return Err(invalid("settings.getLastErrorModes must be an object"));
    };
    for (mode, spec) in modes {
        let Bson::Document(spec) = spec else {
            return Err(invalid(format!(
                "settings.getLastErrorModes.{mode} must be an object"
            )));
        };
        if spec.is_empty() {
            return Err(invalid(format!(
                "settings.getLastErrorModes.{mode} names no tag"
            )));
        }
        for (tag, n) in spec {
            if count(n).is_none_or(|n| n == 0) {
                return Err(invalid(format!(
                    "settings.getLastErrorModes.{mode}.{tag} must be a positive integer"
                )));
            }
        }
    }
    Ok(modes.clone())
}

fn count(v: &Bson) -> Option<usize> {
    let n = query::compare::Num::of(v)?.as_f64();
    (n >= 0.0 && n.fract() == 0.0 && n <= 1000.0).then_some(n as usize)
}

/// Refuses a mode the members can never meet: a tag it needs more distinct values of than the
/// members carry (mongod refuses such a configuration).
pub fn check_modes(members: &[Document], modes: &Document) -> DocResult<()> {
    for (mode, spec) in modes {
        for (tag, n) in spec.as_document().into_iter().flatten() {
            let n = count(n).unwrap_or(usize::MAX);
            let values: BTreeSet<&str> = members
                .iter()
                .filter_map(|m| m.get_document("tags").ok()?.get_str(tag).ok())
                .collect();
            if values.len() < n {
                return Err(invalid(format!(
                    "mode {mode} requires {n} different values for the tag {tag}, but only {} exist in the members",
                    values.len()
                )));
            }
        }
    }
    Ok(())
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

    #[test]
    fn modes_and_tags_are_checked() {
        let members = config()
            .get_array("members")
            .unwrap()
            .iter()
            .filter_map(|m| m.as_document().cloned())
            .collect::<Vec<_>>();
        assert!(check_modes(&members, &doc! {"m": {"dc": 2}}).is_ok());
        assert_eq!(
            check_modes(&members, &doc! {"m": {"dc": 3}})
                .unwrap_err()
                .code,
            93
        );
        assert_eq!(
            check_modes(&members, &doc! {"m": {"zone": 1}})
                .unwrap_err()
                .code,
            93
        );
        assert!(modes(&Bson::Document(doc! {"m": {"dc": 0}})).is_err());
        assert!(modes(&Bson::Document(doc! {"m": {}})).is_err());
        assert!(member_tags(&Bson::Document(doc! {"dc": 1}), "members[0].tags").is_err());
        assert!(member_tags(&Bson::Document(doc! {"dc": "x"}), "members[0].tags").is_ok());
    }
}
