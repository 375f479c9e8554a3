//! `$listLocalSessions`: the logical sessions the server has seen, as documents, the first
//! stage of an `{aggregate: 1}`. The sessions are the server's to know: the stage asks its
//! source ([`CollectionSource::local_sessions`](super::CollectionSource::local_sessions)).

use bson::Bson;

use super::common::stage_err;
use crate::compare::type_name;
use crate::error::{DocError, DocResult};

/// Whose sessions `$listLocalSessions` lists, as mongod's `ListSessionsSpec`.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ListSessionsSpec {
    /// Every user's sessions (`allUsers: true`).
    pub all_users: bool,
    /// These users' sessions, as (user, db); empty and not `all_users`: the caller's own.
    pub users: Vec<(String, String)>,
}

const STAGE: &str = "$listLocalSessions";

impl ListSessionsSpec {
    pub(super) fn parse(arg: &Bson) -> DocResult<ListSessionsSpec> {
        let Bson::Document(d) = arg else {
            return Err(DocError::type_mismatch(format!(
                "{STAGE} options must be specified in an object, but found: {}",
                type_name(arg)
            )));
        };
        let mut spec = ListSessionsSpec::default();
        for (k, v) in d {
            match (k.as_str(), v) {
                ("allUsers", Bson::Boolean(b)) => spec.all_users = *b,
                ("users", Bson::Array(a)) => {
                    spec.users = a.iter().map(parse_user).collect::<DocResult<_>>()?
                }
                ("allUsers" | "users", other) => {
                    let want = if k == "allUsers" { "bool" } else { "array" };
                    return Err(DocError::type_mismatch(format!(
                        "BSON field '{STAGE}.{k}' is the wrong type '{}', expected type '{want}'",
                        type_name(other)
                    )));
                }
                _ => {
                    return Err(stage_err(
                        40415,
                        format!("BSON field '{STAGE}.{k}' is an unknown field."),
                    ))
                }
            }
        }
        if spec.all_users && !spec.users.is_empty() {
            return Err(DocError::with_code(
                12,
                "UnsupportedFormat",
                format!("{STAGE} may not specify {{allUsers:true}} and {{users:[...]}} at the same time"),
            ));
        }
        Ok(spec)
    }
}

/// One `{user, db}` of `users`.
fn parse_user(v: &Bson) -> DocResult<(String, String)> {
    let field = |d: &bson::Document, name: &str| match d.get(name) {
        Some(Bson::String(s)) => Ok(s.clone()),
        Some(other) => Err(DocError::type_mismatch(format!(
            "BSON field 'ListSessionsUser.{name}' is the wrong type '{}', expected type 'string'",
            type_name(other)
        ))),
        None => Err(stage_err(
            40414,
            format!("BSON field 'ListSessionsUser.{name}' is missing but a required field"),
        )),
    };
    match v {
        Bson::Document(d) => {
            if let Some(k) = d.keys().find(|k| *k != "user" && *k != "db") {
                return Err(stage_err(
                    40415,
                    format!("BSON field 'ListSessionsUser.{k}' is an unknown field."),
                ));
            }
            Ok((field(d, "user")?, field(d, "db")?))
        }
        other => Err(DocError::type_mismatch(format!(
            "BSON field '{STAGE}.users' is the wrong type '{}', expected type 'object'",
            type_name(other)
        ))),
    }
}

/// Where `$listLocalSessions` may stand: first (40602).
pub(super) fn misplaced() -> DocError {
    stage_err(
        40602,
        "$listLocalSessions is only valid as the first stage in a pipeline",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::bson;

    #[test]
    fn options_name_whose_sessions() {
        let s = ListSessionsSpec::parse(&bson!({})).unwrap();
        assert_eq!(s, ListSessionsSpec::default());
        let s = ListSessionsSpec::parse(&bson!({"allUsers": true})).unwrap();
        assert!(s.all_users);
        let s = ListSessionsSpec::parse(&bson!({"users": [{"user": "u", "db": "d"}]})).unwrap();
        assert_eq!(s.users, vec![("u".to_string(), "d".to_string())]);
    }

    #[test]
    fn bad_options_get_mongods_codes() {
        let code = |v: Bson| ListSessionsSpec::parse(&v).unwrap_err().code;
        assert_eq!(code(bson!(1)), 14);
        assert_eq!(code(bson!({"allUsers": 1})), 14);
        assert_eq!(code(bson!({"bogus": true})), 40415);
        assert_eq!(code(bson!({"users": [{"user": "u"}]})), 40414);
        assert_eq!(
            code(bson!({"users": [{"user": "u", "db": "d", "x": 1}]})),
            40415
        );
        assert_eq!(code(bson!({"users": [1]})), 14);
        let both = bson!({"allUsers": true, "users": [{"user": "u", "db": "d"}]});
        assert_eq!(code(both), 12);
    }
}
