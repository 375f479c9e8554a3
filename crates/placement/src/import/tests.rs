use super::blkparse::{BlkparseImport, FileMap};
use super::csv::CsvImport;
use super::{CheckpointRule, ImportError, ImportSummary};
use crate::classify::FileClassifier;
use crate::event::{Event, FileKind};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

const FILES: &str = "file_id,path
0,.
1,collection-0-1.wt
2,index-1-1.wt
3,journal/WiredTigerLog.0000000001
4,WiredTiger.turtle.set
5,WiredTiger.turtle
6,journal/WiredTigerTmplog.0000000002
7,journal/WiredTigerLog.0000000002
8,WiredTiger.wt
9,\"odd,name.wt\"
";

/// A WiredTiger-like run: a journal file, two tables, two checkpoints (each: data-file syncs,
/// the metadata file, the turtle file renamed into place), a journal file pre-allocated under a
/// temporary name and renamed, the old one removed.
const EVENTS: &str = "time_ns,op,file_id,offset,len
1000000000,open,1,66,0
1000000100,open,2,66,0
1000000200,open,3,66,0
1000000300,write,3,0,4096
1000000400,write,1,0,32768
1000000500,write,1,32768,32768
1000000600,write,2,0,4096
1000000700,write,3,4096,8192
3000000000,fdatasync,1,0,0
3000000100,fdatasync,2,0,0
3000000200,write,8,0,4096
3000000300,fdatasync,8,0,0
3000000400,open,4,578,0
3000000500,write,4,0,1024
3000000600,fsync,4,0,0
3000000700,close,4,0,0
3000000800,rename,4,5,0
3000000900,fsync,0,0,0
3500000000,open,6,66,0
3500000100,write,6,0,4096
3500000200,rename,6,7,0
3500000300,write,6,4096,4096
3500000400,unlink,3,0,0
3500000500,write,1,65536,32768
3500000600,write,1,0,-28
3500000700,mmapw,2,0,4096
3500000800,falloc,1,0,1048576
6000000000,fdatasync,1,0,0
6000000100,fdatasync,2,0,0
6000000200,fdatasync,8,0,0
6000000300,open,4,578,0
6000000400,write,4,0,1024
6000000500,rename,4,5,0
6000000600,trunc,1,0,65536
6000000700,write,9,0,512
";

fn write_tmp(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::File::create(&path)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    path
}

fn import_csv(
    events: &str,
    files: &str,
    rule: CheckpointRule,
) -> Result<(Vec<Event>, ImportSummary), ImportError> {
    let dir = tempfile::tempdir().unwrap();
    let (e, f) = (
        write_tmp(&dir, "events.csv", events),
        write_tmp(&dir, "files.csv", files),
    );
    let mut out = Vec::new();
    let import = CsvImport {
        classifier: FileClassifier::default(),
        checkpoints: rule,
    };
    let summary = import.run(&e, &f, |ev| out.push(ev))?;
    Ok((out, summary))
}

/// Bytes written per file name (the name each file has at the end; files that had the same
/// name one after the other add up).
fn bytes_by_file(events: &[Event]) -> BTreeMap<String, u64> {
    let mut names = BTreeMap::new();
    let mut bytes: BTreeMap<u32, u64> = BTreeMap::new();
    for e in events {
        match e {
            Event::FileCreate { file, name, .. } | Event::FileRename { file, name, .. } => {
                names.insert(*file, name.clone());
            }
            Event::Write(w) => *bytes.entry(w.file).or_default() += w.len as u64,
            _ => {}
        }
    }
    let mut by_name = BTreeMap::new();
    for (f, b) in bytes {
        *by_name.entry(names[&f].clone()).or_default() += b;
    }
    by_name
}

