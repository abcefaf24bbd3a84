//! Whether a link is worth packing: packing adds the runtime (about 180 KB of host code, and
//! a first launch that reads the store) and buys a smaller output, device code out of every
//! relocation's reach and one store per build. Below [`PACK_THRESHOLD`] of device code none
//! of that pays (BENCHMARKS.md, "When packing pays": `bench/pack_threshold.sh`), so under
//! `--fatpack-mode=auto` the line goes to the real linker unchanged and the output is the
//! plain toolchain's, byte for byte. `fatpack prune`, `split` and `inspect` read such an
//! output as they read any plain build.

use super::options::Mode;
use super::plan::Planned;
use super::session::Session;

/// The least device code (bytes of fatbin sections the link takes in: its objects', and the
/// archive members it pulls, [`super::archive_pull`]) that
/// `--fatpack-mode=auto` packs. Measured (`bench/pack_threshold.sh`, nvcc 13.0 `-arch=all`
/// objects, g++ with static cudart): with SASS as nvcc leaves it (uncompressed) the packed
/// program is the larger below about 240 KB of device code and the smaller above it; with
/// entries nvcc compressed itself (`-Xfatbin=-compress-all`, `--compress-mode=size`) it is
/// larger by the runtime at every size up to 360 KB measured. Twice the first crossover
/// leaves room for code that compresses worse than those kernels (5x).
pub const PACK_THRESHOLD: u64 = 512 << 10;

/// Device code in a link's inputs from which it is packed whatever the estimate of what it
/// takes in says: half the 2 GiB a relocation reaches, so that no estimate (archive members
/// pulled through a linker script or a shared library's reference are not followed) hands
/// the real linker a link that plain ld cannot make.
pub const NEAR_2GIB: u64 = 1 << 30;

/// Why this link is not packed, for `--fatpack-verbose` and `--fatpack-dry-run`; `None`
/// where it is.
pub(super) fn left_unpacked(s: &Session, planned: &[Planned]) -> Option<String> {
    if planned.is_empty() {
        return Some("no device code in the objects and archives linked".into());
    }
    let held: u64 = planned.iter().map(Planned::device_bytes).sum();
    decide(s.opts.mode, held, || {
        super::archive_pull::device_code_linked(&s.line, planned, &s.maps, PACK_THRESHOLD)
    })
}

/// The decision for a link whose inputs hold `held` bytes of device code, of which `linked`
/// estimates what it takes in (asked only where it matters).
fn decide(mode: Mode, held: u64, linked: impl FnOnce() -> u64) -> Option<String> {
    if mode != Mode::Auto || held >= NEAR_2GIB {
        return None;
    }
    let bytes = if held < PACK_THRESHOLD {
        held
    } else {
        linked()
    };
    (bytes < PACK_THRESHOLD).then(|| {
        let of = if held > bytes {
            format!(" (of {held} in its inputs: archive members it does not take left out)")
        } else {
            String::new()
        };
        format!(
            "{bytes} bytes of device code linked{of}, under the {} KiB below which packing \
             cannot pay (--fatpack-mode=packed packs it)",
            PACK_THRESHOLD >> 10
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packed from the threshold up, by what the link takes in; never left to the real linker
    /// near 2 GiB, whatever the estimate; `packed` and `tail` are never decided here.
    #[test]
    fn the_decision() {
        let never = || -> u64 { panic!("estimate asked for") };
        assert!(decide(Mode::Auto, 1000, never).is_some());
        assert!(decide(Mode::Auto, PACK_THRESHOLD - 1, never).is_some());
        assert!(decide(Mode::Auto, PACK_THRESHOLD, || PACK_THRESHOLD).is_none());
        let small = decide(Mode::Auto, 1 << 20, || 5000).unwrap();
        assert!(small.starts_with("5000 bytes of device code linked (of 1048576 in its inputs"));
        assert!(decide(Mode::Auto, NEAR_2GIB, never).is_none());
        assert!(decide(Mode::Packed, 10, never).is_none());
        assert!(decide(Mode::Tail, 10, never).is_none());
    }
}
