//! The per-document stages' helpers: `$addFields`/`$set`, `$unset`, `$unwind`.

use bson::{Bson, Document};

use crate::error::DocResult;
use crate::path::{get_path, remove_path, set_path, split_path};

/// Sets a computed value at a path for `$addFields`, descending into arrays of documents.
pub(super) fn add_field(doc: &mut Document, path: &[String], v: Bson) -> DocResult<()> {
    if path.len() == 1 {
        doc.insert(path[0].clone(), v);
        return Ok(());
    }
    match doc.get_mut(&path[0]) {
        Some(Bson::Document(sub)) => add_field(sub, &path[1..], v),
        Some(Bson::Array(arr)) => {
            for e in arr.iter_mut() {
                if let Bson::Document(sub) = e {
                    add_field(sub, &path[1..], v.clone())?;
                }
            }
            Ok(())
        }
        _ => {
            let mut sub = Document::new();
            add_field(&mut sub, &path[1..], v)?;
            doc.insert(path[0].clone(), sub);
            Ok(())
        }
    }
}

pub(super) fn unset_path(doc: &mut Document, path: &[String]) {
    if path.len() == 1 {
        doc.remove(&path[0]);
        return;
    }
    match doc.get_mut(&path[0]) {
        Some(Bson::Document(sub)) => unset_path(sub, &path[1..]),
        Some(Bson::Array(arr)) => {
            for e in arr.iter_mut() {
                if let Bson::Document(sub) = e {
                    unset_path(sub, &path[1..]);
                }
            }
        }
        _ => {}
    }
}

pub(super) fn unwind_doc(
    d: Document,
    path: &[String],
    index: &Option<String>,
    preserve: bool,
) -> Vec<DocResult<Document>> {
    let with_index = |mut doc: Document, i: Option<usize>| -> DocResult<Document> {
        if let Some(name) = index {
            set_path(
                &mut doc,
                &split_path(name)?,
                i.map(|i| Bson::Int64(i as i64)).unwrap_or(Bson::Null),
            )?;
        }
        Ok(doc)
    };
    match get_path(&d, path).cloned() {
        Some(Bson::Array(a)) if !a.is_empty() => a
            .into_iter()
            .enumerate()
            .map(|(i, e)| {
                let mut out = d.clone();
                set_path(&mut out, path, e)?;
                with_index(out, Some(i))
            })
            .collect(),
        Some(Bson::Array(_)) => {
            if preserve {
                let mut out = d;
                remove_path(&mut out, path);
                vec![with_index(out, None)]
            } else {
                vec![]
            }
        }
        None | Some(Bson::Null) | Some(Bson::Undefined) => {
            if preserve {
                vec![with_index(d, None)]
            } else {
                vec![]
            }
        }
        Some(_) => vec![with_index(d, None)],
    }
}
