//! Server-side JavaScript in queries (`$where`, `$function`, `$accumulator`; the server's
//! `mapReduce` too): the `js` crate runs the functions; this module gives them the running
//! operation's interrupt (its `maxTimeMS` deadline and `killOp` flag: [`Interrupt::current`]),
//! turns their failures into mongod's errors, and holds the switch `security.javascriptEnabled`
//! / `--noscripting` turns off.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bson::{Bson, Document};
pub use js::{Call, Func, JsError, Kind, Outcome};

use crate::error::{DocError, DocResult};
use crate::interrupt::Interrupt;

static ENABLED: AtomicBool = AtomicBool::new(true);

/// Turns server-side JavaScript on or off for the process (`security.javascriptEnabled`).
pub fn set_enabled(on: bool) {
    ENABLED.store(on, Ordering::Relaxed);
}

/// Whether server-side JavaScript may run.
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// mongod's refusal of `$function`, `$accumulator` and `mapReduce` without a JavaScript engine.
pub fn require_enabled() -> DocResult<()> {
    if enabled() {
        return Ok(());
    }
    Err(DocError::with_code(
        31264,
        "Location31264",
        "Cannot run server-side javascript without the javascript engine enabled",
    ))
}

/// mongod's refusal of `$where` without a JavaScript engine.
fn require_enabled_for_where() -> DocResult<()> {
    if enabled() {
        return Ok(());
    }
    Err(DocError::with_code(
        6108304,
        "Location6108304",
        "no globalScriptEngine in $where parsing",
    ))
}

/// A JavaScript failure as mongod reports it: an exception, a syntax error or an exhausted
/// heap is JSInterpreterFailure (139); an interruption is the operation's own reason
/// (MaxTimeMSExpired 50, Interrupted 11601).
pub fn doc_error(e: JsError, interrupt: Option<&Interrupt>) -> DocError {
    match e {
        JsError::Interrupted => interrupt.and_then(|i| i.check().err()).unwrap_or_else(|| {
            DocError::with_code(11601, "Interrupted", "operation was interrupted")
        }),
        other => DocError::with_code(
            139,
            "JSInterpreterFailure",
            format!("JavaScript execution failed: {other}"),
        ),
    }
}

/// Runs `func` under the running operation's interrupt.
pub fn run(func: &Func, call: &Call<'_>) -> DocResult<Outcome> {
    let interrupt = Interrupt::current();
    let stop: js::Stop = match interrupt.clone() {
        Some(i) => Arc::new(move || i.check().is_err()),
        None => Arc::new(|| false),
    };
    js::run(func, call, js::Limits::default(), stop).map_err(|e| doc_error(e, interrupt.as_ref()))
}

/// Calls `func(args…)` and returns its value.
pub fn call(func: &Func, args: &[Bson]) -> DocResult<Bson> {
    let c = Call {
        args,
        ..Call::default()
    };
    Ok(run(func, &c)?.value)
}

/// The source text of a JavaScript operand: a string or BSON Code (Code with scope is
/// refused, as mongod 4.4+ refuses it).
pub fn source_of(v: &Bson, what: &str) -> DocResult<String> {
    match v {
        Bson::String(s) | Bson::JavaScriptCode(s) => Ok(s.clone()),
        Bson::JavaScriptCodeWithScope(_) => Err(DocError::bad_value(format!(
            "{what} does not support code with scope (MongoDB 4.4 removed it)"
        ))),
        other => Err(DocError::type_mismatch(format!(
            "{what} must be a string or Code, not {}",
            crate::compare::type_name(other)
        ))),
    }
}

/// A function source compiled once now, so a syntax error fails the query before it reads
/// anything (as mongod's parse does).
pub fn compiled(source: &str, kind: Kind) -> DocResult<Func> {
    let f = Func::new(source, kind);
    f.check().map_err(|e| doc_error(e, None))?;
    Ok(f)
}

