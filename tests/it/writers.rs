//! Every command that writes (prune, repack, split, join, extract) is as safe as the link:
//! bad input is refused by name with nothing written, an output never replaces what the
//! command reads, a signal or a concurrent writer leaves the old set or the new one and no
//! temp file, an input changing underneath is an error (not SIGBUS), and inspect's exit code
//! says when something it printed is wrong. One test per way the 2026-12 fault campaign
//! broke them; the campaign itself is `campaign.rs`.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::common::{
    big_objects, cuda_lib, fatpack_bin, fixture, fixture_objs, gxx, run, PACK_ALWAYS,
};
use crate::rt_harness::{build_app, make_store, StoreAt};

fn os(s: &str) -> &std::ffi::OsStr {
    std::ffi::OsStr::new(s)
}

fn fp(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    run(Command::new(fatpack_bin()).args(args))
}

macro_rules! fp {
    ($($a:expr),* $(,)?) => { fp(&[$(std::ffi::OsStr::new($a)),*]) };
}

/// Hidden names in `dir`: what temp files and folders (fatpack's, tempfile's) are called.
fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect()
}

fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// `fatpack CMD` on `input` writing `dir/out` (prune `--for 9.0`, split `--into`, inspect
/// nothing) must exit 1 saying each of `want`, with nothing but the input left in `dir`.
fn refused(cmds: &[&str], input: &Path, dir: &Path, want: &[&str]) {
    let out = dir.join("out");
    for &cmd in cmds {
        let mut a: Vec<&std::ffi::OsStr> = vec![os(cmd)];
        if cmd == "prune" {
            a.extend([os("--for"), os("9.0")]);
        }
        a.push(input.as_os_str());
        match cmd {
            "inspect" => {}
            "split" => a.extend([os("--into"), out.as_os_str()]),
            _ => a.extend([os("-o"), out.as_os_str()]),
        }
        let (code, _, err) = fp(&a);
        assert_eq!(code, 1, "{cmd}: {err}");
        for w in want {
            assert!(err.contains(w), "{cmd}: {err}");
        }
        let name = input.file_name().unwrap().to_string_lossy();
        assert_eq!(listing(dir), [name.as_ref()], "{cmd}");
    }
}

fn copy_fixture(name: &str, dir: &Path, to: &str) -> PathBuf {
    let p = dir.join(to);
    std::fs::copy(fixture(name), &p).unwrap();
    p
}

/// The fixture program split into `dir`: (host, its folder).
fn split_app(dir: &Path) -> PathBuf {
    let app = copy_fixture("packed_exe", dir, "app");
    let s = dir.join("s");
    let (code, _, err) = fp!(&"split", &app, &"--into", &s);
    assert_eq!(code, 0, "{err}");
    s.join("app")
}

/// A packed program of the fixture and `extra` big objects linked by `fatpack ld`
/// (`--fatpack-side-file` when `side`), built once per shape.
fn packed(extra: usize, side: bool) -> PathBuf {
    type Built = std::sync::Mutex<Vec<((usize, bool), PathBuf)>>;
    static BUILT: OnceLock<Built> = OnceLock::new();
    let m = BUILT.get_or_init(Default::default);
    let mut built = m.lock().unwrap();
    if let Some((_, p)) = built.iter().find(|(k, _)| *k == (extra, side)) {
        return p.clone();
    }
    let dir = crate::rt_harness::scratch("packed");
    let w = crate::common::wrapper_dir();
    let mut objs = fixture_objs();
    objs.extend(big_objects(&dir, extra));
    let exe = dir.join("app");
    let flags: &[&str] = if side {
        &["-Wl,--fatpack-side-file"]
    } else {
        &[]
    };
    let (code, _, err) = gxx(Some(w.path()), &exe, &objs, &cuda_lib(), flags);
    assert_eq!(code, 0, "{err}");
    built.push(((extra, side), exe.clone()));
    exe
}

