//! Memory that does not follow a package's size: in every format prune reads (wheel,
//! `.conda`, `.tar.bz2`, deb), a package holding a fat ELF file with 1 GiB after its
//! sections (as debug info or data sits), and one holding a 1 GiB data file beside it, are
//! pruned and inspected in at most 300 MB of peak resident memory (`/usr/bin/time -f %M`);
//! the same packages around a library fatpack packed are split in as little.
//! tests/it/packages/big.py writes them, streamed.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// The peak resident memory of `fatpack ARGS` in KiB, and its exit code and stderr.
fn peak_kib(args: &[&std::ffi::OsStr]) -> (u64, i32, String) {
    let (code, _, err) = run(Command::new("/usr/bin/time")
        .args(["-f", "peak-kib %M"])
        .arg(fatpack_bin())
        .args(args));
    let peak = err
        .lines()
        .find_map(|l| l.strip_prefix("peak-kib "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no peak in {err}"));
    (peak, code, err)
}

const LIMIT_KIB: u64 = 300 * 1000;

/// Writes a package of `format` holding `lib` and 1 GiB more (`kind`: after `lib`'s
/// sections, or beside it) into `at`, streamed; its path.
fn big_package(venv: &Path, at: &Path, format: &str, kind: &str, lib: &Path) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/packages/big.py");
    let (code, out, err) = run(Command::new(venv.join("bin/python"))
        .arg(&script)
        .arg(at)
        .args([format, kind, "1024"])
        .arg(lib));
    assert_eq!(code, 0, "{err}");
    PathBuf::from(out.trim())
}

#[test]
fn a_gib_member_of_any_package_prunes_and_inspects_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let venv = venv_with(d, &["zstandard==0.23.0"]);
    let mut rows = Vec::new();
    for format in ["wheel", "conda", "tarbz2", "deb"] {
        for kind in ["elf", "data"] {
            let at = d.join(format!("{format}-{kind}"));
            let package = big_package(&venv, &at, format, kind, &fixture("libfixture.so"));
            let pruned = at.join("out");
            let (prune, code, err) = peak_kib(&[
                "prune".as_ref(),
                "--for".as_ref(),
                "9.0".as_ref(),
                package.as_os_str(),
                "-o".as_ref(),
                pruned.as_os_str(),
            ]);
            assert_eq!(code, 0, "{format} {kind}: {err}");
            assert_eq!(std::fs::read_dir(&pruned).unwrap().count(), 1);
            let (inspect, code, err) = peak_kib(&["inspect".as_ref(), package.as_os_str()]);
            assert_eq!(code, 0, "{format} {kind}: {err}");
            assert!(err.contains("peak-kib"), "{err}");
            rows.push(format!(
                "{format} {kind}: prune {prune} KiB, inspect {inspect} KiB"
            ));
            assert!(
                prune < LIMIT_KIB && inspect < LIMIT_KIB,
                "{format} {kind}: prune {prune} KiB, inspect {inspect} KiB"
            );
            std::fs::remove_dir_all(&at).unwrap();
        }
    }
    eprintln!("{}", rows.join("\n"));
}

#[test]
fn a_gib_member_of_any_package_splits_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let venv = venv_with(d, &["zstandard==0.23.0"]);
    let lib = crate::split_wheel::packed_library(d);
    let mut rows = Vec::new();
    for format in ["wheel", "conda", "tarbz2", "deb"] {
        for kind in ["elf", "data"] {
            let at = d.join(format!("{format}-{kind}"));
            let package = big_package(&venv, &at, format, kind, &lib);
            let into = at.join("split");
            let (split, code, err) = peak_kib(&[
                "split".as_ref(),
                package.as_os_str(),
                "--into".as_ref(),
                into.as_os_str(),
            ]);
            assert_eq!(code, 0, "{format} {kind}: {err}");
            // The host package and at least one device package.
            let written = std::fs::read_dir(&into).unwrap().count();
            assert!(written >= 2, "{format} {kind}: {written} packages\n{err}");
            rows.push(format!("{format} {kind}: split {split} KiB"));
            assert!(split < LIMIT_KIB, "{format} {kind}: split {split} KiB");
            std::fs::remove_dir_all(&at).unwrap();
        }
    }
    eprintln!("{}", rows.join("\n"));
}
