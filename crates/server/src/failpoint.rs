//! Fail points, as mongod has them for tests (`configureFailPoint`, served only with
//! `--setParameter enableTestCommands=1`): `failCommand`, which fails, delays or drops the
//! connection of the commands it names, and `maxTimeAlwaysTimeOut`, which makes every command
//! that carries a `maxTimeMS` time out; `failGetMoreAfterCursorCheckout`, which fails a
//! getMore once it holds its cursor (so the error is the cursor's: a change stream's getMore
//! gets mongod's `ResumableChangeStreamError` label from it); and `stopReplProducer`, which
//! keeps a replica-set member from taking new log entries (mongod's stops its oplog fetcher).
//! The dispatcher asks [`FailPoints::on_command`] before each command; while every fail point
//! is off that is one atomic load.

use bson::{doc, Bson, Document};
use docdb::{DocError, DocResult};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The fail points flashdoc has.
pub const NAMES: &[&str] = &[
    FAIL_COMMAND,
    MAX_TIME_ALWAYS_TIME_OUT,
    FAIL_GET_MORE_AFTER_CHECKOUT,
    STOP_REPL_PRODUCER,
];
const FAIL_COMMAND: &str = "failCommand";
const MAX_TIME_ALWAYS_TIME_OUT: &str = "maxTimeAlwaysTimeOut";
const FAIL_GET_MORE_AFTER_CHECKOUT: &str = "failGetMoreAfterCursorCheckout";
pub const STOP_REPL_PRODUCER: &str = "stopReplProducer";

/// When a fail point fires (mongod's `mode`).
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    Off,
    AlwaysOn,
    /// The next `n` matching commands, then off.
    Times(u64),
    /// Every matching command after the first `n`.
    Skip(u64),
    /// Each matching command with this probability.
    Probability(f64),
}

/// What `failCommand`'s `data` asks of the commands it names.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FailCommand {
    pub commands: Vec<String>,
    pub error_code: Option<i32>,
    pub error_labels: Option<Vec<Bson>>,
    pub close_connection: bool,
    /// Hold the command this long before it runs (or fails).
    pub block: Option<Duration>,
    /// Run the command, then add this `writeConcernError` to its reply.
    pub write_concern_error: Option<Document>,
    /// Only for connections whose handshake named this application.
    pub app_name: Option<String>,
    /// Also the commands of internal clients (flashdoc has none: the field is taken because
    /// drivers' tests send it, and it widens nothing).
    pub fail_internal_commands: bool,
}

/// One fail point's configuration and how often it fired.
#[derive(Clone, Debug)]
struct Armed {
    mode: Mode,
    data: Document,
    fail_command: FailCommand,
    /// `failGetMoreAfterCursorCheckout`'s `errorCode`.
    checkout_error: i32,
    /// Times it fired (mongod's `timesEntered`, what `configureFailPoint` answers as `count`).
    entered: u64,
    /// Matching commands seen, for `skip`.
    seen: u64,
}

/// What a command meets on its way to its handler.
#[derive(Debug, PartialEq)]
pub enum Action {
    /// Nothing: run it.
    Run,
    /// Run it, then add `writeConcernError` (and these labels) to its reply.
    RunThenWriteConcernError {
        error: Document,
        labels: Option<Vec<Bson>>,
    },
    /// Answer this instead of running it.
    Fail(Document),
    /// Close the connection without a reply.
    Close,
}

impl Action {
    /// Whether the fail point was told the error labels its reply carries (`errorLabels`), so
    /// the server adds none of its own, as mongod's `failCommand`.
    pub fn gives_labels(&self) -> bool {
        match self {
            Action::Fail(reply) => reply.contains_key("errorLabels"),
            Action::RunThenWriteConcernError { labels, .. } => labels.is_some(),
            Action::Run | Action::Close => false,
        }
    }
}

/// The command about to run, as the fail points see it.
pub struct Command<'a> {
    pub name: &'a str,
    pub app_name: Option<&'a str>,
    /// Whether it carries a non-zero `maxTimeMS`.
    pub has_max_time: bool,
}

