//! Collation: language-aware string comparison (ICU4X's `icu_collator`), as mongod's
//! `collation` option of find, count, distinct, aggregate, update, delete, findAndModify,
//! collections and indexes.
//!
//! One mechanism, the collation *in effect*: an operation enters a [`scope`] with its
//! collation, and everything that compares values on that thread in the meantime — the
//! matcher, sort, distinct, `$group`, expressions, `$addToSet` — compares strings (and
//! symbols) with it, through [`crate::compare::compare_bson`]. Index keys are encoded under the
//! index's own collation (sort keys instead of the string's bytes), and the planner uses an
//! index only when its collation is the query's. A cursor (docdb's `DocCursor`) remembers the
//! collation it was made under and re-enters it whenever it produces documents, so getMore
//! sees the same collation as the command that opened the cursor.
//!
//! Options: `locale` (`simple` is binary comparison, i.e. no collation), `strength` (1–5),
//! `caseLevel`, `caseFirst` (`upper`, `lower`, `off`; refused below strength 3 without
//! `caseLevel`, as mongod does), `numericOrdering`, `alternate` (`non-ignorable`, `shifted`),
//! `maxVariable` (`punct`, `space`), `normalization`, `version`. `backwards: true` is refused
//! (ICU4X sets French secondary ordering only from the locale).
//!
//! Locales: mongod's list (its "Collation Locales and Default Parameters" table, with the
//! `@collation=` variants), each honoured exactly or refused: see [`resolve_locale`]. A locale
//! outside mongod's list is refused as mongod refuses it (BadValue, "Field 'locale' is invalid
//! in: ..."); one ICU4X's compiled data does not carry is refused naming it, never served by
//! the root collation in its place.
//!
//! `normalization`: ICU defines `false` as "exact for FCD text, unspecified otherwise" and
//! `true` as exact for all text. ICU4X always normalizes, which is exact for all text and so
//! is a correct implementation of both; the spec reports the value given.
//!
//! `version`: mongod refuses a `version` that is not the one it reports
//! (IncompatibleCollationVersion, 161); so does flashdoc, with [`VERSION`].

use crate::error::{DocError, DocResult};
use bson::{doc, Bson, Document};
use icu_collator::options::{AlternateHandling, CaseLevel, CollatorOptions, MaxVariable, Strength};
use icu_collator::preferences::{CollationCaseFirst, CollationNumericOrdering};
use icu_collator::{CollatorBorrowed, CollatorPreferences};
use std::cell::RefCell;
use std::cmp::Ordering;
use std::sync::Arc;

/// A non-simple collation.
pub struct Collation {
    /// The normalized specification (as listIndexes and explain show it; equal specs mean
    /// equal collations).
    spec: Document,
    collator: CollatorBorrowed<'static>,
    /// Set for a stored collation that today's rules refuse (an earlier flashdoc accepted it):
    /// why they refuse it. It is built as that version built it, so the keys it sorted stay in
    /// order; the server warns about it at startup.
    legacy: Option<String>,
}

/// Where a collation document comes from: a request gets today's rules; a stored one (the
/// catalog, written by this or an earlier version) falls back to the rules it was written
/// under when today's refuse it, since its indexes were built with that collator and a
/// database must keep opening.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecOrigin {
    Request,
    Stored,
}

impl std::fmt::Debug for Collation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Collation({})", self.spec)
    }
}

impl PartialEq for Collation {
    fn eq(&self, other: &Self) -> bool {
        self.spec == other.spec
    }
}

fn bad(msg: impl Into<String>) -> DocError {
    DocError::bad_value(msg)
}

fn get_bool(d: &Document, k: &str, default: bool) -> DocResult<bool> {
    match d.get(k) {
        None => Ok(default),
        Some(Bson::Boolean(b)) => Ok(*b),
        Some(_) => Err(DocError::type_mismatch(format!(
            "BSON field 'collation.{k}' is the wrong type, expected a boolean"
        ))),
    }
}

