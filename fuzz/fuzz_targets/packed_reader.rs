//! Reading a packed output: where its store and digest are (`packed::locate`, used by
//! inspect and prune), its stubs, and `fatpack inspect` over the whole file.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("packed");
    std::fs::write(&path, data).unwrap();
    if let Ok(Some(p)) = fatpack::packed::locate(&path, data) {
        let _ = cubin_store::Store::parse(p.store.bytes());
    }
    let _ = fatpack::packed::linked_modules(&path);
    let _ = fatpack::inspect::inspect_path(&path);
});
