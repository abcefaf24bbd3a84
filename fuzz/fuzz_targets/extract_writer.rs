//! `fatpack extract`'s writer: whatever the input (seeded with every fixture kind), extract
//! either writes every file it reports, and nothing else, into the output folder, or fails
//! and leaves nothing: no temp file, no partial set, no folder it created.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::write(&input, data).unwrap();
    let out = dir.path().join("out/sub");
    let listing = |p: &std::path::Path| -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = std::fs::read_dir(p)
            .map(|r| r.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    for fatbins in [false, true] {
        match fatpack::extract::extract(&input, &out, None, fatbins) {
            Ok(x) => {
                let mut files = x.files.clone();
                files.sort();
                assert_eq!(listing(&out), files, "extract wrote what it reports, nothing else");
                std::fs::remove_dir_all(dir.path().join("out")).unwrap();
            }
            Err(_) => {
                assert!(!dir.path().join("out").exists(), "a failed extract left its folder");
            }
        }
        assert_eq!(listing(dir.path()), vec![input.clone()], "nothing beside the input");
    }
    assert_eq!(std::fs::read(&input).unwrap(), data, "the input is unchanged");
});
