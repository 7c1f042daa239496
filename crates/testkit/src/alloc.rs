//! The heap counter of the benches: a global allocator that forwards to the
//! system allocator and counts allocations, bytes allocated, bytes live and the
//! highest bytes live since [`reset_peak`] (the peak heap of what ran since).
//! Each bench binary that uses it installs it itself:
//! `#[global_allocator] static GLOBAL: alloc::Counting = alloc::Counting;`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// The counting allocator.
pub struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
static ALLOCATED: AtomicU64 = AtomicU64::new(0);
static LIVE: AtomicI64 = AtomicI64::new(0);
static PEAK: AtomicI64 = AtomicI64::new(0);

/// Adds `delta` bytes to the live count and raises the peak to it.
fn grow(delta: i64) {
    let live = LIVE.fetch_add(delta, Ordering::Relaxed) + delta;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: forwards to the system allocator unchanged; only counts.
#[allow(unsafe_code)] // a global allocator is an unsafe trait (SAFETY below)
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED.fetch_add(layout.size() as u64, Ordering::Relaxed);
        grow(layout.size() as i64);
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        ALLOCATED.fetch_add(new_size as u64, Ordering::Relaxed);
        grow(new_size as i64 - layout.size() as i64);
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// The counters at one moment; subtract two to price what happened between.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heap {
    /// Allocations (and reallocations) so far.
    pub allocations: u64,
    /// Bytes requested by them so far.
    pub allocated: u64,
    /// Bytes allocated and not freed.
    pub live: i64,
}

/// The highest bytes live since the last [`reset_peak`] (or the start).
pub fn peak() -> i64 {
    PEAK.load(Ordering::Relaxed)
}

/// Starts a new peak from the bytes live now.
pub fn reset_peak() {
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
}

/// The counters now.
pub fn heap() -> Heap {
    Heap {
        allocations: ALLOCATIONS.load(Ordering::Relaxed),
        allocated: ALLOCATED.load(Ordering::Relaxed),
        live: LIVE.load(Ordering::Relaxed),
    }
}

impl std::ops::Sub for Heap {
    type Output = Heap;
    fn sub(self, earlier: Heap) -> Heap {
        Heap {
            allocations: self.allocations - earlier.allocations,
            allocated: self.allocated - earlier.allocated,
            live: self.live - earlier.live,
        }
    }
}
