//! The thread's JavaScript runtime: created on first use, kept for the thread's life, with the
//! functions it compiled. A call sets the caller's stop flag and limits, converts the
//! arguments, calls, and converts the result back.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{Bson, Document};
use rquickjs::function::{Rest, This};
use rquickjs::{Context, Ctx, Function, Persistent, Runtime, Value};

use crate::convert::{doc_to_js, to_bson, to_js, Shell};
use crate::{JsError, Limits, Stop};

/// How a source text becomes a function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// It must be a function (`$function`'s body, `$accumulator`'s, mapReduce's).
    Function,
    /// `$where`: a function, or else an expression (`this.x < 3`) or statements
    /// (`return this.x < 3`) that become one's body, as mongod takes them.
    Where,
}

/// A function's source, ready to call (compiled once per thread, on its first call there).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Func {
    source: Arc<str>,
    kind: Kind,
}

impl Func {
    pub fn new(source: &str, kind: Kind) -> Func {
        Func {
            source: source.into(),
            kind,
        }
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Fails if the source does not compile (checked when a query is parsed, as mongod does).
    pub fn check(&self) -> Result<(), JsError> {
        with_engine(Limits::default(), never_stop(), |ctx, cache| {
            cache.get(ctx, self).map(|_| ())
        })
    }
}

fn never_stop() -> Stop {
    Arc::new(|| false)
}

/// One call's inputs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Call<'a> {
    /// The function's `this` (also the global `obj` for `$where`); `None`: undefined.
    pub this: Option<&'a Document>,
    pub args: &'a [Bson],
    /// Globals set before the call (mapReduce's `scope`).
    pub scope: Option<&'a Document>,
    /// Whether the global `emit(key, value)` collects pairs (mapReduce's map).
    pub emit: bool,
}

/// One call's result.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub value: Bson,
    /// What `emit` collected, in order.
    pub emitted: Vec<(Bson, Bson)>,
}

/// The compiled functions a thread keeps, by source; bounded so that a client sending a new
/// source with every query cannot grow it without end.
#[derive(Default)]
struct Cache {
    funcs: HashMap<Func, Persistent<Function<'static>>>,
}

const MAX_CACHED: usize = 1024;

struct Engine {
    // Field order is drop order: the cached functions go before the context and runtime.
    cache: Cache,
    context: Context,
    runtime: Runtime,
}

thread_local! {
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
    /// The running call's stop flag, which the interrupt handler and `sleep` ask.
    static STOP: RefCell<Option<Stop>> = const { RefCell::new(None) };
    /// Whether the running call was stopped.
    static STOPPED: Cell<bool> = const { Cell::new(false) };
    /// `emit`'s pairs, while a call that collects them runs.
    static EMITTED: RefCell<Option<Vec<(Bson, Bson)>>> = const { RefCell::new(None) };
}

/// Asks the running call's stop flag; remembers a stop, so the call reports it whatever the
/// function did with the exception QuickJS raised.
fn should_stop() -> bool {
    let stop = STOP.with(|s| s.borrow().as_ref().is_some_and(|f| f()));
    if stop {
        STOPPED.with(|s| s.set(true));
    }
    stop
}

/// Runs `f` over the arguments of `call` on this thread's runtime.
pub fn run(f: &Func, call: &Call<'_>, limits: Limits, stop: Stop) -> Result<Outcome, JsError> {
    EMITTED.with(|e| *e.borrow_mut() = call.emit.then(Vec::new));
    let value = with_engine(limits, stop, |ctx, cache| {
        let func = cache.get(ctx, f)?;
        invoke(ctx, &func, f.kind, call)
    });
    let emitted = EMITTED.with(|e| e.borrow_mut().take()).unwrap_or_default();
    Ok(Outcome {
        value: value?,
        emitted,
    })
}