#[test]
fn a_wiredtiger_like_csv_becomes_files_writes_and_checkpoints() {
    let (events, s) = import_csv(
        EVENTS,
        FILES,
        CheckpointRule::Gap {
            quiet_ns: 2_000_000_000,
        },
    )
    .unwrap();
    assert_eq!(s.events, events.len() as u64);
    assert_eq!(s.lines, 35);
    assert_eq!(s.checkpoints, 2);
    assert_eq!((s.failed_writes, s.mmaps, s.fallocates), (1, 1, 1));
    assert_eq!(
        s.implicit_opens, 2,
        "WiredTiger.wt and the odd name were open before"
    );
    // The removed turtle is the one the second rename replaced; the journal file is unlinked.
    assert_eq!((s.renames, s.removes), (3, 2));
    assert_eq!(s.truncates, 1);
    let bytes = bytes_by_file(&events);
    let expect: BTreeMap<String, u64> = [
        ("collection-0-1.wt", 3 * 32768),
        ("index-1-1.wt", 4096),
        ("journal/WiredTigerLog.0000000001", 4096 + 8192),
        // Written under its temporary name and, through the same descriptor, after the rename.
        ("journal/WiredTigerLog.0000000002", 8192),
        ("WiredTiger.wt", 4096),
        // Two turtle files, one after the other.
        ("WiredTiger.turtle", 1024 + 1024),
        ("odd,name.wt", 512),
    ]
    .into_iter()
    .map(|(n, b)| (n.to_string(), b))
    .collect();
    assert_eq!(bytes, expect);
    let kinds: BTreeMap<String, FileKind> = events
        .iter()
        .filter_map(|e| match e {
            Event::FileCreate { name, kind, .. } => Some((name.clone(), *kind)),
            _ => None,
        })
        .collect();
    assert_eq!(kinds["collection-0-1.wt"], FileKind::Collection);
    assert_eq!(kinds["index-1-1.wt"], FileKind::Index);
    assert_eq!(
        kinds["journal/WiredTigerTmplog.0000000002"],
        FileKind::Journal
    );
    assert_eq!(kinds["WiredTiger.turtle.set"], FileKind::Metadata);
    // Checkpoints: begin at the first data-file sync after the quiet gap, commit at the burst's
    // last one; times rebased to the first line.
    let marks: Vec<(bool, u64)> = events
        .iter()
        .filter_map(|e| match e {
            Event::CheckpointBegin { time_ns, .. } => Some((true, *time_ns)),
            Event::CheckpointCommit { time_ns, .. } => Some((false, *time_ns)),
            _ => None,
        })
        .collect();
    assert_eq!(
        marks,
        [
            // The metadata file's sync is not a tree file's.
            (true, 2_000_000_000),
            (false, 2_000_000_100),
            (true, 5_000_000_000),
            (false, 5_000_000_100)
        ]
    );
    let trunc = events.iter().find_map(|e| match e {
        Event::FileTruncate { len, .. } => Some(*len),
        _ => None,
    });
    assert_eq!(trunc, Some(65536));
}

#[test]
fn the_turtle_rule_commits_at_the_turtle_rename_and_none_finds_nothing() {
    let (events, s) = import_csv(EVENTS, FILES, CheckpointRule::Turtle).unwrap();
    assert_eq!(s.checkpoints, 2);
    let commits: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            Event::CheckpointCommit { time_ns, .. } => Some(*time_ns),
            _ => None,
        })
        .collect();
    assert_eq!(commits, [2_000_000_800, 5_000_000_500]);
    let (_, s) = import_csv(EVENTS, FILES, CheckpointRule::None).unwrap();
    assert_eq!(s.checkpoints, 0);
    // WiredTiger rewrites the turtle when it creates a database and when it closes, with no
    // tree-file sync before: not checkpoints.
    let events = "time_ns,op,file_id,offset,len
1,rename,4,5,0
2,fdatasync,8,0,0
3,rename,4,5,0
";
    let (_, s) = import_csv(events, FILES, CheckpointRule::Turtle).unwrap();
    assert_eq!(s.checkpoints, 0);
}

