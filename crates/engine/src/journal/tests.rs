use super::format::{file_name, padded_len, FILE_HEADER_SIZE, RECORD_HEADER_SIZE};
use super::test_support::{config, journal_dir, replay_all};
use super::*;
use crate::io::Io;
use placement::CollectingObserver;
use placement::{Event, FileId, FileKind, PageKind};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::time::Duration;

fn no_events() -> Arc<Io> {
    Arc::new(Io::quiet())
}

/// A mix of payloads: empty, tiny, around the compression threshold, compressible text and
/// random bytes.
fn payloads(rng: &mut StdRng, count: usize, max_len: usize) -> Vec<Vec<u8>> {
    (0..count)
        .map(|i| {
            let len = match i % 5 {
                0 => i % 3,
                1 => 127 + i % 3,
                _ => rng.gen_range(0..max_len),
            };
            if i % 2 == 0 {
                (0..len).map(|_| rng.gen()).collect()
            } else {
                format!(
                    "record {i} {}",
                    "lorem ipsum dolor sit amet ".repeat(len / 27 + 1)
                )
                .into_bytes()[..len]
                    .to_vec()
            }
        })
        .collect()
}

/// Appends all payloads, syncs, closes; returns the LSNs.
fn write_journal(cfg: JournalConfig, payloads: &[Vec<u8>]) -> Vec<Lsn> {
    let j = Journal::open(cfg, no_events()).unwrap();
    let lsns = payloads.iter().map(|p| j.append(p).unwrap()).collect();
    j.sync_all().unwrap();
    j.close().unwrap();
    lsns
}

fn disk_len(payload_len: usize) -> u64 {
    padded_len((RECORD_HEADER_SIZE + payload_len) as u64)
}

#[test]
fn compressor_names_parse_and_print() {
    for c in [
        JournalCompressor::None,
        JournalCompressor::Snappy,
        JournalCompressor::Zstd,
    ] {
        assert_eq!(c.to_string().parse::<JournalCompressor>().unwrap(), c);
        assert_eq!(
            c.to_string()
                .to_uppercase()
                .parse::<JournalCompressor>()
                .unwrap(),
            c
        );
    }
    assert!(matches!(
        "zlib".parse::<JournalCompressor>(),
        Err(Error::Config(_))
    ));
}

#[test]
fn config_limits_are_enforced() {
    let (_tmp, dir) = journal_dir();
    for file_max in [MIN_FILE_MAX - 1, MAX_FILE_MAX + 1] {
        let cfg = config(&dir, file_max, JournalCompressor::None);
        assert!(matches!(
            Journal::open(cfg, no_events()),
            Err(Error::Config(_))
        ));
    }
    assert!(
        !dir.exists(),
        "a rejected configuration must not touch the disk"
    );
    let d = JournalConfig::default();
    assert_eq!(
        (d.file_max, d.commit_interval),
        (100 << 20, Duration::from_millis(100))
    );
    assert_eq!(
        (d.compressor, d.preallocate),
        (JournalCompressor::Snappy, true)
    );
}

#[test]
fn round_trip_with_each_compressor() {
    for compressor in [
        JournalCompressor::None,
        JournalCompressor::Snappy,
        JournalCompressor::Zstd,
    ] {
        let (_tmp, dir) = journal_dir();
        let mut rng = StdRng::seed_from_u64(1);
        let mut recs = payloads(&mut rng, 60, 6000);
        recs.push(vec![7u8; 50_000]);
        let j = Journal::open(config(&dir, 1 << 20, compressor), no_events()).unwrap();
        let lsns: Vec<Lsn> = recs.iter().map(|p| j.append(p).unwrap()).collect();
        j.sync_all().unwrap();
        let stats = j.stats();
        j.close().unwrap();
        let (got, outcome) = replay_all(&dir, Lsn::default());
        assert_eq!(got.len(), recs.len(), "{compressor}");
        for ((lsn, p), (want_lsn, want)) in got.iter().zip(lsns.iter().zip(&recs)) {
            assert_eq!((lsn, p), (want_lsn, want), "{compressor}");
        }
        assert_eq!(outcome.records, recs.len() as u64);
        assert_eq!(outcome.torn_tail, None);
        assert_eq!(stats.records, recs.len() as u64);
        let logical: u64 = recs.iter().map(|p| p.len() as u64).sum();
        assert_eq!(stats.bytes_appended, logical);
        let plain: u64 = recs.iter().map(|p| disk_len(p.len())).sum();
        let on_disk = stats.bytes_written - FILE_HEADER_SIZE as u64;
        if compressor == JournalCompressor::None {
            assert_eq!(on_disk, plain);
        } else {
            assert!(
                on_disk < plain - 40_000,
                "{compressor}: {on_disk} vs {plain}"
            );
        }
    }
}

#[test]
fn lsns_increase_and_next_lsn_is_a_lower_bound() {
    let (_tmp, dir) = journal_dir();
    let j = Journal::open(
        config(&dir, 64 << 10, JournalCompressor::Snappy),
        no_events(),
    )
    .unwrap();
    let first = j.next_lsn();
    assert_eq!(
        first,
        Lsn {
            file: 1,
            offset: FILE_HEADER_SIZE
        }
    );
    let mut rng = StdRng::seed_from_u64(2);
    let mut prev: Option<Lsn> = None;
    for p in payloads(&mut rng, 300, 3000) {
        let before = j.next_lsn();
        let lsn = j.append(&p).unwrap();
        assert!(lsn >= before);
        if lsn.file == before.file {
            assert_eq!(
                lsn, before,
                "in the same file the record lands where next_lsn said"
            );
        }
        assert!(prev.is_none_or(|q| q < lsn));
        assert!(j.next_lsn() > lsn);
        prev = Some(lsn);
    }
    assert!(prev.unwrap().file > 1, "the test should cross files");
}