#[derive(Default)]
pub struct FailPoints {
    /// Whether any fail point is on: the one load a command pays while none is.
    any_on: AtomicBool,
    points: Mutex<Vec<(&'static str, Armed)>>,
}

impl FailPoints {
    /// Configures the fail point `name` (`configureFailPoint`'s fields after its name) and
    /// returns the times it had fired (`count`).
    pub fn configure(&self, name: &str, args: &Document) -> DocResult<i64> {
        let Some(&name) = NAMES.iter().find(|n| **n == name) else {
            return Err(DocError::with_code(
                FAIL_POINT_SET_FAILED,
                "FailPointSetFailed",
                format!("{name} not found"),
            ));
        };
        let mode = parse_mode(args.get("mode"))?;
        let data = match args.get("data") {
            None => Document::new(),
            Some(Bson::Document(d)) => d.clone(),
            Some(_) => {
                return Err(DocError::type_mismatch(
                    "the 'data' field must be an object",
                ))
            }
        };
        let fail_command = if name == FAIL_COMMAND && mode != Mode::Off {
            parse_fail_command(&data)?
        } else {
            FailCommand::default()
        };
        let checkout_error = if name == FAIL_GET_MORE_AFTER_CHECKOUT && mode != Mode::Off {
            parse_checkout_failure(&data)?
        } else {
            0
        };
        let mut points = self.points.lock();
        let entered = points
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, a)| a.entered);
        points.retain(|(n, _)| *n != name);
        if mode != Mode::Off {
            let armed = Armed {
                mode,
                data,
                fail_command,
                checkout_error,
                entered,
                seen: 0,
            };
            points.push((name, armed));
        }
        self.any_on.store(!points.is_empty(), Ordering::Release);
        Ok(i64::try_from(entered).unwrap_or(i64::MAX))
    }

    /// Whether any fail point is on (one atomic load).
    pub fn armed(&self) -> bool {
        self.any_on.load(Ordering::Acquire)
    }

    /// The fail points that are on, for `getParameter`-style listings and tests:
    /// `{name: {mode, data, timesEntered}}`.
    pub fn describe(&self) -> Document {
        let points = self.points.lock();
        let mut out = Document::new();
        for (name, a) in points.iter() {
            out.insert(
                *name,
                doc! {"mode": mode_doc(&a.mode), "data": a.data.clone(), "timesEntered": a.entered as i64},
            );
        }
        out
    }

    /// Whether the fail point `name` is on now (for the points that take no `data` and fire on
    /// every occasion they are asked about: `alwaysOn`; `times`, `skip` and a probability
    /// are counted as for a command). Counts the firing.
    pub fn fires(&self, name: &str) -> bool {
        if !self.armed() {
            return false;
        }
        let mut points = self.points.lock();
        let fired = points
            .iter_mut()
            .find(|(n, _)| *n == name)
            .is_some_and(|(_, a)| a.fire());
        points.retain(|(_, a)| a.mode != Mode::Off);
        self.any_on.store(!points.is_empty(), Ordering::Release);
        fired
    }

    /// Times the fail point `name` fired so far (0 when it is off or unknown).
    pub fn times_entered(&self, name: &str) -> u64 {
        let points = self.points.lock();
        points
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, a)| a.entered)
    }

    /// What the fail points do to `cmd`; fires them (counting `times` and `skip`). A
    /// `blockConnection` delay is served here, outside the lock, before the answer.
    pub fn on_command(&self, cmd: &Command<'_>) -> Action {
        if !self.armed() {
            return Action::Run;
        }
        let (block, action) = self.fire(cmd);
        if let Some(d) = block {
            std::thread::sleep(d);
        }
        action
    }

    /// The first fail point `cmd` fires, and the delay before its answer.
    fn fire(&self, cmd: &Command<'_>) -> (Option<Duration>, Action) {
        let mut points = self.points.lock();
        let mut fired = (None, Action::Run);
        for (name, armed) in points.iter_mut() {
            let matches = match *name {
                MAX_TIME_ALWAYS_TIME_OUT => cmd.has_max_time,
                // Fired from inside getMore, by `on_get_more_checkout`.
                FAIL_GET_MORE_AFTER_CHECKOUT => false,
                _ => armed.fail_command.applies_to(cmd),
            };
            if !matches || !armed.fire() {
                continue;
            }
            fired = match *name {
                MAX_TIME_ALWAYS_TIME_OUT => (
                    None,
                    Action::Fail(error_doc(50, "operation exceeded time limit", None)),
                ),
                _ => (armed.fail_command.block, armed.fail_command.action()),
            };
            break;
        }
        points.retain(|(_, a)| a.mode != Mode::Off);
        self.any_on.store(!points.is_empty(), Ordering::Release);
        fired
    }
}

