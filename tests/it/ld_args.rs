//! The ld command-line model (`ld`), library search (`ld::search`) and the real
//! linker (`ld::real`): parsing as GNU ld parses, re-emitting byte for byte, finding
//! files where ld finds them, and running the linker without running ourselves.

use crate::common::write_executable;
use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use fatpack::ld::real::{self as real_ld, Finder, RealLdError};
use fatpack::ld::{self as search, LinkerDefaults, SearchPath};
use fatpack::ld::{
    ArgsError, InfoRequest, InputFileKind, InputId, InputKind, LinkLine, OutputKind,
};

fn parse(args: &[&str]) -> LinkLine {
    LinkLine::parse(args.iter().copied()).unwrap()
}

fn os(v: &[&str]) -> Vec<OsString> {
    v.iter().map(OsString::from).collect()
}

fn names(l: &LinkLine) -> Vec<String> {
    l.inputs
        .iter()
        .map(|i| i.name.to_string_lossy().into_owned())
        .collect()
}

fn no_change() -> BTreeMap<InputId, PathBuf> {
    BTreeMap::new()
}

fn write(p: &Path, data: impl AsRef<[u8]>) -> PathBuf {
    fs::write(p, data).unwrap();
    p.to_owned()
}

fn executable(p: &Path, script: &str) {
    write_executable(p, script);
}

/// A binutils tool on PATH; a missing one fails the test (binutils come with every gcc).
fn binutil(name: &str) -> PathBuf {
    crate::common::tool(name, "apt-get install binutils")
}

/// A 64-byte ELF header: enough for ld's (and our) compatibility test.
fn elf_header(class64: bool, machine: u16) -> Vec<u8> {
    let mut h = vec![0u8; 64];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = if class64 { 2 } else { 1 };
    h[5] = 1;
    h[6] = 1;
    h[16] = 3; // ET_DYN
    h[18..20].copy_from_slice(&machine.to_le_bytes());
    h
}

/// A one-member `ar` archive.
fn archive(member: &[u8]) -> Vec<u8> {
    let mut a = b"!<arch>\n".to_vec();
    a.extend_from_slice(
        format!(
            "{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n",
            "m.o/",
            0,
            0,
            0,
            644,
            member.len()
        )
        .as_bytes(),
    );
    a.extend_from_slice(member);
    if member.len() % 2 == 1 {
        a.push(b'\n');
    }
    a
}

const EM_X86_64: u16 = 62;
const EM_386: u16 = 3;

fn x86_64_defaults() -> LinkerDefaults {
    LinkerDefaults {
        output_format: Some("elf64-x86-64".into()),
        ..Default::default()
    }
}

// ---------------------------------------------------------------------------------------
// Response files

#[test]
fn response_files_quotes_escapes_nesting() {
    let dir = tempfile::tempdir().unwrap();
    let inner = write(&dir.path().join("inner.rsp"), "-lbar 'sp ace.o'\n");
    let outer = write(
        &dir.path().join("outer.rsp"),
        format!(
            "a.o \"b c.o\"\td\\ e.o\n@{}  -o 'out put'\n",
            inner.display()
        ),
    );
    let at = format!("@{}", outer.display());
    let l = parse(&[&at, "z.o"]);
    assert_eq!(
        l.expanded_args(),
        os(&["a.o", "b c.o", "d e.o", "-lbar", "sp ace.o", "-o", "out put", "z.o"])
    );
    assert_eq!(
        names(&l),
        ["a.o", "b c.o", "d e.o", "bar", "sp ace.o", "z.o"]
    );
    assert_eq!(l.output, Path::new("out put"));
    assert_eq!(l.inputs[0].response_file, Some(0));
    assert_eq!(l.inputs[3].response_file, Some(0));
    assert_eq!(l.inputs[5].response_file, None);
    assert_eq!(l.response_files.len(), 2);
    assert_eq!(
        (l.response_files[0].depth, l.response_files[1].depth),
        (0, 1)
    );
    // Nothing replaced: the @file stays as it was.
    assert_eq!(l.render(&no_change(), &[], &[]).unwrap(), os(&[&at, "z.o"]));
}

#[test]
fn missing_response_file_is_a_literal_argument() {
    let l = parse(&["@/nonexistent/fatpack.rsp", "a.o"]);
    assert_eq!(names(&l), ["@/nonexistent/fatpack.rsp", "a.o"]);
    assert!(l.response_files.is_empty());
}

#[test]
fn response_file_loops_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.rsp");
    let b = dir.path().join("b.rsp");
    write(&a, format!("x.o @{}", b.display()));
    write(&b, format!("y.o @{}", a.display()));
    let r = LinkLine::parse([format!("@{}", a.display())]);
    assert!(
        matches!(r, Err(ArgsError::ResponseFileLoop { .. })),
        "{r:?}"
    );

    let s = dir.path().join("self.rsp");
    write(&s, format!("@{}", s.display()));
    let r = LinkLine::parse([format!("@{}", s.display())]);
    assert!(
        matches!(r, Err(ArgsError::ResponseFileLoop { .. })),
        "{r:?}"
    );

    // The same file twice, not nested, is fine.
    let leaf = write(&dir.path().join("leaf.rsp"), "q.o");
    let twice = write(
        &dir.path().join("twice.rsp"),
        format!("@{0} @{0}", leaf.display()),
    );
    let l = LinkLine::parse([format!("@{}", twice.display())]).unwrap();
    assert_eq!(names(&l), ["q.o", "q.o"]);
}

#[test]
fn response_file_directory_and_empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let r = LinkLine::parse([format!("@{}", dir.path().display())]);
    assert!(matches!(r, Err(ArgsError::ResponseFileIsDirectory { .. })));
    let empty = write(&dir.path().join("empty.rsp"), " \n\t\n");
    let l = LinkLine::parse([format!("@{}", empty.display()), "a.o".into()]).unwrap();
    assert_eq!(l.expanded_args(), os(&["a.o"]));
}

#[test]
fn replacement_inside_a_response_file_expands_only_that_file() {
    let dir = tempfile::tempdir().unwrap();
    let r1 = write(&dir.path().join("r1.rsp"), "x.o 'y y.o'");
    let r2 = write(&dir.path().join("r2.rsp"), "w.o");
    let (a1, a2) = (format!("@{}", r1.display()), format!("@{}", r2.display()));
    let l = parse(&[&a1, &a2, "-o", "out"]);
    let y = l.inputs.iter().find(|i| i.name == "y y.o").unwrap().id;
    let mut rep = BTreeMap::new();
    rep.insert(y, PathBuf::from("/tmp/new y.o"));
    assert_eq!(
        l.render(&rep, &[], &[]).unwrap(),
        os(&["x.o", "/tmp/new y.o", &a2, "-o", "out"])
    );
}

#[test]
fn folding_a_long_line_into_a_response_file() {
    let dir = tempfile::tempdir().unwrap();
    let args = os(&["-o", "out", "with space.o", "q'uote.o", ""]);
    let folded =
        fatpack::ld::fold_into_response_file(args.clone(), dir.path(), "link.rsp", 4).unwrap();
    assert_eq!(folded.len(), 1);
    let back = LinkLine::parse(folded).unwrap();
    assert_eq!(back.expanded_args(), args);
    let kept =
        fatpack::ld::fold_into_response_file(args.clone(), dir.path(), "x.rsp", 1 << 20).unwrap();
    assert_eq!(kept, args);
}

