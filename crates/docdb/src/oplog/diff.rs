//! Update entries as mongod 5.0+ logs them: a `$v: 2` diff, `{$v: 2, diff: {...}}`, computed
//! from the document before and after the update (never the update's operators, so applying it
//! again changes nothing). A diff holds absolute values only:
//!
//! - `d: {f: false}`: fields removed;
//! - `u: {f: value}`: fields set in place (appended if missing);
//! - `i: {f: value}`: fields added, appended in this order (moved to the end if present);
//! - `s<f>: {...}`: the diff of the embedded document `f`, or of the array `f`:
//!   `{a: true, l: n, u<i>: value, s<i>: {...}}` (`l`: the array cut to `n` elements; `u<i>`:
//!   element `i` set, appended past the end; `s<i>`: the diff of element `i`).
//!
//! When the diff cannot express the change (fields reordered)
//! or is larger than the new document, the entry is the new document itself (a replacement,
//! as mongod logs one).

use super::UpdateStyle;
use bson::{Bson, Document};
use query::error::{DocError, DocResult};

/// The `o` of an update entry taking `old` to `new`, in `style`: a `$v: 2` diff, or `new`
/// itself.
pub fn update_object(old: &Document, new: &Document, style: UpdateStyle) -> Document {
    if style == UpdateStyle::Replacement {
        return new.clone();
    }
    let diff = document_diff(old, new);
    let as_diff = bson::doc! {"$v": 2, "diff": diff.clone()};
    let exact = apply_diff(old, &diff).is_ok_and(|applied| same_doc(&applied, new));
    let smaller = encoded_len(&as_diff) < encoded_len(new);
    if exact && (style == UpdateStyle::Operators || smaller) {
        as_diff
    } else {
        new.clone()
    }
}

/// The document an update entry's `o` makes of `old`: the diff applied, or the replacement
/// (which keeps `old`'s `_id`, as the entry's `o2` names it).
pub fn apply_update_object(old: &Document, o: &Document) -> DocResult<Document> {
    match o.get("$v") {
        Some(v) if as_int(v) == Some(2) => {
            let diff = o
                .get_document("diff")
                .map_err(|_| bad_entry(format!("a $v: 2 update without a diff: {o}")))?;
            apply_diff(old, diff)
        }
        Some(v) => Err(bad_entry(format!("update entry version {v} is not 2"))),
        None => Ok(o.clone()),
    }
}

fn as_int(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(*i as i64),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.fract() == 0.0 => Some(*d as i64),
        _ => None,
    }
}

pub(crate) fn bad_entry(msg: String) -> DocError {
    DocError::with_code(2, "BadValue", format!("oplog entry: {msg}"))
}

fn encoded_len(d: &Document) -> usize {
    bson::to_vec(d).map(|v| v.len()).unwrap_or(usize::MAX)
}

/// Byte equality: same fields, same order, same types (a `Document`'s `==` ignores order).
fn same_doc(a: &Document, b: &Document) -> bool {
    bson::to_vec(a).ok() == bson::to_vec(b).ok()
}

fn same_value(a: &Bson, b: &Bson) -> bool {
    same_doc(&bson::doc! {"v": a.clone()}, &bson::doc! {"v": b.clone()})
}

/// The diff from `old` to `new` (not checked here: [`update_object`] applies it and compares).
fn document_diff(old: &Document, new: &Document) -> Document {
    let mut deleted = Document::new();
    let mut updated = Document::new();
    let mut inserted = Document::new();
    let mut sub = Document::new();
    for k in old.keys().filter(|k| !new.contains_key(*k)) {
        deleted.insert(k.clone(), false);
    }
    for (k, v) in new {
        match (old.get(k), v) {
            (None, _) => {
                inserted.insert(k.clone(), v.clone());
            }
            (Some(was), _) if same_value(was, v) => {}
            (Some(Bson::Document(was)), Bson::Document(now)) => {
                sub.insert(format!("s{k}"), document_diff(was, now));
            }
            (Some(Bson::Array(was)), Bson::Array(now)) => {
                sub.insert(format!("s{k}"), array_diff(was, now));
            }
            (Some(_), _) => {
                updated.insert(k.clone(), v.clone());
            }
        }
    }
    let mut diff = Document::new();
    for (key, part) in [("d", deleted), ("u", updated), ("i", inserted)] {
        if !part.is_empty() {
            diff.insert(key, part);
        }
    }
    diff.extend(sub);
    diff
}