/// `$where`'s operand: a string or Code.
pub(crate) fn parse_where(v: &Bson) -> DocResult<Func> {
    require_enabled_for_where()?;
    let source = match v {
        Bson::String(_) | Bson::JavaScriptCode(_) => source_of(v, "$where")?,
        Bson::JavaScriptCodeWithScope(_) => {
            return Err(DocError::bad_value(
                "$where no longer supports deprecated BSON type CodeWScope",
            ))
        }
        _ => return Err(DocError::bad_value("$where got bad type")),
    };
    compiled(&source, Kind::Where)
}

/// Whether `doc` passes a `$where`: its function's result by JavaScript's truthiness. A
/// failure cannot be returned through a matcher's true or false: it fails the running
/// operation at its next yield point instead ([`Interrupt::fail`]), and the document does not
/// match.
pub(crate) fn where_matches(func: &Func, doc: &Document) -> bool {
    let c = Call {
        this: Some(doc),
        ..Call::default()
    };
    match run(func, &c) {
        Ok(out) => js_truthy(&out.value),
        Err(e) => {
            if let Some(i) = Interrupt::current() {
                i.fail(e);
            }
            false
        }
    }
}

/// JavaScript's truthiness of a value that came back from JavaScript.
fn js_truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Double(f) => *f != 0.0 && !f.is_nan(),
        Bson::String(s) => !s.is_empty(),
        Bson::Null | Bson::Undefined => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matcher::Matcher;
    use bson::doc;
    use std::time::Duration;

    #[test]
    fn where_filters_by_the_functions_truthiness() {
        let m = Matcher::new(&doc! {"$where": "this.x < 3"}).unwrap();
        assert!(m.matches(&doc! {"x": 2}));
        assert!(!m.matches(&doc! {"x": 5}));
        let m = Matcher::new(&doc! {"x": {"$gt": 0}, "$where": Bson::JavaScriptCode(
        "function() { return obj.s; }".into())})
        .unwrap();
        assert!(m.matches(&doc! {"x": 1, "s": "yes"}));
        assert!(!m.matches(&doc! {"x": 1, "s": ""}));
        assert!(!m.matches(&doc! {"x": 0, "s": "yes"}));
    }

    #[test]
    fn where_operands_are_checked_when_parsed() {
        let code = |e: DocError| e.code;
        let scope = Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope {
            code: "this.x < i".into(),
            scope: doc! {"i": 3},
        });
        assert_eq!(code(Matcher::new(&doc! {"$where": scope}).unwrap_err()), 2);
        assert_eq!(code(Matcher::new(&doc! {"$where": 5}).unwrap_err()), 2);
        assert_eq!(
            code(Matcher::new(&doc! {"$where": "this.x <"}).unwrap_err()),
            139
        );
        assert_eq!(
            code(Matcher::new(&doc! {"a": {"$elemMatch": {"$where": "true"}}}).unwrap_err()),
            2
        );
    }

    /// A throwing `$where` fails the operation it runs in at its next yield point.
    #[test]
    fn a_throwing_where_fails_the_running_operation() {
        let op = Interrupt::new(None);
        let outer = Interrupt::set_current(Some(op.clone()));
        let m = Matcher::new(&doc! {"$where": "return nothing_here();"}).unwrap();
        assert!(!m.matches(&doc! {"x": 1}));
        let e = op.check().unwrap_err();
        assert_eq!((e.code, e.code_name), (139, "JSInterpreterFailure"));
        assert!(e.message.contains("ReferenceError"), "{}", e.message);
        Interrupt::set_current(outer);
    }

    /// An endless `$where` ends with the operation's budget: MaxTimeMSExpired.
    #[test]
    fn an_endless_where_ends_with_max_time() {
        let op = Interrupt::new(Some(Duration::from_millis(50)));
        let outer = Interrupt::set_current(Some(op.clone()));
        let m = Matcher::new(&doc! {"$where": "while (true) {}"}).unwrap();
        assert!(!m.matches(&doc! {"x": 1}));
        assert_eq!(op.check().unwrap_err().code, 50);
        Interrupt::set_current(outer);
    }
}
