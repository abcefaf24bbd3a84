//! Build-system integrations, end to end, with the fatpack of this build:
//! `examples/cmake/run.sh` (a CMake CUDA project, shared library and executable, linked
//! through fatpack in every documented way) and `nix/test-hook.sh` (the Nix setup hook's
//! shell logic, and links through it, without Nix).
//!
//! Needs cmake, nvcc 13 and cudart (scripts/cuda-env.sh), g++, python3; a missing one fails
//! the test (scripts/test.sh and .ci/run install them).

use std::path::Path;
use std::process::Command;

use crate::common::*;

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
    tool("ld.mold", "apt-get install mold");
    for v in ["toolchain", "flags", "rdc", "mold", "run"] {
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
        "link-mold",
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
    assert!(
        out.contains("  make under fatpack run: packed, runs"),
        "{out}"
    );
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

/// nix/prune-for.nix, evaluated by Nix (Debian's nix-bin) against tests/nix/stand-in.nix:
/// one prune step per output, with the capabilities as given.
#[test]
fn nix_prune_function_evaluates() {
    let nix = tool("nix-instantiate", "apt-get install nix-bin");
    let (code, out, err) = run(Command::new(nix)
        .args(["--eval", "--strict", "--json", "-E"])
        .arg("let s = import ./stand-in.nix; in { inherit (s.pruned) name outputs buildCommand passthru; }")
        .current_dir(root().join("tests/nix")));
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["name"], "magma-2.9.0");
    assert_eq!(v["outputs"], serde_json::json!(["out", "dev"]));
    let cmd = v["buildCommand"].as_str().unwrap();
    let steps: Vec<&str> = cmd.lines().collect();
    assert_eq!(steps.len(), 2, "{cmd}");
    let (out, dev) = (
        "/nix/store/22222222222222222222222222222222-magma-2.9.0",
        "/nix/store/33333333333333333333333333333333-magma-2.9.0-dev",
    );
    for (step, (src, var)) in steps.iter().zip([(out, "$out"), (dev, "$dev")]) {
        // fatpack itself prunes each output; every output's path is replaced in both.
        assert!(step.starts_with("fatpack prune --for '8.9,9.0' "), "{step}");
        assert!(
            step.contains(&format!("--replace-path {out}=\"$out\"")),
            "{step}"
        );
        assert!(
            step.contains(&format!("--replace-path {dev}=\"$dev\"")),
            "{step}"
        );
        assert!(step.ends_with(&format!(" {src} -o \"{var}\"")), "{step}");
    }
    assert_eq!(
        v["passthru"]["cudaCapabilities"],
        serde_json::json!(["8.9", "9.0"])
    );
    // An empty list is refused at evaluation.
    let (code, _, err) = run(Command::new(tool("nix-instantiate", "apt-get install nix-bin"))
        .args(["--eval", "--strict", "-E"])
        .arg("let s = import ./stand-in.nix; in (s.pruneFor s.pkg { cudaCapabilities = []; }).name")
        .current_dir(root().join("tests/nix")));
    assert_ne!(code, 0);
    assert!(err.contains("cudaCapabilities is empty"), "{err}");
}

