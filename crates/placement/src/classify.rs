//! What a file holds, from its path alone: for traces captured outside an engine (the
//! LD_PRELOAD shim, an imported CSV or block trace), where no engine says what it writes.
//!
//! A [`FileClassifier`] is an ordered list of glob patterns, each naming a [`FileKind`]; the
//! first pattern that matches a path (relative to the database directory) decides, and a path
//! no pattern matches is metadata. The defaults are WiredTiger's and MongoDB's names; other
//! servers name their files their own way, so the list is configurable with a spec string:
//!
//! ```text
//! collection=**/collection-*.wt;index=**/index-*.wt,**/idx*.wt;journal=**/journal/*
//! ```
//!
//! `*` does not cross a `/`; `**/` matches any number of directories, none included (so
//! `**/collection-*.wt` also matches MongoDB's `directoryPerDB` layout).

use crate::event::FileKind;
use glob::{MatchOptions, Pattern};

/// WiredTiger's and MongoDB's file names (WiredTiger `src/include/log.h`, MongoDB's
/// `collection-<n>-<id>.wt` / `index-<n>-<id>.wt`).
pub const DEFAULT_SPEC: &str = "collection=**/collection-*.wt;\
     index=**/index-*.wt;\
     journal=**/journal/WiredTigerLog.*,**/journal/WiredTigerPreplog.*,**/journal/WiredTigerTmplog.*";

const OPTIONS: MatchOptions = MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

#[derive(Clone, Debug)]
pub struct FileClassifier {
    rules: Vec<(Pattern, FileKind)>,
}

impl Default for FileClassifier {
    fn default() -> Self {
        Self::parse(DEFAULT_SPEC).expect("the default classifier spec parses")
    }
}

impl FileClassifier {
    /// Parses `kind=pattern[,pattern…][;kind=…]`. Kinds: collection, index, journal, metadata.
    /// Whitespace around items is ignored; an empty spec classifies everything as metadata.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut rules = Vec::new();
        for group in spec.split(';').map(str::trim).filter(|g| !g.is_empty()) {
            let (kind, patterns) = group
                .split_once('=')
                .ok_or_else(|| format!("file kinds: {group:?} is not KIND=PATTERN[,PATTERN…]"))?;
            let kind = kind_named(kind.trim())?;
            for p in patterns.split(',').map(str::trim) {
                if p.is_empty() {
                    return Err(format!("file kinds: an empty pattern for {}", kind.name()));
                }
                let pattern = Pattern::new(p)
                    .map_err(|e| format!("file kinds: pattern {p:?} for {}: {e}", kind.name()))?;
                rules.push((pattern, kind));
            }
        }
        Ok(Self { rules })
    }

    /// The kind of the file at `path`, relative to the database directory (a leading `./` is
    /// ignored).
    pub fn classify(&self, path: &str) -> FileKind {
        let path = path.strip_prefix("./").unwrap_or(path);
        self.rules
            .iter()
            .find(|(p, _)| p.matches_with(path, OPTIONS))
            .map_or(FileKind::Metadata, |(_, k)| *k)
    }
}

fn kind_named(name: &str) -> Result<FileKind, String> {
    FileKind::ALL
        .into_iter()
        .find(|k| k.name() == name)
        .ok_or_else(|| {
            format!("file kinds: unknown kind {name:?} (collection, index, journal or metadata)")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wiredtiger_and_mongodb_names_are_classified_by_default() {
        let c = FileClassifier::default();
        let cases = [
            ("collection-0-123.wt", FileKind::Collection),
            ("mydb/collection-7-99.wt", FileKind::Collection),
            ("index-1-123.wt", FileKind::Index),
            ("journal/WiredTigerLog.0000000001", FileKind::Journal),
            ("./journal/WiredTigerPreplog.0000000002", FileKind::Journal),
            ("journal/WiredTigerTmplog.0000000003", FileKind::Journal),
            ("WiredTiger.wt", FileKind::Metadata),
            ("WiredTiger.turtle", FileKind::Metadata),
            ("_mdb_catalog.wt", FileKind::Metadata),
            ("sizeStorer.wt", FileKind::Metadata),
            // `*` does not cross a directory.
            ("collection-0/x.wt", FileKind::Metadata),
        ];
        for (path, kind) in cases {
            assert_eq!(c.classify(path), kind, "{path}");
        }
    }

    #[test]
    fn the_first_matching_pattern_decides() {
        let c = FileClassifier::parse("index=idx*.wt; collection=*.wt ; journal=log/*").unwrap();
        assert_eq!(c.classify("idx_a.wt"), FileKind::Index);
        assert_eq!(c.classify("usertable.wt"), FileKind::Collection);
        assert_eq!(c.classify("log/WiredTigerLog.1"), FileKind::Journal);
        assert_eq!(c.classify("WiredTiger.turtle"), FileKind::Metadata);
        assert_eq!(
            FileClassifier::parse("").unwrap().classify("a.wt"),
            FileKind::Metadata
        );
    }

    #[test]
    fn bad_specs_are_refused_with_the_reason() {
        for (spec, needle) in [
            ("collection", "KIND=PATTERN"),
            ("table=*.wt", "unknown kind"),
            ("index=a,,b", "empty pattern"),
            ("index=[", "pattern \"[\""),
        ] {
            let e = FileClassifier::parse(spec).unwrap_err();
            assert!(e.contains(needle), "{spec}: {e}");
        }
    }
}