impl FailPoints {
    /// The error `failGetMoreAfterCursorCheckout` fails a getMore with, once the getMore
    /// holds its cursor; fires the fail point (counting `times` and `skip`).
    pub fn on_get_more_checkout(&self) -> Option<DocError> {
        if !self.armed() {
            return None;
        }
        let mut points = self.points.lock();
        let code = points
            .iter_mut()
            .find(|(n, _)| *n == FAIL_GET_MORE_AFTER_CHECKOUT)
            .and_then(|(_, a)| a.fire().then_some(a.checkout_error));
        points.retain(|(_, a)| a.mode != Mode::Off);
        self.any_on.store(!points.is_empty(), Ordering::Release);
        code.map(|code| {
            coded_error(
                code,
                format!("Hit the '{FAIL_GET_MORE_AFTER_CHECKOUT}' failpoint"),
            )
        })
    }
}

/// An error with mongod's code name for `code` (`Location<code>` for a code it has no name
/// for, carried as the reply's `codeName`).
pub fn coded_error(code: i32, message: String) -> DocError {
    match known_code_name(code) {
        Some(name) => DocError::with_code(code, name, message),
        None => {
            let mut e = DocError::with_code(code, "Location", message);
            e.extra = Some(Box::new(doc! {"codeName": code_name(code)}));
            e
        }
    }
}

/// mongod's FailPointSetFailed.
const FAIL_POINT_SET_FAILED: i32 = 266;

impl Armed {
    /// Whether a matching command fires it now; spends a `times` and counts a `skip`.
    fn fire(&mut self) -> bool {
        self.seen += 1;
        let fires = match &mut self.mode {
            Mode::Off => false,
            Mode::AlwaysOn => true,
            Mode::Times(n) => {
                debug_assert!(*n > 0, "a spent times mode is switched off");
                *n -= 1;
                if *n == 0 {
                    self.mode = Mode::Off;
                }
                true
            }
            Mode::Skip(n) => self.seen > *n,
            Mode::Probability(p) => rand::random::<f64>() < *p,
        };
        if fires {
            self.entered += 1;
        }
        fires
    }
}

impl FailCommand {
    /// Whether the fail point concerns `cmd` (configureFailPoint itself never, as in mongod).
    fn applies_to(&self, cmd: &Command<'_>) -> bool {
        cmd.name != "configureFailPoint"
            && self.commands.iter().any(|c| c == cmd.name)
            && self
                .app_name
                .as_deref()
                .is_none_or(|want| cmd.app_name == Some(want))
    }

    /// What a command it fires on meets (after the `block` delay), in mongod's order: a
    /// closed connection, else an error, else a write concern error after it runs.
    fn action(&self) -> Action {
        if self.close_connection {
            return Action::Close;
        }
        if let Some(code) = self.error_code {
            return Action::Fail(error_doc(
                code,
                "Failing command via 'failCommand' failpoint",
                self.error_labels.clone(),
            ));
        }
        match &self.write_concern_error {
            Some(wce) => Action::RunThenWriteConcernError {
                error: wce.clone(),
                labels: self.error_labels.clone(),
            },
            None => Action::Run,
        }
    }
}