#[test]
fn records_switch_files_and_never_span_them() {
    let (_tmp, dir) = journal_dir();
    let file_max = 64 << 10;
    let mut rng = StdRng::seed_from_u64(3);
    let mut recs = payloads(&mut rng, 150, 9000);
    // Larger than a file: it gets a file of its own.
    let big: Vec<u8> = (0..200_000).map(|_| rng.gen()).collect();
    recs.insert(70, big);
    let lsns = write_journal(config(&dir, file_max, JournalCompressor::None), &recs);

    let files = replay::list_files(&dir).unwrap();
    assert!(files.len() >= 6, "{files:?}");
    assert_eq!(files, (1..=files.len() as u32).collect::<Vec<_>>());
    let big_lsn = lsns[70];
    assert_eq!(big_lsn.offset, FILE_HEADER_SIZE);
    assert_eq!(
        lsns[71],
        Lsn {
            file: big_lsn.file + 1,
            offset: FILE_HEADER_SIZE
        }
    );
    for n in files {
        let len = std::fs::metadata(dir.join(file_name(n))).unwrap().len();
        let want = if n == big_lsn.file {
            FILE_HEADER_SIZE as u64 + disk_len(200_000)
        } else {
            file_max
        };
        assert_eq!(len, want, "file {n} is preallocated to its capacity");
    }
    for (lsn, p) in lsns.iter().zip(&recs) {
        let cap = if lsn.file == big_lsn.file {
            u64::MAX
        } else {
            file_max
        };
        assert!(
            lsn.offset as u64 + disk_len(p.len()) <= cap,
            "{lsn} spans files"
        );
    }
    let (got, outcome) = replay_all(&dir, Lsn::default());
    assert_eq!(got.iter().map(|(l, _)| *l).collect::<Vec<_>>(), lsns);
    assert!(got.iter().map(|(_, p)| p).eq(recs.iter()));
    assert_eq!(outcome.torn_tail, None);
    let last = lsns.last().unwrap();
    assert_eq!(
        outcome.end,
        Lsn {
            file: last.file,
            offset: last.offset + disk_len(recs.last().unwrap().len()) as u32
        }
    );
}

#[test]
fn replay_from_a_middle_lsn() {
    let (_tmp, dir) = journal_dir();
    let mut rng = StdRng::seed_from_u64(4);
    let recs = payloads(&mut rng, 120, 4000);
    let lsns = write_journal(config(&dir, 64 << 10, JournalCompressor::Snappy), &recs);
    for k in [0, 1, 37, 80, 119] {
        let (got, outcome) = replay_all(&dir, lsns[k]);
        assert_eq!(got.iter().map(|(l, _)| *l).collect::<Vec<_>>(), lsns[k..]);
        assert!(got.iter().map(|(_, p)| p).eq(recs[k..].iter()));
        assert_eq!(outcome.records, (recs.len() - k) as u64);
    }
    // Past the end: nothing, but the end is still reported.
    let (got, outcome) = replay_all(
        &dir,
        Lsn {
            file: 99,
            offset: 0,
        },
    );
    assert!(got.is_empty());
    assert_eq!(outcome, ReplayOutcome::default());
    let (got, _) = replay_all(&dir.join("missing"), Lsn::default());
    assert!(got.is_empty());
}

/// Where each record ends on disk (compressed records are shorter than their payload), read
/// from the length word of its header.
fn record_ends(dir: &Path, lsns: &[Lsn]) -> Vec<u64> {
    let mut files: HashMap<u32, Vec<u8>> = HashMap::new();
    lsns.iter()
        .map(|l| {
            let bytes = files
                .entry(l.file)
                .or_insert_with(|| std::fs::read(dir.join(file_name(l.file))).unwrap());
            let at = l.offset as usize;
            let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
            at as u64 + padded_len(len as u64)
        })
        .collect()
}

/// How many records survive when file `file` is cut at byte `cut`: those of earlier files and
/// those of this file that end at or before the cut; all of them if the cut only removes the
/// never written (zero) end of the file.
fn whole_before(lsns: &[Lsn], ends: &[u64], file: u32, cut: u64) -> usize {
    let file_end = lsns
        .iter()
        .zip(ends)
        .filter(|(l, _)| l.file == file)
        .map(|(_, &e)| e)
        .max();
    if cut >= file_end.unwrap_or(FILE_HEADER_SIZE as u64) {
        return lsns.len();
    }
    lsns.iter()
        .zip(ends)
        .take_while(|(l, &end)| l.file < file || (l.file == file && end <= cut))
        .count()
}

#[test]
fn a_file_cut_at_every_byte_replays_exactly_the_whole_records_before_the_cut() {
    let (_tmp, dir) = journal_dir();
    let mut rng = StdRng::seed_from_u64(5);
    let recs = payloads(&mut rng, 14, 700);
    let mut cfg = config(&dir, 64 << 10, JournalCompressor::Snappy);
    cfg.preallocate = false;
    let lsns = write_journal(cfg, &recs);
    let ends = record_ends(&dir, &lsns);
    let path = dir.join(file_name(1));
    let original = std::fs::read(&path).unwrap();
    for cut in 0..=original.len() {
        std::fs::write(&path, &original[..cut]).unwrap();
        let (got, outcome) = replay_all(&dir, Lsn::default());
        let want = whole_before(&lsns, &ends, 1, cut as u64);
        assert_eq!(got.len(), want, "cut at {cut}");
        assert!(got.iter().map(|(_, p)| p).eq(recs[..want].iter()));
        let at_boundary = cut == original.len() || lsns.iter().any(|l| l.offset as usize == cut);
        if at_boundary {
            assert_eq!(outcome.torn_tail, None, "cut at {cut}");
        }
        if cut < FILE_HEADER_SIZE as usize {
            assert!(
                outcome.torn_tail.unwrap().contains("header"),
                "cut at {cut}"
            );
        }
    }
}