fn get_str<'a>(d: &'a Document, k: &str, default: &'a str) -> DocResult<&'a str> {
    match d.get(k) {
        None => Ok(default),
        Some(Bson::String(s)) => Ok(s),
        Some(_) => Err(DocError::type_mismatch(format!(
            "BSON field 'collation.{k}' is the wrong type, expected a string"
        ))),
    }
}

/// The collation version flashdoc reports and accepts (the ICU version of the mongod releases
/// drivers and tools compare against; the collation itself is ICU4X's, from CLDR).
pub const VERSION: &str = "57.1";

/// mongod's collation locales, each with the `@collation=` variants mongod accepts for it.
const MONGOD_LOCALES: &[(&str, &[&str])] = &[
    ("af", &[]),
    ("sq", &[]),
    ("am", &[]),
    ("ar", &["compat"]),
    ("hy", &[]),
    ("as", &[]),
    ("az", &["search"]),
    ("be", &[]),
    ("bn", &["traditional"]),
    ("bs", &["search"]),
    ("bs_Cyrl", &[]),
    ("bg", &[]),
    ("my", &[]),
    ("ca", &["search"]),
    ("chr", &[]),
    (
        "zh",
        &[
            "big5han",
            "gb2312han",
            "unihan",
            "zhuyin",
            "pinyin",
            "stroke",
        ],
    ),
    ("zh_Hant", &[]),
    ("hr", &["search"]),
    ("cs", &["search"]),
    ("da", &["search"]),
    ("nl", &[]),
    ("dz", &[]),
    ("en", &[]),
    ("en_US", &[]),
    ("en_US_POSIX", &[]),
    ("eo", &[]),
    ("et", &[]),
    ("ee", &[]),
    ("fo", &[]),
    ("fil", &[]),
    ("fi", &["search", "traditional"]),
    ("fr", &[]),
    ("fr_CA", &[]),
    ("gl", &["search"]),
    ("ka", &[]),
    ("de", &["search", "eor", "phonebook"]),
    ("de_AT", &["phonebook"]),
    ("el", &[]),
    ("gu", &[]),
    ("ha", &[]),
    ("haw", &[]),
    ("he", &["search"]),
    ("hi", &[]),
    ("hu", &[]),
    ("is", &["search"]),
    ("ig", &[]),
    ("smn", &["search"]),
    ("id", &[]),
    ("ga", &[]),
    ("it", &[]),
    ("ja", &["unihan"]),
    ("kl", &["search"]),
    ("kn", &["traditional"]),
    ("kk", &[]),
    ("km", &[]),
    ("kok", &[]),
    ("ko", &["search", "searchjl", "unihan"]),
    ("ky", &[]),
    ("lkt", &[]),
    ("lo", &[]),
    ("lt", &[]),
    ("dsb", &[]),
    ("lb", &[]),
    ("mk", &[]),
    ("ms", &[]),
    ("ml", &[]),
    ("mt", &[]),
    ("mr", &[]),
    ("mn", &[]),
    ("ne", &[]),
    ("se", &["search"]),
    ("nb", &["search"]),
    ("nn", &["search"]),
    ("or", &[]),
    ("om", &[]),
    ("ps", &[]),
    ("fa", &[]),
    ("fa_AF", &[]),
    ("pl", &[]),
    ("pt", &[]),
    ("pa", &[]),
    ("ro", &[]),
    ("ru", &[]),
    ("sr", &[]),
    ("sr_Latn", &["search"]),
    ("si", &["dictionary"]),
    ("sk", &["search"]),
    ("sl", &[]),
    ("es", &["search", "traditional"]),
    ("sw", &[]),
    ("sv", &["search"]),
    ("ta", &[]),
    ("te", &[]),
    ("th", &[]),
    ("bo", &[]),
    ("to", &[]),
    ("tr", &["search"]),
    ("uk", &[]),
    ("hsb", &[]),
    ("ur", &[]),
    ("ug", &[]),
    ("vi", &["traditional"]),
    ("wae", &[]),
    ("cy", &[]),
    ("yi", &["search"]),
    ("yo", &[]),
    ("zu", &[]),
];

