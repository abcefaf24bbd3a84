//! Rewriting an ELF object's fatbins into stubs (`rewrite::elf_edit`, `rewrite::object`) and
//! pruning it (`fatpack prune` on an object): whatever the bytes, an error or an object that
//! parses again, never a panic or an absurd allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::path::Path::new("fuzz.o");
    let Ok(scanned) = fatpack::inputs::scan_bytes(path, data) else {
        return;
    };
    if scanned.kind != fatpack::inputs::FileKind::Object {
        return;
    }
    let mut n = 0;
    if let Ok((out, _)) =
        fatpack::rewrite::rewrite_object("fuzz.o", data, &scanned.sections, &mut |o, i| {
            n += 1;
            format!("{o}#{i}")
        })
    {
        // A rewritten object is an object, and holds no fatbin any more.
        let again = fatpack::inputs::scan_bytes(path, &out).expect("rewritten object scans");
        assert!(again
            .sections
            .iter()
            .all(|s| s.containers.is_empty() || s.spans.is_empty()));
    }
    let dir = tempfile::tempdir().unwrap();
    let (i, o) = (dir.path().join("in.o"), dir.path().join("out.o"));
    std::fs::write(&i, data).unwrap();
    let keep = fatpack::prune::parse_keep("sm_90").unwrap();
    let _ = fatpack::prune::prune(&i, &o, &keep);
});