#[test]
fn random_cuts_in_a_multi_file_journal_stop_at_the_cut() {
    let (_tmp, dir) = journal_dir();
    let mut rng = StdRng::seed_from_u64(6);
    let recs = payloads(&mut rng, 150, 5000);
    let lsns = write_journal(config(&dir, 64 << 10, JournalCompressor::Zstd), &recs);
    let ends = record_ends(&dir, &lsns);
    let files = replay::list_files(&dir).unwrap();
    assert!(files.len() >= 3);
    let originals: HashMap<u32, Vec<u8>> = files
        .iter()
        .map(|&n| (n, std::fs::read(dir.join(file_name(n))).unwrap()))
        .collect();
    for _ in 0..150 {
        let n = files[rng.gen_range(0..files.len())];
        let original = &originals[&n];
        let cut = rng.gen_range(0..original.len());
        let path = dir.join(file_name(n));
        std::fs::write(&path, &original[..cut]).unwrap();
        let (got, _) = replay_all(&dir, Lsn::default());
        let want = whole_before(&lsns, &ends, n, cut as u64);
        assert_eq!(got.len(), want, "file {n} cut at {cut}");
        assert!(got.iter().map(|(_, p)| p).eq(recs[..want].iter()));
        std::fs::write(&path, original).unwrap();
    }
}

#[test]
fn a_flipped_byte_ends_the_log_before_its_record() {
    let (_tmp, dir) = journal_dir();
    let mut rng = StdRng::seed_from_u64(7);
    let recs = payloads(&mut rng, 40, 3000);
    let lsns = write_journal(config(&dir, 1 << 20, JournalCompressor::Snappy), &recs);
    let ends = record_ends(&dir, &lsns);
    let path = dir.join(file_name(1));
    let original = std::fs::read(&path).unwrap();
    for (k, (lsn, &end)) in lsns.iter().zip(&ends).enumerate() {
        for _ in 0..3 {
            let at = rng.gen_range(lsn.offset as usize..end as usize);
            let mut bytes = original.clone();
            bytes[at] ^= 1 << rng.gen_range(0..8);
            std::fs::write(&path, &bytes).unwrap();
            let (got, outcome) = replay_all(&dir, Lsn::default());
            assert_eq!(got.len(), k, "flip at {at} in record {k}");
            assert!(outcome
                .torn_tail
                .unwrap()
                .contains("FlashdocLog.0000000001"));
        }
    }
    let mut bytes = original.clone();
    bytes[20] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let (got, outcome) = replay_all(&dir, Lsn::default());
    assert!(got.is_empty());
    assert!(outcome.torn_tail.unwrap().contains("header"));
}

#[test]
fn a_torn_tail_is_the_end_and_the_next_session_starts_a_fresh_file() {
    let (_tmp, dir) = journal_dir();
    let cfg = config(&dir, 64 << 10, JournalCompressor::None);
    let first = vec![b"one".to_vec(), vec![2u8; 300], vec![3u8; 500]];
    let lsns = write_journal(cfg.clone(), &first);
    // Tear the last record: its last 128-byte unit never reached the disk.
    let path = dir.join(file_name(1));
    let mut bytes = std::fs::read(&path).unwrap();
    let end = lsns[2].offset as usize + disk_len(500) as usize;
    bytes[end - 128..end].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    let (got, outcome) = replay_all(&dir, Lsn::default());
    assert_eq!(got.len(), 2);
    assert!(outcome.torn_tail.as_deref().unwrap().contains("checksum"));
    assert_eq!(outcome.end, lsns[2]);

    // The next session recovers those two records, then logs in a new file.
    let j = Journal::open(cfg.clone(), no_events()).unwrap();
    assert_eq!(
        j.next_lsn(),
        Lsn {
            file: 2,
            offset: FILE_HEADER_SIZE
        }
    );
    let four = j.append(b"four").unwrap();
    j.sync_to(four).unwrap();
    drop(j);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "the old file is never written again"
    );
    let (got, outcome) = replay_all(&dir, Lsn::default());
    let got: Vec<&[u8]> = got.iter().map(|(_, p)| p.as_slice()).collect();
    assert_eq!(got, [&first[0][..], &first[1][..], b"four"]);
    assert_eq!(outcome.torn_tail, None);
    assert_eq!(outcome.skipped_tails.len(), 1);

    // A session whose first file was left without a header (crash while creating it) is
    // stepped over as well.
    std::fs::write(dir.join(file_name(3)), vec![0u8; 4096]).unwrap();
    let j = Journal::open(cfg, no_events()).unwrap();
    assert_eq!(j.next_lsn().file, 4);
    j.append(b"five").unwrap();
    j.close().unwrap();
    let (got, outcome) = replay_all(&dir, Lsn::default());
    assert_eq!(got.len(), 4);
    assert_eq!(got[3].1, b"five");
    assert_eq!(outcome.skipped_tails.len(), 2);
}