// ---------------------------------------------------------------------------------------
// Option tokenisation

/// Every option that takes an argument, in each spelling ld accepts: its value is never an
/// input, and the input after it is.
#[test]
fn option_arguments_are_not_inputs() {
    let cases: &[&[&str]] = &[
        &["-o", "V"],
        &["-oV"],
        &["--output=V"],
        &["--output", "V"],
        &["-L", "V"],
        &["-LV"],
        &["--library-path=V"],
        &["--library-path", "V"],
        &["-T", "V"],
        &["-TV"],
        &["--script=V"],
        &["--script", "V"],
        &["-dT", "V"],
        &["--default-script=V"],
        &["-m", "V"],
        &["-mV"],
        &["-e", "V"],
        &["-eV"],
        &["--entry=V"],
        &["--entry", "V"],
        &["-entry", "V"],
        &["-soname", "V"],
        &["-soname=V"],
        &["--soname=V"],
        &["-h", "V"],
        &["-hV"],
        &["-rpath", "V"],
        &["-rpath=V"],
        &["--rpath", "V"],
        &["-rpath-link", "V"],
        &["-rpath-link=V"],
        &["--dynamic-linker", "V"],
        &["-dynamic-linker", "V"],
        &["--dynamic-linker=V"],
        &["-I", "V"],
        &["-z", "V"],
        &["-zV"],
        &["-u", "V"],
        &["-uV"],
        &["--undefined=V"],
        &["--undefined", "V"],
        &["--version-script", "V"],
        &["--version-script=V"],
        &["-version-script", "V"],
        &["-Map", "V"],
        &["-Map=V"],
        &["--Map", "V"],
        &["--sysroot", "V"],
        &["--sysroot=V"],
        &["-plugin", "V"],
        &["-plugin-opt", "V"],
        &["--plugin-opt=V"],
        &["-plugin-opt=-pass-through=-lgcc"],
        &["-Y", "V"],
        &["-YP,V"],
        &["--hash-style", "V"],
        &["--hash-style=V"],
        &["--build-id"],
        &["--build-id=V"],
        &["--defsym", "V"],
        &["--defsym=V"],
        &["-defsym", "V"],
        &["--wrap", "V"],
        &["--wrap=V"],
        &["-wrap", "V"],
        &["-y", "V"],
        &["-yV"],
        &["--trace-symbol", "V"],
        &["-A", "V"],
        &["--architecture", "V"],
        &["-a", "default"],
        &["-b", "V"],
        &["-bV"],
        &["--format=V"],
        &["--format", "V"],
        &["-format", "V"],
        &["-G", "8"],
        &["-G8"],
        &["-f", "V"],
        &["--auxiliary", "V"],
        &["-F", "V"],
        &["--filter=V"],
        &["-P", "V"],
        &["--depaudit", "V"],
        &["--audit", "V"],
        &["-R", "/nonexistent/fatpack-rpath"],
        &["--just-symbols=/nonexistent/fatpack-rpath"],
        &["--exclude-libs", "V"],
        &["--exclude-libs=V"],
        &["-exclude-libs", "V"],
        &["-Ttext", "V"],
        &["-Ttext=V"],
        &["-Ttext-segment", "V"],
        &["--section-start", "V"],
        &["-init", "V"],
        &["-fini", "V"],
        &["--dependency-file", "V"],
        &["-flto"],
        &["-flto=auto"],
        &["-flto-partition=none"],
        &["-fuse-ld=bfd"],
        &["--compress-debug-sections=zlib"],
        &["-O", "1"],
        &["-O1"],
        &["--oformat", "V"],
        &["--oformat=V"],
        &["--retain-symbols-file", "V"],
        &["--dynamic-list", "V"],
        &["--require-defined", "V"],
        &["--orphan-handling", "V"],
        &["--task-link", "V"],
        &["-assert", "V"],
        &["--ignore-unresolved-symbol", "V"],
        &["--export-dynamic-symbol", "V"],
        &["--sort-section", "V"],
        &["--spare-dynamic-tags", "V"],
        &["--push-state"],
        &["--pop-state"],
        &["--verbose"],
        &["--verbose=1"],
        &["--fatal-warnings"],
        &["-Bsymbolic"],
        &["-Bsymbolic-functions"],
        &["--gc-sections"],
        &["-s"],
        &["-x"],
        &["-dc"],
        &["-nostdlib"],
        &["--eh-frame-hdr"],
        &["-eh-frame-hdr"],
        &["--no-undefined"],
        &["--frobnicate-unknown"],
    ];
    for c in cases {
        let mut args = c.to_vec();
        args.push("in.o");
        let l = parse(&args);
        assert_eq!(names(&l), ["in.o"], "{c:?}");
        assert_eq!(
            l.render(&no_change(), &[], &[]).unwrap(),
            os(&args),
            "{c:?}"
        );
    }
}

#[test]
fn output_spellings() {
    for c in [
        &["-o", "out"][..],
        &["-oout"],
        &["--output=out"],
        &["--output", "out"],
        &["--outp", "out"],
    ] {
        let mut args = c.to_vec();
        args.push("a.o");
        let l = parse(&args);
        assert_eq!(l.output, Path::new("out"), "{c:?}");
        assert!(l.output_given);
    }
    let l = parse(&["a.o"]);
    assert_eq!(l.output, Path::new("a.out"));
    assert!(!l.output_given);
    // Last one wins.
    assert_eq!(parse(&["-o", "x", "a.o", "-o", "y"]).output, Path::new("y"));
}

/// Single-dash forms that ld (2.40) reads in surprising ways, checked against ld itself.
#[test]
fn single_dash_quirks_match_ld() {
    // --output only takes two dashes: -omagic is "-o magic".
    assert_eq!(parse(&["-omagic", "a.o"]).output, Path::new("magic"));
    assert_eq!(parse(&["-output", "a.o"]).output, Path::new("utput"));
    // A unique prefix is the option: --out is --out-implib, which takes an argument.
    assert!(parse(&["--out", "a.o"]).inputs.is_empty());
    // -lNAME is always a library, even when NAME starts like "library"; so is
    // "-library-path DIR" (ld: "cannot find -library-path", then DIR as a file).
    let l = parse(&["-libverbs"]);
    assert_eq!(names(&l), ["ibverbs"]);
    assert_eq!(
        names(&parse(&["-library-path", "/tmp"])),
        ["ibrary-path", "/tmp"]
    );
    // -G without a number is --shared.
    assert_eq!(parse(&["-G", "a.o"]).kind, OutputKind::SharedLibrary);
    assert_eq!(parse(&["-G", "8", "a.o"]).kind, OutputKind::Executable);
    // Everything after -- is ignored by ld.
    let l = parse(&["a.o", "--", "b.o"]);
    assert_eq!(names(&l), ["a.o"]);
    assert_eq!(l.end_of_options, Some(1));
}

