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
        "rt-sources",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
    println!("cargo:rerun-if-env-changed=FATPACK_RT_OBJCOPY");
    println!("cargo:rerun-if-env-changed=FATPACK_RT_LD");
    println!("cargo:rerun-if-env-changed=FATPACK_RT_EXTRA_TARGETS");
    println!("cargo:rerun-if-env-changed=FATPACK_RT_RUSTFLAGS");
    println!("cargo:rerun-if-env-changed=FATPACK_RT_CFLAGS");

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
        let stripped = dir.join("stripped.a");
        strip_debug(&built, &stripped, t);
        let dest = dir.join(ARCHIVE);
        hide_symbols(&stripped, &dest, &dir, t);
        let bytes =
            std::fs::read(&dest).unwrap_or_else(|e| panic!("reading {}: {e}", dest.display()));
        // Named from OUT_DIR as the crate is compiled, not by the path this script saw: a
        // build through another path to the same target folder (a symlinked checkout) must
        // not leave the crate including a path that is gone.
        table += &format!(
            "    Embedded {{ target: {t:?}, blake3: {:?}, \
             bytes: include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{t}/{ARCHIVE}\")) }},\n",
            blake3::hash(&bytes).to_hex().as_str(),
        );
    }
    table += "]\n";
    let gen = out.join("embedded_runtimes.rs");
    std::fs::write(&gen, table).unwrap_or_else(|e| panic!("writing {}: {e}", gen.display()));
    static_unwinder(&out, &target);
}

/// Links fatpack's own executables with gcc's static unwinder (`libgcc_eh.a`) instead of
/// `libgcc_s.so.1`, as `-static-libgcc` does for C++ programs, and the `fatpack` executable
/// itself as a static PIE ([`static_pie`]).
///
/// Why: `fatpack ld` runs once per link, and in a small link its start-up is a fair share of
/// the whole (BENCHMARKS.md, "Small links"). Loading libgcc_s.so.1 runs its constructor,
/// which probes the CPU with `cpuid` (a trap to the hypervisor in a VM): 0.11 ms of a 2.2 ms
/// `fatpack ld` on the dev machine. rustc names the library itself (`-lgcc_s`, from std's
/// unwinder, unless the whole program is static), so this hands the linker a `libgcc_s.so`
/// of its own first in the search path: a one-line linker script naming the static archive.
/// Only in a native build whose C compiler (`cc`, what rustc links with) has that archive;
/// elsewhere nothing changes. The runtime fatpack links into other programs is not affected
/// (it has no unwinder).
fn static_unwinder(out: &Path, target: &str) {
    let native = env::var("HOST").is_ok_and(|h| h == target);
    if !native || !target.ends_with("-linux-gnu") {
        return;
    }
    let Some(path) = cc_file("libgcc_eh.a") else {
        return;
    };
    let dir = out.join("static-unwinder");
    std::fs::create_dir_all(&dir).expect("creating OUT_DIR/static-unwinder");
    write_if_changed(
        &dir.join("libgcc_s.so"),
        &format!("INPUT(\"{}\")\n", path.display()),
    );
    println!("cargo:rustc-link-search=native={}", dir.display());
    static_pie(out, &path);
}

