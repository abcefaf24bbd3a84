//! Build-system integrations, end to end, with the fatpack of this build:
//! `examples/cmake/run.sh` (a CMake CUDA project, shared library and executable, linked
//! through fatpack in every documented way) and `nix/test-hook.sh` (the Nix setup hook's
//! shell logic, and links through it, without Nix).
//!
//! Needs cmake, nvcc 13 and cudart (scripts/cuda-env.sh), g++, python3; a missing one fails
//! the test (scripts/test.sh and .ci/run install them).

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs a script with this build's fatpack and runtime and the CUDA toolchain; asserts it
/// succeeds, returns its stdout.
fn run_script(script: &str, args: &[&str], cuda_lib: &Path, nvcc: Option<&Path>) -> String {
    let mut cmd = Command::new("bash");
    cmd.arg(root().join(script))
        .args(args)
        .current_dir(root())
        .env("FATPACK_BIN", fatpack_bin())
        .env("CUDA_HOME", cuda_lib.parent().unwrap());
    if let Some(nvcc) = nvcc {
        // nvcc first on PATH: the scripts then use this toolchain as it is.
        let mut path = vec![nvcc.parent().unwrap().to_path_buf()];
        path.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        cmd.env("PATH", std::env::join_paths(path).unwrap());
    }
    let (code, out, err) = run(&mut cmd);
    assert_eq!(
        code, 0,
        "{script} {args:?} failed ({code})\n--- stdout\n{out}\n--- stderr\n{err}"
    );
    out
}

#[test]
fn cmake_example_links_through_fatpack() {
    tool("cmake", "apt-get install cmake");
    tool("python3", "apt-get install python3");
    let nvcc = cuda_tool("nvcc");
    let lib = cuda_lib();
    let out = run_script("examples/cmake/run.sh", &[], &lib, Some(&nvcc));
    eprintln!("{out}");
    assert!(out.contains("== cmake example: all"), "{out}");
    // The default variants, whatever else was added (ninja, linker-type).
    for v in ["toolchain", "flags", "rdc"] {
        assert!(
            out.contains(&format!("  {v}: packed .so + executable")),
            "variant {v} missing:\n{out}"
        );
    }
    assert!(
        out.contains("ok (no GPU)") || out.contains("ok (GPU)"),
        "{out}"
    );
}

#[test]
fn nix_setup_hook() {
    tool("g++", "apt-get install g++");
    tool("python3", "apt-get install python3");
    let lib = cuda_lib();
    let out = run_script("nix/test-hook.sh", &[], &lib, None);
    eprintln!("{out}");
    assert!(out.contains("nix hook tests: all "), "{out}");
    for case in [
        "sets-up",
        "idempotent",
        "opt-out",
        "flags-string",
        "link-plain",
        "link-through-cc-wrapper",
    ] {
        assert!(
            out.contains(&format!("ok   {case}\n")),
            "case {case}:\n{out}"
        );
    }
}

#[test]
fn build_systems_link_through_fatpack() {
    tool("make", "apt-get install make");
    tool("python3", "apt-get install python3");
    let lib = cuda_lib();
    let out = run_script("examples/build-systems/run.sh", &[], &lib, None);
    eprintln!("{out}");
    assert!(out.contains("  make: packed, runs"), "{out}");
    assert!(out.contains("  meson: packed, runs"), "{out}");
    assert!(
        out.contains("  cmake-depfile: packed, incremental"),
        "{out}"
    );
    assert!(
        out.contains("== build systems: all 3 linked through fatpack"),
        "{out}"
    );
}
