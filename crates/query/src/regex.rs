//! MongoDB regular expressions: a pattern with its options compiled once, shared by the
//! matcher (`$regex`, `$in` with regexes), the expression operators (`$regexMatch`…) and
//! `$jsonSchema`'s `pattern`.
//!
//! Patterns have PCRE's syntax because mongod compiles them with PCRE2 (6.1 and later): the
//! `pcre2` crate builds the same C library, so lookaround, backreferences, possessive
//! quantifiers, atomic groups, `\Q…\E`, named groups and inline options mean what they mean
//! to mongod. As in mongod (`pcre_util::flagsToOptions`), every pattern is compiled in UTF
//! mode without Unicode properties for `\w`, `\d`, `\b` (those stay ASCII), `u` is accepted
//! and changes nothing.
//!
//! Backtracking is bounded: a pattern such as `(a+)+$` on a long run of `a`s would otherwise
//! hold a thread for hours. PCRE2 stops a match that exceeds its match limit (10 000 000
//! backtracking steps, PCRE2's default and so mongod's), its depth limit or its heap limit and
//! reports an error; what each caller does with that error follows mongod (see
//! [`Regex::is_match`] and [`Regex::captures_at`]).

use crate::error::{DocError, DocResult};

/// The most backtracking steps one match may take: PCRE2's default, which mongod keeps.
pub const MATCH_LIMIT: u32 = 10_000_000;
/// The deepest nesting of backtracking points one match may reach (interpreter only; the JIT
/// is bounded by its stack, [`JIT_STACK_BYTES`]).
pub const DEPTH_LIMIT: u32 = 1_000_000;
/// The most heap, in KiB, the interpreter may use for backtracking frames in one match.
pub const HEAP_LIMIT_KIB: u32 = 64 * 1024;
/// The JIT's stack for one match: PCRE2's default of 32 KiB fails on long subjects that
/// a pattern such as `(a|b)*` walks.
const JIT_STACK_BYTES: usize = 1 << 20;
/// PCRE2's longest pattern as mongod configures it (`kMaxPatternLength`).
const MAX_PATTERN_BYTES: usize = 32_764;

/// A compiled MongoDB regular expression.
#[derive(Clone, Debug)]
pub struct Regex {
    re: pcre2::bytes::Regex,
}

/// One match: the byte span of the whole match and of each capture group (`None` for a
/// group that took no part in it).
#[derive(Clone, Debug, PartialEq)]
pub struct Captures {
    pub groups: Vec<Option<(usize, usize)>>,
}

impl Captures {
    /// The byte span of the whole match.
    pub fn span(&self) -> (usize, usize) {
        self.groups[0].expect("group 0 always takes part in a match")
    }
}

/// Compiles a MongoDB regular expression (`pattern` with `options` among `imsxu`).
pub fn compile_regex(pattern: &str, options: &str) -> DocResult<Regex> {
    let flags = parse_options(options)?;
    if pattern.contains('\0') {
        return Err(DocError::bad_value(
            "Regular expression cannot contain an embedded null byte",
        ));
    }
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(invalid(
            "pattern string is longer than the limit set by the application",
        ));
    }
    // The limits ride on PCRE2's start-of-pattern items, which can only lower the library's
    // own: a pattern that names a higher limit itself still gets at most these.
    let limited = format!(
        "(*LIMIT_MATCH={MATCH_LIMIT})(*LIMIT_DEPTH={DEPTH_LIMIT})(*LIMIT_HEAP={HEAP_LIMIT_KIB}){pattern}"
    );
    let re = pcre2::bytes::RegexBuilder::new()
        .utf(true)
        .caseless(flags.caseless)
        .multi_line(flags.multi_line)
        .dotall(flags.dotall)
        .extended(flags.extended)
        .jit_if_available(true)
        .max_jit_stack_size(Some(JIT_STACK_BYTES))
        .build(&limited)
        .map_err(|e| invalid(&pcre2_message(&e)))?;
    Ok(Regex { re })
}