/// Links the `fatpack` executable as a static PIE (`-static-pie`, glibc's static archives):
/// a process that loads no shared library starts 0.4 ms sooner on the dev machine (2.72 →
/// 2.31 ms for a small link's `fatpack ld` with the real linker replaced by `true`: no
/// `libc.so.6` and `libm.so.6` to map, relocate and bind, 21 fewer page faults;
/// BENCHMARKS.md, stop 51), a fifth of what `fatpack ld` adds to a small link. rustc names the C libraries itself (`-lc -lm
/// ...` after `-Bdynamic`), so, as for the unwinder, a folder searched by the executable's
/// link only holds a `libNAME.so` for each naming glibc's `libNAME.a`. Tests and examples
/// stay dynamic. Only where the C compiler has every archive and `rcrt1.o`; a build with
/// `FATPACK_DYNAMIC=1` (a distribution whose policy wants the C library shared) links as
/// before.
fn static_pie(out: &Path, unwinder: &Path) {
    println!("cargo:rerun-if-env-changed=FATPACK_DYNAMIC");
    if env::var_os("FATPACK_DYNAMIC").is_some_and(|v| !v.is_empty() && v != "0") {
        return;
    }
    const LIBS: [&str; 6] = ["c", "m", "pthread", "rt", "dl", "util"];
    let mut archives = Vec::new();
    for name in LIBS {
        let Some(a) = cc_file(&format!("lib{name}.a")) else {
            return;
        };
        archives.push((name, a));
    }
    let (Some(libgcc), Some(_)) = (cc_file("libgcc.a"), cc_file("rcrt1.o")) else {
        return;
    };
    let dir = out.join("static-pie");
    std::fs::create_dir_all(&dir).expect("creating OUT_DIR/static-pie");
    for (name, archive) in &archives {
        // The C library with what it needs of gcc's, as gcc's own -static-pie link groups them.
        let text = match *name {
            "c" => format!(
                "GROUP ( \"{}\" \"{}\" \"{}\" )\n",
                archive.display(),
                libgcc.display(),
                unwinder.display()
            ),
            _ => format!("INPUT ( \"{}\" )\n", archive.display()),
        };
        write_if_changed(&dir.join(format!("lib{name}.so")), &text);
    }
    println!("cargo:rustc-link-arg-bin=fatpack=-L{}", dir.display());
    println!("cargo:rustc-link-arg-bin=fatpack=-static-pie");
}

/// The absolute path of `name` among the C compiler's files, if it has it.
fn cc_file(name: &str) -> Option<PathBuf> {
    let o = Command::new("cc")
        .arg(format!("-print-file-name={name}"))
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    // gcc answers a bare name when it has no such file.
    (o.status.success() && path.is_absolute() && path.is_file()).then_some(path)
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

/// The crates the runtime is built from, each `rt-sources/<name>.toml` (its manifest) and
/// `rt-sources/<name>-src` (its `src/`): symlinks into the workspace in a checkout, the
/// files themselves in the published crate (cargo packages what the links point to; it
/// would leave out `runtime/` itself, a package of its own).
const RT_CRATES: [&str; 3] = ["runtime", "format", "cubin-store"];

/// A workspace of the runtime and the two crates it uses, under the nested build's target
/// folder, made from `rt-sources/` and the root manifest's shared sections; the same in a
/// checkout and in the published crate, so every build goes the way a crates.io build does.
fn runtime_workspace(root: &Path, target_dir: &Path) -> PathBuf {
    let ws = target_dir.join("workspace");
    // The root manifest as written: `Cargo.toml.orig` in a published crate (cargo rewrites
    // Cargo.toml there, without the workspace's sections).
    let orig = root.join("Cargo.toml.orig");
    let manifest = if orig.is_file() {
        orig
    } else {
        root.join("Cargo.toml")
    };
    let text = read_text(&manifest);
    let mut top = format!(
        "# Written by fatpack's build.rs from {}: the runtime's own workspace.\n\
         [workspace]\nmembers = {RT_CRATES:?}\nresolver = \"2\"\n\n",
        manifest.display()
    );
    top += &sections(&text, |h| {
        h == "[workspace.package]" || h.starts_with("[workspace.lints") || h == "[profile.rt]"
    });
    write_if_changed(&ws.join("Cargo.toml"), &top);
    for name in RT_CRATES {
        let from = root.join("rt-sources");
        // Its dev-dependencies are not needed to build it, and a vendored or offline build
        // of fatpack need not have them.
        let member = sections(&read_text(&from.join(format!("{name}.toml"))), |h| {
            !h.ends_with("dev-dependencies]")
        });
        write_if_changed(&ws.join(name).join("Cargo.toml"), &member);
        let src = from
            .join(format!("{name}-src"))
            .canonicalize()
            .unwrap_or_else(|e| panic!("rt-sources/{name}-src: {e}"));
        let link = ws.join(name).join("src");
        if std::fs::read_link(&link).ok().as_deref() != Some(src.as_path()) {
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&src, &link)
                .unwrap_or_else(|e| panic!("linking {}: {e}", link.display()));
        }
    }
    // The versions fatpack was built with (its lock holds everything the runtime uses);
    // the nested cargo drops the rest.
    let lock = root.join("Cargo.lock");
    if lock.is_file() {
        write_if_changed(&ws.join("Cargo.lock"), &read_text(&lock));
    }
    ws
}

