//! `fatpack inspect` from the command line: every input kind, JSON and table, and bad input
//! (a clear error naming the file, a non-zero exit, never a panic).

use std::path::Path;
use std::process::Command;

use crate::common::*;

fn inspect(args: &[&str], file: &Path) -> (i32, String, String) {
    run(Command::new(fatpack_bin())
        .arg("inspect")
        .args(args)
        .arg(file))
}

#[test]
fn every_fixture_kind_is_reported() {
    for (name, kind, modules) in [
        ("kernels.o", "object", 1),
        ("libfixture.a", "archive", 2),
        ("libfixture_thin.a", "thin-archive", 2),
        ("libfixture.so", "shared-library", 3),
        ("fixture_exe", "executable", 4),
        ("kernels.fatbin", "fatbin", 1),
        ("kernels_sm86.cubin", "cubin", 1),
    ] {
        let r = inspect_json(&fixture(name));
        assert_eq!(r["kind"], kind, "{name}");
        assert_eq!(r["modules"].as_array().unwrap().len(), modules, "{name}");
        let (code, table, _) = inspect(&["--kernels"], &fixture(name));
        assert_eq!(code, 0);
        assert!(table.contains("total:"), "{name}: {table}");
    }
    let (_, table, _) = inspect(&["--kernels"], &fixture("kernels.o"));
    assert!(
        table.contains("void ns::axpy<float>(float, float const*, float*, int)"),
        "{table}"
    );
    assert!(table.contains("compute_90"));
    let r = inspect_json(&fixture("kernels_all.o"));
    let e = &r["modules"][0]["entries"][0];
    assert_eq!(e["compression"], "zstd");
    assert!(e["stored_size"].as_u64() < e["raw_size"].as_u64());
    assert_eq!(e["kernel_count"], 3);
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read(fixture("kernels_all.o")).unwrap();
    let fat = std::fs::read(fixture("kernels.fatbin")).unwrap();
    let find =
        |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle).unwrap();
    let magic = find(&good, &[0x50, 0xed, 0x55, 0xba]);
    let mut cases: Vec<(&str, Vec<u8>, &str)> = Vec::new();
    cases.push((
        "truncated.fatbin",
        fat[..fat.len() / 2].to_vec(),
        "truncated",
    ));
    let mut m = good.clone();
    m[magic] = 0x51;
    cases.push(("badmagic.o", m, "no fatbin magic"));
    let mut m = good.clone();
    // First entry's payload size (entry header at +16, size field at +8) far past the end.
    m[magic + 16 + 8..magic + 16 + 16].copy_from_slice(&0x7fff_0000u64.to_le_bytes());
    cases.push(("pastend.o", m, "runs past the container"));
    let mut m = good.clone();
    // Inside the first zstd frame (frame magic 28 b5 2f fd), a few bytes in.
    let z = find(&good, &[0x28, 0xb5, 0x2f, 0xfd]);
    for b in &mut m[z + 12..z + 40] {
        *b ^= 0x5a;
    }
    cases.push(("badzstd.o", m, "corrupt zstd"));
    cases.push(("empty.o", Vec::new(), "not an ELF"));
    cases.push(("text.o", b"hello world\n".to_vec(), "not an ELF"));
    for (name, bytes, want) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let (code, out, err) = inspect(&[], &p);
        assert_eq!(code, 1, "{name}: exit {code}, stderr {err}");
        assert!(out.is_empty(), "{name}: partial output {out}");
        assert!(err.contains(name) && err.contains(want), "{name}: {err}");
        assert!(!err.contains("panicked"), "{name}: {err}");
    }
}

#[test]
fn a_tampered_store_is_reported() {
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("app");
    assert_eq!(gxx(Some(w.path()), &exe, &fixture_objs(), &cuda, &[]).0, 0);
    let data = std::fs::read(&exe).unwrap();
    let (off, len) = fatpack::packed::store_range(&data).unwrap();
    // A byte in the middle of the blobs: the digest check on read catches it.
    let mut bad = data.clone();
    bad[(off + len / 2) as usize] ^= 0xff;
    let p = dir.path().join("tampered");
    std::fs::write(&p, &bad).unwrap();
    let (code, _, err) = inspect(&[], &p);
    assert_eq!(code, 1);
    assert!(
        err.contains("tampered") && (err.contains("digest") || err.contains("corrupt")),
        "{err}"
    );
    // The header: the store does not parse.
    let mut bad = data.clone();
    bad[off as usize] ^= 0xff;
    std::fs::write(&p, &bad).unwrap();
    let (code, _, err) = inspect(&[], &p);
    assert_eq!(code, 1);
    assert!(err.contains("tampered"), "{err}");
}

/// Several files, one of them bad: the good ones are reported, the bad one is named, and
/// the command fails at the end. A packed file whose store does not match its recorded
/// digest is reported and fails too. JSON carries its layout version, and kernels are
/// counted once however many archs carry them.
#[test]
fn several_files_report_the_good_ones_and_fail_at_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.fatbin");
    std::fs::write(
        &bad,
        &std::fs::read(fixture("kernels.fatbin")).unwrap()[..40],
    )
    .unwrap();
    for json in [false, true] {
        let mut c = Command::new(fatpack_bin());
        c.arg("inspect");
        if json {
            c.arg("--json");
        }
        let (code, out, err) = run(c
            .arg(fixture("kernels.o"))
            .arg(&bad)
            .arg(fixture("other.o")));
        assert_eq!(code, 1, "{err}");
        assert!(err.contains(&bad.display().to_string()), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        if json {
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            let reports = v.as_array().unwrap();
            assert_eq!(reports.len(), 2);
            assert_eq!(reports[0]["json_version"], 1);
        } else {
            assert!(
                out.contains("kernels.o") && out.contains("other.o"),
                "{out}"
            );
        }
    }
    let r = inspect_json(&fixture("kernels_all.o"));
    let per_entry: u64 = r["modules"][0]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kernel_count"].as_u64().unwrap())
        .sum();
    assert_eq!((r["totals"]["kernels"].as_u64(), per_entry), (Some(3), 15));

    // A packed side-file output next to another link's store.
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    for (exe, level) in [(&a, 3), (&b, 19)] {
        let (code, _, err) = gxx(
            Some(w.path()),
            exe,
            &fixture_objs(),
            &cuda,
            &[
                "-Wl,--fatpack-side-file",
                &format!("-Wl,--fatpack-level={level}"),
            ],
        );
        assert_eq!(code, 0, "{err}");
    }
    std::fs::copy(dir.path().join("b.fatpack"), dir.path().join("a.fatpack")).unwrap();
    let (code, out, err) = inspect(&[], &a);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("total:"), "{out}");
    assert!(err.contains("does not match the digest"), "{err}");
}
