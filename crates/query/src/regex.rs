//! MongoDB regular expressions: a pattern with its options compiled once, shared by the
//! matcher (`$regex`), the expression operators (`$regexMatch`…) and `$jsonSchema`'s `pattern`.

use crate::error::{DocError, DocResult};

/// Compiles a MongoDB regular expression (`pattern` with `options` among `imsx`; `u` accepted).
pub fn compile_regex(pattern: &str, options: &str) -> DocResult<::regex::Regex> {
    let mut flags = String::new();
    for c in options.chars() {
        match c {
            'i' | 'm' | 's' | 'x' => {
                if !flags.contains(c) {
                    flags.push(c)
                }
            }
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
    let full = if flags.is_empty() {
        pattern.to_string()
    } else {
        format!("(?{flags}){pattern}")
    };
    ::regex::Regex::new(&full).map_err(|e| {
        DocError::with_code(
            51091,
            "Location51091",
            format!("Regular expression is invalid: {e}"),
        )
    })
}