#[test]
fn modes_and_emulation() {
    let k = |a: &[&str]| parse(a).kind;
    for a in [&["-shared"][..], &["--shared"], &["-Bshareable"], &["-G"]] {
        assert_eq!(k(a), OutputKind::SharedLibrary, "{a:?}");
    }
    for a in [
        &["-pie"][..],
        &["--pie"],
        &["--pic-executable"],
        &["-shared", "-pie"],
    ] {
        assert_eq!(k(a), OutputKind::PieExecutable, "{a:?}");
    }
    for a in [&["-r"][..], &["-i"], &["--relocatable"], &["-Ur"]] {
        assert_eq!(k(a), OutputKind::Relocatable, "{a:?}");
    }
    assert_eq!(k(&["-pie", "-no-pie"]), OutputKind::Executable);
    assert_eq!(k(&[]), OutputKind::Executable);
    let l = parse(&["-static", "-pie", "--no-dynamic-linker", "a.o"]);
    assert!(l.static_link);
    assert_eq!(l.kind, OutputKind::PieExecutable);
    assert!(!parse(&["-Bstatic", "a.o"]).static_link);

    assert_eq!(
        parse(&["-m", "elf_x86_64"]).emulation.as_deref(),
        Some(OsStr::new("elf_x86_64"))
    );
    assert_eq!(
        parse(&["-maarch64linux"]).emulation.as_deref(),
        Some(OsStr::new("aarch64linux"))
    );
    assert_eq!(parse(&["-m486", "a.o"]).emulation, None);
    // aarch64 emulations add options of their own.
    let l = parse(&[
        "-m",
        "aarch64linux",
        "--stub-group-size",
        "4096",
        "--fix-cortex-a53-843419",
        "a.o",
    ]);
    assert_eq!(names(&l), ["a.o"]);
}

#[test]
fn sysroot_only_from_the_joined_form() {
    assert_eq!(
        parse(&["--sysroot=/sr", "a.o"]).sysroot.as_deref(),
        Some(Path::new("/sr"))
    );
    // ld consumes the separate argument but reads the sysroot only from "--sysroot=".
    let l = parse(&["--sysroot", "/sr", "a.o"]);
    assert_eq!(l.sysroot, None);
    assert_eq!(names(&l), ["a.o"]);
}

#[test]
fn informational_requests() {
    let info = |a: &[&str]| parse(a).info;
    assert_eq!(info(&["--version"]), Some(InfoRequest::Version));
    assert_eq!(info(&["-version"]), Some(InfoRequest::Version));
    assert_eq!(info(&["--help"]), Some(InfoRequest::Help));
    assert_eq!(info(&["--target-help"]), Some(InfoRequest::TargetHelp));
    assert_eq!(info(&["--print-sysroot"]), Some(InfoRequest::PrintSysroot));
    assert_eq!(info(&["-v"]), Some(InfoRequest::VersionNoInputs));
    assert_eq!(info(&["-V"]), Some(InfoRequest::VersionNoInputs));
    assert_eq!(info(&["--verbose"]), Some(InfoRequest::VersionNoInputs));
    assert_eq!(
        info(&["-m", "elf_i386", "--verbose"]),
        Some(InfoRequest::VersionNoInputs)
    );
    assert_eq!(
        info(&["--print-output-format"]),
        Some(InfoRequest::PrintOutputFormat)
    );
    assert_eq!(info(&["-v", "a.o"]), None);
    assert_eq!(info(&["--verbose", "-lc"]), None);
    assert_eq!(info(&["a.o", "--version"]), Some(InfoRequest::Version));
    assert_eq!(info(&["a.o"]), None);
}

// ---------------------------------------------------------------------------------------
// State that applies to inputs

#[test]
fn input_state_tracking() {
    let l = parse(&[
        "a.o",
        "--whole-archive",
        "b.a",
        "--no-whole-archive",
        "c.a",
        "-Bstatic",
        "-lx",
        "-Bdynamic",
        "-ly",
        "--as-needed",
        "-lz",
        "--no-as-needed",
        "--start-group",
        "g1.a",
        "g2.a",
        "--end-group",
        "-(",
        "g3.a",
        "-)",
        "--push-state",
        "--whole-archive",
        "-Bstatic",
        "--as-needed",
        "p.a",
        "--pop-state",
        "q.a",
        "-b",
        "binary",
        "blob.bin",
        "-b",
        "default",
        "r.o",
        "-static",
        "s.a",
    ]);
    let get = |n: &str| l.inputs.iter().find(|i| i.name == n).unwrap();
    let flags = |n: &str| {
        let i = get(n);
        (
            i.whole_archive,
            i.static_search,
            i.as_needed,
            i.group,
            i.binary,
        )
    };
    assert_eq!(flags("a.o"), (false, false, false, None, false));
    assert_eq!(flags("b.a"), (true, false, false, None, false));
    assert_eq!(flags("c.a"), (false, false, false, None, false));
    assert_eq!(flags("x"), (false, true, false, None, false));
    assert_eq!(flags("y"), (false, false, false, None, false));
    assert_eq!(flags("z"), (false, false, true, None, false));
    assert_eq!(flags("g1.a"), (false, false, false, Some(0), false));
    assert_eq!(flags("g2.a"), (false, false, false, Some(0), false));
    assert_eq!(flags("g3.a"), (false, false, false, Some(1), false));
    assert_eq!(flags("p.a"), (true, true, true, None, false));
    assert_eq!(flags("q.a"), (false, false, false, None, false));
    assert_eq!(flags("blob.bin"), (false, false, false, None, true));
    assert_eq!(
        get("blob.bin").format.as_deref(),
        Some(OsStr::new("binary"))
    );
    assert_eq!(flags("r.o"), (false, false, false, None, false));
    assert_eq!(flags("s.a"), (false, true, false, None, false));
    assert!(l.static_link);
    assert!(l.diagnostics.is_empty(), "{:?}", l.diagnostics);
}

#[test]
fn static_and_dynamic_spellings() {
    for s in [
        "-Bstatic",
        "-dn",
        "-non_shared",
        "-static",
        "--static",
        "-a archive",
        "-r",
        "-N",
        "-n",
    ] {
        let mut args: Vec<&str> = s.split(' ').collect();
        args.extend(["-lfoo"]);
        assert!(parse(&args).inputs[0].static_search, "{s}");
        for d in ["-Bdynamic", "-dy", "-call_shared", "-a shared"] {
            let mut args: Vec<&str> = s.split(' ').collect();
            args.extend(d.split(' '));
            args.push("-lfoo");
            assert!(!parse(&args).inputs[0].static_search, "{s} {d}");
        }
    }
}

#[test]
fn push_state_does_not_restore_the_format() {
    // ld keeps -b outside the pushed flags.
    let l = parse(&[
        "--push-state",
        "-b",
        "binary",
        "x.bin",
        "--pop-state",
        "y.dat",
    ]);
    assert!(l.inputs[1].binary);
    let l = parse(&["--pop-state", "--end-group", "a.o", "--start-group", "b.a"]);
    assert_eq!(l.diagnostics.len(), 3, "{:?}", l.diagnostics);
}