/// The build step of that function (`fatpack prune --for CAPS --replace-path SRC=DST SRC -o
/// DST`) on a package-like tree: a packed program (mapped store) and a side-file one, an
/// ordinary fat shared library, a symlink and a text file that point into the source path.
/// The copy is pruned for 9.0, every reference to the source path now names the copy, the
/// source is untouched.
#[test]
fn nix_prune_tree_step() {
    tool("python3", "apt-get install python3");
    let cuda = cuda_lib();
    let w = wrapper_dir();
    let base = tempfile::tempdir().unwrap();
    let src = base.path().join("store/aaaaaaaa-pkg-1.0");
    let dst = base.path().join("store/bbbbbbbb-pkg-1.0");
    std::fs::create_dir_all(src.join("bin")).unwrap();
    std::fs::create_dir_all(src.join("lib")).unwrap();
    std::fs::create_dir_all(src.join("share")).unwrap();
    let app = src.join("bin/app");
    let (code, _, err) = gxx(Some(w.path()), &app, &fixture_objs(), &cuda, &[]);
    assert_eq!(code, 0, "{err}");
    let side = src.join("bin/app-side");
    let (code, _, err) = gxx(
        Some(w.path()),
        &side,
        &fixture_objs(),
        &cuda,
        &["-Wl,--fatpack-side-file"],
    );
    assert_eq!(code, 0, "{err}");
    std::fs::copy(fixture("libfixture.so"), src.join("lib/libfixture.so")).unwrap();
    std::os::unix::fs::symlink(
        src.join("lib/libfixture.so"),
        src.join("lib/libfixture.so.1"),
    )
    .unwrap();
    std::fs::write(
        src.join("share/paths.txt"),
        format!("prefix={}\n", src.display()),
    )
    .unwrap();
    let before = std::fs::read(&app).unwrap();

    let (code, out, err) = run(Command::new(fatpack_bin())
        .args(["prune", "--for", "9.0", "--replace-path"])
        .arg(format!("{}={}", src.display(), dst.display()))
        .arg(&src)
        .arg("-o")
        .arg(&dst));
    assert_eq!(code, 0, "{out}\n{err}");
    for f in ["bin/app:", "bin/app-side:", "lib/libfixture.so:"] {
        assert!(err.contains(&format!("fatpack prune: {f} ")), "{f}: {err}");
    }

    let archs = |p: &Path| -> Vec<String> {
        let r = inspect_json(p);
        r["per_arch"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["arch"].as_str().unwrap().to_string())
            .collect()
    };
    for f in ["bin/app", "bin/app-side", "lib/libfixture.so"] {
        let got = archs(&dst.join(f));
        assert!(
            got.iter()
                .all(|a| a == "sm_90" || a.starts_with("compute_")),
            "{f}: {got:?}"
        );
        assert!(archs(&src.join(f)).len() > got.len(), "{f}");
    }
    assert_eq!(inspect_json(&dst.join("bin/app"))["packed"]["mapped"], true);
    assert!(
        std::fs::metadata(dst.join("bin/app")).unwrap().len()
            < std::fs::metadata(&app).unwrap().len()
    );
    for f in ["bin/app", "bin/app-side"] {
        let (code, out, err) = run(&mut Command::new(dst.join(f)));
        assert_eq!((code, out.as_str()), (0, "fixture main ok\n"), "{f}: {err}");
    }
    assert_eq!(
        std::fs::read_link(dst.join("lib/libfixture.so.1")).unwrap(),
        dst.join("lib/libfixture.so")
    );
    assert_eq!(
        std::fs::read_to_string(dst.join("share/paths.txt")).unwrap(),
        format!("prefix={}\n", dst.display())
    );
    assert_eq!(
        std::fs::read(&app).unwrap(),
        before,
        "the source was modified"
    );
}

/// The Nix files against a real nixpkgs: the package, the example derivation with the hook
/// and `pruneFor` of a real package instantiate. Needs a nixpkgs source tree
/// (FATPACK_NIXPKGS=/path/to/nixpkgs) and a Nix at least as new as its `lib/minver.nix`
/// (current nixpkgs: 2.18; Debian 12's nix-bin is 2.8, which reads nixpkgs 24.05); neither
/// can be fetched where the test command runs, hence ignored by default, never skipped
/// silently: `FATPACK_NIXPKGS=... cargo test --test it -- --ignored nix_real_nixpkgs`.
#[test]
#[ignore = "needs a nixpkgs tree: FATPACK_NIXPKGS=/path cargo test --test it -- --ignored nix_real_nixpkgs"]
fn nix_real_nixpkgs_instantiates() {
    let nixpkgs = std::env::var_os("FATPACK_NIXPKGS").expect(
        "FATPACK_NIXPKGS=/path/to/a/nixpkgs/tree must name the nixpkgs to evaluate against",
    );
    let nix = tool("nix-instantiate", "apt-get install nix-bin");
    let expr = r#"
      let
        pkgs = import <nixpkgs> { config.allowUnfree = true; };
        fatpack = pkgs.callPackage ./nix/fatpack.nix { };
        pruneFor = pkgs.callPackage ./nix/prune-for.nix { inherit fatpack; };
      in {
        package = fatpack;
        example = import ./nix/example.nix { inherit pkgs; };
        pruned = pruneFor pkgs.hello { cudaCapabilities = [ "9.0" ]; };
      }"#;
    let mut include = std::ffi::OsString::from("nixpkgs=");
    include.push(&nixpkgs);
    let (code, out, err) = run(Command::new(nix)
        .arg("-I")
        .arg(include)
        .args(["-E", expr])
        .current_dir(root()));
    assert_eq!(code, 0, "{err}");
    let drvs: Vec<&str> = out.lines().collect();
    assert_eq!(drvs.len(), 3, "{out}");
    assert!(
        drvs.iter()
            .all(|d| d.starts_with("/nix/store/") && d.ends_with(".drv")),
        "{out}"
    );
}