/// Locales of mongod's list whose CLDR standard collation is the root collation: ICU4X's data
/// serves them from root, which is exact. Any other locale that ICU4X would serve from root
/// is one its compiled data leaves out, and is refused.
const ROOT_COLLATION_LOCALES: &[&str] = &[
    "en", "en_US", "fr", "de", "de_AT", "it", "nl", "pt", "id", "ms",
];

/// ICU4X's name (a `-u-co-` value, and its data's marker attribute) of a mongod variant.
fn icu_collation_type(variant: &str) -> &str {
    match variant {
        "traditional" => "trad",
        "phonebook" => "phonebk",
        "dictionary" => "dict",
        "gb2312han" => "gb2312",
        other => other,
    }
}

/// The ICU4X locale of a mongod `locale` (`<locale>[@collation=<variant>]`), if flashdoc can
/// honour it exactly: it is in mongod's list, and ICU4X's compiled data has its collation (its
/// own data, a parent's that ICU4X keeps it under, or root for a locale CLDR gives root).
fn resolve_locale(locale: &str, spec: &Document) -> DocResult<icu_locale::Locale> {
    use icu_collator::provider::{Baked, CollationMetadataV1};
    use icu_provider::prelude::*;
    let invalid = |why: &str| bad(format!("Field 'locale' is invalid in: {spec}{why}"));
    let (base, variant) = match locale.split_once('@') {
        None => (locale, None),
        Some((b, kw)) => match kw.strip_prefix("collation=") {
            Some(v) => (b, Some(v)),
            None => return Err(invalid("")),
        },
    };
    let Some((_, variants)) = MONGOD_LOCALES.iter().find(|(l, _)| *l == base) else {
        return Err(invalid(""));
    };
    if variant.is_some_and(|v| !variants.contains(&v)) {
        return Err(invalid(""));
    }
    let co = variant.map(icu_collation_type);
    let tag = match co {
        Some(co) => format!("{}-u-co-{co}", base.replace('_', "-")),
        None => base.replace('_', "-"),
    };
    let loc: icu_locale::Locale = tag.parse().map_err(|_| invalid(""))?;
    let data_locale = DataLocale::from(&loc);
    let attributes = co
        .map(DataMarkerAttributes::from_str_or_panic)
        .unwrap_or_default();
    let mut metadata = DataRequestMetadata::default();
    metadata.silent = true;
    let req = DataRequest {
        id: DataIdentifierBorrowed::for_marker_attributes_and_locale(attributes, &data_locale),
        metadata,
    };
    let served: Result<DataResponse<CollationMetadataV1>, _> = Baked.load(req);
    match served {
        Err(_) => Err(invalid(&format!(
            ": flashdoc's collation data (ICU4X) has no '{}' collation for '{base}'",
            variant.unwrap_or("standard")
        ))),
        Ok(r)
            if r.metadata.locale.is_some_and(|l| l.is_unknown())
                && !ROOT_COLLATION_LOCALES.contains(&base) =>
        {
            Err(invalid(&format!(
                ": flashdoc's collation data (ICU4X) has no tailoring for '{base}'"
            )))
        }
        Ok(_) => Ok(loc),
    }
}

/// Refuses a field `collation` does not have.
fn check_fields(d: &Document) -> DocResult<()> {
    for k in d.keys() {
        if !matches!(
            k.as_str(),
            "locale"
                | "strength"
                | "caseLevel"
                | "caseFirst"
                | "numericOrdering"
                | "alternate"
                | "maxVariable"
                | "normalization"
                | "backwards"
                | "version"
        ) {
            return Err(DocError::failed_to_parse(format!(
                "BSON field 'collation.{k}' is an unknown field."
            )));
        }
    }
    Ok(())
}