#[test]
fn library_spellings() {
    let l = parse(&[
        "-lfoo",
        "-l",
        "bar",
        "-l:libbaz.a",
        "--library=qux",
        "--library",
        "quux",
        "--library=:libv.so.1",
        "-l",
        ":libw.a",
    ]);
    let got: Vec<(String, InputKind)> = l
        .inputs
        .iter()
        .map(|i| (i.name.to_string_lossy().into_owned(), i.kind.clone()))
        .collect();
    let lib = |v, lf| InputKind::Library {
        verbatim: v,
        long_form: lf,
    };
    assert_eq!(
        got,
        vec![
            ("foo".into(), lib(false, false)),
            ("bar".into(), lib(false, false)),
            ("libbaz.a".into(), lib(true, false)),
            ("qux".into(), lib(false, true)),
            ("quux".into(), lib(false, true)),
            ("libv.so.1".into(), lib(true, true)),
            ("libw.a".into(), lib(true, false)),
        ]
    );
    assert_eq!(l.inputs[1].arg_index, 1);
    assert_eq!(l.inputs[2].arg_index, 3);
}

#[test]
fn just_symbols_and_rpath() {
    let dir = tempfile::tempdir().unwrap();
    let f = write(&dir.path().join("syms.o"), "x");
    let d = dir.path().to_str().unwrap();
    let fs_ = f.to_str().unwrap();
    let l = parse(&[
        "-R",
        fs_,
        "-R",
        d,
        "--just-symbols",
        fs_,
        "-rpath",
        "/r",
        "a.o",
    ]);
    assert_eq!(l.inputs.len(), 3);
    assert_eq!(l.inputs[0].kind, InputKind::JustSymbols);
    assert_eq!(l.inputs[1].kind, InputKind::JustSymbols);
    assert_eq!(l.rpaths, os(&[d, "/r"]));
    // Swapping the file keeps it a just-symbols input.
    let mut rep = BTreeMap::new();
    rep.insert(InputId(0), PathBuf::from("/new/syms.o"));
    let got = l.render(&rep, &[], &[]).unwrap();
    assert_eq!(got[0], "--just-symbols=/new/syms.o");
    assert_eq!(got[1], "-R");
    assert_eq!(got[2], d);
}

// ---------------------------------------------------------------------------------------
// Library search

struct Libs {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Libs {
    fn new(files: &[(&str, Vec<u8>)]) -> Libs {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        for (name, data) in files {
            let p = root.join(name);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, data).unwrap();
        }
        Libs { _dir: dir, root }
    }
    fn d(&self, sub: &str) -> String {
        self.root.join(sub).to_string_lossy().into_owned()
    }
    fn p(&self, sub: &str) -> PathBuf {
        self.root.join(sub)
    }
}

fn resolved(args: &[&str], defaults: &LinkerDefaults) -> (LinkLine, SearchPath) {
    let mut l = parse(args);
    let sp = search::resolve(&mut l, defaults);
    (l, sp)
}

#[test]
fn library_search_order() {
    let so = elf_header(true, EM_X86_64);
    let a = archive(&elf_header(true, EM_X86_64));
    let libs = Libs::new(&[
        ("d1/libfoo.so", so.clone()),
        ("d1/libfoo.a", a.clone()),
        ("d0/libfoo.a", a.clone()),
        ("d2/libonly.a", a.clone()),
    ]);
    let (d0, d1) = (libs.d("d0"), libs.d("d1"));
    let def = x86_64_defaults();
    let first = |args: &[&str]| resolved(args, &def).0.inputs[0].resolved.clone();

    assert_eq!(first(&["-L", &d1, "-lfoo"]), Some(libs.p("d1/libfoo.so")));
    assert_eq!(
        first(&["-L", &d1, "-Bstatic", "-lfoo"]),
        Some(libs.p("d1/libfoo.a"))
    );
    assert_eq!(
        first(&["-L", &d1, "-l:libfoo.a"]),
        Some(libs.p("d1/libfoo.a"))
    );
    assert_eq!(
        first(&["-L", &d1, "--library=:libfoo.so"]),
        Some(libs.p("d1/libfoo.so"))
    );
    // Every -L counts, also one after the -l.
    assert_eq!(first(&["-lfoo", "-L", &d1]), Some(libs.p("d1/libfoo.so")));
    // Directory order comes before the .so preference.
    assert_eq!(
        first(&["-L", &d0, "-L", &d1, "-lfoo"]),
        Some(libs.p("d0/libfoo.a"))
    );
    // -r looks for no shared library.
    assert_eq!(
        first(&["-r", "-L", &d1, "-lfoo"]),
        Some(libs.p("d1/libfoo.a"))
    );
    assert_eq!(first(&["-L", &d1, "-lnothere"]), None);
    let (l, sp) = resolved(&["-L", &d1, "-lnothere"], &def);
    assert!(l.diagnostics.iter().any(|d| d.contains("-lnothere")));
    assert_eq!(
        sp.library_candidates(OsStr::new("x"), false, false),
        vec![libs.p("d1/libx.so"), libs.p("d1/libx.a")]
    );
    let (l, _) = resolved(&["-L", &libs.d("d2"), "-lonly", "-lfoo"], &def);
    assert_eq!(l.inputs[0].file_kind, Some(InputFileKind::Archive));
    assert_eq!(l.inputs[1].file_kind, Some(InputFileKind::Missing));
}

#[test]
fn incompatible_libraries_are_skipped() {
    let libs = Libs::new(&[
        ("d32/libfoo.so", elf_header(false, EM_386)),
        ("d32/libfoo.a", archive(&elf_header(false, EM_386))),
        ("d64/libfoo.so", elf_header(true, EM_X86_64)),
        ("d64/libfoo.a", archive(&elf_header(true, EM_X86_64))),
    ]);
    let (d32, d64) = (libs.d("d32"), libs.d("d64"));
    let def = x86_64_defaults();
    let first =
        |args: &[&str], def: &LinkerDefaults| resolved(args, def).0.inputs[0].resolved.clone();
    assert_eq!(
        first(&["-L", &d32, "-L", &d64, "-lfoo"], &def),
        Some(libs.p("d64/libfoo.so"))
    );
    assert_eq!(
        first(&["-L", &d32, "-L", &d64, "-Bstatic", "-lfoo"], &def),
        Some(libs.p("d64/libfoo.a"))
    );
    let i386 = LinkerDefaults {
        output_format: Some("elf32-i386".into()),
        ..Default::default()
    };
    assert_eq!(
        first(&["-L", &d64, "-L", &d32, "-lfoo"], &i386),
        Some(libs.p("d32/libfoo.so"))
    );
    // Not knowing the target, ld's first candidate is taken.
    assert_eq!(
        first(
            &["-L", &d32, "-L", &d64, "-lfoo"],
            &LinkerDefaults::default()
        ),
        Some(libs.p("d32/libfoo.so"))
    );
}

