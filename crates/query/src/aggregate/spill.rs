//! The `$group` stage within its memory budget ([`run_group`]), and past it with
//! `allowDiskUse`: the groups already in memory stay
//! there (they hold every document read so far), and the rest of the input goes to disk in
//! runs of at most the budget, each sorted by group key. Then the runs are merged by key with
//! the groups in memory: each group starts from its in-memory accumulators (the earlier
//! documents) and takes its spilled documents run by run, in input order, so every accumulator
//! sees its documents in the order it would have without spilling and nothing needs merging
//! partial states. Memory: the groups (at most the budget), one run buffer (at most the
//! budget), one document per run while merging, and the output.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Seek, SeekFrom, Write};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use bson::{Bson, Document};

use super::budget::{doc_bytes, Budget};
use super::common::DocIter;
use super::group::{Accumulating, Accumulators, GroupTable};
use crate::compare::{compare_bson, OrdBson};
use crate::error::{DocError, DocResult};
use crate::expr::Ctx;
use crate::vars::Scope;

/// Groups the input by the key `key` computes per document, in first-seen order; the key and
/// the accumulators read the command's `let` variables from `scope`. Past
/// `internalDocumentSourceGroupMaxMemoryBytes` the groups spill to disk when `allowDiskUse`
/// allows (the output is then in key order), and fail with 292 when it does not.
pub(super) fn run_group(
    input: DocIter,
    key: impl FnMut(&Ctx) -> DocResult<Bson>,
    accs: &Accumulators,
    scope: &Scope,
) -> DocResult<Vec<Document>> {
    let limit = super::budget::limit(Budget::Group);
    group_within(input, key, accs, scope, limit)
}

/// [`run_group`] with the budget given (tests give a small one).
pub(super) fn group_within(
    mut input: DocIter,
    mut key: impl FnMut(&Ctx) -> DocResult<Bson>,
    accs: &Accumulators,
    scope: &Scope,
    limit: usize,
) -> DocResult<Vec<Document>> {
    let mut table = GroupTable::new();
    for d in input.by_ref() {
        let d = d?;
        let ctx = Ctx::scoped(&d, scope);
        let k = key(&ctx)?;
        table.add(k, accs, &ctx)?;
        if table.bytes > limit {
            if !super::budget::allow_disk_use() {
                return Err(super::budget::exceeded(
                    "$group",
                    Budget::Group,
                    "pass allowDiskUse: true to spill it to disk",
                ));
            }
            let spill = GroupSpill { accs, scope, limit };
            return spill.run(table, input, key);
        }
    }
    table.finish(accs)
}

/// A spilling `$group`: its accumulators, the command's variables, its budget.
pub(super) struct GroupSpill<'a> {
    pub(super) accs: &'a Accumulators,
    pub(super) scope: &'a Scope,
    pub(super) limit: usize,
}

fn io_error(what: &str, e: std::io::Error) -> DocError {
    DocError::with_code(
        1,
        "InternalError",
        format!("$group spilling to disk: {what}: {e}"),
    )
}

/// One sorted run on disk: `{k: key, d: document}` records, in key order.
struct Run {
    reader: BufReader<File>,
}