/// `strength`: 1 (primary) to 5 (identical), 3 when absent; as given and as ICU's.
fn parse_strength(d: &Document) -> DocResult<(i64, Strength)> {
    let strength_n = match d.get("strength") {
        None => 3,
        Some(Bson::Int32(i)) => *i as i64,
        Some(Bson::Int64(i)) => *i,
        Some(Bson::Double(f)) if f.fract() == 0.0 => *f as i64,
        Some(_) => return Err(bad("collation strength must be an integer 1..5")),
    };
    let strength = match strength_n {
        1 => Strength::Primary,
        2 => Strength::Secondary,
        3 => Strength::Tertiary,
        4 => Strength::Quaternary,
        5 => Strength::Identical,
        n => {
            return Err(bad(format!(
                "Field 'strength' must be an integer 1 through 5. Got: {n}"
            )))
        }
    };
    Ok((strength_n, strength))
}

/// `version`: only this build's ICU version (a legacy index's collation is not checked).
fn check_version(d: &Document, legacy: bool) -> DocResult<()> {
    match d.get("version") {
        _ if legacy => {}
        None => {}
        Some(Bson::String(v)) if v == VERSION => {}
        Some(Bson::String(v)) => {
            return Err(DocError::with_code(
                161,
                "IncompatibleCollationVersion",
                format!(
                    "Requested collation version {v} but the only available collator version was {VERSION}. Requested collation spec: {d}"
                ),
            ))
        }
        Some(_) => {
            return Err(DocError::type_mismatch(
                "BSON field 'collation.version' is the wrong type, expected a string",
            ))
        }
    }
    Ok(())
}

/// The locale's ICU preferences with `caseFirst` and `numericOrdering`.
fn preferences(
    loc: &icu_locale::Locale,
    case_first: &str,
    numeric: bool,
) -> DocResult<CollatorPreferences> {
    let mut prefs = CollatorPreferences::from(loc);
    prefs.case_first = Some(match case_first {
        "upper" => CollationCaseFirst::Upper,
        "lower" => CollationCaseFirst::Lower,
        "off" => CollationCaseFirst::False,
        other => {
            return Err(bad(format!(
                "Field 'caseFirst' must be 'upper', 'lower' or 'off'. Got: {other}"
            )))
        }
    });
    prefs.numeric_ordering = Some(if numeric {
        CollationNumericOrdering::True
    } else {
        CollationNumericOrdering::False
    });
    Ok(prefs)
}

impl Collation {
    /// Parses a request's `collation` document. `Ok(None)` is the simple (binary) collation.
    pub fn parse(d: &Document) -> DocResult<Option<Arc<Collation>>> {
        Self::parse_from(d, SpecOrigin::Request)
    }

    /// Parses a collation document from `origin` (see [`SpecOrigin`]).
    pub fn parse_from(d: &Document, origin: SpecOrigin) -> DocResult<Option<Arc<Collation>>> {
        match (Self::parse_with(d, None), origin) {
            (Err(e), SpecOrigin::Stored) if [2, 161].contains(&e.code) => {
                Self::parse_with(d, Some(e.message))
            }
            (r, _) => r,
        }
    }

    /// Why today's rules refuse this stored collation, if they do.
    pub fn legacy(&self) -> Option<&str> {
        self.legacy.as_deref()
    }