#[test]
fn bad_csv_lines_are_refused_with_their_line_numbers() {
    let ok_files = FILES;
    let header = "time_ns,op,file_id,offset,len\n";
    let cases: [(String, &str, &str, u64, &str); 8] = [
        (
            "time,op\n".into(),
            ok_files,
            "events.csv",
            1,
            "expected the header",
        ),
        (
            format!("{header}1,open,1,0,0\n2,poke,1,0,0\n"),
            ok_files,
            "events.csv",
            3,
            "unknown op",
        ),
        (
            format!("{header}1,write,42,0,10\n"),
            ok_files,
            "events.csv",
            2,
            "not in the file table",
        ),
        (
            format!("{header}1,write,1,-5,10\n"),
            ok_files,
            "events.csv",
            2,
            "offset -5 is negative",
        ),
        (
            format!("{header}1,write,1,0\n"),
            ok_files,
            "events.csv",
            2,
            "expected 5 fields",
        ),
        (
            format!("{header}\n\nx,write,1,0,1\n"),
            ok_files,
            "events.csv",
            4,
            "time_ns",
        ),
        (
            format!("{header}1,rename,1,77,0\n"),
            ok_files,
            "events.csv",
            2,
            "destination",
        ),
        (
            header.into(),
            "file_id,path\n1,a.wt\n1,b.wt\n",
            "files.csv",
            3,
            "given twice",
        ),
    ];
    for (events, files, input, line, needle) in cases {
        let e = import_csv(&events, files, CheckpointRule::None).unwrap_err();
        assert!(
            e.input.ends_with(input) && e.line == line && e.message.contains(needle),
            "{events:?}: {e}"
        );
        assert!(e.to_string().contains(&format!("line {line}:")), "{e}");
    }
}

#[test]
fn times_that_go_backwards_keep_file_order_and_are_counted() {
    let events = "time_ns,op,file_id,offset,len
100,write,1,0,4096
90,write,1,4096,4096
120,write,1,8192,4096
";
    let (out, s) = import_csv(events, FILES, CheckpointRule::None).unwrap();
    assert_eq!(s.reordered_times, 1);
    let times: Vec<u64> = out.iter().map(Event::time_ns).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
}

const BLKPARSE: &str = "  8,0    3        1     0.000000000   697  A   W 2048 + 8 <- (8,1) 0
  8,0    3        2     0.000000785   697  Q   W 2048 + 8 [kworker/3:1]
  8,0    3        3     0.000006555   697  G   W 2048 + 8 [kworker/3:1]
  8,0    3        4     0.000008220   697  P   N [kworker/3:1]
  8,0    3        5     0.000012900   697  D  WS 2048 + 16 [kworker/3:1]
  8,0    1        1     0.005283540     0  C  WS 2048 + 16 [0]
  8,0    0        0     0.006000000     0  m   N cfq697 insert_request
  8,0    3        6     0.010000000   697  D   R 4096 + 8 [mongod]
  8,0    3        7     1.500000001   697  D FWFS 8 + 8 [jbd2/vda1-8]
  8,0    3        8     2.000000000   697  D   D 2048 + 8 [fstrim]

CPU0 (8,0):
 Reads Queued:           0,        0KiB\t Writes Queued:           1,        4KiB
Total (8,0):
 Reads Queued:           0,        0KiB\t Writes Queued:           1,        4KiB
";

fn import_blk(
    text: &str,
    map: Option<&str>,
    device: Option<&str>,
) -> Result<(Vec<Event>, ImportSummary), ImportError> {
    let file_map = map
        .map(|m| FileMap::parse(m.as_bytes(), "map.csv"))
        .transpose()?;
    let import = BlkparseImport {
        file_map,
        classifier: FileClassifier::default(),
        action: "D".into(),
        device: device.map(str::to_string),
    };
    let mut out = Vec::new();
    let s = import.run(text.as_bytes(), "trace.txt", |e| out.push(e))?;
    Ok((out, s))
}

#[test]
fn blkparse_writes_and_discards_of_one_action_become_events() {
    let (events, s) = import_blk(BLKPARSE, None, None).unwrap();
    assert_eq!(
        (s.writes, s.write_bytes, s.discards),
        (2, 16 * 512 + 8 * 512, 1)
    );
    assert_eq!(s.files, 1);
    let w: Vec<(u64, u32, u64)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Write(w) => Some((w.offset, w.len, w.time_ns)),
            _ => None,
        })
        .collect();
    // Times from the first taken line; the preflush-write counts as a write.
    assert_eq!(
        w,
        [(2048 * 512, 16 * 512, 0), (8 * 512, 8 * 512, 1_499_987_101)]
    );
    assert!(matches!(
        events.last(),
        Some(Event::Free {
            offset: 1048576,
            len: 4096,
            ..
        })
    ));
}

