//! The shim's configuration, from `FLASHDOC_SHIM_*` environment variables (docs/shim.md).
//! Parsing is a pure function of the variables, so every rule is unit-tested; an unknown
//! `FLASHDOC_SHIM_*` name or a bad value is an error that names the variable.

use placement::classify::{FileClassifier, DEFAULT_SPEC};
use placement::import::CheckpointRule;
use placement::PlacementConfig;

pub const PREFIX: &str = "FLASHDOC_SHIM_";

/// Linux has six write-life hint values (`RWH_WRITE_LIFE_NOT_SET` = 0 .. `EXTREME` = 5): the
/// shim's stream `s` is hint `s`, one to one, so at most six streams.
pub const MAX_STREAMS: u8 = 6;

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
    (
        "KINDS",
        "file kinds by path, kind=glob[,glob…][;kind=…] as `flashdoc placement import --kinds`",
    ),
    (
        "CHECKPOINT",
        "checkpoint rule: turtle (default), gap, gap:SECONDS, none",
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
    /// File kinds by path ([`placement::classify`], the importer's `--kinds`).
    pub kinds: FileClassifier,
    pub checkpoint: CheckpointRule,
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
        let kinds = FileClassifier::parse(var("KINDS").unwrap_or(DEFAULT_SPEC))
            .map_err(|e| format!("{PREFIX}KINDS: {e}"))?;
        let checkpoint = CheckpointRule::parse(var("CHECKPOINT").unwrap_or("turtle"))
            .map_err(|e| format!("{PREFIX}CHECKPOINT: {e}"))?;
        Ok(Some(Config {
            dir,
            trace,
            policy,
            kinds,
            checkpoint,
        }))
    }
}

/// The policies that can run from outside the engine: those that need no page ids and no
/// knowledge of the future.
fn online_policy(name: &str) -> Result<String, String> {
    let parsed: placement::policy::PolicyName =
        name.parse().map_err(|e| format!("{PREFIX}POLICY: {e}"))?;
    match parsed.as_str() {
        "none" | "file" | "boundary" | "dsm" | "dsm-skip-primary" | "filelog" | "reuse"
        | "agegroup" => Ok(name.into()),
        "lifetime" => Err(format!(
            "{PREFIX}POLICY=lifetime needs page ids, which a write seen from outside the engine \
             does not carry (without them it equals `file`): use file, boundary, dsm, \
             dsm-skip-primary, filelog, reuse or agegroup"
        )),
        other => Err(format!(
            "{PREFIX}POLICY={other} is offline only (it needs the whole trace)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use placement::FileKind;

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
    fn defaults_classify_mongod_files_and_find_checkpoints_by_the_turtle() {
        let c = parse(&[("DIR", "/db"), ("TRACE", "/t")]).unwrap().unwrap();
        let k = |p| c.kinds.classify(p);
        assert_eq!(k("collection-0-123.wt"), FileKind::Collection);
        assert_eq!(k("db/collection-0-123.wt"), FileKind::Collection);
        assert_eq!(k("index-1-123.wt"), FileKind::Index);
        assert_eq!(k("journal/WiredTigerLog.0000000001"), FileKind::Journal);
        for m in [
            "WiredTiger.wt",
            "WiredTiger.turtle",
            "sizeStorer.wt",
            "_mdb_catalog.wt",
        ] {
            assert_eq!(k(m), FileKind::Metadata, "{m}");
        }
        assert!(c.policy.is_none());
        assert_eq!(c.checkpoint, CheckpointRule::Turtle);
    }

    #[test]
    fn patterns_policy_and_streams_are_configurable() {
        let c = parse(&[
            ("DIR", "/db"),
            ("POLICY", "boundary"),
            ("STREAMS", "4"),
            (
                "KINDS",
                "collection=docs.wt;index=docs_idx.wt;journal=WiredTigerLog.*",
            ),
            ("CHECKPOINT", "gap:0.5"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.kinds.classify("docs.wt"), FileKind::Collection);
        assert_eq!(c.kinds.classify("docs_idx.wt"), FileKind::Index);
        assert_eq!(c.kinds.classify("WiredTigerLog.01"), FileKind::Journal);
        assert_eq!(
            c.checkpoint,
            CheckpointRule::Gap {
                quiet_ns: 500_000_000
            }
        );
        let (name, pc) = c.policy.unwrap();
        assert_eq!((name.as_str(), pc.streams), ("boundary", 4));
        assert!(c.trace.is_none());
        let six = parse(&[("DIR", "/db"), ("POLICY", "filelog")])
            .unwrap()
            .unwrap();
        assert_eq!(six.policy.unwrap().1.streams, 6);
        // reuse needs neither page ids nor the future: it runs from outside the engine.
        let reuse = parse(&[("DIR", "/db"), ("POLICY", "reuse")])
            .unwrap()
            .unwrap();
        assert_eq!(reuse.policy.unwrap().0, "reuse");
        // agegroup keys pages by file offset when there are no page ids.
        let agegroup = parse(&[("DIR", "/db"), ("POLICY", "agegroup")])
            .unwrap()
            .unwrap();
        assert_eq!(agegroup.policy.unwrap().0, "agegroup");
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
        assert!(err(&[("DIR", "/d"), ("TRACE", "/t"), ("KINDS", "index=a,,b")]).contains("KINDS"));
        assert!(err(&[("DIR", "/d"), ("TRACE", "/t"), ("KINDS", "disk=a")]).contains("KINDS"));
        assert!(err(&[("DIR", "/d"), ("TRACE", "/t"), ("CHECKPOINT", "x")]).contains("CHECKPOINT"));
    }
}
