//! The torn-or-corrupt rule on journal bytes built as the committer writes them.

use super::*;
use crate::journal::{encode_record, mark_flush_start};

/// A record of batch `seq` carrying `len` bytes of `fill` (never zero, so that no sector of
/// a record reads as zeros unless a test zeroes it).
fn record(seq: u64, len: usize, fill: u8) -> Vec<u8> {
    encode_record(
        seq,
        &[JournalEntry {
            file: 1,
            offset: 0x0101_0101,
            bytes: vec![fill; len],
        }],
    )
}

/// A journal file of `commits` (each a list of (seq, payload bytes)), each commit's first
/// record marked as the committer marks it. Returns the bytes and each record's offset by seq.
fn file(commits: &[&[(u64, usize)]]) -> (Vec<u8>, std::collections::HashMap<u64, usize>) {
    let mut bytes = Vec::new();
    let mut at = std::collections::HashMap::new();
    for commit in commits {
        let mut write = Vec::new();
        for &(seq, len) in *commit {
            at.insert(seq, bytes.len() + write.len());
            write.extend_from_slice(&record(seq, len, 0x5A));
        }
        mark_flush_start(&mut write);
        bytes.extend_from_slice(&write);
    }
    (bytes, at)
}

fn seqs(r: &FileRecords) -> Vec<u64> {
    r.records.iter().map(|r| r.seq).collect()
}

fn torn(r: &FileRecords) -> &Break {
    match &r.end {
        End::Torn(b) => b,
        other => panic!("expected a torn tail, got {other:?}"),
    }
}

fn corrupt(r: &FileRecords) -> &Break {
    match &r.end {
        End::Corrupt(b) => b,
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn a_whole_file_reads_to_its_end_with_each_commits_mark() {
    let (bytes, _) = file(&[&[(1, 100), (2, 300)], &[(3, 50)], &[(4, 700), (5, 10)]]);
    let r = read_file(&bytes);
    assert_eq!(r.end, End::Clean);
    assert_eq!(seqs(&r), [1, 2, 3, 4, 5]);
    let marks: Vec<bool> = r.records.iter().map(|r| r.flush_start).collect();
    assert_eq!(marks, [true, false, true, true, false]);
    assert_eq!(r.records[1].entries[0].bytes, vec![0x5A; 300]);
    assert_eq!(read_file(&[]).end, End::Clean);
}

#[test]
fn a_flipped_byte_in_a_synced_record_with_valid_ones_after_is_corruption() {
    let (mut bytes, at) = file(&[&[(1, 200), (2, 200), (3, 200)], &[(4, 200), (5, 200)]]);
    bytes[at[&2] + 100] ^= 0x01;
    let r = read_file(&bytes);
    let b = corrupt(&r);
    assert_eq!(b.offset, at[&2] as u64);
    assert_eq!(b.next_valid, Some(at[&3] as u64));
    assert!(b.why.contains("checksum mismatch"), "{}", b.why);
    assert!(
        b.why
            .contains(&format!("the record at offset {} begins a commit", at[&4])),
        "{}",
        b.why
    );
    // Nothing past the damage is handed out.
    assert_eq!(seqs(&r), [1]);
}

#[test]
fn a_damaged_length_word_cannot_hide_the_synced_records_after_it() {
    let (mut bytes, at) = file(&[&[(1, 200), (2, 200)], &[(3, 200)], &[(4, 200)]]);
    // Record 2's length now runs past the end of the file.
    bytes[at[&2] + 2] = 0x7F;
    let b = corrupt(&read_file(&bytes)).clone();
    assert_eq!(
        (b.offset, b.next_valid),
        (at[&2] as u64, Some(at[&3] as u64))
    );
}

#[test]
fn a_sector_lost_from_the_last_commit_is_its_torn_tail() {
    // The last commit's record 3 spans several sectors; one of them is lost (reads as zeros),
    // records 4 and 5 after it landed whole.
    let (mut bytes, at) = file(&[&[(1, 200), (2, 200)], &[(3, 3000), (4, 200), (5, 200)]]);
    let sector = (at[&3] / TEAR_SECTOR + 2) * TEAR_SECTOR;
    bytes[sector..sector + TEAR_SECTOR].fill(0);
    let r = read_file(&bytes);
    let b = torn(&r);
    assert_eq!(
        (b.offset, b.next_valid),
        (at[&3] as u64, Some(at[&4] as u64))
    );
    assert!(
        b.why.contains("unsynced commit the crash tore"),
        "{}",
        b.why
    );
    assert_eq!(seqs(&r), [1, 2]);
}

#[test]
fn a_lost_sector_holding_a_records_length_is_a_tear_too() {
    // Records of 36 + 476 bytes: record 3, the second of the last commit, starts a sector.
    let (mut bytes, at) = file(&[&[(1, 476)], &[(2, 476), (3, 1500), (4, 200)]]);
    assert_eq!(at[&3] % TEAR_SECTOR, 0);
    // That sector is lost: record 3's length word reads as zeros.
    bytes[at[&3]..at[&3] + TEAR_SECTOR].fill(0);
    let r = read_file(&bytes);
    let b = torn(&r);
    assert_eq!(
        (b.offset, b.next_valid),
        (at[&3] as u64, Some(at[&4] as u64))
    );
    assert_eq!(seqs(&r), [1, 2]);
}

#[test]
fn damage_in_the_last_commit_with_data_in_every_sector_is_corruption() {
    let (mut bytes, at) = file(&[&[(1, 200)], &[(2, 900), (3, 200)]]);
    bytes[at[&2] + 500] ^= 0x80;
    let b = corrupt(&read_file(&bytes)).clone();
    assert_eq!(b.offset, at[&2] as u64);
    assert!(
        b.why.contains("every 512-byte sector of it holds data"),
        "{}",
        b.why
    );
}

#[test]
fn a_length_word_over_the_next_record_is_corruption() {
    let (mut bytes, at) = file(&[&[(1, 200)], &[(2, 200), (3, 200)]]);
    let len = u32::from_le_bytes(bytes[at[&2]..at[&2] + 4].try_into().unwrap());
    bytes[at[&2]..at[&2] + 4].copy_from_slice(&(len + 40).to_le_bytes());
    let b = corrupt(&read_file(&bytes)).clone();
    assert!(
        b.why.contains("covers the record that verifies"),
        "{}",
        b.why
    );
}

#[test]
fn a_bad_last_record_is_the_torn_tail() {
    let (mut bytes, at) = file(&[&[(1, 200)], &[(2, 200)], &[(3, 200)]]);
    bytes[at[&3] + 50] ^= 0xFF;
    let r = read_file(&bytes);
    assert_eq!(torn(&r).next_valid, None);
    assert_eq!(seqs(&r), [1, 2]);
    // Cut short by the end of the file, in its body or its header.
    let (bytes, at) = file(&[&[(1, 200)], &[(2, 200)]]);
    for cut in [bytes.len() - 1, at[&2] + 5] {
        let r = read_file(&bytes[..cut]);
        assert_eq!((torn(&r).offset, seqs(&r)), (at[&2] as u64, vec![1]));
    }
}

#[test]
fn records_out_of_batch_order_do_not_verify() {
    let mut bytes = record(5, 100, 1);
    bytes.extend_from_slice(&record(4, 100, 1));
    let r = read_file(&bytes);
    assert!(torn(&r).why.contains("out of order"), "{:?}", r.end);
    assert_eq!(seqs(&r), [5]);
}
