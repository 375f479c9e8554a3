use super::*;
use crate::io::{FileRole, Io, OpenMode};
use placement::{PageKind, WriteCause};
use std::sync::Arc;

fn seam(root: &Path, mutation: Mutation) -> (Arc<PowerLossFiles>, Io) {
    let pl = Arc::new(PowerLossFiles::new(root, CrashOdds::default(), mutation));
    let io = Io::new(None, &Default::default(), Some(pl.clone())).unwrap();
    (pl, io)
}

fn open(io: &Io, path: &Path) -> Arc<IoFile> {
    io.open(
        path,
        OpenMode::CreateNew,
        FileRole::of(FileKind::Collection),
        "f".into(),
    )
    .unwrap()
}

fn write(io: &Io, f: &IoFile, at: u64, bytes: &[u8]) -> crate::Result<()> {
    io.write(f, bytes, at, PageKind::Leaf, 0, WriteCause::Other)
}

/// Every image of `pl` over `seeds`, as (file name → bytes).
fn images(pl: &PowerLossFiles, seeds: std::ops::Range<u64>) -> Vec<BTreeMap<String, Vec<u8>>> {
    seeds
        .map(|seed| {
            let out = tempfile::tempdir().unwrap();
            pl.materialise(seed, out.path()).unwrap();
            let mut files = BTreeMap::new();
            for e in std::fs::read_dir(out.path()).unwrap() {
                let p = e.unwrap().path();
                if p.is_file() {
                    let name = p.file_name().unwrap().to_string_lossy().into_owned();
                    files.insert(name, std::fs::read(&p).unwrap());
                }
            }
            files
        })
        .collect()
}

/// A file synced, its directory synced: every image holds it whole; a second, unsynced write
/// over it is, across seeds, sometimes kept, sometimes lost, sometimes torn at a sector.
#[test]
fn synced_data_survives_and_unsynced_writes_are_kept_dropped_or_torn() {
    let dir = tempfile::tempdir().unwrap();
    let (pl, io) = seam(dir.path(), Mutation::None);
    let f = open(&io, &dir.path().join("a"));
    write(&io, &f, 0, &[1u8; 8192]).unwrap();
    io.sync_all(&f).unwrap();
    io.sync_dir(dir.path()).unwrap();
    for img in images(&pl, 0..20) {
        assert_eq!(img["a"], vec![1u8; 8192]);
    }
    write(&io, &f, 0, &[2u8; 8192]).unwrap();
    let (mut old, mut new, mut torn) = (0, 0, 0);
    for img in images(&pl, 0..200) {
        let a = &img["a"];
        assert_eq!(a.len(), 8192);
        assert!(
            a.chunks(512).all(|s| s.iter().all(|&b| b == s[0])),
            "torn inside a sector"
        );
        match (a.iter().all(|&b| b == 1), a.iter().all(|&b| b == 2)) {
            (true, _) => old += 1,
            (_, true) => new += 1,
            _ => torn += 1,
        }
    }
    assert!(old > 0 && new > 0 && torn > 0, "{old} {new} {torn}");
}

/// A created file's name, a rename and an unlink persist only with their directory's fsync;
/// a file's own fsync does not make its name durable.
#[test]
fn namespace_operations_are_volatile_until_the_directory_is_synced() {
    let dir = tempfile::tempdir().unwrap();
    let (pl, io) = seam(dir.path(), Mutation::None);
    let f = open(&io, &dir.path().join("new"));
    write(&io, &f, 0, b"x").unwrap();
    io.sync_all(&f).unwrap();
    let imgs = images(&pl, 0..50);
    assert!(imgs.iter().any(|i| i.is_empty()), "the name may be lost");
    assert!(imgs.iter().any(|i| i.get("new").is_some_and(|b| b == b"x")));
    io.sync_dir(dir.path()).unwrap();
    io.rename(&f, &dir.path().join("renamed"), "r".into(), None)
        .unwrap();
    let imgs = images(&pl, 0..50);
    assert!(imgs.iter().all(|i| i.len() == 1), "a rename is atomic");
    assert!(imgs.iter().any(|i| i.contains_key("new")));
    assert!(imgs.iter().any(|i| i.contains_key("renamed")));
    io.sync_dir(dir.path()).unwrap();
    assert!(images(&pl, 0..20).iter().all(|i| i["renamed"] == b"x"));
}