/// The diff from array `old` to `new`: cut to `new`'s length when it is shorter, each
/// changed element as its own diff (embedded documents and arrays) or set whole.
fn array_diff(old: &[Bson], new: &[Bson]) -> Document {
    let mut diff = bson::doc! {"a": true};
    if new.len() < old.len() {
        diff.insert("l", new.len() as i64);
    }
    for (i, v) in new.iter().enumerate() {
        match (old.get(i), v) {
            (Some(was), _) if same_value(was, v) => {}
            (Some(Bson::Document(was)), Bson::Document(now)) => {
                diff.insert(format!("s{i}"), document_diff(was, now));
            }
            (Some(Bson::Array(was)), Bson::Array(now)) => {
                diff.insert(format!("s{i}"), array_diff(was, now));
            }
            _ => {
                diff.insert(format!("u{i}"), v.clone());
            }
        }
    }
    diff
}

/// Whether a sub-diff is an array's (`a: true`).
pub fn is_array_diff(diff: &Document) -> bool {
    diff.get_bool("a") == Ok(true)
}

/// `diff` (an array's) applied to `old` (its elements; none when the field was no array).
fn apply_array_diff(old: &[Bson], diff: &Document) -> DocResult<Vec<Bson>> {
    let mut out = old.to_vec();
    if let Some(l) = diff.get("l") {
        let n = as_int(l)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| bad_entry(format!("array diff length {l}")))?;
        out.resize(n, Bson::Null);
    }
    for (k, v) in diff {
        let (kind, index) = k.split_at(1.min(k.len()));
        if k == "a" || k == "l" {
            continue;
        }
        let i: usize = index
            .parse()
            .map_err(|_| bad_entry(format!("array diff field {k}")))?;
        if out.len() <= i {
            out.resize(i + 1, Bson::Null);
        }
        out[i] = match (kind, v) {
            ("u", _) => v.clone(),
            ("s", Bson::Document(sd)) => apply_sub_diff(Some(&out[i]), sd)?,
            _ => return Err(bad_entry(format!("array diff field {k}: {v}"))),
        };
    }
    Ok(out)
}

/// A sub-diff (a document's or an array's) applied to the value it names, if any.
fn apply_sub_diff(old: Option<&Bson>, sd: &Document) -> DocResult<Bson> {
    if is_array_diff(sd) {
        let was = match old {
            Some(Bson::Array(a)) => a.as_slice(),
            _ => &[],
        };
        return Ok(Bson::Array(apply_array_diff(was, sd)?));
    }
    let was = match old {
        Some(Bson::Document(d)) => d.clone(),
        _ => Document::new(),
    };
    Ok(Bson::Document(apply_diff(&was, sd)?))
}

/// The parts of one document diff, checked.
struct DiffParts<'a> {
    deleted: Option<&'a Document>,
    updated: Option<&'a Document>,
    inserted: Option<&'a Document>,
    sub: Vec<(&'a str, &'a Document)>,
}

fn diff_parts(diff: &Document) -> DocResult<DiffParts<'_>> {
    let mut parts = DiffParts {
        deleted: None,
        updated: None,
        inserted: None,
        sub: Vec::new(),
    };
    for (k, v) in diff {
        let Bson::Document(d) = v else {
            return Err(bad_entry(format!("diff field {k} is not a document: {v}")));
        };
        match k.as_str() {
            "d" => parts.deleted = Some(d),
            "u" => parts.updated = Some(d),
            "i" => parts.inserted = Some(d),
            "a" | "l" => return Err(bad_entry(format!("array diff field {k} in a document"))),
            s if s.starts_with('s') => parts.sub.push((&s[1..], d)),
            other => return Err(bad_entry(format!("unknown diff field {other}"))),
        }
    }
    Ok(parts)
}

