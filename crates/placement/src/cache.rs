//! A cache hint for the offline replays, which know their next events and device ops long
//! before they reach them (the `ssd` crate's FTL has its own for its tables).

/// Starts loading `*p` into the cache. A hint only: nothing the program sees changes.
#[inline(always)]
pub(crate) fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints the cache; it reads nothing the program sees and never
    // faults, and `p` is a valid reference anyway.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((p as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
