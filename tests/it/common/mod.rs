#![allow(dead_code)]
//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};
use std::process::Command;

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nvcc13")
}

pub fn fixture(name: &str) -> PathBuf {
    fixtures().join(name)
}

/// `.cuda/lib/python3.*/site-packages/nvidia/cu13` (scripts/cuda-env.sh's venv), whatever
/// python3 made it.
fn venv_cu13() -> Option<PathBuf> {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cuda/lib");
    let mut found: Vec<PathBuf> = std::fs::read_dir(lib)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .map(|e| e.path().join("site-packages/nvidia/cu13"))
        .filter(|p| p.is_dir())
        .collect();
    found.sort();
    found.pop()
}

/// A CUDA tool (the repo's `.cuda` venv first, then PATH); a missing one fails the test:
/// scripts/test.sh installs the toolchain (scripts/cuda-env.sh).
pub fn cuda_tool(name: &str) -> PathBuf {
    if let Some(venv) = venv_cu13().map(|c| c.join("bin").join(name)) {
        if venv.exists() {
            return venv;
        }
    }
    if let Ok(path) = std::env::var("PATH") {
        for dir in std::env::split_paths(&path) {
            let p = dir.join(name);
            if p.exists() {
                return p;
            }
        }
    }
    panic!("{name} not found: run the tests through scripts/test.sh, or `source scripts/cuda-env.sh` first")
}

/// `(kind, name)` pairs from `cuobjdump --list-elf --list-ptx`, e.g. `("ELF", "sm_90a")`, in order.
pub fn cuobjdump_list(tool: &Path, file: &Path) -> Vec<(String, String)> {
    // cuobjdump resolves thin-archive members against its working directory.
    let out = Command::new(tool)
        .current_dir(file.parent().unwrap())
        .arg("--list-elf")
        .arg("--list-ptx")
        .arg(file.file_name().unwrap())
        .output()
        .expect("run cuobjdump");
    assert!(
        out.status.success(),
        "cuobjdump failed on {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut v = Vec::new();
    for line in text.lines() {
        let kind = if line.starts_with("ELF file") {
            "ELF"
        } else if line.starts_with("PTX file") {
            "PTX"
        } else {
            continue;
        };
        let name = line.rsplit(':').next().unwrap().trim();
        // `kernels.3.sm_90.cubin` -> `sm_90`
        let stem = name.rsplit_once('.').unwrap().0;
        let arch = stem.rsplit('.').next().unwrap().to_string();
        v.push((kind.to_string(), arch));
    }
    v
}

pub fn fatpack_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_fatpack"))
}

/// A folder with `ld` (and `ld.gold`, `ld.bfd`) linked to fatpack, for `gcc -B<dir>`.
pub fn wrapper_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in ["ld", "ld.gold", "ld.bfd", "ld.lld", "ld.mold"] {
        std::os::unix::fs::symlink(fatpack_bin(), dir.path().join(name)).unwrap();
    }
    dir
}

/// `$CUDA_HOME/lib` with cudart, from the repo's `.cuda` venv or CUDA_HOME.
/// `$CUDA_HOME/lib` with cudart; missing, the test fails (see [`cuda_tool`]).
pub fn cuda_lib() -> PathBuf {
    let cand = std::env::var_os("CUDA_HOME")
        .map(|h| PathBuf::from(h).join("lib"))
        .into_iter()
        .chain(venv_cu13().map(|c| c.join("lib")));
    for c in cand {
        if c.join("libcudart_static.a").exists() {
            return c;
        }
    }
    panic!("cudart not found: run the tests through scripts/test.sh, or `source scripts/cuda-env.sh` first")
}

