//! `fatpack split` / `fatpack join`: a packed program split into a host binary and per-arch
//! packs runs from its packs (fake cudart and driver), a missing or foreign pack is a
//! one-line error naming it, and joining gives the original bytes back.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::tree;
use crate::rt_harness::*;

fn fatpack(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    crate::common::run(Command::new(crate::common::fatpack_bin()).args(args))
}

fn split(input: &Path, into: &Path) -> (i32, String, String) {
    fatpack(&[
        "split".as_ref(),
        input.as_os_str(),
        "--into".as_ref(),
        into.as_os_str(),
    ])
}

fn join(host: &Path, out: &Path) -> (i32, String, String) {
    fatpack(&[
        "join".as_ref(),
        host.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ])
}

fn with_suffix(p: &Path, suffix: &str) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn split_app(at: StoreAt, tag: &str) -> (App, PathBuf) {
    let app = build_app(at, None);
    let into = scratch(tag);
    let (code, _, err) = split(&app.exe, &into);
    assert_eq!(code, 0, "split failed: {err}");
    (app, into.join("app"))
}

#[test]
fn split_writes_one_pack_per_arch_and_a_smaller_host() {
    let (app, host) = split_app(StoreAt::Mapped, "split-files");
    let dir = host.parent().unwrap();
    assert_eq!(
        listing(dir),
        [
            "app",
            "app.compute_80.fatpack",
            "app.compute_90.fatpack",
            "app.sm_100.fatpack",
            "app.sm_80.fatpack",
            "app.sm_86.fatpack",
            "app.sm_90.fatpack",
        ]
    );
    // No blob's bytes are left in the host: each is in exactly one pack.
    let host_bytes = std::fs::read(&host).unwrap();
    let store = cubin_store::Store::parse(&app.store).unwrap();
    let packs: Vec<Vec<u8>> = listing(dir)
        .iter()
        .filter(|f| f.ends_with(".fatpack"))
        .map(|f| std::fs::read(dir.join(f)).unwrap())
        .collect();
    for b in store.blobs().filter(|b| b.stored_len >= 64) {
        let bytes = &app.store[b.offset as usize..(b.offset + b.stored_len) as usize];
        let found = |hay: &[u8]| hay.windows(bytes.len()).filter(|w| *w == bytes).count();
        assert_eq!(found(&host_bytes), 0, "blob {} still in the host", b.id);
        assert_eq!(
            packs.iter().map(|p| found(p)).sum::<usize>(),
            1,
            "blob {}",
            b.id
        );
    }
    // Same mode bits as the input.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&host).unwrap().permissions().mode(),
        std::fs::metadata(&app.exe).unwrap().permissions().mode()
    );
    // Deterministic: a second split gives the same bytes.
    let again = scratch("split-again");
    assert_eq!(split(&app.exe, &again).0, 0);
    for f in listing(dir) {
        assert!(
            std::fs::read(dir.join(&f)).unwrap() == std::fs::read(again.join(&f)).unwrap(),
            "{f} differs between two splits"
        );
    }
    // inspect shows the packs and still reads every entry.
    let j = crate::common::inspect_json(&host);
    let packs = j["packed"]["packs"].as_array().unwrap();
    assert_eq!(packs.len(), 6);
    assert!(packs.iter().all(|p| p["state"] == "ok"), "{j}");
    assert_eq!(j["packed"]["digest_matches"], true);
    // A pack on its own is named for what it is.
    let (code, _, err) = fatpack(&[
        "inspect".as_ref(),
        dir.join("app.sm_90.fatpack").as_os_str(),
    ]);
    assert!(
        code != 0 && err.contains("a pack of a split binary"),
        "{err}"
    );
    // With a pack gone, inspect still lists every entry, and says which pack is missing.
    std::fs::remove_file(dir.join("app.sm_80.fatpack")).unwrap();
    let j = crate::common::inspect_json(&host);
    let missing: Vec<&serde_json::Value> = j["packed"]["packs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["state"] != "ok")
        .collect();
    assert_eq!(missing.len(), 1, "{j}");
    assert!(missing[0]["state"].as_str().unwrap().contains("missing"));
    let entries: usize = j["modules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["entries"].as_array().unwrap().len())
        .sum();
    assert_eq!(entries, store.entry_count());
    // The table stays aligned: an entry whose pack is gone says so on a line of its own.
    // (A missing pack is no error: a machine holds only the packs of its own GPUs.)
    let (code, table, err) = crate::common::run(
        std::process::Command::new(crate::common::fatpack_bin())
            .arg("inspect")
            .arg(&host),
    );
    assert_eq!(code, 0, "{err}");
    let header = table
        .lines()
        .find(|l| l.contains("arch") && l.contains("codec"))
        .unwrap();
    let raw_end = header.find("raw").unwrap() + 3;
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("    sm_") || l.starts_with("    compute_"))
        // The modules' entries, not the per-arch summary.
        .filter(|l| !l.contains(" entries "))
        .collect();
    assert!(!rows.is_empty(), "{table}");
    for row in &rows {
        let before = &row[..raw_end];
        assert!(
            before.ends_with('B') && !row.contains("not available"),
            "misaligned: {row}\n{table}"
        );
    }
    assert!(
        table.contains("not decoded: its pack") && table.contains("app.sm_80.fatpack is missing"),
        "{table}"
    );
}