/// The crash's operation is submitted and fails; everything after it fails; the images are a
/// function of the seed.
#[test]
fn a_crash_fails_its_operation_and_all_later_ones_and_images_repeat_by_seed() {
    let dir = tempfile::tempdir().unwrap();
    let (pl, io) = seam(dir.path(), Mutation::None);
    let f = open(&io, &dir.path().join("a"));
    io.sync_dir(dir.path()).unwrap();
    pl.crash_after(2);
    write(&io, &f, 0, &[3u8; 4096]).unwrap();
    assert!(
        write(&io, &f, 4096, &[4u8; 4096]).is_err(),
        "the in-flight write"
    );
    assert!(io.sync_all(&f).is_err() && pl.crashed());
    assert!(io.sync_dir(dir.path()).is_err());
    let a = images(&pl, 0..40);
    assert_eq!(a, images(&pl, 0..40));
    assert!(
        a.iter().any(|i| i["a"].len() == 8192),
        "the in-flight write may land"
    );
}

/// The mutations: a metadata file's fsync, or the root directory's, does nothing.
#[test]
fn mutations_drop_the_fsync_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let (pl, io) = seam(dir.path(), Mutation::SkipRootDirFsync);
    let f = open(&io, &dir.path().join("a"));
    io.sync_dir(dir.path()).unwrap();
    assert!(images(&pl, 0..20).iter().all(|i| i.contains_key("a")));
    io.rename(&f, &dir.path().join("b"), "b".into(), None)
        .unwrap();
    io.sync_dir(dir.path()).unwrap();
    assert!(images(&pl, 0..50).iter().any(|i| i.contains_key("a")));
    let (pl, io) = seam(dir.path(), Mutation::SkipMetadataFsync);
    let f = io
        .open(
            &dir.path().join("m"),
            OpenMode::CreateNew,
            FileRole::of(FileKind::Metadata),
            "m".into(),
        )
        .unwrap();
    io.sync_dir(dir.path()).unwrap();
    write(&io, &f, 0, b"meta").unwrap();
    io.sync_all(&f).unwrap();
    assert!(images(&pl, 0..50).iter().any(|i| i["m"].is_empty()));
}

/// A file the program did not create through the seam cannot be opened, renamed or removed
/// through it: the model would not know its state.
#[test]
fn files_made_outside_the_seam_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_pl, io) = seam(dir.path(), Mutation::None);
    let stray = dir.path().join("stray");
    std::fs::write(&stray, b"?").unwrap();
    let err = io
        .open(
            &stray,
            OpenMode::Existing,
            FileRole::of(FileKind::Collection),
            "s".into(),
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("not created through the I/O seam"),
        "{err}"
    );
    assert!(io.remove(&stray, None).is_err());
}

/// A new directory is an entry of its parent: it and its files vanish unless the parent is
/// synced after the mkdir.
#[test]
fn a_new_directory_needs_its_parents_fsync() {
    let dir = tempfile::tempdir().unwrap();
    let (pl, io) = seam(dir.path(), Mutation::None);
    let sub = dir.path().join("journal");
    io.create_dir(&sub).unwrap();
    let f = open(&io, &sub.join("j"));
    write(&io, &f, 0, b"j").unwrap();
    io.sync_all(&f).unwrap();
    io.sync_dir(&sub).unwrap();
    let out = tempfile::tempdir().unwrap();
    let lost = (0..50).any(|seed| {
        let o = out.path().join(seed.to_string());
        pl.materialise(seed, &o).unwrap();
        !o.join("journal/j").exists()
    });
    assert!(lost);
    io.sync_dir(dir.path()).unwrap();
    for seed in 0..20 {
        let o = out.path().join(format!("s{seed}"));
        pl.materialise(seed, &o).unwrap();
        assert_eq!(std::fs::read(o.join("journal/j")).unwrap(), b"j");
    }
}