/// Item 1: a segment running past the end of the file (`p_filesz = 0xffffffff` in a tail
/// binary) is a damaged file, refused by name by prune and inspect; never a panic.
#[test]
fn a_segment_past_the_end_of_the_file_is_refused_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let t = copy_fixture("packed_tail", dir.path(), "t");
    let mut b = std::fs::read(&t).unwrap();
    let layout = fatpack::elf::Layout::parse(&b).unwrap();
    let phoff = layout.header.e_phoff.get(object::LittleEndian) as usize;
    let last_load = (0..layout.segments.len())
        .rev()
        .find(|&i| layout.segments[i].p_type.get(object::LittleEndian) == object::elf::PT_LOAD)
        .unwrap();
    let at = phoff + last_load * 56 + 32;
    b[at..at + 8].copy_from_slice(&0xffff_ffffu64.to_le_bytes());
    std::fs::write(&t, &b).unwrap();
    refused(
        &["prune", "repack", "split", "inspect"],
        &t,
        dir.path(),
        &["t: a damaged ELF file", "past the end"],
    );
}

/// Found by the campaign: a packed binary whose store section has stray flags (`sh_flags`
/// 0x5d, its ALLOC bit lost) prunes and splits into a file whose store segment runs past its
/// end. Whatever a writer makes is checked before it is put in place: refused, nothing
/// written.
#[test]
fn an_output_that_does_not_hold_together_is_never_put_in_place() {
    use object::{Object, ObjectSection};
    let dir = tempfile::tempdir().unwrap();
    let app = copy_fixture("packed_exe", dir.path(), "app");
    let mut b = std::fs::read(&app).unwrap();
    let index = object::File::parse(&*b)
        .unwrap()
        .section_by_name(".fatpack")
        .unwrap()
        .index()
        .0;
    let shoff = u64::from_le_bytes(b[0x28..0x30].try_into().unwrap()) as usize;
    b[shoff + 64 * index + 8] = 0x5d;
    std::fs::write(&app, &b).unwrap();
    refused(
        &["prune", "split"],
        &app,
        dir.path(),
        &["does not hold together"],
    );
}

/// Item 2: archive member names are bytes, not always UTF-8: a Latin-1 `k\xb3.o` keeps its
/// name through prune, and `ar` reads the output.
#[test]
fn archive_member_names_that_are_not_utf8_survive_prune() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let name = std::ffi::OsStr::from_bytes(b"k\xb3.o");
    std::fs::copy(fixture("kernels.o"), dir.path().join(name)).unwrap();
    let (code, _, err) = run(Command::new("ar")
        .current_dir(dir.path())
        .arg("rcs")
        .arg("lat1.a")
        .arg(name));
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = fp!(
        &"prune",
        &"--for",
        &"9.0",
        &dir.path().join("lat1.a"),
        &"-o",
        &dir.path().join("out.a")
    );
    assert_eq!(code, 0, "{err}");
    let out = Command::new("ar")
        .arg("t")
        .arg(dir.path().join("out.a"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"k\xb3.o\n");
    let (code, _, err) = fp!(&"inspect", &dir.path().join("out.a"));
    assert_eq!(code, 0, "{err}");
}

/// Item 3: an ELF file of a type fatpack does not write (e_type 4, a core file) is refused
/// by every command, with nothing written.
#[test]
fn elf_files_of_an_unknown_type_are_refused_by_every_command() {
    let dir = tempfile::tempdir().unwrap();
    let e = copy_fixture("packed_exe", dir.path(), "e");
    let mut b = std::fs::read(&e).unwrap();
    b[16] = 4;
    std::fs::write(&e, &b).unwrap();
    refused(
        &["inspect", "prune", "repack", "split", "extract", "join"],
        &e,
        dir.path(),
        &["e: an ELF file of type 4"],
    );
}

/// Item 4: two entries that name one file (a PTX entry relabelled SASS of the same arch):
/// extract writes every entry under its own name, or nothing; never a partial set.
#[test]
fn extract_writes_every_entry_or_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let o = copy_fixture("kernels.o", dir.path(), "k.o");
    let mut b = std::fs::read(&o).unwrap();
    let sec = crate::rt_harness::find_section(&b, ".nv_fatbin").unwrap();
    let (_, entries) = crate::rt_harness::parse_container(&b[sec.clone()]).unwrap();
    let ptx = entries.iter().find(|e| e.kind == 1).expect("a PTX entry");
    let at = ptx.header.as_ptr() as usize - b.as_ptr() as usize;
    let arch = ptx.arch;
    assert!(
        entries.iter().any(|e| e.kind == 2 && e.arch == arch),
        "a SASS twin"
    );
    let count = entries.len();
    b[at..at + 2].copy_from_slice(&2u16.to_le_bytes());
    std::fs::write(&o, &b).unwrap();
    let x = dir.path().join("x");
    let (code, _, err) = fp!(&"extract", &o, &"-o", &x);
    assert_eq!(code, 0, "{err}");
    let names = listing(&x);
    assert_eq!(names.len(), count, "{names:?}");
    assert!(leftovers(&x).is_empty(), "{:?}", leftovers(&x));
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
}