#[test]
fn a_split_program_runs_from_its_packs_as_the_whole_one_did() {
    let (app, host) = split_app(StoreAt::Mapped, "split-run");
    for (devs, mode) in [
        ("90", "launchA"),
        ("86", "launchA"),
        ("103", "launchA"),
        ("120", "launchA"),
        ("90,86", "launchA"),
        ("100", "launchB"),
        ("86", "launchD"),
    ] {
        let whole = run(&app.exe, mode, Some(devs), &[]);
        let split = run(&host, mode, Some(devs), &[]);
        whole.assert_clean();
        split.assert_clean();
        assert_eq!(
            split.registered(),
            whole.registered(),
            "{devs} {mode}: {}",
            split.stderr
        );
        assert_eq!(split.stdout, whole.stdout);
    }
}

/// Removes the packs named `packs` from beside the split program `host`: a machine that
/// installed only the others.
fn uninstall(host: &Path, packs: &[&str]) {
    let dir = host.parent().unwrap();
    for p in packs {
        std::fs::remove_file(dir.join(p)).unwrap();
    }
}

#[test]
fn only_the_packs_a_gpu_needs_must_be_there() {
    let (_app, host) = split_app(StoreAt::Mapped, "split-partial");
    // A 9.0 machine: app#A and app#B run sm_90a (the sm_90 pack); app#D runs sm_86.
    uninstall(
        &host,
        &[
            "app.compute_80.fatpack",
            "app.compute_90.fatpack",
            "app.sm_100.fatpack",
            "app.sm_80.fatpack",
        ],
    );
    let r = run(&host, "launchA", Some("90"), &[]);
    r.assert_clean();
    assert_eq!(r.out("launchA").as_deref(), Some("0"));
    // A GPU whose code is in a removed pack: one line naming the pack and the capability.
    let r = run(&host, "launchA", Some("120"), &[]);
    assert_ne!(r.out("launchA").as_deref(), Some("0"), "{}", r.stdout);
    let line = r
        .stderr
        .lines()
        .find(|l| l.contains("app.compute_90.fatpack"))
        .unwrap_or_else(|| panic!("no line names the pack:\n{}", r.stderr));
    assert!(
        line.contains("compute capability 12.0") && line.contains("missing"),
        "{line}"
    );
    let pack = with_suffix(&host, ".compute_90.fatpack");
    assert!(line.contains(&pack.display().to_string()), "{line}");
}