impl Run {
    /// Writes `entries` (sorted by key, stably: equal keys keep input order) to a new file in
    /// the spill directory. The file is unlinked at once: it lives while the run is open.
    fn write(entries: Vec<(Bson, Document)>) -> DocResult<Run> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = super::budget::spill_dir();
        std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir.display().to_string(), e))?;
        let n = NEXT.fetch_add(1, AtomicOrdering::Relaxed);
        let path = dir.join(format!("group-{}-{n}.spill", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| io_error(&path.display().to_string(), e))?;
        let _ = std::fs::remove_file(&path);
        let mut w = BufWriter::new(file);
        for (k, d) in entries {
            let rec = bson::doc! {"k": k, "d": d};
            rec.to_writer(&mut w)
                .map_err(|e| io_error("encode", std::io::Error::other(e.to_string())))?;
        }
        let mut file = w
            .into_inner()
            .map_err(|e| io_error("write", e.into_error()))?;
        file.flush().map_err(|e| io_error("write", e))?;
        file.seek(SeekFrom::Start(0))
            .map_err(|e| io_error("seek", e))?;
        Ok(Run {
            reader: BufReader::new(file),
        })
    }

    /// The next record, or None at the end of the run.
    fn next(&mut self) -> DocResult<Option<(Bson, Document)>> {
        use std::io::BufRead;
        let at_end = self
            .reader
            .fill_buf()
            .map_err(|e| io_error("read", e))?
            .is_empty();
        if at_end {
            return Ok(None);
        }
        let mut rec = Document::from_reader(&mut self.reader)
            .map_err(|e| io_error("decode", std::io::Error::other(e.to_string())))?;
        let k = rec.remove("k").unwrap_or(Bson::Null);
        let Some(Bson::Document(d)) = rec.remove("d") else {
            return Err(io_error(
                "decode",
                std::io::Error::other("a record without its document"),
            ));
        };
        Ok(Some((k, d)))
    }
}

/// A run's next record in the merge: ordered by key, then by run (earlier runs hold earlier
/// documents).
struct Head {
    key: OrdBson,
    run: usize,
    doc: Document,
}

impl PartialEq for Head {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Head {
    fn cmp(&self, o: &Self) -> Ordering {
        self.key.cmp(&o.key).then(self.run.cmp(&o.run))
    }
}

impl GroupSpill<'_> {
    /// Spills the rest of `input` in sorted runs, then merges them with `table`.
    pub(super) fn run(
        &self,
        table: GroupTable,
        input: DocIter,
        mut key: impl FnMut(&Ctx) -> DocResult<Bson>,
    ) -> DocResult<Vec<Document>> {
        let mut runs = Vec::new();
        let mut buffer: Vec<(Bson, Document)> = Vec::new();
        let mut bytes = 0;
        for d in input {
            let d = d?;
            let k = key(&Ctx::scoped(&d, self.scope))?;
            bytes += doc_bytes(&d) + super::budget::value_bytes(&k);
            buffer.push((k, d));
            if bytes > self.limit {
                runs.push(Self::sorted_run(std::mem::take(&mut buffer))?);
                bytes = 0;
            }
        }
        if !buffer.is_empty() {
            runs.push(Self::sorted_run(buffer)?);
        }
        self.merge(table.into_sorted(), runs)
    }

    fn sorted_run(mut buffer: Vec<(Bson, Document)>) -> DocResult<Run> {
        buffer.sort_by(|a, b| compare_bson(&a.0, &b.0));
        Run::write(buffer)
    }