#[test]
fn a_hole_inside_one_session_is_not_stepped_over() {
    let (_tmp, dir) = journal_dir();
    let mut rng = StdRng::seed_from_u64(8);
    let recs = payloads(&mut rng, 150, 5000);
    let lsns = write_journal(config(&dir, 64 << 10, JournalCompressor::None), &recs);
    assert!(lsns.last().unwrap().file >= 3);
    std::fs::remove_file(dir.join(file_name(2))).unwrap();
    let (got, outcome) = replay_all(&dir, Lsn::default());
    assert_eq!(got.len(), lsns.iter().filter(|l| l.file == 1).count());
    let why = outcome.torn_tail.unwrap();
    assert!(why.contains("FlashdocLog.0000000002 is missing"), "{why}");
}

#[test]
fn remove_before_deletes_only_whole_older_files() {
    let (_tmp, dir) = journal_dir();
    let obs = Arc::new(CollectingObserver::new());
    let events = Arc::new(Io::observed(obs.clone()));
    // A file from an earlier session.
    write_journal(
        config(&dir, 64 << 10, JournalCompressor::None),
        &[b"old".to_vec()],
    );
    let j = Journal::open(config(&dir, 64 << 10, JournalCompressor::None), events).unwrap();
    let lsns: Vec<Lsn> = (0..40)
        .map(|i| j.append(&vec![i as u8; 5000]).unwrap())
        .collect();
    j.sync_all().unwrap();
    let checkpoint = lsns[25];
    assert!(checkpoint.file >= 4 && checkpoint.offset > FILE_HEADER_SIZE);
    j.remove_before(checkpoint).unwrap();
    let files = replay::list_files(&dir).unwrap();
    assert_eq!(files.first(), Some(&checkpoint.file));
    assert_eq!(files.last(), Some(&lsns.last().unwrap().file));
    let removed = (checkpoint.file - 1) as u64;
    assert_eq!(j.stats().files_removed, removed);
    let removes = obs
        .events()
        .iter()
        .filter(|e| matches!(e, Event::FileRemove { .. }))
        .count();
    assert_eq!(removes as u64, removed);
    let (got, _) = replay_all(&dir, checkpoint);
    assert_eq!(got.iter().map(|(l, _)| *l).collect::<Vec<_>>(), lsns[25..]);
    // A position beyond what is durable removes nothing the flusher may still write.
    j.remove_before(Lsn {
        file: 1000,
        offset: 0,
    })
    .unwrap();
    assert!(dir.join(file_name(lsns.last().unwrap().file)).exists());
}

#[test]
fn concurrent_appends_with_sync_to_are_durable_and_replay_in_lsn_order() {
    let (_tmp, dir) = journal_dir();
    let j = Journal::open(
        config(&dir, 64 << 10, JournalCompressor::Snappy),
        no_events(),
    )
    .unwrap();
    let threads: Vec<_> = (0..4u8)
        .map(|t| {
            let j = Arc::clone(&j);
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(t as u64);
                let mut mine = Vec::new();
                for i in 0..400u32 {
                    let mut p = vec![t];
                    p.extend_from_slice(&i.to_le_bytes());
                    let len = rng.gen_range(0..900);
                    p.extend((0..len).map(|_| rng.gen::<u8>()));
                    let lsn = j.append(&p).unwrap();
                    if i % 10 == 0 {
                        j.sync_to(lsn).unwrap();
                        // j:true means on disk now, before close: replay must see it.
                        if i % 100 == 0 {
                            let mut seen = false;
                            replay(j.dir(), lsn, |l, _| {
                                seen |= l == lsn;
                                Ok(())
                            })
                            .unwrap();
                            assert!(seen, "{lsn} was acknowledged but is not on disk");
                        }
                    }
                    j.throttle();
                    mine.push((lsn, p));
                }
                mine
            })
        })
        .collect();
    let mut all: Vec<(Lsn, Vec<u8>)> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    j.close().unwrap();
    all.sort();
    let (got, outcome) = replay_all(&dir, Lsn::default());
    assert_eq!(outcome.records, 1600);
    assert_eq!(got, all);
    assert!(got.windows(2).all(|w| w[0].0 < w[1].0));
    let stats = j.stats();
    assert!(stats.syncs >= 2 && stats.current_file >= 2, "{stats:?}");
}

