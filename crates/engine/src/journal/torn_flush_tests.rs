//! A crash during a flush against damage to synced records (replay.rs, "Torn or synced"): hand-
//! built images of the power-loss loop's seed 319 and its variants, the flusher's
//! [`format::REC_FLUSH_START`] marks, and the journal under the power-loss backend.

use super::format::{check_record_header, file_name, HeaderCheck, RECORD_HEADER_SIZE};
use super::test_support::{self, journal_dir, replay_payloads};
use super::*;
use crate::io::{CrashOdds, Mutation, PowerLossFiles};

fn config(dir: &Path) -> JournalConfig {
    test_support::config(dir, 1 << 20, JournalCompressor::None)
}

/// Payloads of `len` bytes with no zero byte, so that only a lost sector reads as zeros.
fn payload(flush: usize, i: usize, len: usize) -> Vec<u8> {
    let text = format!("flush {flush} record {i} ");
    text.bytes().cycle().take(len).collect()
}

/// Writes `flushes` groups of `per` records of `len` bytes, each group appended and then synced
/// in one flush (inline schedule); returns each group's LSNs and the payloads in order.
fn write_flushes(
    dir: &Path,
    flushes: usize,
    per: usize,
    len: usize,
) -> (Vec<Vec<Lsn>>, Vec<Vec<u8>>) {
    let io = Arc::new(Io::quiet());
    let j = Journal::open_with(config(dir), io, Schedule::Inline).unwrap();
    let (mut groups, mut all) = (Vec::new(), Vec::new());
    for flush in 0..flushes {
        let mut lsns = Vec::new();
        for i in 0..per {
            let p = payload(flush, i, len);
            lsns.push(j.append(&p).unwrap());
            all.push(p);
        }
        j.sync_all().unwrap();
        groups.push(lsns);
    }
    j.close().unwrap();
    (groups, all)
}

/// Zeros the 512-byte sector after the one holding the header of the record at `lsn` (the
/// sector a crash lost: the preallocated file's zeros show through).
fn lose_sector_after_header(dir: &Path, lsn: Lsn) {
    let path = dir.join(file_name(lsn.file));
    let mut bytes = std::fs::read(&path).unwrap();
    let sector = (lsn.offset as usize / 512 + 1) * 512;
    bytes[sector..sector + 512].fill(0);
    std::fs::write(&path, bytes).unwrap();
}

/// Seed 319 of the power-loss loop, cycle 32: the last flush's write was torn, a sector inside
/// its first record lost and the sectors after it kept. The records after the damage verify,
/// but they are of the same unsynced flush: the torn tail, not corruption, and replay ends the
/// log before the torn record (before the fix, open refused: "a record that verifies follows").
#[test]
fn a_sector_lost_inside_the_last_flush_is_its_torn_tail() {
    let (_tmp, dir) = journal_dir();
    let (groups, all) = write_flushes(&dir, 2, 4, 1500);
    lose_sector_after_header(&dir, groups[1][0]);
    let (got, outcome) = replay_payloads(&dir);
    assert_eq!(outcome.corruption, None, "{outcome:?}");
    assert_eq!(
        got,
        all[..4],
        "the synced flush, and nothing of the torn one"
    );
    let tail = outcome.torn_tail.expect("a torn tail");
    assert!(tail.contains("unsynced flush"), "{tail}");
    assert_eq!(outcome.end, groups[1][0]);
}

/// The same lost sector in a flush that a later flush follows: that flush was synced before
/// the later one was written (its first record, which verifies, carries the mark), so the
/// damage is corruption, however much it looks like a tear.
#[test]
fn a_sector_lost_in_a_synced_flush_is_corruption() {
    let (_tmp, dir) = journal_dir();
    let (groups, all) = write_flushes(&dir, 3, 4, 1500);
    lose_sector_after_header(&dir, groups[1][0]);
    let (got, outcome) = replay_payloads(&dir);
    assert_eq!(got, all[..4]);
    let c = outcome.corruption.expect("corruption");
    assert_eq!(c.offset, groups[1][0].offset as u64);
    assert_eq!(c.next_valid, Some(groups[1][1]));
    let proof = format!(
        "record at offset {} was written after a sync",
        groups[2][0].offset
    );
    assert!(c.why.contains(&proof), "{c:?}");
}

