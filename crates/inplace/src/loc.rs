//! Record addresses and sizes: MMAPv1's `DiskLoc` (a data file's number and an offset in it)
//! and the power-of-two record sizes (MongoDB 3.0's default `usePowerOf2Sizes`).

/// Where a record or bucket lives: data file `file`, byte `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DiskLoc {
    pub file: u32,
    pub offset: u32,
}

impl DiskLoc {
    /// No location (an empty list's head, a missing child).
    pub const NULL: DiskLoc = DiskLoc {
        file: u32::MAX,
        offset: 0,
    };
    pub const LEN: usize = 8;

    pub fn new(file: u32, offset: u32) -> DiskLoc {
        DiskLoc { file, offset }
    }
    pub fn is_null(self) -> bool {
        self.file == u32::MAX
    }
    pub fn encode(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&self.file.to_le_bytes());
        b[4..].copy_from_slice(&self.offset.to_le_bytes());
        b
    }
    pub fn decode(b: &[u8]) -> DiskLoc {
        DiskLoc {
            file: u32::from_le_bytes(b[..4].try_into().expect("4 bytes")),
            offset: u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
        }
    }
    /// The location `n` bytes further in the same file.
    pub fn plus(self, n: u32) -> DiskLoc {
        debug_assert!(!self.is_null());
        DiskLoc::new(self.file, self.offset + n)
    }
}

/// Every record starts with its allocated size and its used length (u32 each).
pub const RECORD_HEADER: u32 = 8;
/// The used length of a record on a free list.
pub const FREE_MARK: u32 = u32::MAX;
/// The smallest size class: 2^5 = 32 bytes (room for the header and a free list's link).
pub const MIN_CLASS: u8 = 5;
/// The largest: 2^26 = 64 MiB, room for a 16 MiB document and more.
pub const MAX_CLASS: u8 = 26;
/// Size classes, one free list each.
pub const CLASSES: usize = (MAX_CLASS - MIN_CLASS + 1) as usize;

/// The size class holding `len` bytes of value with its header: the smallest power of two
/// at least that large (the padding an update can grow into in place). `None` past the
/// largest class.
pub fn size_class(value_len: usize) -> Option<u8> {
    let total = (value_len as u64 + RECORD_HEADER as u64).max(1 << MIN_CLASS);
    let class = total.next_power_of_two().trailing_zeros() as u8;
    (class <= MAX_CLASS).then_some(class)
}

/// The allocated size of a record of class `class`.
pub fn class_size(class: u8) -> u32 {
    assert!(
        (MIN_CLASS..=MAX_CLASS).contains(&class),
        "size class {class}"
    );
    1 << class
}

/// The largest value a record can hold.
pub fn max_value_len() -> usize {
    (class_size(MAX_CLASS) - RECORD_HEADER) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_padded_to_powers_of_two() {
        assert_eq!(size_class(0), Some(5));
        assert_eq!(size_class(24), Some(5));
        assert_eq!(size_class(25), Some(6));
        assert_eq!(class_size(size_class(1000).unwrap()), 1024);
        assert_eq!(class_size(size_class(1016).unwrap()), 1024);
        assert_eq!(class_size(size_class(1017).unwrap()), 2048);
        assert_eq!(size_class(max_value_len()), Some(MAX_CLASS));
        assert_eq!(size_class(max_value_len() + 1), None);
    }

    #[test]
    fn locations_round_trip() {
        let l = DiskLoc::new(3, 4096);
        assert_eq!(DiskLoc::decode(&l.encode()), l);
        assert!(DiskLoc::decode(&DiskLoc::NULL.encode()).is_null());
        assert_eq!(l.plus(8), DiskLoc::new(3, 4104));
    }

    #[test]
    #[should_panic(expected = "size class")]
    fn a_class_past_the_largest_is_refused() {
        class_size(MAX_CLASS + 1);
    }
}