#[test]
fn the_timer_makes_records_durable_without_a_sync_request() {
    let (_tmp, dir) = journal_dir();
    let mut cfg = config(&dir, 64 << 10, JournalCompressor::None);
    cfg.commit_interval = Duration::from_millis(10);
    let j = Journal::open(cfg, no_events()).unwrap();
    let lsn = j.append(b"lazy").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let (got, _) = replay_all(&dir, Lsn::default());
        if got == [(lsn, b"lazy".to_vec())] {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the flusher never wrote the record"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    j.close().unwrap();
    j.close().unwrap();
    assert!(matches!(j.append(b"late"), Err(Error::Closed(_))));
    j.sync_all().unwrap();
}

#[test]
fn events_describe_file_creation_writes_and_removal() {
    let (_tmp, dir) = journal_dir();
    let obs = Arc::new(CollectingObserver::new());
    let events = Arc::new(Io::observed(obs.clone()));
    let j = Journal::open(config(&dir, 64 << 10, JournalCompressor::None), events).unwrap();
    for i in 0..30u8 {
        j.append(&[i; 4000]).unwrap();
    }
    j.sync_all().unwrap();
    j.remove_before(j.next_lsn()).unwrap();
    j.close().unwrap();
    let events = obs.events();
    let created: Vec<(FileId, String)> = events
        .iter()
        .filter_map(|e| match e {
            Event::FileCreate {
                file,
                kind: FileKind::Journal,
                name,
                ..
            } => Some((*file, name.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(created.len() as u64, j.stats().files_created);
    assert_eq!(created[0].1, "journal/FlashdocLog.0000000001");
    assert_eq!(created[1].1, "journal/FlashdocLog.0000000002");
    let mut written: HashMap<FileId, u64> = HashMap::new();
    for e in &events {
        if let Event::Write(w) = e {
            assert_eq!(
                (w.file_kind, w.page_kind, w.table, w.stream, w.id_index),
                (FileKind::Journal, PageKind::Log, 0, 0, false)
            );
            let end = written.entry(w.file).or_insert(0);
            assert_eq!(w.offset, *end, "journal writes are sequential appends");
            *end += w.len as u64;
        }
    }
    assert_eq!(written.values().sum::<u64>(), j.stats().bytes_written);
    let removed: Vec<FileId> = events
        .iter()
        .filter_map(|e| match e {
            Event::FileRemove { file, .. } => Some(*file),
            _ => None,
        })
        .collect();
    assert_eq!(
        removed,
        created[..created.len() - 1]
            .iter()
            .map(|c| c.0)
            .collect::<Vec<_>>()
    );
}

const DISK_FULL_CHILD: &str = "FLASHDOC_JOURNAL_DISK_FULL_CHILD";

/// A full disk, made cheaply: a child process runs with a 256 KiB file size limit
/// (RLIMIT_FSIZE, which fails writes and fallocate with EFBIG, counted as disk full), so
/// nothing else in the test run is affected.
#[test]
fn a_write_past_the_file_size_limit_is_refused_and_not_acknowledged() {
    if let Some(dir) = std::env::var_os(DISK_FULL_CHILD) {
        disk_full_child(Path::new(&dir));
        return;
    }
    let (_tmp, dir) = journal_dir();
    let test = concat!(
        module_path!(),
        "::a_write_past_the_file_size_limit_is_refused_and_not_acknowledged"
    );
    let test = test.split_once("::").unwrap().1;
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--test-threads=1", "--nocapture"])
        .env(DISK_FULL_CHILD, &dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success() && text.contains("1 passed"), "{text}");
    let (got, _) = replay_all(&dir, Lsn::default());
    assert_eq!(got.len(), 1, "the acknowledged record survives");
}

fn disk_full_child(dir: &Path) {
    // SAFETY: plain libc calls on this process's own limits and signal disposition.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let limit = libc::rlimit {
            rlim_cur: 256 << 10,
            rlim_max: libc::RLIM_INFINITY,
        };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
    let j = Journal::open(config(dir, 64 << 10, JournalCompressor::None), no_events()).unwrap();
    let kept = j.append(b"acknowledged").unwrap();
    j.sync_to(kept).unwrap();
    // Needs a file of its own, larger than the limit.
    let big = j.append(&vec![1u8; 400 << 10]).unwrap();
    let err = j.sync_to(big).unwrap_err();
    assert!(err.is_disk_full(), "{err}");
    assert!(err.to_string().contains("FlashdocLog.0000000002"), "{err}");
    let err = j.append(b"after").unwrap_err();
    assert!(err.is_disk_full(), "{err}");
    j.throttle();
    assert!(j.close().unwrap_err().is_disk_full());
}

/// Whether `dir`'s file system takes `O_DIRECT` (tmpfs does not): without it the direct tests
/// fail unless `FLASHDOC_ALLOW_NO_ODIRECT=1` ([`crate::io::direct_io_required`]).
fn direct_io_supported(dir: &Path) -> bool {
    std::fs::create_dir_all(dir).unwrap();
    crate::io::direct_io_required(dir)
}

/// With `direct_io=log` every journal write covers whole 4 KiB blocks at block offsets (the
/// kernel would refuse anything else), flushes that end inside a block are padded by filler
/// records, files roll over and an oversized record gets its own file — and replay returns
/// exactly the records appended, at their LSNs, skipping the fillers.
#[test]
fn direct_io_writes_whole_blocks_and_replays_every_record() {
    let (_tmp, dir) = journal_dir();
    if !direct_io_supported(&dir) {
        return;
    }
    let obs = Arc::new(CollectingObserver::new());
    let io = Io::observed(obs.clone()).with_direct_io(crate::io::DirectIo {
        data: false,
        log: true,
    });
    let mut rng = StdRng::seed_from_u64(7);
    let mut records = payloads(&mut rng, 300, 3000);
    records.insert(150, vec![9u8; 200_000]);
    let j = Journal::open(
        config(&dir, 64 << 10, JournalCompressor::Snappy),
        Arc::new(io),
    )
    .unwrap();
    let mut expected = Vec::new();
    for (i, p) in records.iter().enumerate() {
        expected.push((j.append(p).unwrap(), p.clone()));
        if i % 7 == 0 {
            // A `j:true` write: the flush ends inside a block and is padded.
            j.sync_all().unwrap();
        }
    }
    j.sync_all().unwrap();
    let stats = j.stats();
    j.close().unwrap();
    let align = crate::io::DIRECT_IO_ALIGN;
    let writes: Vec<_> = obs
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Write(w) => Some(w),
            _ => None,
        })
        .collect();
    assert!(writes.len() > 40, "{} writes", writes.len());
    for w in &writes {
        assert!(
            w.offset.is_multiple_of(align) && (w.len as u64).is_multiple_of(align),
            "unaligned journal write {w:?}"
        );
    }
    assert!(stats.files_created >= 3, "{stats:?}");
    for (lsn, _) in &expected {
        assert!(
            lsn.offset >= align as u32,
            "record inside the header block: {lsn:?}"
        );
    }
    let (got, outcome) = replay_all(&dir, Lsn::default());
    let lsns = |v: &[(Lsn, Vec<u8>)]| v.iter().map(|r| r.0).collect::<Vec<_>>();
    assert_eq!(lsns(&got), lsns(&expected), "{outcome:?}");
    assert!(got == expected, "a payload differs");
    assert!(outcome.torn_tail.is_none(), "{outcome:?}");
}

#[test]
fn filler_records_verify_and_carry_no_payload() {
    for extent in [128usize, 3968, 4096] {
        let mut buf = Vec::new();
        format::write_filler(&mut buf, extent);
        assert_eq!(buf.len(), extent);
        let header: [u8; RECORD_HEADER_SIZE] = buf[..RECORD_HEADER_SIZE].try_into().unwrap();
        let h = match format::check_record_header(&header) {
            format::HeaderCheck::Record(h) => h,
            _ => panic!("a filler must read as a record"),
        };
        assert_eq!(h.flags, format::REC_FILLER);
        assert_eq!(padded_len(h.len as u64), extent as u64);
        format::verify_record(&h, &buf).unwrap();
        buf[extent - 1] = 1;
        assert!(
            format::verify_record(&h, &buf).is_err(),
            "a torn filler is caught"
        );
    }
}

/// `Schedule::Inline`: nothing is written until the buffer holds a slot (`SLOT_BYTES`, then by
/// the caller's `throttle`) or someone syncs, and what was written replays as the threaded
/// journal's would.
#[test]
fn inline_journal_writes_by_size_and_on_sync_only() {
    let (_tmp, dir) = journal_dir();
    let cfg = config(&dir, 64 << 20, JournalCompressor::None);
    let j = Journal::open_with(cfg, no_events(), Schedule::Inline).unwrap();
    let writes = |j: &Journal| j.stats().writes;
    let header_writes = writes(&j);
    let record = vec![7u8; 64 << 10];
    let first = j.append(&record).unwrap();
    j.throttle();
    assert_eq!(writes(&j), header_writes, "one record stays in the buffer");
    let mut lsns = vec![first];
    while j.shared.state.lock().buffered < SLOT_BYTES {
        lsns.push(j.append(&record).unwrap());
    }
    assert_eq!(writes(&j), header_writes, "appends never write");
    let full = j.shared.state.lock().buffered;
    j.throttle();
    assert_eq!(
        writes(&j),
        header_writes + full.div_ceil(SLOT_BYTES),
        "a full buffer is written by the caller, slot by slot"
    );
    assert_eq!(j.shared.state.lock().buffered, 0);
    lsns.push(j.append(b"last").unwrap());
    j.sync_to(*lsns.last().unwrap()).unwrap();
    assert_eq!(
        writes(&j),
        header_writes + full.div_ceil(SLOT_BYTES) + 1,
        "a sync writes the rest"
    );
    j.close().unwrap();
    let (got, _) = replay_all(&dir, Lsn::default());
    assert_eq!(got.iter().map(|(l, _)| *l).collect::<Vec<_>>(), lsns);
    assert_eq!(got.last().unwrap().1, b"last");
}

/// No journal write is larger than a slot (`SLOT_BYTES`), on either schedule and whatever the
/// file size: a flush of many slots, and a record larger than a slot, are written slot by slot,
/// back to back. The writes cover the journal's bytes once each, and replay returns every record.
#[test]
fn no_journal_write_is_larger_than_a_slot() {
    for schedule in [Schedule::Inline, Schedule::Background] {
        let (_tmp, dir) = journal_dir();
        let obs = Arc::new(CollectingObserver::new());
        let cfg = config(&dir, 64 << 20, JournalCompressor::None);
        let j = Journal::open_with(cfg, Arc::new(Io::observed(obs.clone())), schedule).unwrap();
        let mut rng = StdRng::seed_from_u64(11);
        let mut records = payloads(&mut rng, 3000, 3000);
        records.insert(1500, vec![5u8; 3 * SLOT_BYTES as usize / 2]);
        let mut expected = Vec::new();
        for (i, p) in records.iter().enumerate() {
            expected.push((j.append(p).unwrap(), p.clone()));
            j.throttle();
            if i == 2000 {
                // A flush of more than one slot: written slot by slot.
                j.sync_all().unwrap();
            }
        }
        j.sync_all().unwrap();
        let syncs = j.stats().syncs;
        j.close().unwrap();
        let mut writes: Vec<_> = obs
            .events()
            .into_iter()
            .filter_map(|e| match e {
                Event::Write(w) => Some((w.file, w.offset, w.len as u64)),
                _ => None,
            })
            .collect();
        assert!(writes.len() > 10, "{schedule:?}: {} writes", writes.len());
        let largest = writes.iter().map(|w| w.2).max().unwrap();
        assert!(
            largest <= SLOT_BYTES,
            "{schedule:?}: a {largest}-byte write"
        );
        assert_eq!(largest, SLOT_BYTES, "{schedule:?}: some flush fills a slot");
        // A flush splits its bytes at slot boundaries of the file, never elsewhere: only a
        // flush's first write may start off a boundary (and share a page with the last flush).
        let unaligned = writes.iter().filter(|w| w.1 % SLOT_BYTES != 0).count() as u64;
        assert!(
            unaligned <= syncs,
            "{schedule:?}: {unaligned} writes start off a slot boundary, {syncs} syncs"
        );
        writes.sort();
        for pair in writes.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            assert!(
                a.0 != b.0 || a.1 + a.2 <= b.1,
                "{schedule:?}: writes overlap: {a:?} {b:?}"
            );
        }
        let (got, outcome) = replay_all(&dir, Lsn::default());
        assert!(got == expected, "{schedule:?}: replay differs");
        assert!(outcome.torn_tail.is_none(), "{outcome:?}");
    }
}

/// `block_aligned` without `O_DIRECT`: the direct-I/O layout (header block, every flush padded
/// to a block), so no journal page is written twice, across flushes, syncs and file rollovers;
/// replay returns every record.
#[test]
fn block_aligned_journal_never_writes_a_page_twice() {
    let (_tmp, dir) = journal_dir();
    let obs = Arc::new(CollectingObserver::new());
    let cfg = JournalConfig {
        block_aligned: true,
        ..config(&dir, 1 << 20, JournalCompressor::Snappy)
    };
    let j = Journal::open_with(cfg, Arc::new(Io::observed(obs.clone())), Schedule::Inline).unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    let records = payloads(&mut rng, 4000, 3000);
    let mut expected = Vec::new();
    for (i, p) in records.iter().enumerate() {
        expected.push((j.append(p).unwrap(), p.clone()));
        j.throttle();
        if i % 97 == 0 {
            j.sync_all().unwrap();
        }
    }
    j.sync_all().unwrap();
    let stats = j.stats();
    j.close().unwrap();
    assert!(stats.files_created >= 3, "{stats:?}");
    let mut pages = std::collections::HashSet::new();
    let mut writes = 0;
    for e in obs.events() {
        if let Event::Write(w) = e {
            writes += 1;
            assert!(
                w.offset.is_multiple_of(4096) && (w.len as u64).is_multiple_of(4096),
                "unaligned journal write {w:?}"
            );
            for page in w.offset / 4096..(w.offset + w.len as u64) / 4096 {
                assert!(
                    pages.insert((w.file, page)),
                    "page {page} written twice: {w:?}"
                );
            }
        }
    }
    assert!(writes > 40, "{writes} writes");
    let (got, outcome) = replay_all(&dir, Lsn::default());
    assert!(got == expected, "replay differs");
    assert!(outcome.torn_tail.is_none(), "{outcome:?}");
}

/// Every record of `dir`, read in salvage mode.
fn salvage_all(dir: &Path) -> (Vec<(Lsn, Vec<u8>)>, ReplayOutcome) {
    let mut got = Vec::new();
    let outcome = replay_with(dir, Lsn::default(), ReplayMode::Salvage, |lsn, p| {
        got.push((lsn, p.to_vec()));
        Ok(())
    })
    .unwrap();
    (got, outcome)
}

/// One journal file of `count` records, uncompressed; the payloads and their LSNs.
fn one_file_journal(dir: &Path, count: usize) -> (Vec<Vec<u8>>, Vec<Lsn>) {
    let recs: Vec<Vec<u8>> = (0..count)
        .map(|i| format!("record {i} ").repeat(20 + i % 7).into_bytes())
        .collect();
    let lsns = write_journal(config(dir, 1 << 20, JournalCompressor::None), &recs);
    assert!(lsns.iter().all(|l| l.file == 1));
    (recs, lsns)
}

fn flip_byte(path: &Path, at: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at as usize] ^= 0x20;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn a_flipped_byte_with_valid_records_after_it_is_corruption_at_its_offset() {
    let (_tmp, dir) = journal_dir();
    let (recs, lsns) = one_file_journal(&dir, 30);
    let path = dir.join(file_name(1));
    flip_byte(&path, lsns[10].offset as u64 + 40);
    let (got, outcome) = replay_all(&dir, Lsn::default());
    assert_eq!(got.len(), 10, "strict replay stops at the damage");
    let c = outcome.corruption.expect("corruption, not a torn tail");
    assert_eq!(c.kind, DamageKind::Record);
    assert_eq!(c.file, path);
    assert_eq!(c.offset, lsns[10].offset as u64);
    assert_eq!(c.next_valid, Some(lsns[11]));
    assert!(c.why.contains("checksum"), "{c:?}");

    // Salvage skips exactly the damaged record.
    let (got, outcome) = salvage_all(&dir);
    let want: Vec<&Vec<u8>> = recs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 10)
        .map(|(_, r)| r)
        .collect();
    assert!(got.iter().map(|(_, p)| p).eq(want), "every other record");
    assert_eq!(outcome.corruption, None);
    assert_eq!(outcome.damaged.len(), 1);
    assert_eq!(outcome.damaged[0].offset, lsns[10].offset as u64);
    let len = std::fs::metadata(&path).unwrap().len();
    let extent = (lsns[11].offset - lsns[10].offset) as u64;
    assert_eq!(outcome.damaged[0].skipped_bytes(len), extent);
}