fn read_text(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()))
}

/// The `[section]`s of a TOML file whose header `keep` accepts (the lines before the first
/// header are kept too), in order.
fn sections(text: &str, keep: impl Fn(&str) -> bool) -> String {
    let mut out = String::new();
    let mut on = true;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            on = keep(t);
        }
        if on {
            out += line;
            out.push('\n');
        }
    }
    out
}

/// Writes `text` to `p` unless it holds it already (a debug and a release build of fatpack
/// may write the same files at once: each writes a temp file and renames it).
fn write_if_changed(p: &Path, text: &str) {
    if std::fs::read_to_string(p).ok().as_deref() == Some(text) {
        return;
    }
    let dir = p.parent().expect("a file in a folder");
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    let tmp = dir.join(format!(".tmp-{}", std::process::id()));
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, p))
        .unwrap_or_else(|e| panic!("writing {}: {e}", p.display()));
}

fn build_runtime(root: &Path, out: &Path, target: &str) -> PathBuf {
    let target_dir = nested_target_dir(out);
    let ws = runtime_workspace(root, &target_dir);
    let cargo = env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&ws)
        .arg("build")
        .arg("--manifest-path")
        .arg(ws.join("Cargo.toml"))
        .args(["-p", "fatpack-rt", "--profile", "rt", "--target", target])
        // Without std: see runtime/src/lib.rs.
        .arg("--no-default-features")
        .arg("--target-dir")
        .arg(&target_dir);
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
    // No unwind tables (Rust and C): nothing unwinds through the runtime (panic = "abort",
    // and cudart's C API never throws), and they would be a sixth of what every packed
    // output pays for it. The C flags reach zstd through the cc crate.
    //
    // zstd's decoder, measured on a 2.8 MB cubin (BENCHMARKS.md): the default build decodes
    // at 1.8 GB/s in about 115 KB; zstd-sys `thin` at 0.95 GB/s in 31 KB. These defines
    // (one Huffman decoder, short sequences, no BMI2 dispatch, no error strings) keep its
    // inlining: 1.4 GB/s in 37 KB. ZSTD_TRACE=0: no weak `ZSTD_trace_decompress_*` hooks,
    // which a packed output would export as undefined dynamic symbols and call into
    // whatever library of the process defines them.
    //
    // A distribution's hardening flags for the code fatpack links into its users' binaries
    // go in FATPACK_RT_RUSTFLAGS (space-separated, after fatpack's own) and
    // FATPACK_RT_CFLAGS (for zstd's C, after the target's CFLAGS_<target> and fatpack's),
    // e.g. `-fstack-protector-strong -D_FORTIFY_SOURCE=2 -fcf-protection`.
    let mut rustflags = vec!["-Cforce-unwind-tables=no".to_owned()];
    rustflags.extend(
        env::var("FATPACK_RT_RUSTFLAGS")
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned),
    );
    cmd.env("CARGO_ENCODED_RUSTFLAGS", rustflags.join("\x1f"));
    let cflags_var = format!("CFLAGS_{}", target.replace('-', "_"));
    let mut cflags = env::var(&cflags_var).unwrap_or_default();
    cflags.push_str(
        " -fno-asynchronous-unwind-tables -fno-unwind-tables -DHUF_FORCE_DECOMPRESS_X1=1 \
         -DZSTD_FORCE_DECOMPRESS_SEQUENCES_SHORT=1 -DZSTD_STRIP_ERROR_STRINGS=1 -DDYNAMIC_BMI2=0 \
         -DZSTD_TRACE=0 ",
    );
    cflags.push_str(&env::var("FATPACK_RT_CFLAGS").unwrap_or_default());
    cmd.env(&cflags_var, cflags.trim());
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("running cargo to build the fatpack runtime: {e}"));
    assert!(
        status.success(),
        "building the fatpack runtime (runtime/, profile rt, target {target}) failed: {status}"
    );
    target_dir.join(target).join("rt").join(ARCHIVE)
}

