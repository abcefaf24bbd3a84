//! Builds the runtime archive that `fatpack ld` links into every packed output, for the
//! target this fatpack is built for, and hands it to the crate to embed (src/link/runtime.rs).
//!
//! This is the one recipe for the runtime: `cargo build`, `cargo install`, the tests, the
//! Python wheel and the Nix package all get it from here. It is a nested cargo build of
//! `runtime/` with the workspace's `rt` profile (LTO, size-optimised, panic=abort) into a
//! target folder of its own (so it never waits on the outer build's lock), then stripped of
//! debug info. The archives' blake3 digests are recorded so that fatpack can check what it
//! writes out at link time, and `fatpack --version` can name them.

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

const ARCHIVE: &str = "libfatpack_rt.a";

fn main() {
    let root = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    let target = env::var("TARGET").expect("set by cargo");
    for p in [
        "runtime",
        "format",
        "cubin-store/src",
        "cubin-store/Cargo.toml",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
    println!("cargo:rerun-if-env-changed=FATPACK_RT_OBJCOPY");
    println!("cargo:rerun-if-env-changed=FATPACK_RT_EXTRA_TARGETS");

    // The runtime for the target fatpack runs on, then any others asked for (cross links:
    // `FATPACK_RT_EXTRA_TARGETS=aarch64-unknown-linux-gnu`, with that Rust target and a C
    // cross compiler for zstd installed).
    let mut targets = vec![target.clone()];
    for t in env::var("FATPACK_RT_EXTRA_TARGETS")
        .unwrap_or_default()
        .split(',')
    {
        let t = t.trim();
        if !t.is_empty() && !targets.iter().any(|have| have == t) {
            targets.push(t.to_owned());
        }
    }
    let mut table = String::from("&[\n");
    for t in &targets {
        let built = build_runtime(&root, &out, t);
        let dir = out.join(t);
        std::fs::create_dir_all(&dir).expect("creating OUT_DIR/<target>");
        let dest = dir.join(ARCHIVE);
        strip_debug(&built, &dest, t);
        let bytes =
            std::fs::read(&dest).unwrap_or_else(|e| panic!("reading {}: {e}", dest.display()));
        table += &format!(
            "    Embedded {{ target: {t:?}, blake3: {:?}, bytes: include_bytes!({:?}) }},\n",
            blake3::hash(&bytes).to_hex().as_str(),
            dest.display().to_string()
        );
    }
    table += "]\n";
    let gen = out.join("embedded_runtimes.rs");
    std::fs::write(&gen, table).unwrap_or_else(|e| panic!("writing {}: {e}", gen.display()));
}

/// Where the nested build keeps its files: beside the outer build's profile folders (so a
/// debug and a release build of fatpack share one runtime build), else inside OUT_DIR.
fn nested_target_dir(out: &Path) -> PathBuf {
    // OUT_DIR is <target-dir>[/<triple>]/<profile>/build/fatpack-<hash>/out.
    let shared = out
        .ancestors()
        .nth(3)
        .filter(|_| out.ancestors().nth(2).and_then(Path::file_name) == Some("build".as_ref()))
        .and_then(Path::parent);
    match shared {
        Some(dir) => dir.join("fatpack-rt"),
        None => out.join("fatpack-rt"),
    }
}

fn build_runtime(root: &Path, out: &Path, target: &str) -> PathBuf {
    let target_dir = nested_target_dir(out);
    let cargo = env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .arg("build")
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .args(["-p", "fatpack-rt", "--profile", "rt", "--target", target])
        .arg("--target-dir")
        .arg(&target_dir);
    // Never rewrite the lock file the outer build is reading.
    if root.join("Cargo.lock").is_file() {
        cmd.arg("--locked");
    }
    // The runtime is built the same whatever the outer build was asked for: no sanitizer,
    // coverage or clippy flags meant for the CLI, and no target folder of the outer build.
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_TARGET_DIR",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("running cargo to build the fatpack runtime: {e}"));
    assert!(
        status.success(),
        "building the fatpack runtime (runtime/, profile rt, target {target}) failed: {status}"
    );
    target_dir.join(target).join("rt").join(ARCHIVE)
}

/// Copies `from` to `to` without debug sections: the archive goes into every packed output,
/// and Rust's std brings megabytes of DWARF. Uses `FATPACK_RT_OBJCOPY`, else
/// `<target>-objcopy` for a cross build, else `objcopy`; without any, the archive is
/// embedded as built (a warning says so).
fn strip_debug(from: &Path, to: &Path, target: &str) {
    let host = env::var("HOST").unwrap_or_default();
    let mut tools: Vec<OsString> = Vec::new();
    if let Some(t) = env::var_os("FATPACK_RT_OBJCOPY") {
        tools.push(t);
    }
    if target != host {
        let prefix = target.replacen("-unknown", "", 1);
        tools.push(format!("{prefix}-objcopy").into());
    }
    tools.push("objcopy".into());
    for tool in &tools {
        let ok = Command::new(tool)
            .arg("--strip-debug")
            .arg(from)
            .arg(to)
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return;
        }
    }
    println!(
        "cargo:warning=no objcopy for {target} found: the fatpack runtime is embedded with its \
         debug info (packed outputs get bigger); set FATPACK_RT_OBJCOPY"
    );
    std::fs::copy(from, to).unwrap_or_else(|e| panic!("copying {}: {e}", from.display()));
}
