//! The archive name path of `fatpack prune` and the link: members read from an input
//! archive (any names: non-UTF-8, long, thin) and written back by the archive writer keep
//! their names and bytes, or the writer refuses with an error; never a malformed archive.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lib.a");
    let maps = fatpack::inputs::Maps::default();
    let Ok(members) = fatpack::inputs::archive::members(&path, "lib.a", data, &maps) else {
        return;
    };
    let out: Vec<fatpack::rewrite::archive::Member> = members
        .iter()
        .map(|m| fatpack::rewrite::archive::Member {
            name: m.name.clone(),
            data: std::borrow::Cow::Borrowed(&m.bytes[..]),
            pieces: None,
        })
        .collect();
    let Ok(bytes) = fatpack::rewrite::archive::write_archive(&out) else {
        return;
    };
    let again = fatpack::inputs::archive::members(&path, "lib.a", &bytes, &maps)
        .expect("a written archive reads back");
    assert_eq!(again.len(), out.len());
    for (a, m) in again.iter().zip(&out) {
        let base = m.name.rsplit(|&b| b == b'/').next().unwrap();
        assert_eq!(&a.name[..], base);
        assert_eq!(&a.bytes[..], &m.data[..]);
    }
});