/// The tool for `target`: `$FATPACK_RT_<TOOL>`, else `<target>-<tool>` for a cross build,
/// else the host's.
fn tools(tool: &str, target: &str) -> Vec<OsString> {
    let mut v: Vec<OsString> = Vec::new();
    if let Some(t) = env::var_os(format!("FATPACK_RT_{}", tool.to_uppercase())) {
        v.push(t);
    }
    if target != env::var("HOST").unwrap_or_default() {
        v.push(format!("{}-{tool}", target.replacen("-unknown", "", 1)).into());
    }
    v.push(tool.into());
    v
}

fn run_first(tools: &[OsString], args: &[&std::ffi::OsStr]) -> bool {
    tools.iter().any(|t| {
        Command::new(t)
            .args(args)
            .status()
            .is_ok_and(|s| s.success())
    })
}

/// How the runtime's `ld -r` joins its sections: one `.text`, `.rodata`, `.data.rel.ro`,
/// `.data` and `.bss` instead of one section per function and per constant (`-ffunction-sections`
/// and `-fdata-sections`, which rustc and the cc crate always use: about 1,100 sections).
/// The real linker of every packed link pays per input section (GNU ld matches each against
/// its script): joined, ld on the fixture program's packed line takes 1.5-5 ms less of about
/// 50 (BENCHMARKS.md, "The fixed cost of a link that packs"). The joining comes after
/// `--gc-sections`, so what no entry point reaches is still left out; a user's `--gc-sections` can no longer
/// drop the runtime's functions one by one (what it could drop: the entry points of the
/// wrapped calls a program never makes, a few KB). Sections the final link must still see
/// apart stay apart: the mergeable constants and strings (`.rodata.cst*`, `.rodata.str*`,
/// whose names the patterns leave out), COMDAT groups (`ld -r` keeps them), and every
/// section not named here. Addresses 0, as in ld's own `-r` script.
const JOIN_SECTIONS: &str = "\
/* Written by fatpack's build.rs: the runtime's sections joined by kind. */
SECTIONS {
  .text 0 : { *(.text .text.*) }
  .rodata 0 : { *(.rodata .rodata..L* .rodata._*) }
  .data.rel.ro 0 : { *(.data.rel.ro .data.rel.ro.*) }
  .data 0 : { *(.data .data.*) }
  .bss 0 : { *(.bss .bss.*) }
  .gcc_except_table 0 : { *(.gcc_except_table .gcc_except_table.*) }
}
";