    /// `legacy`: `None` applies today's rules; `Some(why)` the rules of the version that
    /// stored the spec (any well-formed locale tag, ICU4X's own fallback; `caseFirst` and
    /// `version` unchecked), recording why today's refuse it.
    fn parse_with(d: &Document, legacy: Option<String>) -> DocResult<Option<Arc<Collation>>> {
        check_fields(d)?;
        let locale = match d.get("locale") {
            Some(Bson::String(s)) => s.as_str(),
            Some(_) => {
                return Err(DocError::type_mismatch(
                    "BSON field 'collation.locale' is the wrong type, expected a string",
                ))
            }
            None => {
                return Err(DocError::failed_to_parse(
                    "BSON field 'collation.locale' is missing but a required field",
                ))
            }
        };
        if locale == "simple" {
            if d.len() > 1 {
                return Err(bad(
                    "If the collation locale is 'simple', no other options may be specified",
                ));
            }
            return Ok(None);
        }
        let (strength_n, strength) = parse_strength(d)?;
        let case_level = get_bool(d, "caseLevel", false)?;
        let case_first = get_str(d, "caseFirst", "off")?;
        let numeric = get_bool(d, "numericOrdering", false)?;
        let alternate = get_str(d, "alternate", "non-ignorable")?;
        let max_variable = get_str(d, "maxVariable", "punct")?;
        let normalization = get_bool(d, "normalization", false)?;
        let backwards = get_bool(d, "backwards", false)?;
        if backwards {
            return Err(bad(
                "collation backwards: true is not supported by flashdoc (French secondary ordering follows the locale)",
            ));
        }
        if legacy.is_none() && case_first != "off" && !case_level && strength_n < 3 {
            return Err(bad(format!(
                "'caseFirst' is invalid unless 'caseLevel' is on or 'strength' is greater than 2 in: {d}"
            )));
        }
        check_version(d, legacy.is_some())?;
        let loc = match (resolve_locale(locale, d), &legacy) {
            (Ok(loc), _) => loc,
            (Err(_), Some(_)) => locale
                .replace('_', "-")
                .parse()
                .map_err(|_| bad(format!("Field 'locale' is invalid in: {d}")))?,
            (Err(e), None) => return Err(e),
        };
        let prefs = preferences(&loc, case_first, numeric)?;
        let mut opts = CollatorOptions::default();
        opts.strength = Some(strength);
        opts.case_level = Some(if case_level {
            CaseLevel::On
        } else {
            CaseLevel::Off
        });
        opts.alternate_handling = Some(match alternate {
            "non-ignorable" => AlternateHandling::NonIgnorable,
            "shifted" => AlternateHandling::Shifted,
            other => {
                return Err(bad(format!(
                    "Field 'alternate' must be 'non-ignorable' or 'shifted'. Got: {other}"
                )))
            }
        });
        opts.max_variable = Some(match max_variable {
            "punct" => MaxVariable::Punctuation,
            "space" => MaxVariable::Space,
            other => {
                return Err(bad(format!(
                    "Field 'maxVariable' must be 'punct' or 'space'. Got: {other}"
                )))
            }
        });
        let collator = icu_collator::Collator::try_new(prefs, opts)
            .map_err(|e| bad(format!("collation for locale {locale}: {e}")))?;
        let spec = doc! {
            "locale": locale,
            "caseLevel": case_level,
            "caseFirst": case_first,
            "strength": strength_n as i32,
            "numericOrdering": numeric,
            "alternate": alternate,
            "maxVariable": max_variable,
            "normalization": normalization,
            "backwards": false,
            "version": VERSION,
        };
        Ok(Some(Arc::new(Collation {
            spec,
            collator,
            legacy,
        })))
    }

    /// The normalized specification.
    pub fn spec(&self) -> &Document {
        &self.spec
    }

    pub fn compare(&self, a: &str, b: &str) -> Ordering {
        self.collator.compare(a, b)
    }

    /// The sort key of a string: its bytes compare as the strings do under this collation.
    pub fn sort_key(&self, s: &str) -> Vec<u8> {
        let mut k = Vec::new();
        let Ok(()) = self.collator.write_sort_key_to(s, &mut k);
        k
    }
}

/// Two optional collations are the same (None is the simple collation).
pub fn same(a: Option<&Arc<Collation>>, b: Option<&Arc<Collation>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => x.spec == y.spec,
        _ => false,
    }
}

