//! blake3 of a module's decoded code on two threads. The runtime checks every entry it
//! hands cudart against the store's index, and on one core hashing a few-MB cubin costs about
//! a third of what decoding it does, on the path to the program's first kernel. blake3 is a
//! tree: the subtrees of one input hash independently and merge into the same root
//! (`blake3::hazmat`), so the result is exactly `blake3::hash`.

use blake3::hazmat::{left_subtree_len, merge_subtrees_root, ChainingValue, HasherExt, Mode};
use core::ffi::c_void;

/// Below this a thread costs more than it saves.
const MIN_SPLIT: usize = 512 * 1024;

/// One subtree of the input: where it starts in the whole, its bytes, its chaining value.
struct Piece {
    offset: u64,
    data: *const u8,
    len: usize,
    cv: ChainingValue,
}

impl Piece {
    fn hash(&mut self) {
        // SAFETY: `data`/`len` come from a live slice that outlives this piece (see blake3).
        let data = unsafe { core::slice::from_raw_parts(self.data, self.len) };
        let mut h = blake3::Hasher::new();
        h.set_input_offset(self.offset);
        h.update(data);
        self.cv = h.finalize_non_root();
    }
}

extern "C" fn hash_piece(p: *mut c_void) -> *mut c_void {
    // SAFETY: `p` is a Piece of `blake3` below, joined before it goes away and not touched
    // by the spawning thread meanwhile.
    unsafe { &mut *p.cast::<Piece>() }.hash();
    core::ptr::null_mut()
}

/// blake3 of `data`: its two top subtrees on two threads (on one if no thread can be made).
pub(crate) fn blake3(data: &[u8]) -> [u8; 32] {
    if data.len() < MIN_SPLIT {
        return *blake3::hash(data).as_bytes();
    }
    let left = left_subtree_len(data.len() as u64) as usize;
    let mut l = Piece {
        offset: 0,
        data: data.as_ptr(),
        len: left,
        cv: [0; 32],
    };
    let mut r = Piece {
        offset: left as u64,
        data: data[left..].as_ptr(),
        len: data.len() - left,
        cv: [0; 32],
    };
    let mut tid: libc::pthread_t = 0;
    // SAFETY: the thread gets a pointer to `l`, which lives until the join below; `data`
    // outlives both pieces.
    let started = unsafe {
        libc::pthread_create(
            &mut tid,
            core::ptr::null(),
            hash_piece,
            (&mut l as *mut Piece).cast(),
        )
    } == 0;
    r.hash();
    if started {
        // SAFETY: the thread created above, joined once.
        unsafe { libc::pthread_join(tid, core::ptr::null_mut()) };
    } else {
        l.hash();
    }
    *merge_subtrees_root(&l.cv, &r.cv, Mode::Hash).as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equals_blake3_at_every_shape() {
        let data: alloc::vec::Vec<u8> = (0..3_500_000u32)
            .map(|i| i.wrapping_mul(2654435761) as u8)
            .collect();
        for n in [
            0,
            1,
            1024,
            MIN_SPLIT - 1,
            MIN_SPLIT,
            MIN_SPLIT + 1,
            1 << 20,
            (1 << 20) + 1025,
            2_809_920,
            3_500_000,
        ] {
            assert_eq!(
                blake3(&data[..n]),
                *blake3::hash(&data[..n]).as_bytes(),
                "{n}"
            );
        }
    }
}