/// Run a command, returning (status code, stdout, stderr).
pub fn run(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `fatpack inspect --json FILE`, parsed.
pub fn inspect_json(file: &Path) -> serde_json::Value {
    let (code, out, err) = run(Command::new(fatpack_bin())
        .args(["inspect", "--json"])
        .arg(file));
    assert_eq!(code, 0, "inspect {}: {err}", file.display());
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v[0].clone()
}

/// Each module's origin (`libkern.a(kernels.o)#0`, say) in an `inspect --json` report.
pub fn module_names(report: &serde_json::Value) -> Vec<String> {
    report["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["origin"].as_str().unwrap().to_string())
        .collect()
}

/// The fixtures hold less device code than `fatpack ld` packs by default
/// (`fatpack::link::PACK_THRESHOLD`): a test of packing asks for it, as a user would for a
/// small program, with this environment (a `--fatpack-mode` on the line wins over it).
pub const PACK_ALWAYS: (&str, &str) = ("FATPACK_MODE", "packed");

/// `g++ [-B<wrapper>] -o OUT INPUTS -L<cuda> EXTRA -lcudart_static ...`: a CUDA host link,
/// packed whatever the size of its device code when through the wrapper ([`PACK_ALWAYS`]).
pub fn gxx(
    wrapper: Option<&Path>,
    out: &Path,
    inputs: &[PathBuf],
    cuda: &Path,
    extra: &[&str],
) -> (i32, String, String) {
    let mut c = Command::new("g++");
    if let Some(w) = wrapper {
        c.arg(format!("-B{}", w.display()))
            .env(PACK_ALWAYS.0, PACK_ALWAYS.1);
    }
    c.arg("-o")
        .arg(out)
        .args(inputs)
        .arg(format!("-L{}", cuda.display()))
        .args(extra);
    c.args(["-lcudart_static", "-ldl", "-lpthread", "-lrt"]);
    run(&mut c)
}

/// The fixture program's objects: main.o, kernels.o, other.o.
pub fn fixture_objs() -> Vec<PathBuf> {
    ["main.o", "kernels.o", "other.o"]
        .iter()
        .map(|n| fixture(n))
        .collect()
}

/// Writes an executable file (a script, or a binary) at `p`. The file is written by a child process (`install`),
/// never through a descriptor of this one: a test thread that forks while this process holds
/// the file open for writing would make exec'ing it fail with "Text file busy" (ETXTBSY).
pub fn write_executable(p: &Path, contents: impl AsRef<[u8]>) {
    let src = p.with_extension("exe-src");
    std::fs::write(&src, contents).unwrap();
    let st = Command::new("install")
        .arg("-m755")
        .arg(&src)
        .arg(p)
        .status()
        .unwrap();
    assert!(st.success(), "install {}", p.display());
}

/// `name` on PATH; a missing one fails the test, saying how to install it (`.ci/run` does).
pub fn tool(name: &str, install: &str) -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        })
        .unwrap_or_else(|| panic!("{name} not found: {install} (.ci/run does)"))
}