#[test]
fn default_dirs_sysroot_scripts_and_nostdlib() {
    let a = archive(&elf_header(true, EM_X86_64));
    let libs = Libs::new(&[
        ("sr/usr/lib/libsys.a", a.clone()),
        ("def/libdef.a", a.clone()),
        ("sd/s.ld", b"SEARCH_DIR(\"DIR3\")\n".to_vec()),
        ("d3/libbar.a", a.clone()),
    ]);
    let script = libs.p("sd/s.ld");
    fs::write(&script, format!("SEARCH_DIR(\"{}\")\n", libs.d("d3"))).unwrap();
    let insert = libs.p("sd/ins.ld");
    fs::write(
        &insert,
        format!(
            "SEARCH_DIR({})\nSECTIONS {{ .x : {{ *(.x) }} }} INSERT AFTER .text;\n",
            libs.d("d3")
        ),
    )
    .unwrap();
    let def = LinkerDefaults {
        search_dirs: vec![OsString::from(libs.d("def"))],
        ..x86_64_defaults()
    };
    let found = |args: &[&str]| -> Vec<Option<PathBuf>> {
        resolved(args, &def)
            .0
            .inputs
            .iter()
            .map(|i| i.resolved.clone())
            .collect()
    };

    // '=' dirs are in the sysroot.
    let sr = format!("--sysroot={}", libs.d("sr"));
    assert_eq!(
        found(&[&sr, "-L=/usr/lib", "-lsys"]),
        vec![Some(libs.p("sr/usr/lib/libsys.a"))]
    );
    // Default dirs come last, and -nostdlib drops them.
    assert_eq!(found(&["-ldef"]), vec![Some(libs.p("def/libdef.a"))]);
    assert_eq!(found(&["-nostdlib", "-ldef"]), vec![None]);
    // A -T script is looked for in the -L dirs before it; its SEARCH_DIRs count; and it
    // replaces the default script, default dirs included.
    let sd = libs.d("sd");
    let (l, _) = resolved(&["-L", &sd, "-T", "s.ld", "-lbar", "-ldef"], &def);
    assert_eq!(l.scripts[0].resolved.as_deref(), Some(script.as_path()));
    assert_eq!(l.inputs[0].resolved, Some(libs.p("d3/libbar.a")));
    assert_eq!(l.inputs[1].resolved, None);
    let (l, _) = resolved(&["-T", "s.ld", "-L", &sd, "-lbar"], &def);
    assert_eq!(l.scripts[0].resolved, None);
    // An INSERT script keeps the default script.
    let (l, _) = resolved(&["-L", &sd, "-T", "ins.ld", "-lbar", "-ldef"], &def);
    assert!(l.scripts[0].info.as_ref().unwrap().has_insert);
    assert_eq!(l.inputs[1].resolved, Some(libs.p("def/libdef.a")));
}

#[test]
fn linker_scripts_as_inputs() {
    let libs = Libs::new(&[
        ("lib/libc.so.6", elf_header(true, EM_X86_64)),
        (
            "lib/libc_nonshared.a",
            archive(&elf_header(true, EM_X86_64)),
        ),
        ("lib/libempty.so", Vec::new()),
    ]);
    let lib = libs.d("lib");
    let script = format!(
        "/* GNU ld script */\nOUTPUT_FORMAT(elf64-x86-64)\nGROUP ( {lib}/libc.so.6 {lib}/libc_nonshared.a  AS_NEEDED ( /nonexistent/ld.so ) )\n"
    );
    fs::write(libs.p("lib/libc.so"), script).unwrap();
    let (l, _) = resolved(
        &["-L", &lib, "-lc", "-lempty", &libs.d("lib/libc.so.6")],
        &x86_64_defaults(),
    );
    let c = &l.inputs[0];
    assert_eq!(c.resolved, Some(libs.p("lib/libc.so")));
    assert_eq!(c.file_kind, Some(InputFileKind::Script));
    let info = c.script.as_ref().unwrap();
    let entries: Vec<_> = info
        .entries
        .iter()
        .map(|e| (e.resolved.clone(), e.as_needed, e.in_group))
        .collect();
    assert_eq!(
        entries,
        vec![
            (Some(libs.p("lib/libc.so.6")), false, true),
            (Some(libs.p("lib/libc_nonshared.a")), false, true),
            (None, true, true),
        ]
    );
    // An empty "library" is an empty script to ld, not an error.
    assert_eq!(l.inputs[1].file_kind, Some(InputFileKind::Script));
    assert_eq!(l.inputs[2].file_kind, Some(InputFileKind::Elf));
    // -b binary inputs are raw data, not sniffed.
    let (l, _) = resolved(
        &["-b", "binary", &libs.d("lib/libc.so")],
        &x86_64_defaults(),
    );
    assert_eq!(l.inputs[0].file_kind, Some(InputFileKind::Binary));
}