    /// Merges the in-memory groups (in key order) with the runs, finishing each group once
    /// all its documents are in.
    fn merge(
        &self,
        memory: Vec<(Bson, Accumulating)>,
        mut runs: Vec<Run>,
    ) -> DocResult<Vec<Document>> {
        let mut heads = BinaryHeap::new();
        for (i, r) in runs.iter_mut().enumerate() {
            if let Some((k, doc)) = r.next()? {
                heads.push(Reverse(Head {
                    key: OrdBson(k),
                    run: i,
                    doc,
                }));
            }
        }
        let mut memory = memory.into_iter().peekable();
        let mut out = Vec::new();
        let mut current: Option<(Bson, Accumulating)> = None;
        while let Some(Reverse(head)) = heads.pop() {
            if let Some((k, doc)) = runs[head.run].next()? {
                heads.push(Reverse(Head {
                    key: OrdBson(k),
                    run: head.run,
                    doc,
                }));
            }
            let same = current
                .as_ref()
                .is_some_and(|(k, _)| compare_bson(k, &head.key.0) == Ordering::Equal);
            if !same {
                if let Some((k, g)) = current.take() {
                    out.push(g.finish(k, self.accs)?);
                }
                // Groups only in memory, before this key, are complete.
                while memory
                    .peek()
                    .is_some_and(|(k, _)| compare_bson(k, &head.key.0) == Ordering::Less)
                {
                    let (k, g) = memory.next().expect("peeked");
                    out.push(g.finish(k, self.accs)?);
                }
                current = Some(match memory.peek() {
                    Some((k, _)) if compare_bson(k, &head.key.0) == Ordering::Equal => {
                        memory.next().expect("peeked")
                    }
                    _ => (head.key.0.clone(), Accumulating::new(self.accs)),
                });
            }
            let (_, g) = current.as_mut().expect("set above");
            g.add(self.accs, &Ctx::scoped(&head.doc, self.scope))?;
        }
        if let Some((k, g)) = current.take() {
            out.push(g.finish(k, self.accs)?);
        }
        for (k, g) in memory {
            out.push(g.finish(k, self.accs)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use bson::{doc, Bson, Document};

    use super::super::budget::DiskUseScope;
    use super::super::group::parse_accumulators;
    use super::group_within;
    use crate::compare::compare_bson;
    use crate::error::DocResult;
    use crate::expr::{parse_expr, Ctx};

    /// 3 000 documents over 300 keys, each key's documents spread through the input.
    fn input() -> Vec<Document> {
        (0..3000)
            .map(|i| doc! {"k": i % 300, "i": i, "pad": "x".repeat(200)})
            .collect()
    }

    fn group(limit: usize, allow: Option<bool>) -> DocResult<Vec<Document>> {
        let _disk = DiskUseScope::enter(allow);
        let spec = doc! {
            "n": {"$sum": 1}, "total": {"$sum": "$i"}, "avg": {"$avg": "$i"},
            "first": {"$first": "$i"}, "last": {"$last": "$i"}, "all": {"$push": "$i"},
            "top": {"$maxN": {"input": "$i", "n": 2}}, "m": {"$mergeObjects": {"i": "$i"}},
        };
        let accs = parse_accumulators(spec.iter())?;
        let id = parse_expr(&Bson::String("$k".into()))?;
        let key = |ctx: &Ctx| Ok(id.eval(ctx)?.unwrap_or(Bson::Null));
        let docs = input();
        let mut out = group_within(
            Box::new(docs.into_iter().map(Ok)),
            key,
            &accs,
            &crate::vars::EMPTY,
            limit,
        )?;
        out.sort_by(|a, b| {
            compare_bson(
                &a.get("_id").cloned().unwrap(),
                &b.get("_id").cloned().unwrap(),
            )
        });
        Ok(out)
    }

    #[test]
    fn a_spilled_group_gives_what_the_in_memory_one_gives() {
        let in_memory = group(usize::MAX, Some(false)).unwrap();
        assert_eq!(in_memory.len(), 300);
        // 64 KB: the groups overflow early and the rest goes to disk in many runs.
        let spilled = group(64 << 10, Some(true)).unwrap();
        assert_eq!(spilled, in_memory);
        let g = &spilled[7];
        assert_eq!(g.get_i32("n").unwrap(), 10);
        assert_eq!(g.get_i32("first").unwrap(), 7);
        assert_eq!(g.get_i32("last").unwrap(), 2707);
        assert_eq!(g.get_array("all").unwrap().len(), 10);
    }

    #[test]
    fn past_the_budget_without_disk_use_is_292() {
        let e = group(64 << 10, Some(false)).unwrap_err();
        assert_eq!(
            (e.code, e.code_name),
            (292, "QueryExceededMemoryLimitNoDiskUseAllowed")
        );
        assert!(
            e.message
                .contains("internalDocumentSourceGroupMaxMemoryBytes"),
            "{}",
            e.message
        );
    }
}