/// An error reply with mongod's code name for `code`.
fn error_doc(code: i32, message: &str, labels: Option<Vec<Bson>>) -> Document {
    let mut d = doc! {"ok": 0.0, "errmsg": message, "code": code, "codeName": code_name(code)};
    if let Some(l) = labels {
        d.insert("errorLabels", l);
    }
    d
}

/// mongod's names of the codes drivers' tests fail commands with (error_codes.yml); any other
/// is `Location<code>`, as mongod names a code it has no name for.
fn code_name(code: i32) -> String {
    known_code_name(code).map_or_else(|| format!("Location{code}"), str::to_string)
}

fn known_code_name(code: i32) -> Option<&'static str> {
    let known = match code {
        1 => "InternalError",
        2 => "BadValue",
        6 => "HostUnreachable",
        7 => "HostNotFound",
        8 => "UnknownError",
        11 => "UserNotFound",
        13 => "Unauthorized",
        18 => "AuthenticationFailed",
        20 => "IllegalOperation",
        24 => "LockTimeout",
        43 => "CursorNotFound",
        50 => "MaxTimeMSExpired",
        59 => "CommandNotFound",
        64 => "WriteConcernFailed",
        89 => "NetworkTimeout",
        91 => "ShutdownInProgress",
        96 => "OperationFailed",
        100 => "UnsatisfiableWriteConcern",
        112 => "WriteConflict",
        121 => "DocumentValidationFailure",
        133 => "FailedToSatisfyReadPreference",
        134 => "ReadConcernMajorityNotAvailableYet",
        136 => "CappedPositionLost",
        175 => "QueryPlanKilled",
        189 => "PrimarySteppedDown",
        237 => "CursorKilled",
        246 => "SnapshotUnavailable",
        251 => "NoSuchTransaction",
        262 => "ExceededTimeLimit",
        267 => "PreparedTransactionInProgress",
        279 => "ClientDisconnect",
        280 => "ChangeStreamFatalError",
        286 => "ChangeStreamHistoryLost",
        9001 => "SocketException",
        10107 => "NotWritablePrimary",
        11000 => "DuplicateKey",
        11600 => "InterruptedAtShutdown",
        11601 => "Interrupted",
        11602 => "InterruptedDueToReplStateChange",
        13435 => "NotPrimaryNoSecondaryOk",
        13436 => "NotPrimaryOrSecondary",
        63 => "StaleShardVersion",
        150 => "StaleEpoch",
        234 => "RetryChangeStream",
        13388 => "StaleConfig",
        _ => return None,
    };
    Some(known)
}

fn mode_doc(m: &Mode) -> Bson {
    match m {
        Mode::Off => Bson::String("off".into()),
        Mode::AlwaysOn => Bson::String("alwaysOn".into()),
        Mode::Times(n) => Bson::Document(doc! {"times": *n as i64}),
        Mode::Skip(n) => Bson::Document(doc! {"skip": *n as i64}),
        Mode::Probability(p) => Bson::Document(doc! {"activationProbability": *p}),
    }
}