/// Our `-l` resolution against the real ld's own `--verbose` trace.
#[test]
fn search_agrees_with_real_ld() {
    let (ld, asm, ar) = (binutil("ld"), binutil("as"), binutil("ar"));
    let dir = tempfile::tempdir().unwrap();
    let p = |s: &str| dir.path().join(s);
    fs::write(p("f.s"), ".globl f\nf: ret\n").unwrap();
    assert!(Command::new(&asm)
        .arg("-o")
        .arg(p("f.o"))
        .arg(p("f.s"))
        .status()
        .unwrap()
        .success());
    for d in ["d0", "d1", "d2"] {
        fs::create_dir(p(d)).unwrap();
    }
    for a in ["d0/libfoo.a", "d1/libfoo.a", "d2/libbar.a"] {
        assert!(Command::new(&ar)
            .arg("rc")
            .arg(p(a))
            .arg(p("f.o"))
            .status()
            .unwrap()
            .success());
    }
    let so = Command::new(&ld)
        .arg("-shared")
        .arg("-o")
        .arg(p("d1/libfoo.so"))
        .arg(p("f.o"))
        .status()
        .unwrap();
    assert!(so.success());
    fs::write(p("d1/libbar.so"), "").unwrap();

    let real = real_ld::find_real_ld(Some(OsStr::new("ld"))).unwrap();
    let defaults = LinkerDefaults::query(&real, None).unwrap();
    assert!(!defaults.search_dirs.is_empty());
    let (d0, d1, d2) = (p("d0"), p("d1"), p("d2"));
    let (d0, d1, d2) = (
        d0.to_str().unwrap(),
        d1.to_str().unwrap(),
        d2.to_str().unwrap(),
    );
    let lines: Vec<Vec<&str>> = vec![
        vec!["-L", d1, "-lfoo"],
        vec!["-L", d0, "-L", d1, "-lfoo"],
        vec!["-Bstatic", "-L", d1, "-lfoo"],
        vec!["-lfoo", "-L", d1],
        vec!["-L", d2, "-L", d1, "-lbar"],
        vec!["-L", d1, "-L", d2, "-lbar"],
        vec!["-L", d1, "-l:libfoo.a"],
        vec!["-L", d2, "-lc"],
    ];
    for args in lines {
        let mut l = parse(&args);
        search::resolve(&mut l, &defaults);
        let ours = l.inputs[0].resolved.clone().unwrap();
        let out = Command::new(&real)
            .arg("--verbose")
            .arg("-o")
            .arg(p("out"))
            .arg(p("f.o"))
            .args(&args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let theirs = text
            .lines()
            .filter_map(|t| {
                t.strip_prefix("attempt to open ")?
                    .strip_suffix(" succeeded")
            })
            .find(|t| !t.ends_with("f.o"))
            .unwrap_or_else(|| panic!("{args:?}: no library opened by ld:\n{text}"));
        assert_eq!(
            fs::canonicalize(&ours).unwrap(),
            fs::canonicalize(theirs).unwrap(),
            "{args:?}"
        );
    }
}

/// The inputs we list, against the files the real ld opens (`ld -t`) for lines whose
/// option arguments could pass for file names.
#[test]
fn inputs_agree_with_real_ld_trace() {
    let (_, asm) = (binutil("ld"), binutil("as"));
    let dir = tempfile::tempdir().unwrap();
    let p = |s: &str| dir.path().join(s);
    fs::write(p("a.s"), ".globl _start\n_start: ret\n").unwrap();
    fs::write(p("b.s"), ".globl g\ng: ret\n").unwrap();
    for o in ["a", "b"] {
        let st = Command::new(&asm)
            .arg("-o")
            .arg(p(&format!("{o}.o")))
            .arg(p(&format!("{o}.s")))
            .status();
        assert!(st.unwrap().success());
    }
    let real = real_ld::find_real_ld(Some(OsStr::new("ld"))).unwrap();
    let lines: &[&[&str]] = &[
        &["-Map", "m.map", "a.o", "b.o"],
        &["-Map=m.map", "a.o", "b.o"],
        &["-e", "_start", "a.o", "-u", "g", "b.o"],
        &["-eg", "a.o", "-ug", "b.o"],
        &["-z", "now", "a.o", "-znoexecstack", "b.o"],
        &["--defsym", "x=1", "a.o", "--defsym=y=2", "b.o"],
        &["-y", "g", "a.o", "--trace-symbol", "g", "b.o"],
        &["-Ttext", "0x500000", "a.o", "b.o"],
        &["--hash-style", "gnu", "a.o", "-hash-style", "sysv", "b.o"],
        &["-rpath", "/x", "a.o", "-rpath-link", "/y", "b.o"],
        &[
            "-dynamic-linker",
            "/lib/ld.so",
            "a.o",
            "--dynamic-linker",
            "/l",
            "b.o",
        ],
        &["--wrap", "g", "a.o", "-wrap", "h", "b.o"],
        &["--exclude-libs", "ALL", "a.o", "b.o"],
        &["-O", "1", "a.o", "-O1", "b.o"],
        &["-a", "default", "a.o", "-b", "elf64-x86-64", "b.o"],
        &["-Y", "P,/tmp", "a.o", "b.o"],
        &["-A", "i386:x86-64", "a.o", "b.o"],
        &["--sysroot", "/", "a.o", "b.o"],
        &["-(", "a.o", "-)", "--start-group", "b.o", "--end-group"],
        &[
            "--push-state",
            "--whole-archive",
            "a.o",
            "--pop-state",
            "b.o",
        ],
        &["-G", "a.o", "b.o"],
        &["-soname", "x", "-shared", "a.o", "-h", "y", "b.o"],
        &["--out", "implib.a", "a.o", "b.o"],
        &["--build-id", "a.o", "--build-id=sha1", "b.o"],
        &["-init", "_start", "a.o", "-fini", "g", "b.o"],
        &["-Bsymbolic", "-shared", "a.o", "-Bstatic", "b.o"],
        &["--require-defined", "g", "a.o", "b.o"],
        &["-flto", "-fuse-ld=bfd", "a.o", "b.o"],
    ];
    for line in lines {
        let mut args: Vec<&str> = vec!["-t", "-o", "out"];
        args.extend_from_slice(line);
        let ours = names(&parse(&args));
        let out = Command::new(&real)
            .current_dir(dir.path())
            .args(&args)
            .output()
            .unwrap();
        let theirs: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect();
        assert!(
            out.status.success(),
            "{line:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(ours, theirs, "{line:?}");
    }
}

// ---------------------------------------------------------------------------------------
// Re-emitting

#[test]
fn render_round_trip_and_single_replacement() {
    let args = [
        "-m",
        "elf_x86_64",
        "-o",
        "out",
        "a.o",
        "-l",
        "foo",
        "-Lx",
        "b.o",
        "-lbar",
        "--library",
        "baz",
    ];
    let l = parse(&args);
    assert_eq!(l.render(&no_change(), &[], &[]).unwrap(), os(&args));
    assert_eq!(l.original_args(), os(&args).as_slice());

    let b = l.inputs.iter().find(|i| i.name == "b.o").unwrap().id;
    let mut rep = BTreeMap::new();
    rep.insert(b, PathBuf::from("/tmp/rw/b.o"));
    let mut want = os(&args);
    want[8] = "/tmp/rw/b.o".into();
    assert_eq!(l.render(&rep, &[], &[]).unwrap(), want);

    // A library written as two arguments becomes one path; the rest stays.
    let foo = l.inputs.iter().find(|i| i.name == "foo").unwrap().id;
    let baz = l.inputs.iter().find(|i| i.name == "baz").unwrap().id;
    let mut rep = BTreeMap::new();
    rep.insert(foo, PathBuf::from("/tmp/rw/libfoo.a"));
    rep.insert(baz, PathBuf::from("-odd.a"));
    let got = l
        .render(&rep, &os(&["--pre"]), &os(&["--post", "x"]))
        .unwrap();
    assert_eq!(
        got,
        os(&[
            "--pre",
            "-m",
            "elf_x86_64",
            "-o",
            "out",
            "a.o",
            "/tmp/rw/libfoo.a",
            "-Lx",
            "b.o",
            "-lbar",
            "./-odd.a",
            "--post",
            "x"
        ])
    );
    let mut rep = BTreeMap::new();
    rep.insert(InputId(99), PathBuf::from("x"));
    assert!(matches!(
        l.render(&rep, &[], &[]),
        Err(ArgsError::UnknownInput(99))
    ));
}

#[test]
fn fatpack_options_are_recorded_and_stripped() {
    let dir = tempfile::tempdir().unwrap();
    let rsp = write(&dir.path().join("r.rsp"), "b.o --fatpack-verbose");
    let at = format!("@{}", rsp.display());
    let l = parse(&[
        "--fatpack-side-file",
        "a.o",
        "--fatpack-mode=tail",
        &at,
        "-o",
        "out",
    ]);
    assert_eq!(names(&l), ["a.o", "b.o"]);
    assert!(l.fatpack_flag("side-file"));
    assert!(l.fatpack_flag("verbose"));
    assert!(!l.fatpack_flag("mode-x"));
    assert_eq!(l.fatpack_value("mode"), Some(OsStr::new("tail")));
    assert_eq!(l.fatpack_value("side-file"), Some(OsStr::new("")));
    assert_eq!(l.fatpack_value("other"), None);
    assert_eq!(
        l.render(&no_change(), &[], &[]).unwrap(),
        os(&["a.o", "b.o", "-o", "out"])
    );
}

#[test]
fn non_utf8_arguments_survive() {
    let bad = OsStr::from_bytes(b"caf\xe9.o").to_owned();
    let l = LinkLine::parse([OsString::from("-o"), OsString::from("out"), bad.clone()]).unwrap();
    assert_eq!(l.inputs[0].name, bad);
    let mut rep = BTreeMap::new();
    rep.insert(InputId(0), PathBuf::from(OsStr::from_bytes(b"/tmp/\xff.o")));
    let got = l.render(&rep, &[], &[]).unwrap();
    assert_eq!(got[2].as_bytes(), b"/tmp/\xff.o");
}

// ---------------------------------------------------------------------------------------
// Real command lines

/// `gcc -v -o /tmp/cap/x x.c` (GCC 12, Debian bookworm): collect2's arguments.
const GCC_LINE: &str = "-plugin /usr/lib/gcc/x86_64-linux-gnu/12/liblto_plugin.so -plugin-opt=/usr/lib/gcc/x86_64-linux-gnu/12/lto-wrapper -plugin-opt=-fresolution=/tmp/ccm5sqYL.res -plugin-opt=-pass-through=-lgcc -plugin-opt=-pass-through=-lgcc_s -plugin-opt=-pass-through=-lc -plugin-opt=-pass-through=-lgcc -plugin-opt=-pass-through=-lgcc_s --build-id --eh-frame-hdr -m elf_x86_64 --hash-style=gnu --as-needed -dynamic-linker /lib64/ld-linux-x86-64.so.2 -pie -o /tmp/cap/x /usr/lib/gcc/x86_64-linux-gnu/12/../../../x86_64-linux-gnu/Scrt1.o /usr/lib/gcc/x86_64-linux-gnu/12/../../../x86_64-linux-gnu/crti.o /usr/lib/gcc/x86_64-linux-gnu/12/crtbeginS.o -L/usr/lib/gcc/x86_64-linux-gnu/12 -L/usr/lib/gcc/x86_64-linux-gnu/12/../../../x86_64-linux-gnu -L/usr/lib/gcc/x86_64-linux-gnu/12/../../../../lib -L/lib/x86_64-linux-gnu -L/lib/../lib -L/usr/lib/x86_64-linux-gnu -L/usr/lib/../lib -L/usr/lib/gcc/x86_64-linux-gnu/12/../../.. /tmp/ccLTnhhN.o -lgcc --push-state --as-needed -lgcc_s --pop-state -lc -lgcc --push-state --as-needed -lgcc_s --pop-state /usr/lib/gcc/x86_64-linux-gnu/12/crtendS.o /usr/lib/gcc/x86_64-linux-gnu/12/../../../x86_64-linux-gnu/crtn.o";

/// `nvcc -Xcompiler -v -o k k.cu` (CUDA 13.0, GCC 12): the final host link's collect2 arguments.
const NVCC_LINE: &str = "-plugin /usr/lib/gcc/x86_64-linux-gnu/12/liblto_plugin.so -plugin-opt=/usr/lib/gcc/x86_64-linux-gnu/12/lto-wrapper -plugin-opt=-fresolution=/tmp/cciOspJL.res -plugin-opt=-pass-through=-lgcc_s -plugin-opt=-pass-through=-lgcc -plugin-opt=-pass-through=-lc -plugin-opt=-pass-through=-lgcc_s -plugin-opt=-pass-through=-lgcc --build-id --eh-frame-hdr -m elf_x86_64 --hash-style=gnu --as-needed -dynamic-linker /lib64/ld-linux-x86-64.so.2 -pie -o k /usr/lib/gcc/x86_64-linux-gnu/12/../../../x86_64-linux-gnu/Scrt1.o /usr/lib/gcc/x86_64-linux-gnu/12/../../../x86_64-linux-gnu/crti.o /usr/lib/gcc/x86_64-linux-gnu/12/crtbeginS.o -L/work/main/.cuda/lib/python3.11/site-packages/nvidia/cu13/bin/..//lib64/stubs -L/work/main/.cuda/lib/python3.11/site-packages/nvidia/cu13/bin/..//lib64 -L/usr/lib/gcc/x86_64-linux-gnu/12 -L/usr/lib/gcc/x86_64-linux-gnu/12/../../../x86_64-linux-gnu -L/usr/lib/gcc/x86_64-linux-gnu/12/../../../../lib -L/lib/x86_64-linux-gnu -L/lib/../lib -L/usr/lib/x86_64-linux-gnu -L/usr/lib/../lib -L/usr/lib/gcc/x86_64-linux-gnu/12/../../.. --start-group /tmp/tmpxft_00002c92_00000000-13_k_dlink.o /tmp/tmpxft_00002c92_00000000-11_k.o -lcudadevrt -lcudart_static -lrt -lpthread -ldl --end-group -lstdc++ -lm -lgcc_s -lgcc -lc -lgcc_s -lgcc /usr/lib/gcc/x86_64-linux-gnu/12/crtendS.o /usr/lib/gcc/x86_64-linux-gnu/12/../../../x86_64-linux-gnu/crtn.o";

#[test]
fn gcc_collect2_line() {
    let args: Vec<&str> = GCC_LINE.split(' ').collect();
    let l = parse(&args);
    assert_eq!(l.kind, OutputKind::PieExecutable);
    assert_eq!(l.output, Path::new("/tmp/cap/x"));
    assert_eq!(l.emulation.as_deref(), Some(OsStr::new("elf_x86_64")));
    assert!(!l.static_link);
    assert_eq!(l.library_dirs.len(), 8);
    let short: Vec<String> = l
        .inputs
        .iter()
        .map(|i| {
            let base = Path::new(&i.name)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned();
            if i.is_library() {
                format!("-l{base}")
            } else {
                base
            }
        })
        .collect();
    assert_eq!(
        short,
        [
            "Scrt1.o",
            "crti.o",
            "crtbeginS.o",
            "ccLTnhhN.o",
            "-lgcc",
            "-lgcc_s",
            "-lc",
            "-lgcc",
            "-lgcc_s",
            "crtendS.o",
            "crtn.o"
        ]
    );
    // --as-needed from the start applies throughout; the pushed one is popped back to it.
    assert!(l.inputs.iter().all(|i| i.as_needed));
    assert!(l.diagnostics.is_empty(), "{:?}", l.diagnostics);
    assert_eq!(l.info, None);
    assert_eq!(l.render(&no_change(), &[], &[]).unwrap(), os(&args));

    // Resolved with this machine's linker, when it is the one the line came from.
    if Path::new("/usr/lib/gcc/x86_64-linux-gnu/12/crtbeginS.o").exists() {
        let real = real_ld::find_real_ld(Some(OsStr::new("ld"))).unwrap();
        let mut cache = search::DefaultsCache::new();
        let mut l = l;
        search::resolve_with(&mut l, &real, &mut cache).unwrap();
        let libc = l.inputs.iter().find(|i| i.name == "c").unwrap();
        assert_eq!(
            libc.file_kind,
            Some(InputFileKind::Script),
            "{:?}",
            libc.resolved
        );
        assert!(libc
            .script
            .as_ref()
            .unwrap()
            .entries
            .iter()
            .any(|e| e.name.as_bytes().ends_with(b"libc.so.6")));
        let gcc = l.inputs.iter().find(|i| i.name == "gcc").unwrap();
        assert_eq!(gcc.file_kind, Some(InputFileKind::Archive));
    }
}

#[test]
fn nvcc_host_link_line() {
    let args: Vec<&str> = NVCC_LINE.split(' ').collect();
    let l = parse(&args);
    assert_eq!(l.kind, OutputKind::PieExecutable);
    assert_eq!(l.output, Path::new("k"));
    let grouped: Vec<String> = l
        .inputs
        .iter()
        .filter(|i| i.group.is_some())
        .map(|i| i.name.to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        grouped,
        [
            "/tmp/tmpxft_00002c92_00000000-13_k_dlink.o",
            "/tmp/tmpxft_00002c92_00000000-11_k.o",
            "cudadevrt",
            "cudart_static",
            "rt",
            "pthread",
            "dl"
        ]
    );
    assert_eq!(l.inputs.iter().filter(|i| !i.is_library()).count(), 7);
    assert_eq!(l.render(&no_change(), &[], &[]).unwrap(), os(&args));
}

// ---------------------------------------------------------------------------------------
// The real linker

#[test]
fn discovery_skips_a_symlink_to_ourselves() {
    let me = std::env::current_exe().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (wrap, real) = (dir.path().join("wrap"), dir.path().join("real"));
    fs::create_dir(&wrap).unwrap();
    fs::create_dir(&real).unwrap();
    std::os::unix::fs::symlink(&me, wrap.join("ld")).unwrap();
    std::os::unix::fs::symlink(&me, wrap.join("ld.gold")).unwrap();
    fs::hard_link(&me, wrap.join("ld.bfd")).unwrap_or(());
    executable(&real.join("ld"), "#!/bin/sh\nexit 0\n");
    executable(&real.join("ld.bfd"), "#!/bin/sh\nexit 0\n");
    let path = std::env::join_paths([&wrap, &real]).unwrap();
    let finder = |argv0: &str| Finder {
        override_ld: None,
        invoked_as: Some(argv0.into()),
        path: Some(path.clone()),
        self_exe: Some(me.clone()),
    };
    assert_eq!(finder("ld").find().unwrap(), real.join("ld"));
    assert_eq!(
        finder(wrap.join("ld").to_str().unwrap()).find().unwrap(),
        real.join("ld")
    );
    // A hard link (same inode, other path) is us too.
    assert_eq!(finder("ld.bfd").find().unwrap(), real.join("ld.bfd"));
    // No ld.gold but us: an error, never another linker (`-fuse-ld=gold` means gold).
    assert!(matches!(
        finder("ld.gold").find(),
        Err(RealLdError::NotFound { name }) if name == "ld.gold"
    ));
    assert_eq!(finder("fatpack").find().unwrap(), real.join("ld"));

    let only_us = Finder {
        path: Some(wrap.clone().into_os_string()),
        ..finder("ld")
    };
    assert!(matches!(only_us.find(), Err(RealLdError::NotFound { .. })));

    let with = |v: &OsStr| Finder {
        override_ld: Some(v.to_owned()),
        ..finder("ld")
    };
    assert_eq!(
        with(real.join("ld.bfd").as_os_str()).find().unwrap(),
        real.join("ld.bfd")
    );
    assert_eq!(
        with(OsStr::new("ld.bfd")).find().unwrap(),
        real.join("ld.bfd")
    );
    assert!(matches!(
        with(wrap.join("ld").as_os_str()).find(),
        Err(RealLdError::OverrideIsSelf { .. })
    ));
    assert!(matches!(
        with(OsStr::new("/nonexistent/ld")).find(),
        Err(RealLdError::BadOverride { .. })
    ));
}

#[test]
fn exit_codes_and_depth_are_passed_on() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("fake-ld");
    executable(
        &fake,
        "#!/bin/sh\necho \"depth=$FATPACK_LD_DEPTH args=$*\"\nexit 7\n",
    );
    let quiet = dir.path().join("quiet-ld");
    executable(&quiet, "#!/bin/sh\nexit 7\n");
    let status = real_ld::run(&quiet, &["a", "b"]).unwrap();
    assert_eq!(real_ld::exit_code(status), 7);
    let out = real_ld::capture(&fake, &["x y"]).unwrap();
    let want = format!("depth={} args=x y\n", real_ld::current_depth().unwrap() + 1);
    assert_eq!(String::from_utf8_lossy(&out.stdout), want);
    let killed = dir.path().join("killed-ld");
    executable(&killed, "#!/bin/sh\nkill -9 $$\n");
    assert_eq!(
        real_ld::exit_code(real_ld::run(&killed, &[] as &[&str]).unwrap()),
        128 + 9
    );
    assert!(matches!(
        real_ld::run(&dir.path().join("none"), &[] as &[&str]),
        Err(RealLdError::Spawn { .. })
    ));
}

#[test]
fn nested_wrappers_are_refused() {
    // In a child process, so that the environment of this one stays as it is.
    let me = std::env::current_exe().unwrap();
    let out = Command::new(&me)
        .args([
            "--exact",
            "ld_args::depth_probe",
            "--nocapture",
            "--include-ignored",
        ])
        .env(real_ld::DEPTH_ENV, "2")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("refused: linker wrappers call each other")
    );
}

