//! Store reader fuzzer: parse, walk, read and verify arbitrary bytes.
#![no_main]

use cubin_store::{Store, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fn exercise(data: &[u8]) {
    let Ok(store) = Store::parse(data) else {
        return;
    };
    let _ = (store.digest(), store.stats(), store.dictionary());
    for m in store.modules() {
        let _ = store.module_by_name(m.name());
        for e in m.entries() {
            let _ = (e.meta(), e.arch_name(), e.blob(), e.is_shared());
            if let Ok(raw) = store.read_entry(&e) {
                assert_eq!(raw.len() as u64, e.raw_len());
            }
        }
    }
    for b in store.blobs() {
        let _ = store.read_blob(b.id);
    }
    let _ = store.verify();
}

fuzz_target!(|data: &[u8]| {
    exercise(data);
    // Mutated indexes almost never keep a valid blake3; recompute the digests so the index
    // validator and blob decoding get fuzzed too, not just the digest check.
    if data.len() >= HEADER_LEN {
        let mut resealed = data.to_vec();
        cubin_store::testing::reseal(&mut resealed);
        if resealed != data {
            exercise(&resealed);
        }
    }
});
