//! Dotted field paths.
//!
//! * Reading as the query matcher and multikey indexes do ([`traverse_path`], [`lookup_path`]):
//!   arrays met *before* the last path component are traversed (each document element continues
//!   the path; a numeric component also indexes the array), and the leaf value is reported as is
//!   (the matcher then decides whether to look at its elements).
//! * Reading, writing and removing one concrete path as updates do ([`get_path`], [`set_path`],
//!   [`remove_path`]): numeric components index arrays, nothing is expanded.

use bson::{Bson, Document};

use crate::compare::shell_repr;
use crate::error::{DocError, DocResult};
use crate::limits;

/// One value reached by a dotted path, as the matcher sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Reached<'a> {
    /// The value, or `None` when the path is missing here (which `{$eq: null}` and
    /// `{$exists: false}` match).
    pub value: Option<&'a Bson>,
    /// Index within the first array traversed on the way (for the positional `$` operator).
    pub array_index: Option<usize>,
}

fn is_array_index(s: &str) -> Option<usize> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0')) {
        s.parse().ok()
    } else {
        None
    }
}

/// All values the dotted `path` reaches in `doc`, with matcher semantics: missing paths are
/// reported as `value: None`; the value at the leaf is not expanded even if it is an array;
/// an array met before the leaf is traversed (document elements continue the path; elements that
/// are not documents yield nothing; a numeric next component also selects that element).
pub fn traverse_path<'a>(doc: &'a Document, path: &str) -> Vec<Reached<'a>> {
    let parts: Vec<&str> = path.split('.').collect();
    let mut out = Vec::new();
    traverse_doc(doc, &parts, None, &mut out);
    out
}

fn traverse_doc<'a>(
    doc: &'a Document,
    parts: &[&str],
    idx: Option<usize>,
    out: &mut Vec<Reached<'a>>,
) {
    match doc.get(parts[0]) {
        None => out.push(Reached {
            value: None,
            array_index: idx,
        }),
        Some(v) => traverse_value(v, &parts[1..], idx, out),
    }
}

fn traverse_value<'a>(v: &'a Bson, rest: &[&str], idx: Option<usize>, out: &mut Vec<Reached<'a>>) {
    if rest.is_empty() {
        out.push(Reached {
            value: Some(v),
            array_index: idx,
        });
        return;
    }
    match v {
        Bson::Document(d) => traverse_doc(d, rest, idx, out),
        Bson::Array(arr) => {
            if let Some(i) = is_array_index(rest[0]) {
                // Positional: the element at that index continues the rest of the path.
                match arr.get(i) {
                    Some(e) => traverse_value(e, &rest[1..], idx.or(Some(i)), out),
                    None => out.push(Reached {
                        value: None,
                        array_index: idx,
                    }),
                }
            }
            let numeric = is_array_index(rest[0]).is_some();
            for (i, e) in arr.iter().enumerate() {
                if let Bson::Document(d) = e {
                    if numeric {
                        // Documents with a field named like the index: keep only real hits,
                        // the positional element above already speaks for "missing".
                        let mut sub = Vec::new();
                        traverse_doc(d, rest, idx.or(Some(i)), &mut sub);
                        out.extend(sub.into_iter().filter(|r| r.value.is_some()));
                    } else {
                        traverse_doc(d, rest, idx.or(Some(i)), out);
                    }
                }
            }
        }
        _ => out.push(Reached {
            value: None,
            array_index: idx,
        }),
    }
}

/// The values reachable by `path` with multikey-index semantics: arrays before the leaf are
/// traversed as in [`traverse_path`], and an array at the leaf contributes its elements (one
/// level). Missing paths contribute nothing, so an empty result means "missing, or only empty
/// arrays" (use [`traverse_path`] to tell them apart).
pub fn lookup_path<'a>(doc: &'a Document, path: &str) -> Vec<&'a Bson> {
    let mut out = Vec::new();
    for r in traverse_path(doc, path) {
        match r.value {
            Some(Bson::Array(a)) => out.extend(a.iter()),
            Some(v) => out.push(v),
            None => {}
        }
    }
    out
}

