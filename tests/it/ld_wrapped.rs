//! A real linker that is a wrapper adding library directories of its own, as Nix's bintools
//! wrapper does (`-L` for every input of the build, from `NIX_LDFLAGS`): `fatpack ld` finds
//! a library the line names where the wrapped linker finds it, or says which it could not.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// `dir/lib{name}.a` of `members`.
fn library(dir: &Path, name: &str, members: &[&str]) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let lib = dir.join(format!("lib{name}.a"));
    let paths: Vec<PathBuf> = members.iter().map(|m| fixture(m)).collect();
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    ar_rcs(&lib, &refs);
    lib
}

/// A script that runs `linker` with `-L before` ahead of its arguments and `-L after` behind
/// them (where nixpkgs' wrapper puts NIX_LDFLAGS_BEFORE and NIX_LDFLAGS).
fn wrapping(dir: &Path, linker: &str, before: &Path, after: &Path) -> PathBuf {
    let w = dir.join(format!("wrapped-{linker}"));
    write_executable(
        &w,
        format!(
            "#!/bin/sh\nexec {linker} -L{} \"$@\" -L{}\n",
            before.display(),
            after.display()
        ),
    );
    w
}

/// `g++ -B<fatpack> main.o [-L DIR] -lkern -lcudart_static ...` with `FATPACK_REAL_LD=wrapper`
/// (cudart's folder named on the line: only the kernels' library is the wrapper's to find).
fn link_through(
    wrapper: &Path,
    out: &Path,
    line_dir: Option<&Path>,
    extra_env: &[(&str, &str)],
) -> (i32, String, String) {
    let fp = wrapper_dir();
    let mut c = Command::new("g++");
    c.arg(format!("-B{}", fp.path().display()))
        .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
        .env("FATPACK_REAL_LD", wrapper)
        .arg("-o")
        .arg(out)
        .arg(fixture("main.o"))
        .args(line_dir.map(|d| format!("-L{}", d.display())))
        .arg("-lkern")
        .arg(format!("-L{}", cuda_lib().display()))
        .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt"]);
    for (k, v) in extra_env {
        c.env(k, v);
    }
    run(&mut c)
}

fn origins(out: &Path) -> Vec<String> {
    module_names(&inspect_json(out))
}

/// GNU ld and gold through a wrapper: the library only the wrapper's directories hold is
/// packed, and where both of its directories hold one of that name, the one the linker takes
/// (the directory ahead of the line's) is the one packed. With the defaults cache off, and on
/// (a folder `FATPACK_CACHE_DIR` names: the wrapper's answer is kept there, and read back by
/// the next link).
#[test]
fn a_wrappers_own_library_directories_are_searched_in_its_order() {
    let dir = tempfile::tempdir().unwrap();
    let (before, after) = (dir.path().join("before"), dir.path().join("after"));
    let cache = dir.path().join("cache");
    for linker in ["ld.bfd", "ld.gold"] {
        // Only behind the line's directories.
        std::fs::create_dir_all(&before).unwrap();
        let _ = std::fs::remove_file(before.join("libkern.a"));
        library(&after, "kern", &["kernels.o", "other.o"]);
        let wrapper = wrapping(dir.path(), linker, &before, &after);
        let out = dir.path().join(format!("app-{linker}"));
        for cache_dir in ["", cache.to_str().unwrap(), cache.to_str().unwrap()] {
            let (code, _, err) =
                link_through(&wrapper, &out, None, &[("FATPACK_CACHE_DIR", cache_dir)]);
            assert_eq!(code, 0, "{linker}, cache {cache_dir:?}: {err}");
            let o = origins(&out);
            assert!(
                o.iter().any(|m| m == "libkern.a(kernels.o)#0"),
                "{linker}: {o:?}"
            );
        }
        let kept = std::fs::read_dir(cache.join("linker-defaults")).map_or(0, |d| d.count());
        assert!(kept >= 1, "{linker}: the wrapper's answer was not kept");
        // A library of that name ahead of the line's directories too: ld takes that one.
        library(&before, "kern", &["kernels_all.o", "other.o"]);
        let (code, _, err) = link_through(&wrapper, &out, None, &[("FATPACK_CACHE_DIR", "")]);
        assert_eq!(code, 0, "{linker}: {err}");
        let o = origins(&out);
        assert!(
            o.iter().any(|m| m == "libkern.a(kernels_all.o)#0")
                && !o.iter().any(|m| m == "libkern.a(kernels.o)#0"),
            "{linker}: {o:?}"
        );
    }
}

/// A wrapper around a linker that does not say where it looks (lld): the link fails with
/// the library fatpack could not find named, and nothing is written.
#[test]
fn a_library_only_the_real_linker_found_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let (before, after) = (dir.path().join("before"), dir.path().join("after"));
    std::fs::create_dir_all(&before).unwrap();
    library(&after, "kern", &["kernels.o", "other.o"]);
    let wrapper = wrapping(dir.path(), "ld.lld", &before, &after);
    let out = dir.path().join("app");
    let (code, _, err) = link_through(&wrapper, &out, None, &[("FATPACK_CACHE_DIR", "")]);
    assert_ne!(code, 0, "{err}");
    assert!(
        err.contains("fatpack could not find -lkern where the real linker did")
            && err.contains("with -L"),
        "{err}"
    );
    assert!(!out.exists(), "an output was left");
    // Named on the line, it is found and packed.
    let (code, _, err) = link_through(&wrapper, &out, Some(&after), &[("FATPACK_CACHE_DIR", "")]);
    assert_eq!(code, 0, "{err}");
    assert!(origins(&out).iter().any(|m| m == "libkern.a(kernels.o)#0"));
}