/// Damage in the last flush that no crash leaves is corruption, though no later flush proves
/// the flush was synced: a flipped byte (every sector of the record holds data) and a damaged
/// length word (it covers the next record, and a crash never changes a header).
#[test]
fn damage_in_the_last_flush_that_is_no_tear_is_corruption() {
    let (_tmp, dir) = journal_dir();
    let (groups, _) = write_flushes(&dir, 2, 4, 1500);
    let at = groups[1][1];
    let path = dir.join(file_name(at.file));
    let original = std::fs::read(&path).unwrap();

    let mut bytes = original.clone();
    bytes[at.offset as usize + 700] ^= 0x04;
    std::fs::write(&path, &bytes).unwrap();
    let c = replay_payloads(&dir).1.corruption.expect("a flipped byte");
    assert_eq!(c.offset, at.offset as u64);
    assert!(c.why.contains("every 512-byte sector"), "{c:?}");

    let mut bytes = original.clone();
    let stored = 3 * 1500u32;
    let at_len = at.offset as usize;
    bytes[at_len..at_len + 4].copy_from_slice(&(stored + RECORD_HEADER_SIZE as u32).to_le_bytes());
    bytes[at_len + 12..at_len + 16].copy_from_slice(&stored.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let c = replay_payloads(&dir)
        .1
        .corruption
        .expect("a damaged length word");
    assert!(c.why.contains("length word"), "{c:?}");

    let mut bytes = original;
    bytes[at.offset as usize + 10] = 1;
    std::fs::write(&path, &bytes).unwrap();
    let c = replay_payloads(&dir)
        .1
        .corruption
        .expect("a damaged header");
    assert!(c.why.contains("header is damaged"), "{c:?}");
}

/// Every record of journal file `n`, as (offset, carries the flush-start mark).
fn marks(dir: &Path, n: u32) -> Vec<(u32, bool)> {
    let bytes = std::fs::read(dir.join(file_name(n))).unwrap();
    let mut at = FILE_HEADER_SIZE as usize;
    let mut out = Vec::new();
    while at + RECORD_HEADER_SIZE <= bytes.len() {
        let header: [u8; RECORD_HEADER_SIZE] =
            bytes[at..at + RECORD_HEADER_SIZE].try_into().unwrap();
        match check_record_header(&header) {
            HeaderCheck::Record(h) => {
                out.push((at as u32, h.flush_start));
                at += format::padded_len(h.len as u64) as usize;
            }
            HeaderCheck::Zero => break,
            HeaderCheck::Bad(why) => panic!("offset {at}: {why}"),
        }
    }
    out
}

/// The flusher marks exactly the first record of each write after a sync, in every file (a
/// new file's first record too: its header was synced with its name), and replay reads the
/// marked records as any other.
#[test]
fn the_flusher_marks_the_first_record_written_after_each_sync() {
    let (_tmp, dir) = journal_dir();
    let io = Arc::new(Io::quiet());
    let mut cfg = config(&dir);
    cfg.file_max = MIN_FILE_MAX;
    let j = Journal::open_with(cfg, io, Schedule::Inline).unwrap();
    let mut firsts = Vec::new();
    let mut all = Vec::new();
    for flush in 0..70 {
        let before = j.next_lsn();
        let mut lsns = Vec::new();
        for i in 0..3 {
            let p = payload(flush, i, 900);
            lsns.push(j.append(&p).unwrap());
            all.push(p);
        }
        // A flush that crosses into a new file writes its first record there marked too.
        firsts.push(lsns[0]);
        if let Some(l) = lsns
            .iter()
            .find(|l| l.file != before.file && l.file != lsns[0].file)
        {
            firsts.push(*l);
        }
        j.sync_all().unwrap();
    }
    j.close().unwrap();
    let files = replay::list_files(&dir).unwrap();
    assert!(files.len() >= 3, "{files:?}");
    let mut marked = Vec::new();
    for n in files {
        let m = marks(&dir, n);
        assert!(m[0].1, "file {n}'s first record is marked");
        marked.extend(
            m.iter()
                .filter(|(_, s)| *s)
                .map(|&(offset, _)| Lsn { file: n, offset }),
        );
    }
    let files_first: Vec<Lsn> = firsts.clone();
    assert!(files_first.iter().all(|l| marked.contains(l)), "{marked:?}");
    assert_eq!(marked.len(), firsts.len(), "{marked:?} {firsts:?}");
    let (got, outcome) = replay_payloads(&dir);
    assert_eq!(got, all);
    assert_eq!(outcome.torn_tail, None);
}

/// A journal of format version 1 (no record carries the mark) is still read.
#[test]
fn a_version_1_journal_is_read() {
    let (_tmp, dir) = journal_dir();
    let (_, all) = write_flushes(&dir, 2, 3, 300);
    let path = dir.join(file_name(1));
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[..124]);
    bytes[124..128].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let (got, outcome) = replay_payloads(&dir);
    assert_eq!((got, outcome.torn_tail), (all, None));
}