/// Splits a dotted path into its components (at most [`limits::MAX_PATH_PARTS`]).
pub fn split_path(path: &str) -> DocResult<Vec<String>> {
    limits::check_path(path)?;
    Ok(path.split('.').map(str::to_string).collect())
}

/// The value at one concrete path (numeric components index arrays; no expansion).
pub fn get_path<'a>(doc: &'a Document, parts: &[String]) -> Option<&'a Bson> {
    let mut cur = doc.get(&parts[0])?;
    for p in &parts[1..] {
        cur = match cur {
            Bson::Document(d) => d.get(p)?,
            Bson::Array(a) => a.get(is_array_index(p)?)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn not_viable(field: &str, parent: &str, value: &Bson) -> DocError {
    DocError::path_not_viable(format!(
        "Cannot create field '{field}' in element {{{parent}: {}}}",
        shell_repr(value)
    ))
}

/// Sets the value at one concrete path, creating intermediate documents (and padding arrays with
/// nulls for numeric components past their end). Fails with PathNotViable (28) when the path
/// runs through a scalar, or through an array by a non-numeric component.
pub fn set_path(doc: &mut Document, parts: &[String], value: Bson) -> DocResult<()> {
    // Recursion below is one level per component: callers split with `split_path`, which
    // bounds the count; this guards any other caller.
    assert!(parts.len() <= limits::MAX_PATH_PARTS + 1, "unbounded path");
    let first = &parts[0];
    if parts.len() == 1 {
        doc.insert(first.clone(), value);
        return Ok(());
    }
    if !doc.contains_key(first) {
        doc.insert(first.clone(), Document::new());
    }
    let child = doc.get_mut(first).expect("just ensured");
    set_in_value(child, first, &parts[1..], value)
}

fn set_in_value(cur: &mut Bson, name: &str, rest: &[String], value: Bson) -> DocResult<()> {
    match cur {
        Bson::Document(d) => set_path(d, rest, value),
        Bson::Array(a) => {
            let Some(i) = is_array_index(&rest[0]) else {
                return Err(not_viable(&rest[0], name, cur));
            };
            if a.len() <= i {
                a.resize(i + 1, Bson::Null);
            }
            if rest.len() == 1 {
                a[i] = value;
                return Ok(());
            }
            if a[i] == Bson::Null {
                a[i] = Bson::Document(Document::new());
            }
            set_in_value(&mut a[i], &rest[0], &rest[1..], value)
        }
        other => Err(not_viable(&rest[0], name, other)),
    }
}

/// Removes the value at one concrete path (an array element becomes null, as `$unset` does).
/// Returns the removed value.
pub fn remove_path(doc: &mut Document, parts: &[String]) -> Option<Bson> {
    if parts.len() == 1 {
        return doc.remove(&parts[0]);
    }
    let mut cur = doc.get_mut(&parts[0])?;
    for p in &parts[1..parts.len() - 1] {
        cur = match cur {
            Bson::Document(d) => d.get_mut(p)?,
            Bson::Array(a) => a.get_mut(is_array_index(p)?)?,
            _ => return None,
        };
    }
    let last = &parts[parts.len() - 1];
    match cur {
        Bson::Document(d) => d.remove(last),
        Bson::Array(a) => {
            let slot = a.get_mut(is_array_index(last)?)?;
            Some(std::mem::replace(slot, Bson::Null))
        }
        _ => None,
    }
}

/// Whether the concrete path runs through an array before its leaf (or at a numeric component).
pub fn path_crosses_array(doc: &Document, parts: &[String]) -> bool {
    let mut cur = match doc.get(&parts[0]) {
        Some(v) => v,
        None => return false,
    };
    for p in &parts[1..] {
        cur = match cur {
            Bson::Document(d) => match d.get(p) {
                Some(v) => v,
                None => return false,
            },
            Bson::Array(_) => return true,
            _ => return false,
        };
    }
    false
}

pub(crate) fn array_index(s: &str) -> Option<usize> {
    is_array_index(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc};

    fn sp(p: &str) -> Vec<String> {
        split_path(p).unwrap()
    }

    fn vals(doc: &Document, path: &str) -> Vec<Option<Bson>> {
        traverse_path(doc, path)
            .into_iter()
            .map(|r| r.value.cloned())
            .collect()
    }

    #[test]
    fn traversal() {
        let d = doc! {"a": {"b": 1}, "c": [{"d": 1}, {"d": [2, 3]}, 5, {"e": 0}], "f": 4, "g": []};
        assert_eq!(vals(&d, "a.b"), vec![Some(bson!(1))]);
        assert_eq!(vals(&d, "a"), vec![Some(bson!({"b": 1}))]);
        assert_eq!(vals(&d, "x"), vec![None]);
        assert_eq!(vals(&d, "a.x"), vec![None]);
        assert_eq!(vals(&d, "f.x"), vec![None]);
        assert_eq!(
            vals(&d, "c.d"),
            vec![Some(bson!(1)), Some(bson!([2, 3])), None]
        );
        assert_eq!(vals(&d, "g.x"), Vec::<Option<Bson>>::new());
        assert_eq!(vals(&d, "c.1.d"), vec![Some(bson!([2, 3]))]);
        assert_eq!(vals(&d, "c.2"), vec![Some(bson!(5))]);
        assert_eq!(vals(&d, "c.9"), vec![None]);
        let r = traverse_path(&d, "c.d");
        assert_eq!(r[1].array_index, Some(1));
        assert_eq!(
            lookup_path(&d, "c.d"),
            vec![&bson!(1), &bson!(2), &bson!(3)]
        );
        assert!(lookup_path(&d, "g").is_empty());
        // Nested arrays are not traversed before the leaf.
        let d = doc! {"a": [[{"b": 1}]]};
        assert!(vals(&d, "a.b").is_empty());
        assert_eq!(vals(&d, "a.0.0.b"), vec![Some(bson!(1))]);
    }

    #[test]
    fn set_get_remove() {
        let mut d = doc! {"a": {"b": 1}, "arr": [1, {"x": 1}]};
        set_path(&mut d, &sp("a.c.d"), bson!(2)).unwrap();
        assert_eq!(d, doc! {"a": {"b": 1, "c": {"d": 2}}, "arr": [1, {"x": 1}]});
        set_path(&mut d, &sp("arr.1.y"), bson!(3)).unwrap();
        set_path(&mut d, &sp("arr.4"), bson!(9)).unwrap();
        assert_eq!(
            d.get("arr").unwrap(),
            &bson!([1, {"x": 1, "y": 3}, null, null, 9])
        );
        assert_eq!(get_path(&d, &sp("arr.1.y")), Some(&bson!(3)));
        let e = set_path(&mut d, &sp("a.b.c"), bson!(1)).unwrap_err();
        assert_eq!(e.code, 28);
        assert_eq!(e.message, "Cannot create field 'c' in element {b: 1}");
        let e = set_path(&mut d, &sp("arr.x"), bson!(1)).unwrap_err();
        assert_eq!(e.code, 28);
        assert_eq!(remove_path(&mut d, &sp("arr.0")), Some(bson!(1)));
        assert_eq!(get_path(&d, &sp("arr.0")), Some(&Bson::Null));
        assert_eq!(remove_path(&mut d, &sp("a.c")), Some(bson!({"d": 2})));
        assert_eq!(remove_path(&mut d, &sp("a.zz.y")), None);
        assert!(path_crosses_array(&d, &sp("arr.1.y")));
        assert!(!path_crosses_array(&d, &sp("a.b")));
    }
}