/// Item 5: extract refuses a store of another build (side file) and a split binary's
/// foreign pack, as inspect, prune, repack and split do; nothing is written.
#[test]
fn extract_refuses_another_builds_store_and_packs() {
    let app = build_app(StoreAt::SideFile, None);
    let (other, _) = make_store(&[("other#A", &["sm_90"])]);
    std::fs::write(fatpack::packed::side_path(&app.exe), other).unwrap();
    let x = app.dir.join("x");
    let (code, _, err) = fp!(&"extract", &app.exe, &"-o", &x);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("does not belong to this binary"), "{err}");
    assert!(!x.exists());

    let dir = tempfile::tempdir().unwrap();
    let host = split_app(dir.path());
    let other = tempfile::tempdir().unwrap();
    let b = other.path().join("app");
    std::fs::copy(packed(1, false), &b).unwrap();
    let (code, _, err) = fp!(&"split", &b, &"--into", &other.path().join("s"));
    assert_eq!(code, 0, "{err}");
    std::fs::copy(
        other.path().join("s/app.sm_90.fatpack"),
        host.with_file_name("app.sm_90.fatpack"),
    )
    .unwrap();
    let (code, _, err) = fp!(&"extract", &host, &"-o", &x);
    assert_eq!(code, 1, "{err}");
    assert!(!err.contains("app: app:"), "the file named once: {err}");
    assert!(!x.exists());
}

/// Item 6: inspect fails when a pack it lists is damaged, truncated or another build's; a
/// pack that is not installed (a machine given only its GPUs' packs) is not a failure.
#[test]
fn inspect_fails_on_a_damaged_pack_but_not_on_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let host = split_app(dir.path());
    let pack = host.with_file_name("app.sm_90.fatpack");
    let good = std::fs::read(&pack).unwrap();
    std::fs::remove_file(&pack).unwrap();
    let (code, out, err) = fp!(&"inspect", &host);
    assert_eq!(code, 0, "missing: {err}");
    assert!(out.contains("is missing"), "{out}");
    let mut bad_magic = good.clone();
    bad_magic[..4].copy_from_slice(b"XXXX");
    for (what, bytes) in [
        ("bad magic", bad_magic),
        ("truncated", good[..good.len() / 2].to_vec()),
    ] {
        std::fs::write(&pack, bytes).unwrap();
        let (code, _, err) = fp!(&"inspect", &host);
        assert_eq!(code, 1, "{what}: {err}");
        assert!(err.contains("app.sm_90.fatpack"), "{what}: {err}");
        let (code, _, _) = fp!(&"inspect", &"--json", &host);
        assert_eq!(code, 1, "{what} --json");
        // join names the bad pack, not its own output.
        let joined = dir.path().join("joined");
        let (code, _, err) = fp!(&"join", &host, &"-o", &joined);
        assert_eq!(code, 1, "{what}: {err}");
        assert!(
            err.contains("app.sm_90.fatpack") && !err.contains("joined"),
            "{err}"
        );
    }
}