/// Every file under `dir` (relative path, bytes), sorted.
pub fn tree(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap().display().to_string();
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

/// `n` copies of the fixture's big kernels (about 200 KB of compressed device code each,
/// four SASS archs and PTX), their symbols made local so that they link side by side; each
/// registers its own fatbin.
pub fn big_objects(dir: &Path, n: usize) -> Vec<PathBuf> {
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

/// `o` made to define the global function `symbol` (at the start of its `.text`), in place:
/// what another object or archive member can then call into.
pub fn define_symbol(o: &Path, symbol: &str) {
    let (code, _, err) = run(Command::new("objcopy")
        .arg(format!("--add-symbol={symbol}=.text:0,global,function"))
        .arg(o));
    assert_eq!(code, 0, "objcopy: {err}");
}

/// The archive `lib` (`ar rcs`) of `members`.
pub fn ar_rcs(lib: &Path, members: &[&Path]) {
    let (code, _, err) = run(Command::new("ar").arg("rcs").arg(lib).args(members));
    assert_eq!(code, 0, "ar: {err}");
}

/// `DIR/NAME.o` compiled by gcc from the C `source` (written to `DIR/NAME.c`).
pub fn c_object(dir: &Path, name: &str, source: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, source).unwrap();
    let o = dir.join(format!("{name}.o"));
    let (code, _, err) = run(Command::new("gcc")
        .args(["-c", "-fPIC", "-o"])
        .arg(&o)
        .arg(&c));
    assert_eq!(code, 0, "{err}");
    o
}

/// A fresh venv at `dir/venv` with `packages` installed from PyPI (the installers and
/// resolvers the package tests read their outputs with).
pub fn venv_with(dir: &Path, packages: &[&str]) -> PathBuf {
    let venv = dir.join("venv");
    let (code, _, err) = run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(Command::new(venv.join("bin/pip"))
        .args(["install", "-q", "--disable-pip-version-check"])
        .args(packages));
    assert_eq!(code, 0, "{err}");
    venv
}

/// The archs `inspect` finds in `file`, in its per-arch order.
pub fn archs_of(file: &Path) -> Vec<String> {
    inspect_json(file)["per_arch"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["arch"].as_str().unwrap().to_string())
        .collect()
}

/// `fatpack prune ARGS INPUT -o OUT`: its exit code and standard error.
/// `uv pip install -q` from `venv` in its variant mode (PEP 825 wheel variants, NVIDIA's
/// provider built in), its cache in `cache`; the machine's own GPU never decides: the
/// provider's forced arch is removed (a cell sets its own).
pub fn uv_variant_install(venv: &Path, cache: &Path) -> Command {
    let mut c = Command::new(venv.join("bin/uv"));
    c.args([
        "pip",
        "install",
        "-q",
        "--preview-features",
        "wheel-variants",
    ])
    .env("UV_CACHE_DIR", cache)
    .env_remove("NV_VARIANT_PROVIDER_FORCE_SM_ARCH");
    c
}

/// `fatpack index WHEELS -o OUT`, which must succeed.
pub fn fatpack_index(wheels: &Path, out: &Path) {
    let (code, _, err) = run(Command::new(fatpack_bin())
        .arg("index")
        .arg(wheels)
        .arg("-o")
        .arg(out));
    assert_eq!(code, 0, "{err}");
}

/// `fatpack split INPUT --into INTO`: its exit code and standard error.
pub fn split_into(input: &Path, into: &Path) -> (i32, String) {
    let (code, _, err) = run(Command::new(fatpack_bin())
        .arg("split")
        .arg(input)
        .arg("--into")
        .arg(into));
    (code, err)
}

pub fn prune_with(args: &[&str], input: &Path, out: &Path) -> (i32, String) {
    let (code, _, err) = run(Command::new(fatpack_bin())
        .arg("prune")
        .args(args)
        .arg(input)
        .arg("-o")
        .arg(out));
    (code, err)
}

/// A real linker at `path` that hangs on the link itself (a query such as `--version` goes to
/// ld): it appends "PID PPID" to `pids`, then becomes `sleep 60`; with `KILL_PARENT` set in its
/// environment it first kills the process that ran it with SIGKILL.
pub fn slow_linker(path: &Path, pids: &Path) {
    write_executable(
        path,
        format!(
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = -o ] && {{ echo $$ $PPID >> {}; [ -n \"$KILL_PARENT\" ] && kill -KILL $PPID; exec sleep 60; }}; done\nexec ld \"$@\"\n",
            pids.display()
        ),
    );
}

/// A temp folder for links that are stopped mid-way: `tmp/` (their TMPDIR), `out/` (their
/// outputs) and a [`slow_linker`] at `slow-ld` writing to `ld-pids`.
pub struct SlowLinkDirs {
    pub dir: tempfile::TempDir,
    pub tmp: PathBuf,
    pub out: PathBuf,
    pub slow: PathBuf,
    pub pids: PathBuf,
}

pub fn slow_link_dirs() -> SlowLinkDirs {
    let dir = tempfile::tempdir().unwrap();
    let (tmp, out) = (dir.path().join("tmp"), dir.path().join("out"));
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::create_dir_all(&out).unwrap();
    let (slow, pids) = (dir.path().join("slow-ld"), dir.path().join("ld-pids"));
    slow_linker(&slow, &pids);
    SlowLinkDirs {
        dir,
        tmp,
        out,
        slow,
        pids,
    }
}

/// Whether process `pid` is running (not gone, and not a zombie waiting to be reaped).
pub fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|st| {
        !st.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}
