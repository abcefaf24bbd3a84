//! Archives, regular and thin, as inputs: their members (thin ones name files, here in an
//! empty folder), and the device-code scan over them.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lib.a");
    let maps = fatpack::inputs::Maps::default();
    if let Ok(members) = fatpack::inputs::archive::members(&path, "lib.a", data, &maps) {
        for m in members {
            let _ = fatpack::inputs::scan_bytes(std::path::Path::new(&m.origin), &m.bytes);
        }
    }
    let _ = fatpack::inputs::locate(&path, data, &maps);
});
