//! Rewriting an ELF object's fatbins into stubs (`elf::sections`, `rewrite::object`) and
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
    let mut name = |o: &str, i: usize| format!("{o}#{i}");
    if let Ok((out, _)) =
        fatpack::rewrite::rewrite_object("fuzz.o", data, &scanned.sections, &mut name)
    {
        // A rewritten object is an ELF object whose device sections hold only stubs.
        use object::{Object, ObjectSection};
        let f = object::File::parse(&*out).expect("rewritten object parses");
        for name in fatpack::inputs::DEVICE_SECTIONS {
            if let Some(sec) = f.section_by_name(name) {
                let bytes = sec.data().expect("section data");
                fatpack::format::stub::parse_all(bytes).expect("only stubs");
            }
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let (i, o) = (dir.path().join("in.o"), dir.path().join("out.o"));
    std::fs::write(&i, data).unwrap();
    use fatpack::selection::{parse_capabilities, parse_keep, Selection};
    let keep = Selection::Keep {
        targets: parse_keep("sm_90").unwrap(),
        allow_empty: true,
    };
    let opts = fatpack::package::Options::default();
    let _ = fatpack::package::prune(&i, &o, &keep, &opts);
    let for_two = Selection::For(parse_capabilities("9.0,8.6").unwrap());
    let _ = fatpack::package::prune(&i, &o, &for_two, &opts);
});
