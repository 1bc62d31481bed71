//! Memory for packed weights: one allocation for a whole model, aligned to 2 MiB and
//! asked to be backed by huge pages, handed out in disjoint parts.
//!
//! Decode reads every weight once per token, so it runs at the speed memory is read.
//! On 4-KiB pages that read pays a page walk every 4 KiB; in a virtual machine each
//! walk is a nested one, and a 2-core EPYC/Xeon guest read 20 GB/s that way against
//! 31 GB/s from huge pages (`docs/performance.md`). Linux backs the memory with huge
//! pages where `transparent_hugepage` is `always` or `madvise`; elsewhere the advice is
//! ignored and nothing else changes.

use std::alloc::Layout;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::error::WeightError;

/// A huge page's size, the allocation's alignment.
const HUGE_PAGE: usize = 2 << 20;

/// Every part starts on a cache line.
const PART_ALIGN: usize = 64;

/// One allocation; freed when the last part that points into it goes.
struct Block {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: the block is plain bytes; each part's bytes are written once, before the part
// exists, and only read afterwards.
unsafe impl Send for Block {}
unsafe impl Sync for Block {}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `WeightMemory::new`.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// Room for `bytes` of weights, handed out front to back.
pub struct WeightMemory {
    block: Arc<Block>,
    next: usize,
}

/// A part of a [`WeightMemory`]: some weight's bytes.
pub struct Part {
    block: Arc<Block>,
    start: usize,
    len: usize,
}

impl WeightMemory {
    /// Room for parts of `sizes` bytes (each started on a cache line).
    pub fn for_parts(sizes: impl IntoIterator<Item = usize>) -> Result<Self, WeightError> {
        let no_memory = WeightError::NoMemory { bytes: usize::MAX };
        let total = sizes.into_iter().try_fold(0usize, |total, n| {
            total.checked_add(n.checked_next_multiple_of(PART_ALIGN)?)
        });
        Self::new(total.ok_or(no_memory)?)
    }

    fn new(bytes: usize) -> Result<Self, WeightError> {
        let no_memory = || WeightError::NoMemory { bytes };
        let align = if bytes >= HUGE_PAGE {
            HUGE_PAGE
        } else {
            PART_ALIGN
        };
        let layout =
            Layout::from_size_align(bytes.max(PART_ALIGN), align).map_err(|_| no_memory())?;
        // SAFETY: the layout's size is not zero.
        let ptr = NonNull::new(unsafe { std::alloc::alloc(layout) }).ok_or_else(no_memory)?;
        #[cfg(target_os = "linux")]
        if align == HUGE_PAGE {
            // SAFETY: the range is the allocation just made, untouched so far (the
            // advice applies when its pages are first written). Failure only means
            // small pages.
            unsafe {
                libc::madvise(
                    ptr.as_ptr().cast(),
                    layout.size() / HUGE_PAGE * HUGE_PAGE,
                    libc::MADV_HUGEPAGE,
                )
            };
        }
        Ok(WeightMemory {
            block: Arc::new(Block { ptr, layout }),
            next: 0,
        })
    }

    /// The next `len` bytes, zeroed and then written by `fill`; `None` when the room
    /// asked for in [`WeightMemory::for_parts`] is used up.
    pub fn take(&mut self, len: usize, fill: impl FnOnce(&mut [u8])) -> Option<Part> {
        let start = self.next;
        let end = start.checked_add(len)?;
        if end > self.block.layout.size() {
            return None;
        }
        // SAFETY: `start..end` lies in the block and was handed out to nobody before
        // (`next` only moves forward); no part reads it until `fill` is done.
        let bytes = unsafe {
            let at = self.block.ptr.as_ptr().add(start);
            at.write_bytes(0, len);
            std::slice::from_raw_parts_mut(at, len)
        };
        fill(bytes);
        self.next = end
            .checked_next_multiple_of(PART_ALIGN)
            .unwrap_or(usize::MAX);
        Some(Part {
            block: Arc::clone(&self.block),
            start,
            len,
        })
    }
}

impl Part {
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the part's range lies in the block, which lives as long as `self`,
        // and was written before the part was made.
        unsafe { std::slice::from_raw_parts(self.block.ptr.as_ptr().add(self.start), self.len) }
    }
}
