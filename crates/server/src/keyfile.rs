//! Internal authentication between cluster members with a shared key file (mongod's
//! `security.keyFile`): every member reads the same file, and each authenticates to the others
//! as the internal user `__system@local`, whose SCRAM password is the key. A member that has a
//! key file derives that user's credentials from it at start (never stored); a client that
//! knows the key can authenticate as it, so the file must be readable by its owner only.
//!
//! The file is checked as mongod checks it: not readable, writable or executable by group or
//! others; its contents, with whitespace removed, 6 to 1024 characters of the base64 alphabet.

use crate::scram::{Credential, Mechanism};
use std::path::Path;

/// The internal user members authenticate as.
pub const INTERNAL_USER: &str = "__system";
/// The internal user's database.
pub const INTERNAL_DB: &str = "local";
/// The role the internal user holds: every action on every database (mongod's `__system`).
/// It is not a built-in role a user can be granted (`roles::BUILTIN_ROLES` lacks it).
pub const INTERNAL_ROLE: &str = "__system";

const MIN_KEY: usize = 6;
const MAX_KEY: usize = 1024;

/// A validated key.
#[derive(Clone)]
pub struct KeyFile {
    key: String,
}

impl std::fmt::Debug for KeyFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key itself (logs, panics).
        f.write_str("KeyFile(..)")
    }
}

impl KeyFile {
    /// Reads and checks the key file at `path` (permissions, then contents).
    pub fn read(path: &Path) -> Result<KeyFile, String> {
        let shown = path.display();
        let meta = std::fs::metadata(path)
            .map_err(|e| format!("security.keyFile: cannot read {shown}: {e}"))?;
        if !meta.is_file() {
            return Err(format!("security.keyFile: {shown} is not a regular file"));
        }
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode();
        if mode & 0o077 != 0 {
            return Err(format!(
                "security.keyFile: permissions on {shown} are too open (mode {:o}): it must not be accessible to group or others (chmod 400 or 600)",
                mode & 0o777
            ));
        }
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("security.keyFile: cannot read {shown}: {e}"))?;
        KeyFile::parse(&text).map_err(|e| format!("security.keyFile {shown}: {e}"))
    }

    /// Checks a key's text: whitespace is dropped, as mongod drops it; what remains is 6 to
    /// 1024 characters of the base64 alphabet.
    pub fn parse(text: &str) -> Result<KeyFile, String> {
        let key: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        if let Some(c) = key
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=')))
        {
            return Err(format!(
                "invalid character {c:?} in the key: only base64 characters (A-Z, a-z, 0-9, +, /, =) and whitespace are allowed"
            ));
        }
        if !(MIN_KEY..=MAX_KEY).contains(&key.len()) {
            return Err(format!(
                "the key has {} characters; it must have between {MIN_KEY} and {MAX_KEY}",
                key.len()
            ));
        }
        Ok(KeyFile { key })
    }

    /// The internal user's password (the key).
    pub fn password(&self) -> &str {
        &self.key
    }

    /// The internal user's credentials for `mech`, salted afresh (what a member checks
    /// others' proofs against).
    pub fn credential(&self, mech: Mechanism) -> Credential {
        Credential::derive(mech, INTERNAL_USER, &self.key)
            .expect("a base64 key is ASCII, which SASLprep keeps as it is")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn contents_are_checked_as_mongod_checks_them() {
        assert_eq!(KeyFile::parse("abc def\n").unwrap().password(), "abcdef");
        assert!(KeyFile::parse("abcde")
            .unwrap_err()
            .contains("5 characters"));
        assert!(KeyFile::parse(&"a".repeat(1025))
            .unwrap_err()
            .contains("1025 characters"));
        assert!(KeyFile::parse(&"a".repeat(1024)).is_ok());
        assert!(KeyFile::parse("abc!defg").unwrap_err().contains("'!'"));
        assert!(KeyFile::parse("ab+/=cd09ZZ").is_ok());
    }

    #[test]
    fn a_file_others_can_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("key");
        std::fs::write(&p, "c2VjcmV0a2V5\n").unwrap();
        for mode in [0o644, 0o640, 0o604, 0o610] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            let e = KeyFile::read(&p).unwrap_err();
            assert!(e.contains("too open"), "{mode:o}: {e}");
        }
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(KeyFile::read(&p).unwrap().password(), "c2VjcmV0a2V5");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert!(KeyFile::read(&p).is_ok());
        assert!(KeyFile::read(&dir.path().join("missing"))
            .unwrap_err()
            .contains("cannot read"));
    }
}