#[test]
fn a_torn_last_record_is_a_torn_tail_not_corruption() {
    let (_tmp, dir) = journal_dir();
    let (_, lsns) = one_file_journal(&dir, 30);
    let path = dir.join(file_name(1));
    // Its last 128-byte unit never reached the disk (the file is preallocated: zeros).
    let end = record_ends(&dir, &lsns)[29];
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[end as usize - 128..end as usize].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    let (got, outcome) = replay_all(&dir, Lsn::default());
    assert_eq!(got.len(), 29);
    assert_eq!(outcome.corruption, None);
    assert!(outcome.torn_tail.unwrap().contains("checksum"));
    // Salvage has nothing to step over: a tail is not damage.
    let (got, outcome) = salvage_all(&dir);
    assert_eq!(got.len(), 29);
    assert!(outcome.damaged.is_empty(), "{outcome:?}");
    // A flipped byte in the last record is indistinguishable from a tear: a tail too.
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[end as usize - 128..end as usize].fill(0x55);
    std::fs::write(&path, &bytes).unwrap();
    let (got, outcome) = replay_all(&dir, Lsn::default());
    assert_eq!((got.len(), outcome.corruption), (29, None));
}

#[test]
fn a_damaged_length_word_does_not_hide_the_records_after_it() {
    let (_tmp, dir) = journal_dir();
    let (recs, lsns) = one_file_journal(&dir, 30);
    let path = dir.join(file_name(1));
    let mut bytes = std::fs::read(&path).unwrap();
    let at = lsns[10].offset as usize;
    for len in [u32::MAX, 16 + 8192, 17] {
        let mut damaged = bytes.clone();
        damaged[at..at + 4].copy_from_slice(&len.to_le_bytes());
        std::fs::write(&path, &damaged).unwrap();
        let (got, outcome) = replay_all(&dir, Lsn::default());
        assert_eq!(got.len(), 10, "length {len}");
        let c = outcome.corruption.expect("corruption");
        assert_eq!(
            (c.offset, c.next_valid),
            (at as u64, Some(lsns[11])),
            "length {len}"
        );
        let (got, outcome) = salvage_all(&dir);
        assert_eq!(got.len(), 29, "length {len}");
        assert_eq!(got[10].1, recs[11]);
        assert_eq!(outcome.damaged.len(), 1);
    }
    bytes[at..at + 4].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    assert!(replay_all(&dir, Lsn::default()).1.corruption.is_some());
}