#[test]
fn a_file_map_splits_writes_between_files_and_the_unmapped_space() {
    let map = "path,first_lba,last_lba
collection-0-1.wt,2048,2055
journal/WiredTigerLog.0000000001,2056,2059
collection-0-1.wt,100,107
";
    let (events, s) = import_blk(BLKPARSE, Some(map), None).unwrap();
    // 2048 + 16 covers the collection's first extent (8 sectors), 4 sectors of the journal,
    // then 4 unmapped ones; the preflush write at sector 8 is unmapped.
    let mut got: Vec<(String, u64, u32)> = Vec::new();
    let mut names = BTreeMap::new();
    for e in &events {
        match e {
            Event::FileCreate {
                file, name, kind, ..
            } => {
                names.insert(*file, (name.clone(), *kind));
            }
            Event::Write(w) => got.push((names[&w.file].0.clone(), w.offset, w.len)),
            _ => {}
        }
    }
    assert_eq!(
        got,
        [
            // The map's first line is the file's first extent, whatever its sector.
            ("collection-0-1.wt".to_string(), 0, 8 * 512),
            ("journal/WiredTigerLog.0000000001".to_string(), 0, 4 * 512),
            ("(unmapped)".to_string(), 2060 * 512, 4 * 512),
            ("(unmapped)".to_string(), 8 * 512, 8 * 512),
        ]
    );
    assert_eq!(s.writes, 4);
    let kinds: Vec<FileKind> = names.values().map(|(_, k)| *k).collect();
    assert!(kinds.contains(&FileKind::Journal) && kinds.contains(&FileKind::Collection));
}

#[test]
fn bad_blkparse_input_is_refused_with_its_line_number() {
    let e = import_blk("  8,0 1 1 0.5 9 D W 8 + 8 [x]\ngarbage here\n", None, None).unwrap_err();
    assert_eq!(e.line, 2, "{e}");
    let e = import_blk("  8,0 1 1 0.5 9 D W 8 [x]\n", None, None).unwrap_err();
    assert!(e.line == 1 && e.message.contains("sector range"), "{e}");
    let two = "  8,0 1 1 0.5 9 D W 8 + 8 [x]\n  8,16 1 2 0.6 9 D W 8 + 8 [x]\n";
    let e = import_blk(two, None, None).unwrap_err();
    assert!(e.line == 2 && e.message.contains("--device"), "{e}");
    let (_, s) = import_blk(two, None, Some("8,16")).unwrap();
    assert_eq!(s.writes, 1);
    let e = FileMap::parse("path,first_lba,last_lba\na,0,9\nb,5,20\n".as_bytes(), "m").unwrap_err();
    assert!(e.line == 3 && e.message.contains("overlap"), "{e}");
    let e = FileMap::parse("path,first_lba,last_lba\na,9,0\n".as_bytes(), "m").unwrap_err();
    assert!(e.line == 2 && e.message.contains("before"), "{e}");
}

#[test]
fn checkpoint_rules_parse() {
    assert_eq!(
        CheckpointRule::parse("gap").unwrap(),
        CheckpointRule::Gap {
            quiet_ns: 2_000_000_000
        }
    );
    assert_eq!(
        CheckpointRule::parse("gap:0.5s").unwrap(),
        CheckpointRule::Gap {
            quiet_ns: 500_000_000
        }
    );
    assert_eq!(
        CheckpointRule::parse("turtle").unwrap(),
        CheckpointRule::Turtle
    );
    assert!(CheckpointRule::parse("gap:-1").is_err());
    assert!(CheckpointRule::parse("gap:x").is_err());
    assert!(CheckpointRule::parse("often").is_err());
}