/// `diff` applied to `old` (see the module comment); applying it to its own result changes
/// nothing.
pub fn apply_diff(old: &Document, diff: &Document) -> DocResult<Document> {
    let p = diff_parts(diff)?;
    let has = |part: Option<&Document>, k: &str| part.is_some_and(|d| d.contains_key(k));
    let sub_of = |k: &str| p.sub.iter().find(|(f, _)| *f == k).map(|(_, d)| *d);
    let mut out = Document::new();
    for (k, v) in old {
        if has(p.deleted, k) || has(p.inserted, k) {
            continue;
        }
        if let Some(now) = p.updated.and_then(|u| u.get(k)) {
            out.insert(k.clone(), now.clone());
        } else if let Some(sd) = sub_of(k) {
            out.insert(k.clone(), apply_sub_diff(Some(v), sd)?);
        } else {
            out.insert(k.clone(), v.clone());
        }
    }
    // Replayed on a document that lacks them: set where a first application would leave them.
    for (k, v) in p.updated.into_iter().flatten() {
        if !out.contains_key(k) && !has(p.deleted, k) && !has(p.inserted, k) {
            out.insert(k.clone(), v.clone());
        }
    }
    for (k, sd) in &p.sub {
        if !out.contains_key(*k) && !old.contains_key(*k) {
            out.insert(k.to_string(), apply_sub_diff(None, sd)?);
        }
    }
    for (k, v) in p.inserted.into_iter().flatten() {
        out.insert(k.clone(), v.clone());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn a_field_change_is_logged_as_a_diff_of_absolute_values() {
        let old =
            doc! {"_id": 1, "n": 5, "gone": "x", "big": "y".repeat(100), "e": {"a": 1, "b": 2}};
        let new =
            doc! {"_id": 1, "n": 6, "big": "y".repeat(100), "e": {"a": 1, "b": 3}, "add": true};
        let o = update_object(&old, &new, UpdateStyle::Smaller);
        assert_eq!(
            o,
            doc! {"$v": 2, "diff": {"d": {"gone": false}, "u": {"n": 6}, "i": {"add": true},
            "se": {"u": {"b": 3}}}}
        );
        let once = apply_update_object(&old, &o).unwrap();
        assert!(same_doc(&once, &new));
        assert!(same_doc(&apply_update_object(&once, &o).unwrap(), &new));
    }

    #[test]
    fn a_reordering_or_small_document_is_logged_whole() {
        let old = doc! {"_id": 1, "a": 1, "b": 2};
        let new = doc! {"_id": 1, "b": 2, "a": 1};
        assert!(same_doc(
            &update_object(&old, &new, UpdateStyle::Smaller),
            &new
        ));
        let small = doc! {"_id": 1, "a": 2};
        assert!(same_doc(
            &update_object(&doc! {"_id": 1, "a": 1}, &small, UpdateStyle::Smaller),
            &small
        ));
        // An operator update is logged as a diff however small the document, as mongod
        // logs it; a replacement whole however large.
        let op = update_object(&doc! {"_id": 1, "a": 1}, &small, UpdateStyle::Operators);
        assert_eq!(op, bson::doc! {"$v": 2, "diff": {"u": {"a": 2}}});
        let big = doc! {"_id": 1, "a": 1, "pad": "p".repeat(100)};
        let mut changed = big.clone();
        changed.insert("a", 2);
        let whole = update_object(&big, &changed, UpdateStyle::Replacement);
        assert!(same_doc(&whole, &changed));
    }

    #[test]
    fn a_diff_replayed_on_a_document_missing_its_fields_sets_them() {
        let diff = doc! {"u": {"x": 1}, "sy": {"i": {"z": 2}}, "d": {"w": false}};
        let got = apply_diff(&doc! {"_id": 1, "w": 0}, &diff).unwrap();
        assert!(same_doc(&got, &doc! {"_id": 1, "x": 1, "y": {"z": 2}}));
        assert!(same_doc(&apply_diff(&got, &diff).unwrap(), &got));
    }

    #[test]
    fn arrays_are_logged_as_array_diffs() {
        let old = doc! {"_id": 1, "pad": "p".repeat(100), "l": ["foo", {"a": "bar"}, 1, 2, 3], "m": [[1], {"x": 1}]};
        let new = doc! {"_id": 1, "pad": "p".repeat(100), "l": ["foo", {"a": "bar"}], "m": [[1, 2], {"x": 2}, 7]};
        let o = update_object(&old, &new, UpdateStyle::Smaller);
        assert_eq!(
            o,
            doc! {"$v": 2, "diff": {
                "sl": {"a": true, "l": 2_i64},
                "sm": {"a": true, "s0": {"a": true, "u1": 2}, "s1": {"u": {"x": 2}}, "u2": 7},
            }}
        );
        let applied = apply_update_object(&old, &o).unwrap();
        assert!(same_doc(&applied, &new));
        assert!(
            same_doc(&apply_update_object(&applied, &o).unwrap(), &new),
            "idempotent"
        );
    }

    #[test]
    fn a_malformed_diff_is_refused() {
        assert!(apply_diff(&doc! {}, &doc! {"q": {}}).is_err());
        assert!(apply_diff(&doc! {}, &doc! {"u": 1}).is_err());
        assert!(apply_update_object(&doc! {}, &doc! {"$v": 1, "diff": {}}).is_err());
    }
}