/// A split program decodes ahead from the packs that are installed (mapped and checked on
/// the program's thread at its first driver call, as its loads would): a kernel launched
/// right after that call finds its module decoded. A pack for another GPU, not installed,
/// is not needed.
#[test]
fn a_split_program_decodes_ahead_from_its_installed_packs() {
    let (_app, host) = split_app(StoreAt::Mapped, "split-ahead");
    uninstall(
        &host,
        &[
            "app.compute_80.fatpack",
            "app.sm_100.fatpack",
            "app.sm_80.fatpack",
        ],
    );
    let env = [
        ("FATPACK_AHEAD", "32"),
        ("FAKE_CUDART_CONTEXT_MS", "200"),
        ("FATPACK_LOG", "info"),
    ];
    let r = run(&host, "aheadnow", Some("90"), &env);
    r.assert_launched_decoded_ahead(2);
}

#[test]
fn packs_are_found_next_to_the_binary_not_in_the_current_directory() {
    let (_app, host) = split_app(StoreAt::Mapped, "split-cwd");
    let elsewhere = scratch("split-cwd-elsewhere");
    // A decoy in the current directory with the pack's name must not be read.
    std::fs::write(elsewhere.join("app.sm_90.fatpack"), b"decoy").unwrap();
    let mut cmd = Command::new(&host);
    cmd.arg("launchA")
        .current_dir(&elsewhere)
        .env("LD_LIBRARY_PATH", fakes().join("cuda"))
        .env("FAKE_CUDA_DEVICES", "90");
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("launchA=0"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_damaged_or_foreign_pack_is_refused_by_name() {
    let (_app, host) = split_app(StoreAt::Mapped, "split-bad");
    let pack = with_suffix(&host, ".sm_90.fatpack");
    let good = std::fs::read(&pack).unwrap();

    // Another build's pack: the store digest in its header differs.
    let mut foreign = good.clone();
    foreign[20] ^= 1;
    std::fs::write(&pack, &foreign).unwrap();
    let r = run(&host, "launchA", Some("90"), &[]);
    assert_ne!(r.out("launchA").as_deref(), Some("0"));
    assert!(
        r.stderr.contains("another build") && r.stderr.contains("app.sm_90.fatpack"),
        "{}",
        r.stderr
    );
    assert!(join(&host, &scratch("split-bad-join").join("app")).0 != 0);

    // A changed byte in a blob (the last one of the pack: app#B's sm_90a): caught by the
    // index's digest, never passed to cudart; app#A's blob in the same pack still loads.
    let mut damaged = good.clone();
    let last = damaged.len() - 1;
    damaged[last] ^= 0x40;
    std::fs::write(&pack, &damaged).unwrap();
    let r = run(&host, "launchB", Some("90"), &[]);
    assert_ne!(r.out("launchB").as_deref(), Some("0"));
    assert!(r.stderr.contains("app.sm_90.fatpack"), "{}", r.stderr);
    assert!(
        !r.log.contains("sm_90a"),
        "damaged code reached cudart:\n{}",
        r.log
    );
    let r = run(&host, "launchA", Some("90"), &[]);
    assert_eq!(r.out("launchA").as_deref(), Some("0"), "{}", r.stderr);

    // A FIFO in the pack's place: an error, not a hang.
    std::fs::remove_file(&pack).unwrap();
    assert!(Command::new("mkfifo")
        .arg(&pack)
        .status()
        .unwrap()
        .success());
    let r = run_via(&["timeout", "20"], &host, "launchA", Some("90"), &[]);
    assert_ne!(r.code, Some(124), "hung on a FIFO pack");
    assert!(r.stderr.contains("FIFO"), "{}", r.stderr);
}

#[test]
fn join_gives_back_the_original_bytes_wherever_the_store_was() {
    for (at, tag) in [
        (StoreAt::Mapped, "join-mapped"),
        (StoreAt::UnmappedSection, "join-section"),
        (StoreAt::SideFile, "join-side"),
    ] {
        let (app, host) = split_app(at, tag);
        if at == StoreAt::SideFile {
            // The host binary is unchanged; its side file holds the manifest.
            assert!(std::fs::read(&host).unwrap() == std::fs::read(&app.exe).unwrap());
            assert!(with_suffix(&host, ".fatpack").exists());
        }
        let r = run(&host, "launchA", Some("90"), &[]);
        r.assert_clean();
        let out = scratch(&format!("{tag}-out")).join("app");
        let (code, _, err) = join(&host, &out);
        assert_eq!(code, 0, "{tag}: {err}");
        assert!(
            std::fs::read(&out).unwrap() == std::fs::read(&app.exe).unwrap(),
            "{tag}: joined binary differs from the original"
        );
        if at == StoreAt::SideFile {
            assert!(
                std::fs::read(with_suffix(&out, ".fatpack")).unwrap() == app.store,
                "{tag}: joined side file differs"
            );
        }
    }
}

/// A binary that is not packed (a plain build, or a link `fatpack ld` left to the real linker,
/// its device code under the packing threshold) splits into itself, whole, and no packs:
/// a split of a whole build covers every file, and each keeps running as it did.
#[test]
fn a_binary_that_is_not_packed_is_written_whole() {
    let d = scratch("split-unpacked");
    let w = crate::common::wrapper_dir();
    let exe = d.join("small");
    let (code, _, err) = crate::common::run(
        Command::new("g++")
            .arg(format!("-B{}", w.path().display()))
            .env_remove("FATPACK_MODE")
            .arg("-o")
            .arg(&exe)
            .args(crate::common::fixture_objs())
            .arg(format!("-L{}", fakes().display()))
            .arg("-lfakecudart")
            .arg(format!("-Wl,-rpath,{}", fakes().display())),
    );
    assert_eq!(code, 0, "{err}");
    let into = d.join("out");
    let (code, _, err) = split(&exe, &into);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("small: not packed") && err.contains("written whole"),
        "{err}"
    );
    assert_eq!(listing(&into), ["small"]);
    assert_eq!(
        std::fs::read(into.join("small")).unwrap(),
        std::fs::read(&exe).unwrap()
    );
    let r = run(&into.join("small"), "go", Some("90"), &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
}

#[test]
fn bad_inputs_are_refused_without_leaving_files() {
    let d = scratch("split-errors");
    // Not a linked binary: an object is refused.
    let into = d.join("out1");
    let (code, _, err) = split(&crate::common::fixture("kernels.o"), &into);
    assert_ne!(code, 0);
    assert!(
        err.contains("kernels.o: object, not a program or shared library"),
        "{err}"
    );
    assert!(!into.exists() || listing(&into).is_empty());
    // Join of a binary that is not packed.
    let plain = d.join("plain");
    std::fs::copy("/bin/true", &plain).unwrap();
    let (code, _, err) = join(&plain, &d.join("joined-plain"));
    assert!(
        code != 0 && err.contains("plain: not a packed output"),
        "{err}"
    );
    assert!(!d.join("joined-plain").exists());

    // Already split; and join of a whole binary.
    let (app, host) = split_app(StoreAt::Mapped, "split-twice");
    let into = d.join("out2");
    let (code, _, err) = split(&host, &into);
    assert!(code != 0 && err.contains("already split"), "{err}");
    assert!(!into.exists() || listing(&into).is_empty());
    let (code, _, err) = join(&app.exe, &d.join("joined"));
    assert!(code != 0 && err.contains("not split"), "{err}");

    // A missing pack: join names it and writes nothing.
    std::fs::remove_file(with_suffix(&host, ".sm_86.fatpack")).unwrap();
    let out_dir = d.join("out3");
    std::fs::create_dir_all(&out_dir).unwrap();
    let (code, _, err) = join(&host, &out_dir.join("app"));
    assert!(
        code != 0 && err.contains("app.sm_86.fatpack") && err.contains("missing"),
        "{err}"
    );
    assert!(listing(&out_dir).is_empty(), "{:?}", listing(&out_dir));

    // prune refuses a split binary with a hint.
    let (code, _, err) = fatpack(&[
        "prune".as_ref(),
        "--for".as_ref(),
        "9.0".as_ref(),
        host.as_os_str(),
        "-o".as_ref(),
        d.join("pruned").as_os_str(),
    ]);
    assert!(code != 0 && err.contains("split"), "{err}");
}

#[test]
fn a_binary_whose_runtime_cannot_read_packs_is_not_split() {
    let app = build_app(StoreAt::Mapped, None);
    // Clear the feature bits, as a binary linked by an older fatpack has them.
    let data = std::fs::read(&app.exe).unwrap();
    let r = fatpack::packed::slot_range(&data).unwrap().unwrap();
    let mut data = data;
    let at = r.0 as usize + 52;
    data[at..at + 4].copy_from_slice(&[0; 4]);
    std::fs::write(&app.exe, &data).unwrap();
    let into = scratch("split-old");
    let (code, _, err) = split(&app.exe, &into);
    assert!(code != 0 && err.contains("relink"), "{err}");
    assert!(!into.exists() || listing(&into).is_empty());
}

#[test]
fn real_nvcc_outputs_split_extract_and_join_to_the_same_bytes() {
    let cuda = crate::common::cuda_lib();
    let w = crate::common::wrapper_dir();
    let dir = tempfile::tempdir().unwrap();
    // GNU ld maps the store; mold 1.x leaves an unmapped section.
    for (name, flags) in [("bfd", vec![]), ("mold", vec!["-fuse-ld=mold"])] {
        let exe = dir.path().join(format!("app-{name}"));
        let (code, _, err) = crate::common::gxx(
            Some(w.path()),
            &exe,
            &crate::common::fixture_objs(),
            &cuda,
            &flags,
        );
        assert_eq!(code, 0, "{name}: {err}");
        let into = dir.path().join(format!("split-{name}"));
        let (code, _, err) = split(&exe, &into);
        assert_eq!(code, 0, "{name}: {err}");
        assert!(err.contains("loads from"), "{name}: {err}");
        let host = into.join(exe.file_name().unwrap());
        assert_eq!(
            crate::common::run(&mut Command::new(&host)).1,
            "fixture main ok\n",
            "{name}"
        );
        // The same device code comes out of the split binary as out of the whole one.
        let (a, b) = (
            dir.path().join(format!("x-{name}-a")),
            dir.path().join(format!("x-{name}-b")),
        );
        for (input, out) in [(&exe, &a), (&host, &b)] {
            let (code, _, err) = fatpack(&[
                "extract".as_ref(),
                input.as_os_str(),
                "-o".as_ref(),
                out.as_os_str(),
            ]);
            assert_eq!(code, 0, "{name}: {err}");
        }
        let (ta, tb) = (tree(&a), tree(&b));
        assert!(!ta.is_empty() && ta == tb, "{name}: extract differs");
        let joined = dir.path().join(format!("joined-{name}"));
        let (code, _, err) = join(&host, &joined);
        assert_eq!(code, 0, "{name}: {err}");
        assert!(
            std::fs::read(&joined).unwrap() == std::fs::read(&exe).unwrap(),
            "{name}: join differs from the linked binary"
        );
    }
}

#[test]
fn a_damaged_manifest_fails_cleanly_at_run_time() {
    let (_app, host) = split_app(StoreAt::Mapped, "split-manifest");
    let data = std::fs::read(&host).unwrap();
    let (off, len) = fatpack::packed::store_range(&data).expect("the manifest section");
    // Every 97th byte of the manifest in turn (header, pack table, placements, skeleton).
    for at in (0..len as usize).step_by(97) {
        let mut d = data.clone();
        d[off as usize + at] ^= 0x5a;
        std::fs::write(&host, &d).unwrap();
        let r = run_via(&["timeout", "20"], &host, "launchA", Some("90"), &[]);
        assert!(
            matches!(r.code, Some(c) if c != 124),
            "byte {at}: killed or hung ({:?}):\n{}",
            r.code,
            r.stderr
        );
        if r.out("launchA").as_deref() == Some("0") {
            // Only a byte nothing checks may change, and then cudart got the right code.
            assert!(!r.log.contains("BAD"), "byte {at}:\n{}", r.log);
        } else {
            assert!(
                r.stderr.contains("fatpack: error"),
                "byte {at}:\n{}",
                r.stderr
            );
        }
    }
}

#[test]
fn a_binary_split_through_a_symlink_is_named_as_the_loader_sees_it() {
    let app = build_app(StoreAt::Mapped, None);
    let d = scratch("split-link");
    let link = d.join("app-link");
    std::os::unix::fs::symlink(&app.exe, &link).unwrap();
    let into = d.join("out");
    let (code, _, err) = split(&link, &into);
    assert_eq!(code, 0, "{err}");
    assert!(into.join("app").exists() && into.join("app.sm_90.fatpack").exists());
    assert!(!into.join("app-link").exists());
    let r = run(&into.join("app"), "launchA", Some("90"), &[]);
    r.assert_clean();
    // Joined and inspected through a link to the host, the packs are found all the same.
    let host_link = d.join("host-link");
    std::os::unix::fs::symlink(into.join("app"), &host_link).unwrap();
    let (code, _, err) = join(&host_link, &d.join("joined"));
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read(d.join("joined")).unwrap() == std::fs::read(&app.exe).unwrap());
}

/// A release store (solid groups) splits: grouped by family, sm_80 and sm_86 share a group and
/// so a family pack (a family with one arch keeps its arch's pack); grouped by arch, the packs are per arch as before. Each group's frame is
/// in its pack once, the split program registers what the unsplit one does on every GPU, and
/// join gives the release binary back byte for byte.
#[test]
fn release_stores_split_by_family_or_arch_and_join_back() {
    let app = build_app(StoreAt::Mapped, None);
    for (by, packs) in [
        (
            "family",
            &[
                "app",
                "app.compute_80.fatpack",
                "app.compute_90.fatpack",
                "app.sm_100.fatpack",
                "app.sm_8x.fatpack",
                "app.sm_90.fatpack",
            ][..],
        ),
        (
            "arch",
            &[
                "app",
                "app.compute_80.fatpack",
                "app.compute_90.fatpack",
                "app.sm_100.fatpack",
                "app.sm_80.fatpack",
                "app.sm_86.fatpack",
                "app.sm_90.fatpack",
            ][..],
        ),
    ] {
        let release = scratch("split-release").join("app");
        let (code, _, err) = fatpack(&[
            "repack".as_ref(),
            app.exe.as_os_str(),
            "-o".as_ref(),
            release.as_os_str(),
            "--release".as_ref(),
            "--group-by".as_ref(),
            by.as_ref(),
        ]);
        assert_eq!(code, 0, "{err}");
        let into = scratch("split-release-into");
        let (code, _, err) = split(&release, &into);
        assert_eq!(code, 0, "{by}: {err}");
        assert_eq!(listing(&into), packs, "{by}");
        let host = into.join("app");
        for (devs, mode) in [("90", "launchA"), ("86", "launchD"), ("120", "launchA")] {
            let a = run(&app.exe, mode, Some(devs), &[]);
            let b = run(&host, mode, Some(devs), &[]);
            b.assert_clean();
            assert_eq!(b.registered(), a.registered(), "{by} {devs} {mode}");
        }
        let joined = scratch("split-release-join").join("app");
        let (code, _, err) = join(&host, &joined);
        assert_eq!(code, 0, "{by}: {err}");
        assert!(
            std::fs::read(&joined).unwrap() == std::fs::read(&release).unwrap(),
            "{by}"
        );
    }
}