#[test]
fn a_bad_record_in_a_file_that_is_not_the_last_is_corruption() {
    let (_tmp, dir) = journal_dir();
    let mut rng = StdRng::seed_from_u64(9);
    let recs = payloads(&mut rng, 150, 5000);
    let lsns = write_journal(config(&dir, 64 << 10, JournalCompressor::None), &recs);
    assert!(lsns.last().unwrap().file >= 3);
    // The last record of file 1: nothing valid follows it in its own file.
    let last1 = lsns.iter().rposition(|l| l.file == 1).unwrap();
    let path = dir.join(file_name(1));
    flip_byte(&path, lsns[last1].offset as u64 + 20);
    let (got, outcome) = replay_all(&dir, Lsn::default());
    assert_eq!(got.len(), last1);
    let c = outcome
        .corruption
        .expect("corruption: file 2 of the same session follows");
    assert_eq!(
        (c.file.as_path(), c.offset),
        (path.as_path(), lsns[last1].offset as u64)
    );
    assert_eq!(
        c.next_valid,
        Some(Lsn {
            file: 2,
            offset: FILE_HEADER_SIZE
        })
    );
    assert!(c.why.contains("same session"), "{c:?}");

    let (got, outcome) = salvage_all(&dir);
    assert_eq!(got.len(), recs.len() - 1);
    assert_eq!(outcome.damaged.len(), 1);

    // A missing file in the middle is corruption as well; salvage reads the files after it.
    std::fs::remove_file(dir.join(file_name(2))).unwrap();
    let (_, outcome) = replay_all(&dir, Lsn::default());
    let c = outcome.corruption.expect("corruption");
    assert_eq!(c.kind, DamageKind::Record, "file 1's damage comes first");
    let in2 = lsns.iter().filter(|l| l.file == 2).count();
    let (got, outcome) = salvage_all(&dir);
    assert_eq!(got.len(), recs.len() - 1 - in2);
    assert!(outcome
        .damaged
        .iter()
        .any(|d| d.kind == DamageKind::MissingFile));
}

