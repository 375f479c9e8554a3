//! The shim's configuration, from `FLASHDOC_SHIM_*` environment variables (docs/shim.md).
//! Parsing is a pure function of the variables, so every rule is unit-tested; an unknown
//! `FLASHDOC_SHIM_*` name or a bad value is an error that names the variable.

use crate::checkpoint::CheckpointRule;
use crate::pattern::PatternList;
use placement::{FileKind, PlacementConfig};

pub const PREFIX: &str = "FLASHDOC_SHIM_";

/// Linux has six write-life hint values (`RWH_WRITE_LIFE_NOT_SET` = 0 .. `EXTREME` = 5): the
/// shim's stream `s` is hint `s`, one to one, so at most six streams.
pub const MAX_STREAMS: u8 = 6;

pub const DEFAULT_COLLECTION: &str = "collection-*.wt";
pub const DEFAULT_INDEX: &str = "index-*.wt";
pub const DEFAULT_JOURNAL: &str = "WiredTigerLog.*,WiredTigerPreplog.*,WiredTigerTmplog.*";
pub const DEFAULT_CHECKPOINT_FILES: &str = "*.wt,!WiredTiger.wt";
pub const DEFAULT_TURTLE: &str = "WiredTiger.turtle";

/// Every variable the shim reads, with its one-line meaning (the error for an unknown name
/// lists them).
pub const VARIABLES: &[(&str, &str)] = &[
    (
        "DIR",
        "the database directory (required when TRACE or POLICY is set)",
    ),
    ("TRACE", "write the event trace here (%p = process id)"),
    ("POLICY", "set write-life hints by this placement policy"),
    ("STREAMS", "the policy's stream budget, 2..=6 (default 6)"),
    ("COLLECTION", "collection file patterns"),
    ("INDEX", "index file patterns"),
    ("JOURNAL", "journal file patterns"),
    (
        "CHECKPOINT",
        "checkpoint rule: turtle (default), sync-gap=SECONDS, none",
    ),
    (
        "CHECKPOINT_FILES",
        "files whose syncs make a checkpoint's sync phase",
    ),
    (
        "TURTLE",
        "the file a checkpoint commit renames onto (turtle rule)",
    ),
];

/// What the shim does.
#[derive(Clone, Debug)]
pub struct Config {
    /// The database directory as given (canonicalized when the shim starts).
    pub dir: String,
    pub trace: Option<String>,
    /// The online policy and its configuration (`streams` ≤ [`MAX_STREAMS`]).
    pub policy: Option<(String, PlacementConfig)>,
    pub classes: Classifier,
    pub checkpoint: CheckpointRule,
    pub checkpoint_files: PatternList,
}

/// File kind by name: collection, index and journal patterns are tried in that order;
/// everything else is metadata.
#[derive(Clone, Debug)]
pub struct Classifier {
    pub collection: PatternList,
    pub index: PatternList,
    pub journal: PatternList,
}

impl Classifier {
    pub fn kind(&self, rel_path: &str) -> FileKind {
        if self.collection.matches(rel_path) {
            FileKind::Collection
        } else if self.index.matches(rel_path) {
            FileKind::Index
        } else if self.journal.matches(rel_path) {
            FileKind::Journal
        } else {
            FileKind::Metadata
        }
    }
}

impl Config {
    /// `Ok(None)`: neither a trace nor a policy is asked for, and the shim passes every call
    /// through without looking at it.
    pub fn from_vars<I>(vars: I) -> Result<Option<Config>, String>
    where
        I: IntoIterator<Item = (String, String)>,
    {
        let mut get = std::collections::HashMap::new();
        for (k, v) in vars {
            let Some(name) = k.strip_prefix(PREFIX) else {
                continue;
            };
            if !VARIABLES.iter().any(|(n, _)| *n == name) {
                let known: Vec<String> = VARIABLES
                    .iter()
                    .map(|(n, what)| format!("{PREFIX}{n} ({what})"))
                    .collect();
                return Err(format!("unknown variable {k}; known: {}", known.join("; ")));
            }
            get.insert(name.to_string(), v);
        }
        let var = |n: &str| get.get(n).map(String::as_str);
        let trace = var("TRACE").map(str::to_string);
        let policy_name = var("POLICY");
        if trace.is_none() && policy_name.is_none() {
            return Ok(None);
        }
        let dir = var("DIR")
            .filter(|d| !d.is_empty())
            .ok_or_else(|| format!("{PREFIX}DIR (the database directory) is required"))?
            .to_string();
        if trace.as_deref() == Some("") {
            return Err(format!("{PREFIX}TRACE is empty"));
        }
        let streams = match var("STREAMS") {
            None => MAX_STREAMS,
            Some(s) => s
                .parse::<u8>()
                .ok()
                .filter(|n| (2..=MAX_STREAMS).contains(n))
                .ok_or_else(|| {
                    format!(
                        "{PREFIX}STREAMS={s:?}: must be 2..={MAX_STREAMS} (Linux has six \
                         write-life hints, and stream s is hint s)"
                    )
                })?,
        };
        let policy = match policy_name {
            None => None,
            Some(name) => Some((online_policy(name)?, streams)),
        }
        .map(|(name, streams)| {
            (
                name,
                PlacementConfig {
                    streams,
                    ..PlacementConfig::default()
                },
            )
        });
        let patterns = |n: &str, default: &str| {
            PatternList::parse(var(n).unwrap_or(default)).map_err(|e| format!("{PREFIX}{n}: {e}"))
        };
        let classes = Classifier {
            collection: patterns("COLLECTION", DEFAULT_COLLECTION)?,
            index: patterns("INDEX", DEFAULT_INDEX)?,
            journal: patterns("JOURNAL", DEFAULT_JOURNAL)?,
        };
        let turtle = var("TURTLE").unwrap_or(DEFAULT_TURTLE);
        if turtle.is_empty() || turtle.contains('/') {
            return Err(format!(
                "{PREFIX}TURTLE={turtle:?}: a file name without '/'"
            ));
        }
        let checkpoint = CheckpointRule::parse(var("CHECKPOINT").unwrap_or("turtle"), turtle)
            .map_err(|e| format!("{PREFIX}CHECKPOINT: {e}"))?;
        Ok(Some(Config {
            dir,
            trace,
            policy,
            classes,
            checkpoint,
            checkpoint_files: patterns("CHECKPOINT_FILES", DEFAULT_CHECKPOINT_FILES)?,
        }))
    }
}