/// Runs `body` in this thread's context with the stop flag and limits set, and turns what
/// QuickJS threw into a [`JsError`].
fn with_engine<T>(
    limits: Limits,
    stop: Stop,
    body: impl for<'js> FnOnce(&Ctx<'js>, &mut Cache) -> Result<T, JsError>,
) -> Result<T, JsError> {
    ENGINE.with(|cell| {
        let mut slot = cell
            .try_borrow_mut()
            .map_err(|_| JsError::Exception("JavaScript called itself re-entrantly".into()))?;
        if slot.is_none() {
            *slot = Some(Engine::new()?);
        }
        let engine = slot.as_mut().expect("created above");
        crate::heap::start_call(limits.heap_bytes);
        engine.runtime.set_max_stack_size(limits.stack_bytes);
        STOP.with(|s| *s.borrow_mut() = Some(stop));
        STOPPED.with(|s| s.set(false));
        let Engine {
            cache,
            context,
            runtime,
        } = engine;
        let out = context.with(|ctx| body(&ctx, cache));
        STOP.with(|s| *s.borrow_mut() = None);
        crate::heap::start_call(usize::MAX);
        if STOPPED.with(|s| s.get()) {
            return Err(JsError::Interrupted);
        }
        if crate::heap::refused() {
            runtime.run_gc();
            return Err(JsError::OutOfMemory);
        }
        out
    })
}

impl Engine {
    fn new() -> Result<Engine, JsError> {
        let runtime = Runtime::new_with_alloc(crate::heap::CappedHeap::new())
            .map_err(|e| JsError::Exception(e.to_string()))?;
        runtime.set_interrupt_handler(Some(Box::new(should_stop)));
        let context = Context::full(&runtime).map_err(|e| JsError::Exception(e.to_string()))?;
        context.with(|ctx| install(&ctx).map_err(|e| caught(&ctx, e)))?;
        Ok(Engine {
            cache: Cache::default(),
            context,
            runtime,
        })
    }
}

/// The shell's types and helpers, `sleep` and `emit`.
fn install(ctx: &Ctx<'_>) -> rquickjs::Result<()> {
    ctx.eval::<(), _>(include_str!("shell.js"))?;
    let g = ctx.globals();
    g.set("sleep", Function::new(ctx.clone(), sleep)?)?;
    g.set("emit", Function::new(ctx.clone(), emit)?)?;
    Ok(())
}

/// The shell's `sleep(ms)`: waits in short slices, asking the stop flag between them.
fn sleep(ctx: Ctx<'_>, ms: f64) -> rquickjs::Result<()> {
    let until = Instant::now() + Duration::from_secs_f64((ms.max(0.0) / 1000.0).min(86_400.0));
    loop {
        if should_stop() {
            return Err(rquickjs::Exception::throw_internal(&ctx, "interrupted"));
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        std::thread::sleep(left.min(Duration::from_millis(5)));
    }
}

/// mapReduce's `emit(key, value)`.
fn emit<'js>(ctx: Ctx<'js>, key: Value<'js>, value: Value<'js>) -> rquickjs::Result<()> {
    let sh = Shell::of(&ctx)?;
    let throw = |e: JsError| rquickjs::Exception::throw_type(&ctx, &e.to_string());
    let pair = (
        to_bson(&sh, &key, 0).map_err(throw)?,
        to_bson(&sh, &value, 0).map_err(throw)?,
    );
    EMITTED.with(|e| match e.borrow_mut().as_mut() {
        Some(out) => {
            out.push(pair);
            Ok(())
        }
        None => Err(rquickjs::Exception::throw_reference(
            &ctx,
            "emit is only available in mapReduce's map function",
        )),
    })
}

impl Cache {
    /// The compiled function for `f`, compiling it on first use.
    fn get<'js>(&mut self, ctx: &Ctx<'js>, f: &Func) -> Result<Function<'js>, JsError> {
        if let Some(p) = self.funcs.get(f) {
            return p.clone().restore(ctx).map_err(|e| caught(ctx, e));
        }
        let func = compile(ctx, f)?;
        if self.funcs.len() >= MAX_CACHED {
            self.funcs.clear();
        }
        self.funcs
            .insert(f.clone(), Persistent::save(ctx, func.clone()));
        Ok(func)
    }
}