/// Item 7: no output may be, or contain, what the command reads (the input, its side file,
/// its packs; by any name); refused with the input untouched.
#[test]
fn outputs_that_are_part_of_the_input_are_refused() {
    let app = build_app(StoreAt::SideFile, None);
    let side = fatpack::packed::side_path(&app.exe);
    let dir = tempfile::tempdir().unwrap();
    let host = split_app(dir.path());
    let s = host.parent().unwrap();
    let plain = copy_fixture("packed_exe", dir.path(), "plain");
    let before = |paths: &[&Path]| -> Vec<Vec<u8>> {
        paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
    };
    let read_sets: Vec<Vec<PathBuf>> = vec![
        vec![app.exe.clone(), side.clone()],
        std::fs::read_dir(s)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect(),
        vec![plain.clone()],
    ];
    let snap: Vec<_> = read_sets
        .iter()
        .map(|v| before(&v.iter().map(PathBuf::as_path).collect::<Vec<_>>()))
        .collect();
    let cases: Vec<Vec<std::ffi::OsString>> = vec![
        vec![
            "prune".into(),
            "--for".into(),
            "9.0".into(),
            app.exe.clone().into(),
            "-o".into(),
            side.clone().into(),
        ],
        vec![
            "repack".into(),
            app.exe.clone().into(),
            "-o".into(),
            side.clone().into(),
        ],
        vec![
            "join".into(),
            host.clone().into(),
            "-o".into(),
            s.join("app.sm_80.fatpack").into(),
        ],
        vec![
            "join".into(),
            host.clone().into(),
            "-o".into(),
            host.clone().into(),
        ],
        vec![
            "split".into(),
            plain.clone().into(),
            "--into".into(),
            dir.path().into(),
        ],
        vec![
            "extract".into(),
            plain.clone().into(),
            "-o".into(),
            plain.clone().into(),
        ],
    ];
    for c in &cases {
        let a: Vec<&std::ffi::OsStr> = c.iter().map(|s| s.as_os_str()).collect();
        let (code, _, err) = fp(&a);
        assert_eq!(code, 1, "{c:?}: {err}");
        assert!(err.contains("must not be the input"), "{c:?}: {err}");
    }
    for (set, snap) in read_sets.iter().zip(&snap) {
        let now = before(&set.iter().map(PathBuf::as_path).collect::<Vec<_>>());
        assert!(&now == snap, "an input changed: {set:?}");
    }
    assert!(leftovers(s).is_empty() && leftovers(dir.path()).is_empty());
}

/// Item 8: SIGINT, SIGTERM or SIGHUP at any moment of prune, repack or split leaves no temp
/// file; what SIGKILL leaves is swept by the next run in that folder.
#[test]
fn signals_leave_no_temp_files_and_the_next_run_sweeps_sigkills() {
    let big = packed(12, false);
    let plain_dir = tempfile::tempdir().unwrap();
    let plain = plain_dir.path().join("plain");
    let mut objs = fixture_objs();
    objs.extend(big_objects(plain_dir.path(), 12));
    let (code, _, err) = gxx(None, &plain, &objs, &cuda_lib(), &[]);
    assert_eq!(code, 0, "{err}");
    let out = tempfile::tempdir().unwrap();
    let o = out.path().join("o");
    let jobs: Vec<(&str, Vec<std::ffi::OsString>)> = vec![
        (
            "prune",
            vec![
                "prune".into(),
                "--for".into(),
                "9.0".into(),
                plain.clone().into(),
                "-o".into(),
                o.clone().into(),
            ],
        ),
        (
            "repack",
            vec![
                "repack".into(),
                big.clone().into(),
                "-o".into(),
                o.clone().into(),
                "--level".into(),
                "19".into(),
            ],
        ),
        (
            "split",
            vec![
                "split".into(),
                big.clone().into(),
                "--into".into(),
                out.path().join("s").into(),
            ],
        ),
    ];
    let mut interrupted = 0;
    for (name, args) in &jobs {
        for (i, sig) in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP]
            .iter()
            .cycle()
            .take(6)
            .enumerate()
        {
            let mut child = Command::new(fatpack_bin())
                .args(args)
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20 + 40 * i as u64));
            // SAFETY: a plain syscall to the child just started.
            unsafe { libc::kill(child.id() as i32, *sig) };
            let st = child.wait().unwrap();
            if st.signal().is_some() || st.code() == Some(128 + sig) {
                interrupted += 1;
            }
            assert!(
                leftovers(out.path()).is_empty(),
                "{name} signal {sig}: {:?}",
                leftovers(out.path())
            );
            if out.path().join("s").exists() {
                assert!(leftovers(&out.path().join("s")).is_empty(), "{name}");
            }
        }
    }
    assert!(
        interrupted >= 6,
        "the signals came too late to test anything ({interrupted})"
    );
    // SIGKILL: the temp stays, the next run (of any command) in that folder removes it.
    let mut child = Command::new(fatpack_bin())
        .args(&jobs[1].1)
        .spawn()
        .unwrap();
    let dead_pid = child.id();
    std::thread::sleep(std::time::Duration::from_millis(150));
    child.kill().unwrap();
    child.wait().unwrap();
    let stale = out.path().join(format!(".fatpack-tmp-{dead_pid}-zzzzzz"));
    std::fs::write(&stale, b"left by SIGKILL").unwrap();
    let (code, _, err) = fp!(
        &"prune",
        &"--for",
        &"9.0",
        &fixture("packed_exe"),
        &"-o",
        &o
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        leftovers(out.path()).is_empty(),
        "{:?}",
        leftovers(out.path())
    );
}