/// The collation of an operation: its own if given, else the collection's default.
pub fn resolve(
    own: Option<&Document>,
    default: Option<&Arc<Collation>>,
) -> DocResult<Option<Arc<Collation>>> {
    match own {
        Some(d) => Collation::parse(d),
        None => Ok(default.cloned()),
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Collation>>> = const { RefCell::new(None) };
}

/// Restores the previous collation when dropped.
pub struct Scope {
    previous: Option<Arc<Collation>>,
}

impl Drop for Scope {
    fn drop(&mut self) {
        let prev = self.previous.take();
        CURRENT.with(|c| *c.borrow_mut() = prev);
    }
}

/// Makes `c` the collation in effect on this thread until the returned guard is dropped.
#[must_use = "the collation is in effect only while the guard lives"]
pub fn scope(c: Option<Arc<Collation>>) -> Scope {
    let previous = CURRENT.with(|cur| std::mem::replace(&mut *cur.borrow_mut(), c));
    Scope { previous }
}

/// The collation in effect on this thread.
pub fn current() -> Option<Arc<Collation>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// Compares two strings under the collation in effect (bytes when there is none).
pub fn compare_strings(a: &str, b: &str) -> Ordering {
    CURRENT.with(|c| match &*c.borrow() {
        None => a.as_bytes().cmp(b.as_bytes()),
        Some(coll) => coll.compare(a, b),
    })
}

/// Appends a string's index-key bytes under the collation in effect: its sort key, or its
/// bytes when there is none.
pub fn with_key_bytes<R>(s: &str, f: impl FnOnce(&[u8]) -> R) -> R {
    CURRENT.with(|c| match &*c.borrow() {
        None => f(s.as_bytes()),
        Some(coll) => f(&coll.sort_key(s)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coll(d: Document) -> Arc<Collation> {
        Collation::parse(&d).unwrap().unwrap()
    }

    #[test]
    fn strengths_case_level_and_scope() {
        let s1 = coll(doc! {"locale": "en", "strength": 1});
        assert_eq!(s1.compare("cafe", "Café"), Ordering::Equal);
        let s2 = coll(doc! {"locale": "en", "strength": 2});
        assert_eq!(s2.compare("cafe", "CAFE"), Ordering::Equal);
        assert_ne!(s2.compare("cafe", "café"), Ordering::Equal);
        let cl = coll(doc! {"locale": "en", "strength": 1, "caseLevel": true});
        assert_ne!(cl.compare("a", "A"), Ordering::Equal);
        assert_eq!(cl.compare("a", "á"), Ordering::Equal);
        let num = coll(doc! {"locale": "en", "numericOrdering": true});
        assert_eq!(num.compare("10", "9"), Ordering::Greater);
        assert_eq!(s1.sort_key("ABC"), s1.sort_key("abc"));
        assert!(s1.sort_key("abc") < s1.sort_key("abd"));
        assert_eq!(compare_strings("a", "B"), Ordering::Greater);
        {
            let _g = scope(Some(s2.clone()));
            assert_eq!(compare_strings("a", "B"), Ordering::Less);
            {
                let _inner = scope(None);
                assert_eq!(compare_strings("a", "B"), Ordering::Greater);
            }
            assert_eq!(compare_strings("A", "a"), Ordering::Equal);
        }
        assert_eq!(compare_strings("A", "a"), Ordering::Less);
        assert!(Collation::parse(&doc! {"locale": "simple"})
            .unwrap()
            .is_none());
        assert!(same(
            Some(&s1),
            Some(&coll(doc! {"locale": "en", "strength": 1}))
        ));
        assert!(!same(Some(&s1), None));
    }

    #[test]
    fn bad_specs() {
        for d in [
            doc! {"strength": 1},
            doc! {"locale": "en", "strength": 7},
            doc! {"locale": "en", "caseFirst": "sideways"},
            doc! {"locale": "en", "bogus": 1},
            doc! {"locale": "simple", "strength": 1},
            doc! {"locale": "en", "backwards": true},
            doc! {"locale": 5},
            doc! {"locale": "en", "strength": 2, "caseFirst": "upper"},
            doc! {"locale": "en", "version": 1},
        ] {
            assert!(Collation::parse(&d).is_err(), "{d}");
        }
        let e = Collation::parse(&doc! {"locale": "en", "version": "1.0"}).unwrap_err();
        assert_eq!(e.code, 161);
        assert!(Collation::parse(&doc! {"locale": "en", "version": VERSION}).is_ok());
        assert!(Collation::parse(
            &doc! {"locale": "en", "caseLevel": true, "strength": 1, "caseFirst": "upper"}
        )
        .is_ok());
    }

    /// Every locale of mongod's list is either honoured exactly or refused naming it; the
    /// refused set is pinned, so a change of ICU4X's data shows up here.
    #[test]
    fn locales_are_honoured_or_refused() {
        let mut refused = Vec::new();
        for (base, variants) in MONGOD_LOCALES {
            let names = std::iter::once(base.to_string())
                .chain(variants.iter().map(|v| format!("{base}@collation={v}")));
            for name in names {
                match Collation::parse(&doc! {"locale": &name}) {
                    Ok(c) => assert_eq!(c.unwrap().spec.get_str("locale").unwrap(), name),
                    Err(e) => {
                        assert_eq!(e.code, 2, "{name}: {e:?}");
                        assert!(e.message.contains(&name), "{name}: {e:?}");
                        refused.push(name);
                    }
                }
            }
        }
        let searches = refused
            .iter()
            .filter(|n| n.ends_with("@collation=search"))
            .count();
        let others: Vec<&str> = refused
            .iter()
            .filter(|n| !n.ends_with("@collation=search"))
            .map(String::as_str)
            .collect();
        assert_eq!(searches, 23, "{refused:?}");
        assert_eq!(
            others,
            [
                "ca",
                "zh@collation=big5han",
                "zh@collation=gb2312han",
                "dz",
                "haw",
                "smn",
                "ga",
                "kl",
                "ko@collation=searchjl",
                "lkt",
                "lb",
                "se",
                "sw",
                "bo",
                "wae",
                "yi",
                "zu"
            ],
        );
        for bad_name in [
            "xx",
            "en-US",
            "de@collation=bogus",
            "en@calendar=x",
            "",
            "simple ",
        ] {
            let e = Collation::parse(&doc! {"locale": bad_name}).unwrap_err();
            assert_eq!(e.code, 2, "{bad_name}");
            assert!(
                e.message.starts_with("Field 'locale' is invalid in:"),
                "{e:?}"
            );
        }
        // Served exactly: German phonebook puts "ä" with "ae", the standard order with "a".
        let pb = Collation::parse(&doc! {"locale": "de@collation=phonebook"})
            .unwrap()
            .unwrap();
        let std = Collation::parse(&doc! {"locale": "de"}).unwrap().unwrap();
        assert_eq!(pb.compare("Äb", "Af"), Ordering::Less);
        assert_eq!(std.compare("Äb", "Af"), Ordering::Less);
        assert_eq!(pb.compare("Äz", "Af"), Ordering::Less);
        assert_eq!(std.compare("Äz", "Af"), Ordering::Greater);
    }

    /// `normalization: false` is ICU's "exact for FCD text, unspecified otherwise": always
    /// normalizing is exact for all text, so both values give canonically equivalent strings
    /// (here a decomposed and a precomposed "ṩ" with its marks in either order) equal.
    #[test]
    fn normalization_is_exact_either_way() {
        for n in [false, true] {
            let c = coll(doc! {"locale": "en", "normalization": n});
            assert_eq!(c.spec.get_bool("normalization").unwrap(), n);
            assert_eq!(c.compare("s\u{0323}\u{0307}", "\u{1E69}"), Ordering::Equal);
            assert_eq!(c.compare("s\u{0307}\u{0323}", "\u{1E69}"), Ordering::Equal);
            assert_ne!(c.compare("s\u{0307}", "\u{1E69}"), Ordering::Equal);
        }
    }
}