/// The runtime as one object that exports nothing but its `__wrap_*` entry points, so that a
/// packed binary can also link its own zstd, blake3 or Rust code: `ld -r` joins the archive's
/// members (collecting the sections no entry point reaches, which keeps outputs small) and
/// their sections by kind ([`JOIN_SECTIONS`]), then `objcopy` makes every other defined symbol
/// local and drops the symbols no relocation needs. Written as an archive with a symbol index
/// of those entry points (by hand: binutils' `ar` may load an LTO plugin that cannot read
/// Rust's objects). Without the tools, the archive is used as it is and a warning says so.
fn hide_symbols(from: &Path, to: &Path, dir: &Path, target: &str) {
    let entries: Vec<String> = fatpack_format::link::WRAPPED_SYMBOLS
        .iter()
        .map(|s| format!("__wrap_{s}"))
        .collect();
    let joined = dir.join("joined.o");
    let hidden = dir.join("fatpack_rt.o");
    let script = dir.join("join-sections.ld");
    write_if_changed(&script, JOIN_SECTIONS);
    let join = |merged: bool| {
        let mut ld_args: Vec<OsString> = vec!["-r".into(), "--gc-sections".into()];
        if merged {
            ld_args.extend(["-T".into(), script.as_os_str().to_owned()]);
        }
        for e in &entries {
            ld_args.push("-u".into());
            ld_args.push(e.into());
        }
        ld_args.extend([
            "--whole-archive".into(),
            from.as_os_str().to_owned(),
            "-o".into(),
            joined.as_os_str().to_owned(),
        ]);
        let ld_refs: Vec<&std::ffi::OsStr> = ld_args.iter().map(|a| a.as_os_str()).collect();
        run_first(&tools("ld", target), &ld_refs)
    };
    // A linker that cannot take the script still joins the members (sections as they were).
    let localised = (join(true) || join(false))
        && run_first(
            &tools("objcopy", target),
            &[
                "--wildcard".as_ref(),
                "--keep-global-symbol=__wrap_*".as_ref(),
                // Drops the undefined symbols only the collected sections referred to: `ld -r`
                // turns zstd's weak `ZSTD_trace_*` references into strong ones, which would
                // then clash with a program's own libzstd.
                "--strip-unneeded".as_ref(),
                // The unwind tables `core` was precompiled with: nothing unwinds through the
                // runtime (see build_runtime), and they are 15 KB of every output.
                "--remove-section=.eh_frame".as_ref(),
                "--remove-section=.rela.eh_frame".as_ref(),
                joined.as_os_str(),
                hidden.as_os_str(),
            ],
        );
    if !localised {
        println!(
            "cargo:warning=no ld/objcopy for {target}: the fatpack runtime keeps its global \
             symbols (zstd, blake3, Rust std); set FATPACK_RT_LD and FATPACK_RT_OBJCOPY"
        );
        std::fs::copy(from, to).unwrap_or_else(|e| panic!("copying {}: {e}", from.display()));
        return;
    }
    let object =
        std::fs::read(&hidden).unwrap_or_else(|e| panic!("reading {}: {e}", hidden.display()));
    std::fs::write(to, archive_of("fatpack_rt.o", &object, &entries))
        .unwrap_or_else(|e| panic!("writing {}: {e}", to.display()));
}

/// A GNU `ar` archive of one member, with a symbol index naming `symbols` in it.
fn archive_of(name: &str, member: &[u8], symbols: &[String]) -> Vec<u8> {
    fn header(name: &str, size: usize) -> Vec<u8> {
        let h = format!("{name:<16}{:<12}{:<6}{:<6}{:<8}{size:<10}`\n", 0, 0, 0, 644);
        assert_eq!(h.len(), 60);
        h.into_bytes()
    }
    let mut names = Vec::new();
    for s in symbols {
        names.extend_from_slice(s.as_bytes());
        names.push(0);
    }
    let index_len = 4 + 4 * symbols.len() + names.len();
    let padded = |n: usize| n + n % 2;
    let member_at = 8 + 60 + padded(index_len);
    let mut out = b"!<arch>\n".to_vec();
    out.extend(header("/", index_len));
    out.extend((symbols.len() as u32).to_be_bytes());
    for _ in symbols {
        out.extend((member_at as u32).to_be_bytes());
    }
    out.extend(&names);
    if index_len % 2 == 1 {
        out.push(b'\n');
    }
    out.extend(header(&format!("{name}/"), member.len()));
    out.extend_from_slice(member);
    if member.len() % 2 == 1 {
        out.push(b'\n');
    }
    out
}

/// Copies `from` to `to` without debug sections: the archive goes into every packed output,
/// and Rust's std brings megabytes of DWARF. Uses `FATPACK_RT_OBJCOPY`, else
/// `<target>-objcopy` for a cross build, else `objcopy`; without any, the archive is
/// embedded as built (a warning says so).
fn strip_debug(from: &Path, to: &Path, target: &str) {
    let tools = tools("objcopy", target);
    for tool in &tools {
        // LTO leaves the bitcode in the object (.llvmbc/.llvmcmd): never linked, 1.5 MB of
        // fatpack's own size.
        let ok = Command::new(tool)
            .arg("--strip-debug")
            .args(["--remove-section=.llvmbc", "--remove-section=.llvmcmd"])
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
