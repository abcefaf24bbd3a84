//! The fatbin container parser and everything downstream of it that reads untrusted bytes:
//! entry headers, nvcc's zstd/LZ4 payloads, the cubin ELF reader, the PTX scanner, fatpack
//! stubs, and the ELF/archive scan of whole input files.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(fbs) = fatpack::fatbin::parse_all(data) {
        for fb in &fbs {
            let bytes = fb.to_bytes();
            // Whatever parsed must write back to something that parses the same.
            let (again, _) = fatpack::fatbin::parse_one(&bytes, 0).expect("re-parse");
            assert_eq!(&again, fb);
            for e in &fb.entries {
                let _ = e.options();
                let _ = e.identifier();
                if let Ok(p) = e.payload() {
                    let _ = fatpack::cubin::read(&p);
                    let _ = fatpack::ptx::kernels(&p);
                }
            }
        }
    }
    let _ = fatpack::fatbin::spans(data);
    let _ = fatpack::format::stub::parse_all(data);
    let _ = fatpack::cubin::read(data);
    // A thin archive names other files to read; that is its job, not a parser's.
    if fatpack::inputs::sniff(data) != fatpack::inputs::FileKind::ThinArchive {
        let _ = fatpack::inputs::scan_bytes(std::path::Path::new("fuzz-input"), data);
    }
});