/// A non-negative whole number, as a fail point's counts are given.
fn count(what: &str, v: &Bson) -> DocResult<u64> {
    let n = match v {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        Bson::Double(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => *f as i64,
        _ => {
            return Err(DocError::type_mismatch(format!(
                "'{what}' must be a number"
            )))
        }
    };
    u64::try_from(n).map_err(|_| DocError::bad_value(format!("'{what}' must be >= 0, got {n}")))
}

/// `mode`: `off`, `alwaysOn`, `{times: n}`, `{skip: n}` or `{activationProbability: p}`.
pub fn parse_mode(v: Option<&Bson>) -> DocResult<Mode> {
    let bad = || {
        DocError::bad_value(
            "'mode' must be 'off', 'alwaysOn', {times: n}, {skip: n} or {activationProbability: p}",
        )
    };
    let doc = match v {
        None => return Err(DocError::failed_to_parse("missing 'mode' field")),
        Some(Bson::String(s)) if s == "off" => return Ok(Mode::Off),
        Some(Bson::String(s)) if s == "alwaysOn" => return Ok(Mode::AlwaysOn),
        Some(Bson::Document(d)) if d.len() == 1 => d,
        Some(_) => return Err(bad()),
    };
    let (k, v) = doc.iter().next().expect("one field");
    match k.as_str() {
        "times" => match count("times", v)? {
            0 => Ok(Mode::Off),
            n => Ok(Mode::Times(n)),
        },
        "skip" => Ok(Mode::Skip(count("skip", v)?)),
        "activationProbability" => match v.as_f64() {
            Some(p) if (0.0..=1.0).contains(&p) => Ok(Mode::Probability(p)),
            _ => Err(DocError::bad_value(
                "'activationProbability' must be a number between 0 and 1",
            )),
        },
        _ => Err(bad()),
    }
}

/// `failCommand`'s `data`; a field it does not know is refused rather than ignored.
pub fn parse_fail_command(data: &Document) -> DocResult<FailCommand> {
    let mut fc = FailCommand::default();
    let mut block_ms = None;
    for (k, v) in data {
        match k.as_str() {
            "failCommands" => fc.commands = strings(k, v)?,
            "errorCode" => {
                let n = count(k, v)?;
                fc.error_code =
                    Some(i32::try_from(n).map_err(|_| {
                        DocError::bad_value(format!("'errorCode' out of range: {n}"))
                    })?);
            }
            "errorLabels" => match v {
                Bson::Array(a) if a.iter().all(|l| matches!(l, Bson::String(_))) => {
                    fc.error_labels = Some(a.clone())
                }
                _ => {
                    return Err(DocError::type_mismatch(
                        "'errorLabels' must be an array of strings",
                    ))
                }
            },
            "closeConnection" => fc.close_connection = boolean(k, v)?,
            "blockConnection" => {
                if boolean(k, v)? {
                    block_ms.get_or_insert(None);
                }
            }
            "blockTimeMS" => block_ms = Some(Some(count(k, v)?)),
            "writeConcernError" => match v {
                Bson::Document(d) => fc.write_concern_error = Some(d.clone()),
                _ => {
                    return Err(DocError::type_mismatch(
                        "'writeConcernError' must be an object",
                    ))
                }
            },
            "appName" => match v {
                Bson::String(s) => fc.app_name = Some(s.clone()),
                _ => return Err(DocError::type_mismatch("'appName' must be a string")),
            },
            "failInternalCommands" => fc.fail_internal_commands = boolean(k, v)?,
            other => {
                return Err(DocError::bad_value(format!(
                    "failCommand: unknown field '{other}' in 'data'"
                )))
            }
        }
    }
    fc.block = blocking(data, block_ms)?;
    if fc.commands.is_empty() {
        return Err(DocError::bad_value(
            "failCommand: 'data.failCommands' must name at least one command",
        ));
    }
    Ok(fc)
}

/// `failGetMoreAfterCursorCheckout`'s `data`: the `errorCode` to fail with. `closeConnection`
/// is taken as drivers' tests send it, `false` only: this fail point answers an error.
fn parse_checkout_failure(data: &Document) -> DocResult<i32> {
    let mut code = None;
    for (k, v) in data {
        match k.as_str() {
            "errorCode" => {
                let n = count(k, v)?;
                code =
                    Some(i32::try_from(n).map_err(|_| {
                        DocError::bad_value(format!("'errorCode' out of range: {n}"))
                    })?);
            }
            "closeConnection" if !boolean(k, v)? => {}
            other => {
                return Err(DocError::bad_value(format!(
                    "{FAIL_GET_MORE_AFTER_CHECKOUT}: unsupported field '{other}' in 'data'"
                )))
            }
        }
    }
    code.ok_or_else(|| {
        DocError::bad_value(format!(
            "{FAIL_GET_MORE_AFTER_CHECKOUT}: 'data.errorCode' is required"
        ))
    })
}

/// `blockConnection: true` needs `blockTimeMS`; `blockTimeMS` alone blocks nothing in mongod,
/// so it is refused alone rather than ignored.
fn blocking(data: &Document, block_ms: Option<Option<u64>>) -> DocResult<Option<Duration>> {
    let blocks = data.get_bool("blockConnection").unwrap_or(false);
    match (blocks, block_ms) {
        (true, Some(Some(ms))) => Ok(Some(Duration::from_millis(ms))),
        (true, _) => Err(DocError::bad_value(
            "failCommand: 'blockConnection' requires 'blockTimeMS'",
        )),
        (false, Some(Some(_))) => Err(DocError::bad_value(
            "failCommand: 'blockTimeMS' is used only with 'blockConnection: true'",
        )),
        (false, _) => Ok(None),
    }
}

fn boolean(k: &str, v: &Bson) -> DocResult<bool> {
    match v {
        Bson::Boolean(b) => Ok(*b),
        _ => Err(DocError::type_mismatch(format!("'{k}' must be a boolean"))),
    }
}

fn strings(k: &str, v: &Bson) -> DocResult<Vec<String>> {
    let Bson::Array(a) = v else {
        return Err(DocError::type_mismatch(format!(
            "'{k}' must be an array of strings"
        )));
    };
    a.iter()
        .map(|s| match s {
            Bson::String(s) => Ok(s.clone()),
            _ => Err(DocError::type_mismatch(format!(
                "'{k}' must be an array of strings"
            ))),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find() -> Command<'static> {
        Command {
            name: "find",
            app_name: None,
            has_max_time: false,
        }
    }

    fn fail_find(mode: Bson) -> FailPoints {
        let fp = FailPoints::default();
        fp.configure(
            "failCommand",
            &doc! {"mode": mode, "data": {"failCommands": ["find"], "errorCode": 2}},
        )
        .unwrap();
        fp
    }

    fn fails(a: &Action) -> bool {
        matches!(a, Action::Fail(d) if d.get_i32("code") == Ok(2) && d.get_str("codeName") == Ok("BadValue"))
    }

    #[test]
    fn off_costs_nothing_and_runs() {
        let fp = FailPoints::default();
        assert_eq!(fp.on_command(&find()), Action::Run);
        assert!(!fp.any_on.load(Ordering::Relaxed));
    }

    #[test]
    fn times_fires_n_times_then_switches_off() {
        let fp = fail_find(Bson::Document(doc! {"times": 2}));
        assert!(fails(&fp.on_command(&find())));
        let other = Command {
            name: "insert",
            ..find()
        };
        assert_eq!(
            fp.on_command(&other),
            Action::Run,
            "another command is no hit"
        );
        assert!(fails(&fp.on_command(&find())));
        assert_eq!(fp.on_command(&find()), Action::Run);
        assert!(!fp.any_on.load(Ordering::Relaxed));
        // Reconfiguring reports how often it fired.
        assert_eq!(
            fp.configure("failCommand", &doc! {"mode": "off"}).unwrap(),
            0,
            "a spent fail point is gone"
        );
    }

    #[test]
    fn skip_lets_the_first_n_through() {
        let fp = fail_find(Bson::Document(doc! {"skip": 2}));
        assert_eq!(fp.on_command(&find()), Action::Run);
        assert_eq!(fp.on_command(&find()), Action::Run);
        assert!(fails(&fp.on_command(&find())));
        assert!(fails(&fp.on_command(&find())));
        assert_eq!(fp.times_entered("failCommand"), 2);
    }

    #[test]
    fn always_on_until_off() {
        let fp = fail_find(Bson::String("alwaysOn".into()));
        for _ in 0..3 {
            assert!(fails(&fp.on_command(&find())));
        }
        assert_eq!(
            fp.configure("failCommand", &doc! {"mode": "off"}).unwrap(),
            3
        );
        assert_eq!(fp.on_command(&find()), Action::Run);
    }

    #[test]
    fn app_name_close_and_write_concern_error() {
        let fp = FailPoints::default();
        fp.configure(
            "failCommand",
            &doc! {"mode": "alwaysOn", "data": {"failCommands": ["find"], "closeConnection": true, "appName": "mine"}},
        )
        .unwrap();
        assert_eq!(fp.on_command(&find()), Action::Run);
        let mine = Command {
            app_name: Some("mine"),
            ..find()
        };
        assert_eq!(fp.on_command(&mine), Action::Close);
        fp.configure(
            "failCommand",
            &doc! {"mode": "alwaysOn", "data": {"failCommands": ["find"], "writeConcernError": {"code": 91, "errmsg": "x"}, "errorLabels": ["L"]}},
        )
        .unwrap();
        assert_eq!(
            fp.on_command(&find()),
            Action::RunThenWriteConcernError {
                error: doc! {"code": 91, "errmsg": "x"},
                labels: Some(vec![Bson::String("L".into())])
            }
        );
    }

    #[test]
    fn max_time_always_times_out_only_with_max_time() {
        let fp = FailPoints::default();
        fp.configure("maxTimeAlwaysTimeOut", &doc! {"mode": "alwaysOn"})
            .unwrap();
        assert_eq!(fp.on_command(&find()), Action::Run);
        let timed = Command {
            has_max_time: true,
            ..find()
        };
        assert!(
            matches!(fp.on_command(&timed), Action::Fail(d) if d.get_str("codeName") == Ok("MaxTimeMSExpired"))
        );
    }

    #[test]
    fn bad_configurations_are_refused() {
        let fp = FailPoints::default();
        for (name, args, code) in [
            ("noSuchPoint", doc! {"mode": "alwaysOn"}, 266),
            ("failCommand", doc! {}, 9),
            ("failCommand", doc! {"mode": "sometimes"}, 2),
            ("failCommand", doc! {"mode": {"times": -1}}, 2),
            ("failCommand", doc! {"mode": {"nth": 1}}, 2),
            (
                "failCommand",
                doc! {"mode": "alwaysOn", "data": {"failCommands": ["find"], "bogus": 1}},
                2,
            ),
            (
                "failCommand",
                doc! {"mode": "alwaysOn", "data": {"errorCode": 2}},
                2,
            ),
            (
                "failCommand",
                doc! {"mode": "alwaysOn", "data": {"failCommands": ["find"], "blockConnection": true}},
                2,
            ),
            (
                "failCommand",
                doc! {"mode": "alwaysOn", "data": {"failCommands": "find"}},
                14,
            ),
        ] {
            let e = fp.configure(name, &args).unwrap_err();
            assert_eq!(e.code, code, "{name} {args}: {e}");
        }
        assert!(fp.describe().is_empty());
    }

    #[test]
    fn get_more_checkout_fails_only_getmores_that_hold_their_cursor() {
        let fp = FailPoints::default();
        assert!(fp.on_get_more_checkout().is_none());
        fp.configure(
            "failGetMoreAfterCursorCheckout",
            &doc! {"mode": {"times": 1}, "data": {"errorCode": 91, "closeConnection": false}},
        )
        .unwrap();
        let getmore = Command {
            name: "getMore",
            ..find()
        };
        assert_eq!(fp.on_command(&getmore), Action::Run, "not before checkout");
        let e = fp.on_get_more_checkout().expect("fires once");
        assert_eq!((e.code, e.code_name), (91, "ShutdownInProgress"));
        assert!(fp.on_get_more_checkout().is_none(), "spent");
        fp.configure(
            "failGetMoreAfterCursorCheckout",
            &doc! {"mode": "alwaysOn", "data": {"errorCode": 4242}},
        )
        .unwrap();
        let e = fp.on_get_more_checkout().unwrap();
        assert_eq!(
            crate::reply::error_reply(&e).get_str("codeName"),
            Ok("Location4242")
        );
        for data in [doc! {}, doc! {"errorCode": 6, "closeConnection": true}] {
            let args = doc! {"mode": "alwaysOn", "data": data};
            assert!(fp
                .configure("failGetMoreAfterCursorCheckout", &args)
                .is_err());
        }
    }

    #[test]
    fn unknown_codes_are_named_as_mongod_names_them() {
        assert_eq!(code_name(91), "ShutdownInProgress");
        assert_eq!(code_name(12345), "Location12345");
    }
}