/// Patterns an evaluating thread keeps compiled for the expression operators, which meet the
/// same (usually constant) pattern once per document: PCRE2's compile and JIT cost far more
/// than a match.
const CACHED_PATTERNS: usize = 64;

thread_local! {
    static COMPILED: std::cell::RefCell<std::collections::HashMap<(String, String), Regex>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// [`compile_regex`], through a per-thread cache of the last patterns compiled (emptied
/// when full).
pub fn compile_regex_cached(pattern: &str, options: &str) -> DocResult<Regex> {
    let key = (pattern.to_string(), options.to_string());
    if let Some(re) = COMPILED.with(|c| c.borrow().get(&key).cloned()) {
        return Ok(re);
    }
    let re = compile_regex(pattern, options)?;
    COMPILED.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= CACHED_PATTERNS {
            c.clear();
        }
        c.insert(key, re.clone());
    });
    Ok(re)
}

#[derive(Default)]
struct Flags {
    caseless: bool,
    multi_line: bool,
    dotall: bool,
    extended: bool,
}

fn parse_options(options: &str) -> DocResult<Flags> {
    let mut flags = Flags::default();
    for c in options.chars() {
        match c {
            'i' => flags.caseless = true,
            'm' => flags.multi_line = true,
            's' => flags.dotall = true,
            'x' => flags.extended = true,
            'u' => {}
            other => {
                return Err(DocError::with_code(
                    51108,
                    "Location51108",
                    format!("invalid flag in regex options: {other}"),
                ))
            }
        }
    }
    Ok(flags)
}

fn invalid(reason: &str) -> DocError {
    DocError::with_code(
        51091,
        "Location51091",
        format!("Regular expression is invalid: {reason}"),
    )
}

/// PCRE2's own message, without the crate's "PCRE2: error compiling pattern at offset N: "
/// (mongod reports the library's message alone).
fn pcre2_message(e: &pcre2::Error) -> String {
    let text = e.to_string();
    let body = text.strip_prefix("PCRE2: ").unwrap_or(&text);
    body.split_once(": ")
        .map_or(body, |(_, message)| message)
        .to_string()
}

impl Regex {
    /// Whether the pattern matches anywhere in `subject`, for the matcher: as in mongod
    /// (`RegexMatchExpression::matchesSingleElement` and SBE's `regexMatch`), a match that
    /// stops at a limit is no match.
    pub fn is_match(&self, subject: &str) -> bool {
        self.re.is_match(subject.as_bytes()).unwrap_or(false)
    }

    /// The first match at or after byte `start` (a char boundary), for the expression
    /// operators: a match that stops at a limit is mongod's error 51156, naming `op`.
    pub fn captures_at(
        &self,
        subject: &str,
        start: usize,
        op: &str,
    ) -> DocResult<Option<Captures>> {
        debug_assert!(
            subject.is_char_boundary(start),
            "a match starts on a char boundary"
        );
        let mut locs = self.re.capture_locations();
        match self.re.captures_read_at(&mut locs, subject.as_bytes(), start) {
            Ok(None) => Ok(None),
            Ok(Some(_)) => Ok(Some(Captures {
                groups: (0..locs.len()).map(|i| locs.get(i)).collect(),
            })),
            Err(e) => Err(DocError::with_code(
                51156,
                "Location51156",
                format!(
                    "Error occurred while executing the regular expression in {op}. Result code: {}",
                    pcre2_message(&e)
                ),
            )),
        }
    }

    /// Every non-overlapping match, left to right; after an empty match the search goes on
    /// one character further, as mongod's `$regexFindAll` does. `visit` sees each match and
    /// may stop the walk with an error.
    pub fn for_each_match(
        &self,
        subject: &str,
        op: &str,
        mut visit: impl FnMut(&Captures) -> DocResult<()>,
    ) -> DocResult<()> {
        let mut start = 0;
        while start <= subject.len() {
            let Some(c) = self.captures_at(subject, start, op)? else {
                break;
            };
            visit(&c)?;
            let (s, e) = c.span();
            start = if e > s {
                e
            } else {
                e + subject[e..].chars().next().map_or(1, char::len_utf8)
            };
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