/// Item 8, SIGXFSZ: an output past the file-size limit (`ulimit -f`) is an error naming it,
/// with nothing left; not a core dump and a temp file.
#[test]
fn a_file_size_limit_is_an_error_that_leaves_nothing() {
    let big = packed(12, false);
    let dir = tempfile::tempdir().unwrap();
    for cmd in [
        "repack {in} -o {dir}/o",
        "split {in} --into {dir}/s",
        "prune --keep sm_90 {in} -o {dir}/o",
    ] {
        let cmd = cmd
            .replace("{in}", &big.display().to_string())
            .replace("{dir}", &dir.path().display().to_string());
        // 64 blocks of 512 bytes: the binary alone is larger.
        let (code, _, err) = run(Command::new("bash").arg("-c").arg(format!(
            "ulimit -f 64; exec {} {cmd}",
            fatpack_bin().display()
        )));
        assert_eq!(code, 1, "{cmd}: {err}");
        assert!(err.contains("File too large"), "{cmd}: {err}");
        assert!(!err.contains(".fatpack-tmp"), "{cmd}: {err}");
        assert!(
            listing(dir.path()).is_empty(),
            "{cmd}: {:?}",
            listing(dir.path())
        );
    }
}

/// Item 9: concurrent writers of one output take turns: the binary and its side file, or a
/// host and its packs, always come from one writer.
#[test]
fn concurrent_writers_of_one_output_never_mix_their_files() {
    let a = packed(0, true);
    let b = packed(1, true);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("app");
    for round in 0..3 {
        let kids: Vec<_> = (0..10)
            .map(|i| {
                let input = if i % 2 == 0 { &a } else { &b };
                Command::new(fatpack_bin())
                    .args(["repack", "--level", "1"])
                    .arg(input)
                    .arg("-o")
                    .arg(&out)
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut k in kids {
            assert!(k.wait().unwrap().success(), "round {round}");
        }
        let (code, _, err) = fp!(&"inspect", &out);
        assert_eq!(code, 0, "round {round}: {err}");
        assert!(leftovers(dir.path()).is_empty());
    }
    // Split into one folder: a host with packs of another build would fail inspect.
    let s = dir.path().join("s");
    let ma = packed(0, false);
    let mb = packed(1, false);
    for round in 0..3 {
        let kids: Vec<_> = (0..10)
            .map(|i| {
                Command::new(fatpack_bin())
                    .arg("split")
                    .arg(if i % 2 == 0 { &ma } else { &mb })
                    .arg("--into")
                    .arg(&s)
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut k in kids {
            assert!(k.wait().unwrap().success(), "round {round}");
        }
        let (code, _, err) = fp!(&"inspect", &s.join("app"));
        assert_eq!(code, 0, "split round {round}: {err}");
        assert!(leftovers(&s).is_empty());
    }
}

/// Item 10: an input truncated while it is read is an error naming it, never SIGBUS.
#[test]
fn an_input_truncated_while_read_is_an_error_not_a_signal() {
    let big = packed(12, false);
    let bytes = std::fs::read(&big).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::write(&input, &bytes).unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let truncator = {
        let (stop, input, bytes) = (stop.clone(), input.clone(), bytes.clone());
        std::thread::spawn(move || {
            use std::io::Write;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Rewritten in place (same inode): the file shrinks and grows under readers.
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(&input)
                    .unwrap();
                f.set_len(4096).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(2));
                f.write_all(&bytes).unwrap();
                std::thread::sleep(std::time::Duration::from_millis(3));
            }
        })
    };
    let out = dir.path().join("out");
    for i in 0..30 {
        let (args, o): (Vec<&str>, &Path) = match i % 3 {
            0 => (vec!["repack"], &out),
            1 => (vec!["prune", "--for", "9.0"], &out),
            _ => (vec!["split"], &out),
        };
        let mut c = Command::new(fatpack_bin());
        c.args(&args).arg(&input);
        if args[0] == "split" {
            c.arg("--into").arg(dir.path().join("s"));
        } else {
            c.arg("-o").arg(o);
        }
        let st = c.stderr(std::process::Stdio::null()).status().unwrap();
        assert!(
            st.signal().is_none(),
            "{args:?} died of signal {:?}",
            st.signal()
        );
        assert!(matches!(st.code(), Some(0 | 1)), "{args:?}: {st:?}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    truncator.join().unwrap();
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
}

/// Item 11: messages name the user's files: never a temp file, never a file twice, the
/// thin archive with its missing member.
#[test]
fn messages_name_the_users_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixture("kernels.o"), dir.path().join("km.o")).unwrap();
    let (code, _, err) = run(Command::new("ar")
        .current_dir(dir.path())
        .args(["rcT", "thin.a", "km.o"]));
    assert_eq!(code, 0, "{err}");
    std::fs::remove_file(dir.path().join("km.o")).unwrap();
    let (code, _, err) = fp!(&"inspect", &dir.path().join("thin.a"));
    assert_eq!(code, 1);
    assert!(
        err.contains("thin.a(km.o)") && err.contains("No such file"),
        "{err}"
    );
    // A store whose digest section is damaged: the error names the output, not a temp.
    let app = copy_fixture("packed_exe", dir.path(), "app");
    let mut b = std::fs::read(&app).unwrap();
    let r = crate::rt_harness::find_section(&b, ".fatpack_digest").unwrap();
    b[r.start + 8] ^= 0xff;
    std::fs::write(&app, &b).unwrap();
    for args in [vec!["repack"], vec!["prune", "--for", "9.0"]] {
        let mut a: Vec<&std::ffi::OsStr> = args.iter().map(|s| s.as_ref()).collect();
        let o = dir.path().join("o");
        a.extend([app.as_os_str(), os("-o"), o.as_os_str()]);
        let (code, _, err) = fp(&a);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            !err.contains(".fatpack-"),
            "{args:?} names a temp file: {err}"
        );
        assert!(!err.contains("app: app:"), "{err}");
    }
    // A loaded segment whose size in memory runs past any address: prune, repack and
    // inspect refuse the input, naming it, and write nothing.
    let mut b = std::fs::read(copy_fixture("packed_exe", dir.path(), "memsz")).unwrap();
    let layout = fatpack::elf::Layout::parse(&b).unwrap();
    let last = layout
        .segments
        .iter()
        .rposition(|p| p.p_type.get(fatpack::elf::LE) == object::elf::PT_LOAD)
        .unwrap();
    let mut new = layout.clone();
    new.segments[last].p_memsz.set(fatpack::elf::LE, 1 << 60);
    new.write_into(&mut b).unwrap();
    let memsz = dir.path().join("memsz");
    std::fs::write(&memsz, &b).unwrap();
    for args in [
        vec!["repack"],
        vec!["prune", "--for", "9.0"],
        vec!["inspect"],
    ] {
        let mut a: Vec<&std::ffi::OsStr> = args.iter().map(|s| s.as_ref()).collect();
        let o = dir.path().join("o2");
        a.push(memsz.as_os_str());
        if args[0] != "inspect" {
            a.extend([os("-o"), o.as_os_str()]);
        }
        let (code, _, err) = fp(&a);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(
            err.contains("memsz: a damaged ELF file") && err.contains("past any address"),
            "{args:?}: {err}"
        );
        assert!(!o.exists());
    }
}

/// An input whose ELF type is damaged but that holds device code: `fatpack ld` names that
/// input and what is wrong with it, not the output.
#[test]
fn a_link_input_of_an_unknown_elf_type_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = std::fs::read(fixture("kernels.o")).unwrap();
    let layout = fatpack::elf::Layout::parse(&b).unwrap();
    let mut new = layout.clone();
    new.header.e_type.set(fatpack::elf::LE, 0x1234);
    new.write_into(&mut b).unwrap();
    let bad = dir.path().join("bad_type.o");
    std::fs::write(&bad, &b).unwrap();
    let out = dir.path().join("app");
    let wrap = crate::common::wrapper_dir();
    let (code, _, err) = gxx(
        Some(wrap.path()),
        &out,
        &[fixture("main.o"), bad, fixture("other.o")],
        &cuda_lib(),
        &[],
    );
    assert_ne!(code, 0);
    assert!(
        err.contains("bad_type.o: an ELF file of type 0x1234") && err.contains(".nv_fatbin"),
        "{err}"
    );
    assert!(!out.exists());
}