#[test]
fn a_flipped_file_header_with_records_after_it_is_corruption() {
    let (_tmp, dir) = journal_dir();
    let (recs, _) = one_file_journal(&dir, 5);
    let path = dir.join(file_name(1));
    flip_byte(&path, 20);
    let (got, outcome) = replay_all(&dir, Lsn::default());
    assert!(got.is_empty());
    let c = outcome.corruption.expect("corruption");
    assert_eq!((c.kind, c.offset), (DamageKind::FileHeader, 0));
    let (got, _) = salvage_all(&dir);
    assert!(got.iter().map(|(_, p)| p).eq(recs.iter()));
}

#[test]
fn a_later_session_still_steps_over_an_earlier_torn_tail() {
    let (_tmp, dir) = journal_dir();
    let cfg = config(&dir, 64 << 10, JournalCompressor::None);
    let lsns = write_journal(cfg.clone(), &[b"one".to_vec(), vec![2u8; 300]]);
    let path = dir.join(file_name(1));
    // The crash tore the last record: only its header reached the disk.
    let mut bytes = std::fs::read(&path).unwrap();
    let at = lsns[1].offset as usize;
    bytes[at + RECORD_HEADER_SIZE..at + 384].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    write_journal(cfg, &[b"three".to_vec()]);
    let (got, outcome) = replay_all(&dir, Lsn::default());
    let got: Vec<&[u8]> = got.iter().map(|(_, p)| p.as_slice()).collect();
    assert_eq!(got, [&b"one"[..], b"three"]);
    assert_eq!(outcome.corruption, None);
    assert_eq!(outcome.torn_tail, None);
    assert_eq!(outcome.skipped_tails.len(), 1);
    assert!(outcome.skipped_tails[0].contains("FlashdocLog.0000000001"));
}
