//! The one-module fatbin container handed to cudart, built in memory aligned as nvcc's
//! `.nv_fatbin` is. The layout itself is fatpack-format's; this file only owns the memory.

#[allow(unused_imports)]
use crate::prelude::*;
use core::fmt;

use core::ops::Range;

use fatpack_format::fatbin::{plan_empty_container, EncodeError, EntryInput, PayloadForm};

/// A byte buffer aligned to 16, so cudart sees the container as nvcc's `.nv_fatbin` would be.
pub(crate) struct Aligned {
    words: Vec<u128>,
    len: usize,
}

impl Aligned {
    fn zeroed(len: usize) -> Self {
        Aligned {
            words: vec![0u128; len.div_ceil(16)],
            len,
        }
    }

    pub(crate) fn as_bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: `words` holds at least `len` initialised bytes; u8 has no alignment needs,
        // and `&mut self` makes the borrow unique.
        unsafe { core::slice::from_raw_parts_mut(self.words.as_mut_ptr().cast::<u8>(), self.len) }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.words.as_ptr().cast()
    }
}

impl fmt::Debug for Aligned {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Aligned({} bytes)", self.len)
    }
}

/// One container for `entries` (payloads as `forms` say, not read), its headers written: the
/// caller decodes (or copies) each payload into its range, so a module's code is written
/// once, where cudart will read it.
pub(crate) fn empty_container(
    entries: &[EntryInput<'_>],
    forms: &[PayloadForm],
) -> Result<(Aligned, Vec<Range<usize>>), EncodeError> {
    let plan = plan_empty_container(entries, forms)?;
    let mut out = Aligned::zeroed(plan.len);
    plan.write_headers(out.as_bytes_mut());
    Ok((out, plan.ranges))
}