/// Item 13: a failed split or extract leaves no output folder it created; a link that keeps
/// its store inside the binary removes the earlier side-file link's `<output>.fatpack`.
#[test]
fn failed_writers_leave_no_folders_and_links_no_stale_side_files() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk");
    std::fs::write(&junk, vec![0u8; 4096]).unwrap();
    // Packed but split can read nothing of it: the digest is damaged.
    let app = copy_fixture("packed_exe", dir.path(), "app");
    let mut b = std::fs::read(&app).unwrap();
    let r = crate::rt_harness::find_section(&b, ".fatpack").unwrap();
    b[r.end - 1] ^= 0xff;
    std::fs::write(&app, &b).unwrap();
    let (code, _, err) = fp!(&"split", &app, &"--into", &dir.path().join("new/s"));
    assert_eq!(code, 1, "{err}");
    let (code, _, err) = fp!(&"extract", &junk, &"-o", &dir.path().join("x/y"));
    assert_eq!(code, 1, "{err}");
    assert_eq!(listing(dir.path()), ["app", "junk"]);

    let w = crate::common::wrapper_dir();
    let exe = dir.path().join("linked");
    let cuda = cuda_lib();
    let (code, _, err) = gxx(
        Some(w.path()),
        &exe,
        &fixture_objs(),
        &cuda,
        &["-Wl,--fatpack-side-file"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(fatpack::packed::side_path(&exe).exists());
    let (code, _, err) = gxx(Some(w.path()), &exe, &fixture_objs(), &cuda, &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !fatpack::packed::side_path(&exe).exists(),
        "the stale side file stayed"
    );
    let (code, _, err) = fp!(&"inspect", &exe);
    assert_eq!(code, 0, "{err}");
}

/// Item 14: a packed output exports no symbol a plain link does not: zstd's weak trace hooks
/// would let another library's definitions run inside the runtime.
#[test]
fn packed_outputs_export_no_zstd_trace_hooks() {
    let (code, out, err) = run(Command::new("nm").arg("-D").arg(packed(0, false)));
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("ZSTD_trace"), "{out}");
}

