//! `$currentOp`: the operations in progress (and, when asked, the idle connections and
//! cursors) as documents, the first stage of an `{aggregate: 1}` on `admin`. What is running
//! is the server's to know: the stage asks its source ([`CollectionSource::current_ops`]),
//! which the server fills from its operation registry.

use bson::Bson;

use super::common::stage_err;
use crate::compare::type_name;
use crate::error::{DocError, DocResult};

/// The options of `$currentOp`, as mongod's (all default to false but `idleSessions`).
#[derive(Clone, Debug, PartialEq)]
pub struct CurrentOpSpec {
    /// Every user's operations; false: only those of the connection's own users.
    pub all_users: bool,
    /// Also the connections that run nothing (`active: false`).
    pub idle_connections: bool,
    /// Also the open cursors no operation is reading (`type: "idleCursor"`).
    pub idle_cursors: bool,
    /// Also the idle sessions (a standalone flashdoc keeps no server-side sessions, so there
    /// are never any to report).
    pub idle_sessions: bool,
    /// A router's own operations only (on a standalone every operation is local).
    pub local_ops: bool,
}

impl Default for CurrentOpSpec {
    fn default() -> Self {
        CurrentOpSpec {
            all_users: false,
            idle_connections: false,
            idle_cursors: false,
            idle_sessions: true,
            local_ops: false,
        }
    }
}

impl CurrentOpSpec {
    pub(super) fn parse(arg: &Bson) -> DocResult<CurrentOpSpec> {
        let Bson::Document(d) = arg else {
            return Err(DocError::failed_to_parse(format!(
                "$currentOp options must be specified in an object, but found: {}",
                type_name(arg)
            )));
        };
        let mut spec = CurrentOpSpec::default();
        for (k, v) in d {
            let flag = match v {
                Bson::Boolean(b) => *b,
                other => {
                    return Err(DocError::failed_to_parse(format!(
                        "The '{k}' parameter of the $currentOp stage must be a boolean value, but found: {}",
                        type_name(other)
                    )))
                }
            };
            match k.as_str() {
                "allUsers" => spec.all_users = flag,
                "idleConnections" => spec.idle_connections = flag,
                "idleCursors" => spec.idle_cursors = flag,
                "idleSessions" => spec.idle_sessions = flag,
                "localOps" => spec.local_ops = flag,
                // mongod accepts it and prints backtraces of waiting threads only in debug
                // builds; flashdoc's operations carry no backtrace.
                "backtrace" if !flag => {}
                "backtrace" | "truncateOps" | "targetAllNodes" => {
                    return Err(DocError::with_code(
                        238,
                        "NotImplemented",
                        format!("$currentOp option '{k}: {flag}' is not supported by flashdoc"),
                    ))
                }
                other => {
                    return Err(DocError::failed_to_parse(format!(
                        "Unrecognized option '{other}' in $currentOp stage."
                    )))
                }
            }
        }
        Ok(spec)
    }
}

/// Where `$currentOp` may stand: first (40602), and only in `{aggregate: 1}` on `admin`
/// (73); the storage side checks the latter, this the former.
pub(super) fn misplaced() -> DocError {
    stage_err(
        40602,
        "$currentOp is only valid as the first stage in a pipeline",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn options_are_booleans_with_mongods_defaults() {
        let s = CurrentOpSpec::parse(&Bson::Document(doc! {})).unwrap();
        assert_eq!(s, CurrentOpSpec::default());
        assert!(s.idle_sessions && !s.all_users && !s.idle_connections);
        let s = CurrentOpSpec::parse(&Bson::Document(
            doc! {"allUsers": true, "idleConnections": true, "backtrace": false},
        ))
        .unwrap();
        assert!(s.all_users && s.idle_connections);
        let code = |d: Bson| CurrentOpSpec::parse(&d).unwrap_err().code;
        assert_eq!(code(Bson::Int32(1)), 9);
        assert_eq!(code(Bson::Document(doc! {"allUsers": 1})), 9);
        assert_eq!(code(Bson::Document(doc! {"nope": true})), 9);
        assert_eq!(code(Bson::Document(doc! {"backtrace": true})), 238);
    }
}