/// The policies that can run from outside the engine: those that need no page ids and no
/// knowledge of the future.
fn online_policy(name: &str) -> Result<String, String> {
    let parsed: placement::policy::PolicyName =
        name.parse().map_err(|e| format!("{PREFIX}POLICY: {e}"))?;
    match parsed.as_str() {
        "none" | "file" | "boundary" | "dsm" | "dsm-skip-primary" | "filelog" => Ok(name.into()),
        "lifetime" => Err(format!(
            "{PREFIX}POLICY=lifetime needs page ids, which a write seen from outside the engine \
             does not carry (without them it equals `file`): use file, boundary, dsm, \
             dsm-skip-primary or filelog"
        )),
        other => Err(format!(
            "{PREFIX}POLICY={other} is offline only (it needs the whole trace)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(vars: &[(&str, &str)]) -> Result<Option<Config>, String> {
        Config::from_vars(
            vars.iter()
                .map(|(k, v)| (format!("{PREFIX}{k}"), v.to_string()))
                .chain([("PATH".to_string(), "/bin".to_string())]),
        )
    }

    #[test]
    fn inert_without_trace_or_policy() {
        assert!(parse(&[]).unwrap().is_none());
        assert!(parse(&[("DIR", "/db")]).unwrap().is_none());
    }

    #[test]
    fn defaults_classify_mongod_files() {
        let c = parse(&[("DIR", "/db"), ("TRACE", "/t")]).unwrap().unwrap();
        let k = |p| c.classes.kind(p);
        assert_eq!(k("collection-0-123.wt"), FileKind::Collection);
        assert_eq!(k("db/collection-0-123.wt"), FileKind::Collection);
        assert_eq!(k("index-1-123.wt"), FileKind::Index);
        assert_eq!(k("journal/WiredTigerLog.0000000001"), FileKind::Journal);
        assert_eq!(k("journal/WiredTigerPreplog.0000000001"), FileKind::Journal);
        assert_eq!(k("WiredTigerTmplog.0000000001"), FileKind::Journal);
        for m in [
            "WiredTiger.wt",
            "WiredTiger.turtle",
            "sizeStorer.wt",
            "_mdb_catalog.wt",
        ] {
            assert_eq!(k(m), FileKind::Metadata, "{m}");
        }
        assert!(c.policy.is_none());
        assert!(c.checkpoint_files.matches("collection-0-1.wt"));
        assert!(!c.checkpoint_files.matches("WiredTiger.wt"));
    }

    #[test]
    fn patterns_policy_and_streams_are_configurable() {
        let c = parse(&[
            ("DIR", "/db"),
            ("POLICY", "boundary"),
            ("STREAMS", "4"),
            ("COLLECTION", "docs.wt"),
            ("INDEX", "docs_idx.wt"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.classes.kind("docs.wt"), FileKind::Collection);
        assert_eq!(c.classes.kind("docs_idx.wt"), FileKind::Index);
        let (name, pc) = c.policy.unwrap();
        assert_eq!((name.as_str(), pc.streams), ("boundary", 4));
        assert!(c.trace.is_none());
        let six = parse(&[("DIR", "/db"), ("POLICY", "filelog")])
            .unwrap()
            .unwrap();
        assert_eq!(six.policy.unwrap().1.streams, 6);
    }

    #[test]
    fn bad_settings_are_refused_by_name() {
        let err = |v: &[(&str, &str)]| parse(v).unwrap_err();
        assert!(err(&[("TRACE", "/t")]).contains("DIR"));
        assert!(err(&[("DIR", "/d"), ("TRACE", "")]).contains("TRACE"));
        assert!(err(&[("DIR", "/d"), ("TRACES", "/t")]).contains("unknown variable"));
        assert!(err(&[("DIR", "/d"), ("POLICY", "nope")]).contains("unknown placement policy"));
        assert!(err(&[("DIR", "/d"), ("POLICY", "lifetime")]).contains("page ids"));
        assert!(err(&[("DIR", "/d"), ("POLICY", "oracle")]).contains("offline"));
        for s in ["1", "7", "x", ""] {
            let e = err(&[("DIR", "/d"), ("POLICY", "file"), ("STREAMS", s)]);
            assert!(e.contains("STREAMS"), "{e}");
        }
        assert!(err(&[("DIR", "/d"), ("TRACE", "/t"), ("INDEX", "a,,b")]).contains("INDEX"));
        assert!(err(&[("DIR", "/d"), ("TRACE", "/t"), ("CHECKPOINT", "x")]).contains("CHECKPOINT"));
        assert!(err(&[("DIR", "/d"), ("TRACE", "/t"), ("TURTLE", "a/b")]).contains("TURTLE"));
    }
}
