//! `fatpack prune` of executables and shared libraries fatpack did not link: the freed
//! device code is cut out of the file (it shrinks), every loaded address stays, and the
//! result loads and runs, through every linker, PIE or not, with `-z separate-code` on and
//! off and with 4 KiB and 2 MiB segment alignment; a layout that cannot be cut keeps its
//! size and says why.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use object::{Object, ObjectSection};

/// `n` copies of the fixture's big kernels (about 200 KB of compressed device code each,
/// four SASS archs and PTX), their symbols made local so that they link side by side; each
/// registers its own fatbin.
fn big_objects(dir: &Path, n: usize) -> Vec<PathBuf> {
    (0..n)
        .map(|i| {
            let o = dir.join(format!("big{i}.o"));
            let (code, _, err) = run(Command::new("objcopy")
                .args(["--wildcard", "--localize-symbol=_Z*"])
                .arg(fixture("big_kernels_all.o"))
                .arg(&o));
            assert_eq!(code, 0, "objcopy: {err}");
            o
        })
        .collect()
}

/// The allocated sections (name, address, size) other than the device code.
fn host_sections(file: &Path) -> Vec<(String, u64, u64)> {
    let data = std::fs::read(file).unwrap();
    let f = object::File::parse(&*data).unwrap();
    f.sections()
        .filter(|s| s.address() != 0 && s.name() != Ok(".nv_fatbin"))
        .map(|s| (s.name().unwrap().to_string(), s.address(), s.size()))
        .collect()
}

/// What `eu-elflint --gnu-ld` says about `file`, as a set of messages.
fn elflint(file: &Path) -> BTreeSet<String> {
    let (_, out, err) = run(Command::new(tool("eu-elflint", "apt-get install elfutils"))
        .arg("--gnu-ld")
        .arg(file));
    out.lines()
        .chain(err.lines())
        .map(|l| l.replace(&*file.to_string_lossy(), "FILE"))
        .collect()
}

/// The device bytes a prune dropped, from its report.
fn dropped(report: &str) -> u64 {
    report
        .lines()
        .find_map(|l| l.split("device code ").nth(1))
        .and_then(|s| {
            let (a, b) = s.split_once(" -> ")?;
            Some(a.parse::<u64>().ok()? - b.split(' ').next()?.parse::<u64>().ok()?)
        })
        .expect("device code line")
}

/// Prunes `input` for 9.0 and checks the cut: smaller by about the dropped bytes (less than
/// two alignment units lost), the same host sections at the same addresses, no new
/// complaint from readelf or eu-elflint, only the kept entries listed.
fn prune_and_check(input: &Path, align: u64, what: &str) -> PathBuf {
    let out = input.with_extension("sm90");
    let (code, _, err) = run(Command::new(fatpack_bin())
        .args(["prune", "--for", "9.0"])
        .arg(input)
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 0, "{what}: {err}");
    assert!(!err.contains("keeps its size"), "{what}: {err}");
    let (before, after) = (
        std::fs::metadata(input).unwrap().len(),
        std::fs::metadata(&out).unwrap().len(),
    );
    let gone = dropped(&err);
    assert!(
        before - after + 2 * align > gone && before - after <= gone + align,
        "{what}: {before} -> {after} bytes, {gone} device bytes dropped"
    );
    assert_eq!(host_sections(input), host_sections(&out), "{what}");
    let (code, _, warnings) = run(Command::new("readelf").arg("-aW").arg(&out));
    assert_eq!(code, 0, "{what}");
    assert!(warnings.is_empty(), "{what}: readelf: {warnings}");
    let new: Vec<_> = elflint(&out).difference(&elflint(input)).cloned().collect();
    assert!(new.is_empty(), "{what}: eu-elflint: {new:?}");
    let listed = cuobjdump_list(&cuda_tool("cuobjdump"), &out);
    assert!(
        listed
            .iter()
            .all(|(k, a)| a == "sm_90" || (k == "PTX" && a == "sm_80")),
        "{what}: {listed:?}"
    );
    out
}