/// An input truncated by another process while `fatpack ld` has it mapped (here by the
/// "real linker" itself, once it has linked, before fatpack reads the input's device code
/// again): exit 1 with a message naming the input, no output, no temp files. Before, the
/// read past the new end ended fatpack with SIGBUS and left its temp folder.
#[test]
fn an_input_truncated_during_the_link_is_named_and_nothing_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for n in ["main.o", "kernels.o", "other.o"] {
        std::fs::copy(fixture(n), d.join(n)).unwrap();
    }
    let fake = d.join("fakeld");
    std::fs::write(
        &fake,
        "#!/bin/sh\n/usr/bin/ld \"$@\" || exit $?\n\
         case \" $* \" in *\" kernels.o \"*) truncate -s 2000 kernels.o ;; esac\n",
    )
    .unwrap();
    let (code, _, err) = run(Command::new("chmod").arg("+x").arg(&fake));
    assert_eq!(code, 0, "{err}");
    let tmp = d.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let wrap = crate::common::wrapper_dir();
    let (code, _, err) = run(Command::new("g++")
        .current_dir(d)
        .env("FATPACK_REAL_LD", &fake)
        .env("TMPDIR", &tmp)
        .arg(format!("-B{}", wrap.path().display()))
        .env(PACK_ALWAYS.0, PACK_ALWAYS.1)
        .args(["-o", "app", "main.o", "kernels.o", "other.o"])
        .arg(format!("-L{}", cuda_lib().display()))
        .args(["-lcudart_static", "-ldl", "-lpthread", "-lrt"])
        .args(["-Wl,--fatpack-route=direct", "-Wl,--fatpack-early-link=no"]));
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("kernels.o: changed while fatpack read it") && !err.contains("signal"),
        "{err}"
    );
    assert_eq!(
        std::fs::metadata(d.join("kernels.o")).unwrap().len(),
        2000,
        "truncated"
    );
    assert!(!d.join("app").exists());
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "temp files left: {left:?}");
}