#[test]
#[ignore = "run by nested_wrappers_are_refused with FATPACK_LD_DEPTH=2"]
fn depth_probe() {
    match real_ld::run(Path::new("/bin/true"), &[] as &[&str]) {
        Err(e @ RealLdError::Loop { .. }) => println!("refused: {e}"),
        other => panic!("not refused: {other:?}"),
    }
}

/// Links a trivial object with the real ld through the API; a failing link gives ld's code.
#[test]
fn end_to_end_link_with_real_ld() {
    let (ld, asm) = (binutil("ld"), binutil("as"));
    let dir = tempfile::tempdir().unwrap();
    let p = |s: &str| dir.path().join(s);
    fs::write(p("start.s"), ".globl _start\n_start:\n  ret\n").unwrap();
    assert!(Command::new(&asm)
        .arg("-o")
        .arg(p("start.o"))
        .arg(p("start.s"))
        .status()
        .unwrap()
        .success());
    fs::copy(p("start.o"), p("copy.o")).unwrap();

    let real = real_ld::find_real_ld(Some(OsStr::new("ld"))).unwrap();
    let out = p("prog");
    let args = [
        OsString::from("-o"),
        out.clone().into(),
        p("start.o").into(),
        "--fatpack-verbose".into(),
    ];
    let l = LinkLine::parse(args).unwrap();
    let mut rep = BTreeMap::new();
    rep.insert(InputId(0), p("copy.o"));
    let argv = l.render(&rep, &[], &[]).unwrap();
    assert_eq!(
        argv,
        vec![OsString::from("-o"), out.clone().into(), p("copy.o").into()]
    );
    let status = real_ld::run(&real, &argv).unwrap();
    assert_eq!(real_ld::exit_code(status), 0);
    assert!(out.is_file());

    let bad =
        LinkLine::parse([OsString::from("-o"), p("bad").into(), p("missing.o").into()]).unwrap();
    let argv = bad.render(&no_change(), &[], &[]).unwrap();
    let ours = real_ld::exit_code(real_ld::run(&real, &argv).unwrap());
    let direct = Command::new(&ld)
        .args(&argv)
        .output()
        .unwrap()
        .status
        .code()
        .unwrap();
    assert_ne!(ours, 0);
    assert_eq!(ours, direct);
}

/// libiberty reads as many bytes of an `@file` as seeking to its end reports: none for a
/// device such as /dev/zero (ld then links as if it were empty). fatpack must not read it
/// without bound.
#[test]
fn a_device_as_response_file_reads_as_empty() {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let l = LinkLine::parse(["@/dev/zero", "-o", "out", "a.o"]);
        tx.send(l.map(|l| l.inputs.len())).unwrap();
    });
    let got = rx
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("parsing @/dev/zero did not end");
    assert_eq!(got.unwrap(), 1);
}
