//! The heap limit: QuickJS allocates through [`CappedHeap`], which refuses an allocation that
//! would take the runtime past the running call's limit and remembers that it did, so the call
//! reports [`crate::JsError::OutOfMemory`] (QuickJS itself may then have no memory left to
//! build an error object, and throws `null`).

use rquickjs::allocator::{Allocator, RustAllocator};
use std::cell::Cell;

thread_local! {
    /// The running call's heap limit, in bytes.
    static LIMIT: Cell<usize> = const { Cell::new(usize::MAX) };
    /// Whether an allocation was refused since [`start_call`].
    static REFUSED: Cell<bool> = const { Cell::new(false) };
}

/// A call starts: the limit it runs under, and no refusal yet.
pub(crate) fn start_call(limit: usize) {
    LIMIT.with(|l| l.set(limit));
    REFUSED.with(|r| r.set(false));
}

/// Whether the running call reached its heap limit.
pub(crate) fn refused() -> bool {
    REFUSED.with(Cell::get)
}

/// Rust's allocator, counting the bytes the runtime holds.
pub(crate) struct CappedHeap {
    inner: RustAllocator,
    used: usize,
}

impl CappedHeap {
    pub(crate) fn new() -> CappedHeap {
        CappedHeap {
            inner: RustAllocator,
            used: 0,
        }
    }

    /// Whether `more` bytes fit under the limit (and if not, remembers the refusal).
    fn admits(&self, more: usize) -> bool {
        let fits = self
            .used
            .checked_add(more)
            .is_some_and(|total| total <= LIMIT.with(Cell::get));
        if !fits {
            REFUSED.with(|r| r.set(true));
        }
        fits
    }

    fn size_of(ptr: *mut u8) -> usize {
        if ptr.is_null() {
            return 0;
        }
        // SAFETY: every non-null pointer QuickJS hands back came from `inner` (this
        // allocator is the runtime's only one), which stores its size in front of it.
        unsafe { RustAllocator::usable_size(ptr) }
    }
}

// SAFETY: every method delegates the allocation itself to `RustAllocator` (whose contract
// holds unchanged) and only refuses requests or counts sizes around it.
unsafe impl Allocator for CappedHeap {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        if !self.admits(size) {
            return std::ptr::null_mut();
        }
        let p = self.inner.alloc(size);
        self.used += Self::size_of(p);
        p
    }

    fn calloc(&mut self, count: usize, size: usize) -> *mut u8 {
        if !count.checked_mul(size).is_some_and(|n| self.admits(n)) {
            return std::ptr::null_mut();
        }
        let p = self.inner.calloc(count, size);
        self.used += Self::size_of(p);
        p
    }

    /// # Safety
    /// `ptr` is null or came from this allocator (the trait's contract).
    unsafe fn dealloc(&mut self, ptr: *mut u8) {
        if ptr.is_null() {
            return;
        }
        self.used = self.used.saturating_sub(Self::size_of(ptr));
        // SAFETY: `ptr` came from `inner` (the caller's contract: same allocator).
        unsafe { self.inner.dealloc(ptr) }
    }

    /// # Safety
    /// `ptr` is null or came from this allocator (the trait's contract).
    unsafe fn realloc(&mut self, ptr: *mut u8, new_size: usize) -> *mut u8 {
        if ptr.is_null() {
            return self.alloc(new_size);
        }
        let old = Self::size_of(ptr);
        if new_size > old && !self.admits(new_size - old) {
            return std::ptr::null_mut();
        }
        // SAFETY: `ptr` is non-null and came from `inner` (the caller's contract).
        let p = unsafe { self.inner.realloc(ptr, new_size) };
        if !p.is_null() {
            self.used = self.used.saturating_sub(old) + Self::size_of(p);
        }
        p
    }

    /// # Safety
    /// `ptr` is null or came from this allocator (the trait's contract).
    unsafe fn usable_size(ptr: *mut u8) -> usize {
        Self::size_of(ptr)
    }
}
