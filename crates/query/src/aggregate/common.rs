//! What every stage file shares: the document stream between stages, the memory bound of a
//! blocking stage, mongod's numbered stage errors and output field names.

use std::collections::BTreeMap;
use std::sync::Mutex;

use bson::Document;

use super::budget::Budget;
use crate::error::{DocError, DocResult};

/// A stream of documents between stages (a scan's output, a stage's output).
pub type DocIter = Box<dyn Iterator<Item = DocResult<Document>> + Send>;

/// What a blocking stage holds, charged document by document against its budget
/// (`budget::Budget`, mongod's 100 MB by default). These stages do not spill to disk, so past
/// the budget they fail with mongod's code (292) whatever `allowDiskUse` says, rather than
/// growing without bound.
pub(super) struct Memory {
    stage: &'static str,
    budget: Budget,
    used: usize,
}

impl Memory {
    /// A blocking stage's (`internalQueryMaxBlockingSortMemoryUsageBytes`).
    pub(super) fn new(stage: &'static str) -> Memory {
        Memory::charged_to(stage, Budget::Blocking)
    }

    pub(super) fn charged_to(stage: &'static str, budget: Budget) -> Memory {
        Memory {
            stage,
            budget,
            used: 0,
        }
    }

    pub(super) fn charge(&mut self, d: &Document) -> DocResult<()> {
        self.used += bson::to_vec(d).map(|b| b.len()).unwrap_or(0);
        if self.used > super::budget::limit(self.budget) {
            return Err(super::budget::exceeded(
                self.stage,
                self.budget,
                "flashdoc does not spill this stage to disk",
            ));
        }
        Ok(())
    }

    /// Collects a stream, charging each document.
    pub(super) fn collect(&mut self, input: DocIter) -> DocResult<Vec<Document>> {
        let mut out = Vec::new();
        for d in input {
            let d = d?;
            self.charge(&d)?;
            out.push(d);
        }
        Ok(out)
    }
}

/// mongod's internalPipelineLengthLimit.
pub(super) const MAX_PIPELINE_STAGES: usize = 1000;

/// An error with one of mongod's numbered codes that have no name of their own: mongod names
/// them "Location<code>". The codes are this crate's constants (a bounded set), so each name is
/// built once and kept for the process's life.
pub(super) fn stage_err(code: i32, msg: impl Into<String>) -> DocError {
    static NAMES: Mutex<BTreeMap<i32, &'static str>> = Mutex::new(BTreeMap::new());
    let name = *NAMES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(code)
        .or_insert_with(|| Box::leak(format!("Location{code}").into_boxed_str()));
    DocError::with_code(code, name, msg)
}

/// mongod's `FieldPath::validateFieldName` for an output field named by the user.
pub(super) fn check_output_name(name: &str) -> DocResult<()> {
    if name.is_empty() {
        return Err(stage_err(
            15998,
            "FieldPath field names may not be empty strings.",
        ));
    }
    if name.starts_with('$') {
        return Err(stage_err(
            16410,
            format!("FieldPath field names may not start with '$'. Consider using $getField or $setField. ('{name}')"),
        ));
    }
    if name.contains('\0') {
        return Err(stage_err(
            16411,
            "FieldPath field names may not contain embedded nulls.",
        ));
    }
    if name.contains('.') {
        return Err(stage_err(
            16412,
            format!("FieldPath field names may not contain '.'. ('{name}')"),
        ));
    }
    Ok(())
}
