//! Blobs ordered by likeness, for release stores' solid groups (`--group-order similar`).
//!
//! A group is one zstd frame, so what it saves is what its blobs repeat of each other. In
//! module order a group holds one module's archs and its neighbours' cubins; the kernels that
//! repeat each other most (instantiations of one template) may sit in modules far apart.
//! Measured on cuBLASLt 13's cubins, 8 MiB groups (BENCHMARKS.md, "Blob order inside release
//! groups"): a chain of nearest MinHash signatures stores family 10.x in 0.82x the bytes of
//! module order, the whole library in 0.90x.
//!
//! Each blob gets a MinHash signature of its 16-byte shingles (two 8-byte words at each
//! 8-byte step: SASS instructions are 16 bytes, their alignment in a blob 8), one-permutation
//! style: one hash per shingle, the least in each of [`BINS`] bins. The chain starts at the
//! first blob in module order and goes on to the unplaced blob sharing the most bins with
//! the last placed, the first in module order on ties; so the order depends only on the
//! blobs' bytes and their module order. Chains are built over runs of at most [`RUN`]
//! blobs, so the work stays quadratic in a run, not in a library.

/// Bins of a signature: two blobs' share of equal bins estimates their Jaccard similarity.
pub const BINS: usize = 64;
/// Shingles read per blob at most (evenly spaced): a 28 MiB cubin costs what 1 MiB does.
const SHINGLES: usize = 1 << 17;
/// Blobs per chain at most: 4,096² signature comparisons, under a second.
pub const RUN: usize = 4096;

/// A blob's signature: the least shingle hash in each bin (`u64::MAX` where none fell).
pub type Signature = [u64; BINS];

/// The signature of `raw` (see the module's comment).
pub fn signature(raw: &[u8]) -> Signature {
    let mut sig = [u64::MAX; BINS];
    let words = raw.len() / 8;
    let shingles = words.saturating_sub(1);
    let step = shingles / SHINGLES + 1;
    let word = |i: usize| -> u64 {
        let mut w = [0u8; 8];
        if let Some(b) = raw.get(i * 8..i * 8 + 8) {
            w.copy_from_slice(b);
        }
        u64::from_le_bytes(w)
    };
    for i in (0..shingles).step_by(step) {
        let h = mix(word(i).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ word(i + 1));
        let bin = (h >> 58) as usize; // the top 6 bits: 64 bins
        if let Some(s) = sig.get_mut(bin) {
            *s = (*s).min(h & (u64::MAX >> 6));
        }
    }
    sig
}

/// splitmix64's finaliser: every input bit moves every output bit, so bins fill evenly.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Bins two signatures share (bins empty in both do not count).
fn shared(a: &Signature, b: &Signature) -> u32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| u32::from(x == y && *x != u64::MAX))
        .sum()
}

/// Indices into `sigs` (blobs in module order) in chain order: each run of [`RUN`] blobs a
/// chain of nearest neighbours (see the module's comment).
pub fn chain(sigs: &[Signature]) -> Vec<usize> {
    chain_in_runs(sigs, RUN)
}

fn chain_in_runs(sigs: &[Signature], run_len: usize) -> Vec<usize> {
    let mut order = Vec::with_capacity(sigs.len());
    for (r, run) in sigs.chunks(run_len.max(1)).enumerate() {
        let base = r * run_len;
        let mut left = vec![true; run.len()];
        let mut last = 0;
        left[0] = false;
        order.push(base);
        for _ in 1..run.len() {
            let mut best: Option<(u32, usize)> = None;
            for (i, sig) in run.iter().enumerate() {
                if !left[i] {
                    continue;
                }
                let s = shared(&run[last], sig);
                if best.is_none_or(|(b, _)| s > b) {
                    best = Some((s, i));
                }
            }
            let Some((_, next)) = best else { break };
            left[next] = false;
            order.push(base + next);
            last = next;
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of "kernel" `k` (a pattern of 16-byte instructions) with `salt` mixed into
    /// every 64th instruction: blobs of one kernel share most shingles, of two kernels none.
    fn blob(k: u64, salt: u64, len: usize) -> Vec<u8> {
        (0..len / 16)
            .flat_map(|i| {
                let i = i as u64;
                let op = mix(k * 1_000_003 + i % 977);
                let arg = if i % 64 == 0 { mix(salt ^ i) } else { op ^ k };
                [op.to_le_bytes(), arg.to_le_bytes()].concat()
            })
            .collect()
    }

    #[test]
    fn alike_blobs_end_up_next_to_each_other() {
        // Module order alternates two kernels; the chain puts each kernel's blobs together,
        // starting from the first blob: kernel 0's three, then kernel 1's.
        let blobs: Vec<Vec<u8>> = (0..6).map(|i| blob(i % 2, i, 64 << 10)).collect();
        let sigs: Vec<Signature> = blobs.iter().map(|b| signature(b)).collect();
        assert!(
            shared(&sigs[0], &sigs[2]) > 40,
            "{}",
            shared(&sigs[0], &sigs[2])
        );
        assert!(
            shared(&sigs[0], &sigs[1]) < 4,
            "{}",
            shared(&sigs[0], &sigs[1])
        );
        let order = chain(&sigs);
        assert_eq!(order[0], 0);
        let (mut first, mut then) = (order[..3].to_vec(), order[3..].to_vec());
        first.sort_unstable();
        then.sort_unstable();
        assert_eq!((first, then), (vec![0, 2, 4], vec![1, 3, 5]), "{order:?}");
    }

    #[test]
    fn every_blob_once_ties_in_module_order_and_runs_apart() {
        // Equal signatures: ties go to module order, so the chain is the module order.
        let same = vec![signature(&blob(7, 0, 4096)); 10];
        assert_eq!(chain(&same), (0..10).collect::<Vec<_>>());
        // Empty and tiny blobs have empty signatures; they share nothing and are still placed.
        let tiny: Vec<Signature> = [&b""[..], b"1234567", b"0123456789abcdef"]
            .iter()
            .map(|b| signature(b))
            .collect();
        assert_eq!(chain(&tiny), [0, 1, 2]);
        assert_eq!(shared(&tiny[0], &tiny[0]), 0);
        // More blobs than a run: each run is a chain of its own, every index once. Even
        // blobs share a bin, odd ones another, so each run is its first blob's parity in
        // module order, then the other's.
        let many: Vec<Signature> = (0..13)
            .map(|i| {
                let mut s = [u64::MAX; BINS];
                s[i % 2] = 1;
                s
            })
            .collect();
        assert_eq!(
            chain_in_runs(&many, 5),
            [0, 2, 4, 1, 3, 5, 7, 9, 6, 8, 10, 12, 11]
        );
    }
}
