//! Collation: language-aware string comparison (ICU4X's `icu_collator`), as mongod's
//! `collation` option of find, count, distinct, aggregate, update, delete, findAndModify,
//! collections and indexes.
//!
//! One mechanism, the collation *in effect*: an operation enters a [`scope`] with its
//! collation, and everything that compares values on that thread in the meantime — the
//! matcher, sort, distinct, `$group`, expressions, `$addToSet` — compares strings (and
//! symbols) with it, through [`crate::compare::compare_bson`]. Index keys are encoded under the
//! index's own collation (sort keys instead of the string's bytes), and the planner uses an
//! index only when its collation is the query's. A [`crate::DocCursor`] remembers the
//! collation it was made under and re-enters it whenever it produces documents, so getMore
//! sees the same collation as the command that opened the cursor.
//!
//! Options: `locale` (`simple` is binary comparison, i.e. no collation), `strength` (1–5),
//! `caseLevel`, `caseFirst` (`upper`, `lower`, `off`), `numericOrdering`, `alternate`
//! (`non-ignorable`, `shifted`), `maxVariable` (`punct`, `space`), `normalization` (ICU4X
//! always normalizes, which gives the same order mongod gives with it on). `backwards: true`
//! is refused (ICU4X sets French secondary ordering only from the locale). A locale ICU4X has
//! no data for falls back to the root collation (mongod refuses locales it does not know).

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

impl Collation {
    /// Parses a `collation` document. `Ok(None)` is the simple (binary) collation.
    pub fn parse(d: &Document) -> DocResult<Option<Arc<Collation>>> {
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
        let loc: icu_locale::Locale = locale
            .replace('_', "-")
            .parse()
            .map_err(|_| bad(format!("Field 'locale' is invalid in: {d}")))?;
        let mut prefs = CollatorPreferences::from(&loc);
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
            "version": "57.1",
        };
        Ok(Some(Arc::new(Collation { spec, collator })))
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
        ] {
            assert!(Collation::parse(&d).is_err(), "{d}");
        }
    }
}