/// The writer's ordering assertion: a chunk that does not start where its file's records end
/// (a retry at a wrong offset, a chunk out of order) is never written.
#[test]
#[should_panic(expected = "a journal write starts where its file's records end")]
fn a_chunk_out_of_place_is_never_written() {
    let (_tmp, dir) = journal_dir();
    let j = Journal::open_with(config(&dir), Arc::new(Io::quiet()), Schedule::Inline).unwrap();
    let mut bytes = Vec::new();
    format::EncodedRecord::encode(b"late", JournalCompressor::None).write_to(&mut bytes);
    let mut chunk = Chunk {
        file: 1,
        offset: FILE_HEADER_SIZE + 128,
        cap: 1 << 20,
        bytes,
    };
    let flusher = j.inline.as_ref().expect("inline");
    let _ = flusher.lock().write_chunk(&mut chunk);
}

/// The journal under the power-loss backend: a flush synced, then a flush of many records whose
/// fdatasync the power cut. Across images (the second flush's write kept, dropped, torn at 512
/// B or 4 KiB, sectors in any order) replay never reports corruption, always returns the synced
/// flush whole and then a prefix of the cut one; some images are the seed 319 shape (records
/// that verify after the torn one).
#[test]
fn a_flush_cut_by_power_loss_is_never_corruption() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("db");
    std::fs::create_dir_all(&root).unwrap();
    let pl = Arc::new(PowerLossFiles::new(
        &root,
        CrashOdds::default(),
        Mutation::None,
    ));
    let io = Arc::new(Io::new(None, &Default::default(), Some(pl.clone())).unwrap());
    let dir = root.join("journal");
    let j = Journal::open_with(config(&dir), io, Schedule::Inline).unwrap();
    let mut all = Vec::new();
    for flush in 0..2 {
        if flush == 1 {
            // The write goes to the page cache; the power goes during the sync after it.
            pl.crash_after(2);
        }
        for i in 0..12 {
            let p = payload(flush, i, 200 + 150 * i);
            j.append(&p).unwrap();
            all.push(p);
        }
        let synced = j.sync_all();
        assert_eq!(synced.is_ok(), flush == 0, "{synced:?}");
    }
    drop(j);
    let mut rest_verified = 0;
    for seed in 0..300 {
        let img = tempfile::tempdir().unwrap();
        pl.materialise(seed, img.path()).unwrap();
        let (got, outcome) = replay_payloads(&img.path().join("journal"));
        assert_eq!(outcome.corruption, None, "seed {seed}: {outcome:?}");
        assert!(
            got.len() >= 12,
            "seed {seed}: the synced flush is whole: {outcome:?}"
        );
        assert_eq!(got, all[..got.len()], "seed {seed}");
        if outcome
            .torn_tail
            .is_some_and(|t| t.contains("unsynced flush"))
        {
            rest_verified += 1;
        }
    }
    assert!(
        rest_verified > 0,
        "no image had records verifying after a tear"
    );
}

/// The mark is set only on a whole record at the start of a chunk: bytes that do not start
/// with one (a length word of zero here) are never given a checksum.
#[test]
#[should_panic(expected = "a chunk starts with a whole record")]
fn marking_bytes_that_are_not_a_whole_record_trips_the_assertion() {
    let mut bytes = [0u8; 64];
    format::mark_flush_start(&mut bytes);
}
