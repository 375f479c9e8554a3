//! The server's log (`systemLog`): startup, warnings, connections, slow operations and, from
//! verbosity 1, every command; one line each, to standard output or to `systemLog.path`.

use crate::config::{LogDestination, SystemLogSettings};
use parking_lot::Mutex;
use std::io::Write;
use std::sync::OnceLock;

struct Log {
    out: Mutex<Box<dyn Write + Send>>,
    verbosity: u32,
    quiet: bool,
}

static LOG: OnceLock<Log> = OnceLock::new();

/// Opens the log as configured (the first call wins; later calls keep the first log).
pub fn init(cfg: &SystemLogSettings) -> std::io::Result<()> {
    let out: Box<dyn Write + Send> = match (cfg.destination, &cfg.path) {
        (LogDestination::File, Some(path)) => Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .append(cfg.log_append)
                .truncate(!cfg.log_append)
                .open(path)
                .map_err(|e| {
                    std::io::Error::new(e.kind(), format!("systemLog.path {}: {e}", path.display()))
                })?,
        ),
        _ => Box::new(std::io::stdout()),
    };
    let _ = LOG.set(Log {
        out: Mutex::new(out),
        verbosity: cfg.verbosity,
        quiet: cfg.quiet,
    });
    Ok(())
}

fn write(severity: char, component: &str, msg: &str) {
    let now = bson::DateTime::now()
        .try_to_rfc3339_string()
        .unwrap_or_default();
    let line = format!("{now} {severity} {component:<8} {msg}\n");
    match LOG.get() {
        Some(l) => {
            let mut out = l.out.lock();
            let _ = out.write_all(line.as_bytes());
            let _ = out.flush();
        }
        None => eprint!("{line}"),
    }
}

pub fn info(component: &str, msg: &str) {
    write('I', component, msg);
}

pub fn warn(component: &str, msg: &str) {
    write('W', component, msg);
}

pub fn error(component: &str, msg: &str) {
    write('E', component, msg);
}

/// Connection opened/closed lines; `systemLog.quiet` suppresses them.
pub fn connection(msg: &str) {
    if !LOG.get().is_some_and(|l| l.quiet) {
        write('I', "NETWORK", msg);
    }
}

/// A line shown only at `systemLog.verbosity` >= `level`.
pub fn debug(level: u32, component: &str, msg: &str) {
    if LOG.get().is_some_and(|l| l.verbosity >= level) {
        write('D', component, msg);
    }
}