/// Executables (PIE and not) and a shared library with a program on it, through every
/// linker, with `-z separate-code` on and off: each pruned file runs.
#[test]
fn pruned_binaries_of_every_linker_shrink_and_run() {
    let cuda = cuda_lib();
    let dir = tempfile::tempdir().unwrap();
    let big = big_objects(dir.path(), 3);
    let mut objs = fixture_objs();
    objs.extend(big.iter().cloned());
    for linker in ["bfd", "gold", "lld", "mold"] {
        tool(
            &format!("ld.{linker}"),
            &format!("apt-get install {linker}"),
        );
        // gold has one layout (code and read-only data in one segment) and no such option.
        let layouts: &[&str] = match linker {
            "gold" => &["default"],
            _ => &["separate-code", "noseparate-code"],
        };
        for &code_layout in layouts {
            let mut flags = vec![format!("-fuse-ld={linker}")];
            if code_layout != "default" {
                flags.push(format!("-Wl,-z,{code_layout}"));
            }
            let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
            for pie in ["-pie", "-no-pie"] {
                let what = format!("{linker} {code_layout} {pie}");
                let exe = dir.path().join(format!("app-{linker}-{code_layout}{pie}"));
                let mut f = flags.clone();
                f.push(pie);
                let (code, _, err) = gxx(None, &exe, &objs, &cuda, &f);
                assert_eq!(code, 0, "{what}: {err}");
                let out = prune_and_check(&exe, 4096, &what);
                assert_eq!(
                    run(&mut Command::new(&out)).1,
                    "fixture main ok\n",
                    "{what}"
                );
            }
            // The device code in a shared library; the program links the pruned one.
            let what = format!("{linker} {code_layout} -shared");
            let lib_dir = dir.path().join(format!("lib-{linker}-{code_layout}"));
            std::fs::create_dir(&lib_dir).unwrap();
            let lib = lib_dir.join("libcut.so");
            let lib_objs = objs[1..].to_vec();
            let mut f = flags.clone();
            f.push("-shared");
            let (code, _, err) = gxx(None, &lib, &lib_objs, &cuda, &f);
            assert_eq!(code, 0, "{what}: {err}");
            let pruned = prune_and_check(&lib, 4096, &what);
            std::fs::rename(&pruned, &lib).unwrap();
            let exe = lib_dir.join("app");
            let (code, _, err) = run(Command::new("g++")
                .arg("-o")
                .arg(&exe)
                .arg(fixture("main.o"))
                .arg(format!("-L{}", lib_dir.display()))
                .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
                .arg("-lcut")
                .arg(format!("-L{}", cuda.display()))
                .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt"]));
            assert_eq!(code, 0, "{what}: {err}");
            assert_eq!(
                run(&mut Command::new(&exe)).1,
                "fixture main ok\n",
                "{what}"
            );
        }
    }
}

/// 2 MiB segment alignment (`-z max-page-size`, as cuSPARSE and cuFFT are linked): the cut
/// moves what follows by whole 2 MiB units. Too little freed code for one unit: the file
/// keeps its size, pruned in place, and says why.
#[test]
fn two_mib_alignment_cuts_whole_units_and_a_small_gain_falls_back_to_holes() {
    let cuda = cuda_lib();
    let dir = tempfile::tempdir().unwrap();
    let mut objs = fixture_objs();
    objs.extend(big_objects(dir.path(), 32));
    let exe = dir.path().join("app2m");
    let flags = ["-Wl,-z,max-page-size=0x200000", "-Wl,-z,noseparate-code"];
    let (code, _, err) = gxx(None, &exe, &objs, &cuda, &flags);
    assert_eq!(code, 0, "{err}");
    let out = prune_and_check(&exe, 0x200000, "2 MiB");
    assert_eq!(run(&mut Command::new(&out)).1, "fixture main ok\n");

    let small = dir.path().join("small2m");
    let (code, _, err) = gxx(None, &small, &fixture_objs(), &cuda, &flags);
    assert_eq!(code, 0, "{err}");
    let out = dir.path().join("small2m.sm90");
    let (code, _, err) = run(Command::new(fatpack_bin())
        .args(["prune", "--for", "9.0"])
        .arg(&small)
        .arg("-o")
        .arg(&out));
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("keeps its size") && err.contains("no whole alignment unit (0x200000"),
        "{err}"
    );
    assert_eq!(
        std::fs::metadata(&small).unwrap().len(),
        std::fs::metadata(&out).unwrap().len()
    );
    assert_eq!(run(&mut Command::new(&out)).1, "fixture main ok\n");
    let data = std::fs::read(&out).unwrap();
    let f = object::File::parse(&*data).unwrap();
    assert!(f.section_by_name(".nv_fatbin").is_some());
}
