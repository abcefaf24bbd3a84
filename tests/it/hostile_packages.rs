//! The hostile-package corpus (tests/it/packages/hostile.py): in every package format prune
//! reads (wheel, `.conda`, `.tar.bz2`, deb, folder), one package per class of attack or
//! damage: names and links that leave the install folder (`..`, absolute, a symlink chain,
//! a member written through a link), duplicates, members the manifest does not vouch for or
//! vouches for wrongly (RECORD, paths.json with its hard links, md5sums), container
//! checksums (zip CRC-32, gzip, bzip2), zip layouts (mismatched names, members sharing
//! bytes), metadata an output's name or rank is built from (Debian policy's fields, conda's
//! `index.json`), and a truncated fat ELF member. Each must be refused by `prune` with one
//! line naming the package and the member or field, exit 1, nothing written, no temp left,
//! the input untouched; `inspect` must not crash on any.

use std::path::Path;
use std::process::Command;

use crate::common::*;

/// A case of the corpus: its format, name, package and the words one of which its refusal
/// must hold.
type Case = (String, String, std::path::PathBuf, Vec<String>);

/// The corpus, written into `dir`: the hostile cases, and the valid packages beside them
/// that must still pass (hard links, links inside, Debian's absolute links between
/// top-level folders).
fn corpus(dir: &Path) -> (Vec<Case>, Vec<std::path::PathBuf>) {
    let venv = venv_with(dir, &["zstandard==0.23.0"]);
    let out = dir.join("corpus");
    std::fs::create_dir(&out).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/packages/hostile.py");
    let (code, _, err) = run(Command::new(venv.join("bin/python"))
        .arg(script)
        .arg(&out)
        .arg(fixture("libfixture.so")));
    assert_eq!(code, 0, "{err}");
    let cases: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("cases.json")).unwrap()).unwrap();
    let cases = cases
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap().to_string();
            let want = c["want"].as_array().unwrap();
            let want = want.iter().map(|w| w.as_str().unwrap().to_string());
            (s("format"), s("case"), s("path").into(), want.collect())
        })
        .collect();
    let valid: Vec<String> =
        serde_json::from_slice(&std::fs::read(out.join("valid.json")).unwrap()).unwrap();
    (cases, valid.into_iter().map(Into::into).collect())
}

/// Every file under `dir`, with its bytes' digest: what a command must leave as it was.
fn snapshot(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.is_dir() {
                stack.push(p.clone());
            }
            let digest = match meta.is_file() {
                true => blake3::hash(&std::fs::read(&p).unwrap())
                    .to_hex()
                    .to_string(),
                false => String::new(),
            };
            out.push((p.display().to_string(), digest));
        }
    }
    out.sort();
    out
}

#[test]
fn every_hostile_or_damaged_package_is_refused_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let (cases, valid) = corpus(dir.path());
    for package in &valid {
        let out = package.parent().unwrap().join("out");
        let (code, err) = prune_with(&["--for", "9.0"], package, &out);
        assert_eq!(code, 0, "{}: {err}", package.display());
        let written = std::fs::read_dir(&out)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let (code, _, err) = run(Command::new(fatpack_bin()).arg("inspect").arg(&written));
        assert_eq!(code, 0, "{err}");
    }
    assert_eq!(valid.len(), 4);
    let formats: std::collections::BTreeSet<&str> = cases.iter().map(|c| c.0.as_str()).collect();
    assert_eq!(
        formats.into_iter().collect::<Vec<_>>(),
        ["conda", "deb", "folder", "tarbz2", "wheel"]
    );
    let mut failures = Vec::new();
    for (format, case, input, want) in &cases {
        let case_dir = input.parent().unwrap();
        let before = snapshot(case_dir);
        let out = case_dir.join("out");
        let (code, err) = prune_with(&["--for", "9.0"], input, &out);
        let err = err.trim_end();
        let named = input.file_name().unwrap().to_str().unwrap();
        let ok = code == 1
            && !err.contains('\n')
            && err.contains(named)
            && want.iter().any(|w| err.contains(w.as_str()))
            && !out.exists()
            && snapshot(case_dir) == before;
        if !ok {
            failures.push(format!("{format}/{case}: exit {code}: {err}"));
        }
        // inspect reads the same package: an answer or an error, never a crash or a temp.
        let (code, _, err) = run(Command::new(fatpack_bin()).arg("inspect").arg(input));
        if !(code == 0 || code == 1) || err.contains("panicked") || snapshot(case_dir) != before {
            failures.push(format!("inspect {format}/{case}: exit {code}: {err}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// `fatpack index` builds pages and URLs from wheel file names: a name that is not a
/// wheel's (markup, quotes) is refused, nothing written.
#[test]
fn index_refuses_a_wheel_name_that_is_not_one() {
    let dir = tempfile::tempdir().unwrap();
    let wheels = dir.path().join("wheels");
    std::fs::create_dir(&wheels).unwrap();
    let name = "cut<script>fix-1.0-py3-none-linux_x86_64.whl";
    std::fs::write(wheels.join(name), b"PK").unwrap();
    let out = dir.path().join("index");
    let (code, _, err) = run(Command::new(fatpack_bin())
        .arg("index")
        .arg(&wheels)
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("cut<script>fix") && err.contains("refused"),
        "{err}"
    );
    assert!(!out.exists());
}
