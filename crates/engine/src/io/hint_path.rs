//! Which path a placement hint takes to the device, detected, never assumed.
//!
//! Linux has two ways to tell a device where a write belongs:
//!
//! - **`write-streams`**: io_uring's per-write `write_stream` (Linux 6.16+), which the NVMe
//!   driver turns into a data placement identifier (FDP). Only for writes to a raw block device
//!   whose queue reports `max_write_streams` > 0 (`/sys/dev/block/MAJ:MIN/queue/`). flashdoc
//!   has no raw-device mode, so its files never take this path; detection reports it for a
//!   block device so that a raw-device mode (not built) would know.
//! - **`rw-hint`**: `fcntl(F_SET_RW_HINT)`, a write-life value kept on the inode. The kernel
//!   records it and file systems may use it (f2fs's temperatures), but mainline NVMe does not
//!   map it to FDP placement: through a file system the hint does **not** reach the device
//!   (`reaches_device` is false).
//! - **`none`**: neither is taken (the file system refuses `F_SET_RW_HINT`).
//!
//! [`detect`] decides from a target ([`Target`]), a sysfs root (a test gives a fake tree) and
//! a probe that sets a hint on a file of the database's file system.

use serde::{Deserialize, Serialize};
use std::io;
use std::path::Path;

/// `storage.flash.hints`: what the engine should do about hints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Hints {
    /// No hint calls.
    None,
    /// Detect the path ([`detect`]) and use it (flash mode's default).
    Auto,
    /// Set `F_SET_RW_HINT` on every file, whatever the probe said (a refusal is logged once).
    Linux,
}

/// The hint path actually used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HintPath {
    WriteStreams,
    RwHint,
    None,
}

impl HintPath {
    pub fn as_str(self) -> &'static str {
        match self {
            HintPath::WriteStreams => "write-streams",
            HintPath::RwHint => "rw-hint",
            HintPath::None => "none",
        }
    }

    /// Whether the path reaches the device's data placement: only per-write streams do; an
    /// inode's write-life hint stops at the kernel on mainline Linux.
    pub fn reaches_device(self) -> bool {
        self == HintPath::WriteStreams
    }
}

/// What the database's files live on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// A raw block device, by its device number.
    BlockDevice { major: u32, minor: u32 },
    /// A file system (every flashdoc database today).
    FileSystem,
}

impl Target {
    /// The target `path` names: a block device node, or anything else (a file system).
    pub fn of(path: &Path) -> io::Result<Target> {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let m = std::fs::metadata(path)?;
        if !m.file_type().is_block_device() {
            return Ok(Target::FileSystem);
        }
        let rdev = m.rdev();
        Ok(Target::BlockDevice {
            major: libc::major(rdev),
            minor: libc::minor(rdev),
        })
    }
}

/// The real sysfs.
pub const SYSFS: &str = "/sys";

/// `queue/max_write_streams` of block device `major:minor` under `sysfs` (a partition's queue is
/// its disk's, one directory up); `None` when the kernel has no such file (before 6.16) or the
/// device is unknown.
pub fn max_write_streams(sysfs: &Path, major: u32, minor: u32) -> Option<u32> {
    let dev = sysfs.join("dev/block").join(format!("{major}:{minor}"));
    [dev.join("queue"), dev.join("../queue")]
        .iter()
        .map(|q| q.join("max_write_streams"))
        .find_map(|f| std::fs::read_to_string(f).ok())
        .and_then(|s| s.trim().parse().ok())
}

/// The path `mode` takes on `target`: `write-streams` for a block device whose queue has
/// write streams, else `rw-hint` when `probe_rw_hint` (setting a hint on a file of the
/// target) succeeds, else `none`. `Hints::None` takes no path and probes nothing.
pub fn detect(
    mode: Hints,
    target: Target,
    sysfs: &Path,
    probe_rw_hint: impl FnOnce() -> io::Result<()>,
) -> HintPath {
    if mode == Hints::None {
        return HintPath::None;
    }
    if let Target::BlockDevice { major, minor } = target {
        if max_write_streams(sysfs, major, minor).is_some_and(|n| n > 0) {
            return HintPath::WriteStreams;
        }
    }
    match probe_rw_hint() {
        Ok(()) => HintPath::RwHint,
        Err(_) => HintPath::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake sysfs with one disk 259:0 (queue reporting `streams`, or no file when `None`)
    /// and its partition 259:1.
    fn fake_sysfs(streams: Option<u32>) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let disk = root.path().join("devices/nvme0n1");
        std::fs::create_dir_all(disk.join("queue")).unwrap();
        std::fs::create_dir_all(disk.join("nvme0n1p1")).unwrap();
        if let Some(n) = streams {
            std::fs::write(disk.join("queue/max_write_streams"), format!("{n}\n")).unwrap();
        }
        let block = root.path().join("dev/block");
        std::fs::create_dir_all(&block).unwrap();
        std::os::unix::fs::symlink(&disk, block.join("259:0")).unwrap();
        std::os::unix::fs::symlink(disk.join("nvme0n1p1"), block.join("259:1")).unwrap();
        root
    }

    const DISK: Target = Target::BlockDevice {
        major: 259,
        minor: 0,
    };
    const PARTITION: Target = Target::BlockDevice {
        major: 259,
        minor: 1,
    };
    fn refused() -> io::Result<()> {
        Err(io::Error::from_raw_os_error(libc::EINVAL))
    }
    fn taken() -> io::Result<()> {
        Ok(())
    }

    #[test]
    fn a_raw_device_with_write_streams_takes_them() {
        let sys = fake_sysfs(Some(8));
        assert_eq!(max_write_streams(sys.path(), 259, 0), Some(8));
        assert_eq!(
            max_write_streams(sys.path(), 259, 1),
            Some(8),
            "the disk's queue"
        );
        for t in [DISK, PARTITION] {
            let p = detect(Hints::Auto, t, sys.path(), refused);
            assert_eq!(p, HintPath::WriteStreams);
            assert!(p.reaches_device());
        }
    }

    #[test]
    fn a_device_without_write_streams_falls_back_to_rw_hints_then_none() {
        for streams in [Some(0), None] {
            let sys = fake_sysfs(streams);
            assert_eq!(
                detect(Hints::Auto, DISK, sys.path(), taken),
                HintPath::RwHint
            );
            assert_eq!(
                detect(Hints::Auto, DISK, sys.path(), refused),
                HintPath::None
            );
        }
        // An unknown device (no sysfs entry) too.
        let sys = fake_sysfs(Some(8));
        let other = Target::BlockDevice { major: 8, minor: 0 };
        assert_eq!(
            detect(Hints::Auto, other, sys.path(), taken),
            HintPath::RwHint
        );
    }

    #[test]
    fn through_a_file_system_it_is_rw_hint_or_none_and_never_reaches_the_device() {
        let sys = fake_sysfs(Some(8));
        let p = detect(Hints::Auto, Target::FileSystem, sys.path(), taken);
        assert_eq!(p, HintPath::RwHint);
        assert!(
            !p.reaches_device(),
            "mainline NVMe does not map RW hints to FDP"
        );
        let p = detect(Hints::Linux, Target::FileSystem, sys.path(), refused);
        assert_eq!(p, HintPath::None);
        assert!(!p.reaches_device());
        let p = detect(Hints::None, DISK, sys.path(), || panic!("no probe"));
        assert_eq!(p, HintPath::None);
    }

    #[test]
    fn a_directory_is_a_file_system_target() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(Target::of(d.path()).unwrap(), Target::FileSystem);
        assert!(Target::of(&d.path().join("missing")).is_err());
    }
}