/// Compiles a source into a function without running any of it: a function expression is
/// evaluated (which only creates the closure); a `$where` expression or statements become a
/// function's body through `Function`, which parses without running.
fn compile<'js>(ctx: &Ctx<'js>, f: &Func) -> Result<Function<'js>, JsError> {
    let src = f.source.trim();
    let is_function = src.starts_with("function") || src.starts_with("async function");
    if f.kind == Kind::Function || is_function {
        let v: Value = ctx
            .eval(format!("({src}\n)"))
            .map_err(|e| compile_error(ctx, e))?;
        return v
            .into_function()
            .ok_or_else(|| JsError::Compile(format!("the source is not a function: {src}")));
    }
    let make: rquickjs::Constructor = ctx.globals().get("Function").map_err(|e| caught(ctx, e))?;
    make.construct::<_, Function>((format!("return ({src}\n);"),))
        .or_else(|_| {
            let _ = ctx.catch();
            make.construct::<_, Function>((src.to_string(),))
        })
        .map_err(|e| compile_error(ctx, e))
}

fn compile_error(ctx: &Ctx<'_>, e: rquickjs::Error) -> JsError {
    match caught(ctx, e) {
        JsError::Exception(m) => JsError::Compile(m),
        other => other,
    }
}

/// Calls a compiled function with `this`, the arguments and the scope of `call`.
fn invoke<'js>(
    ctx: &Ctx<'js>,
    func: &Function<'js>,
    kind: Kind,
    call: &Call<'_>,
) -> Result<Bson, JsError> {
    let sh = Shell::of(ctx).map_err(|e| caught(ctx, e))?;
    let prepared = (|| {
        let g = ctx.globals();
        for (k, v) in call.scope.into_iter().flatten() {
            g.set(k.as_str(), to_js(ctx, &sh, v, 0)?)?;
        }
        let this = match call.this {
            Some(d) => doc_to_js(ctx, &sh, d, 0)?,
            None => Value::new_undefined(ctx.clone()),
        };
        if kind == Kind::Where {
            g.set("obj", this.clone())?;
        }
        let args = call
            .args
            .iter()
            .map(|a| to_js(ctx, &sh, a, 0))
            .collect::<rquickjs::Result<Vec<_>>>()?;
        Ok((this, args))
    })();
    let (this, args) = prepared.map_err(|e| caught(ctx, e))?;
    let result: Value = func
        .call((This(this), Rest(args)))
        .map_err(|e| caught(ctx, e))?;
    to_bson(&sh, &result, 0)
}

/// What QuickJS threw, as a [`JsError`]: "Name: message" and the stack, as mongod reports a
/// JavaScript exception.
fn caught(ctx: &Ctx<'_>, e: rquickjs::Error) -> JsError {
    if STOPPED.with(|s| s.get()) {
        let _ = ctx.catch();
        return JsError::Interrupted;
    }
    if !e.is_exception() {
        return match e {
            rquickjs::Error::Allocation => JsError::OutOfMemory,
            other => JsError::Exception(other.to_string()),
        };
    }
    let thrown = ctx.catch();
    let text = match thrown.as_exception() {
        Some(ex) => {
            let name: String = ex
                .as_object()
                .get::<_, Option<String>>("name")
                .ok()
                .flatten()
                .unwrap_or_else(|| "Error".into());
            let message = ex.message().unwrap_or_default();
            let stack = ex.stack().unwrap_or_default();
            format!("{name}: {message} :\n{stack}")
        }
        None => thrown
            .get::<rquickjs::Coerced<String>>()
            .map(|s| format!("uncaught exception: {}", s.0))
            .unwrap_or_else(|_| "uncaught exception".into()),
    };
    if text.contains("out of memory") {
        return JsError::OutOfMemory;
    }
    JsError::Exception(text)
}
