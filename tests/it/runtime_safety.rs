//! A packed binary must not crash, hang or refuse to run where an ordinary binary would not:
//! stripped by distribution tools, launched through the dynamic loader, replaced or deleted
//! by a package upgrade while it runs, a FIFO where its side file should be, its store
//! rewritten in place between two module loads, a cubin whose header contradicts its label.
//! (The fake cudart and libcuda of tests/fake; the GPU versions are in tests/gpu.)

use std::path::Path;
use std::process::Command;

use crate::rt_harness::*;

fn copy_exe(app: &App, tag: &str) -> std::path::PathBuf {
    let d = scratch(tag);
    let exe = d.join("app");
    crate::common::write_executable(&exe, std::fs::read(&app.exe).unwrap());
    exe
}

fn assert_loads_a(exe: &Path, r: &Run) {
    r.assert_clean();
    assert_eq!(
        r.out("launchA").as_deref(),
        Some("0"),
        "{}: {}\n{}",
        exe.display(),
        r.log,
        r.stderr
    );
    assert_eq!(r.registered(), [vec!["app#A:sm_86"]], "{}", r.stderr);
}

/// Debian's dh_strip, RPM's find-debuginfo and Nix's fixup strip the binary after the link:
/// the store is an allocated section in its own PT_LOAD, which every strip tool keeps.
#[test]
fn stripped_binaries_keep_their_store() {
    let app = std_app();
    let eu = crate::common::tool("eu-strip", "apt-get install elfutils");
    for (tag, args) in [
        ("strip", vec!["strip"]),
        ("strip-debug", vec!["strip", "--strip-debug"]),
        ("objcopy", vec!["objcopy", "--strip-all"]),
        ("eu-strip", vec![eu.to_str().unwrap(), "-f", "DEBUG"]),
        (
            "find-debuginfo",
            vec![eu.to_str().unwrap(), "--remove-comment", "-f", "DEBUG"],
        ),
    ] {
        let exe = copy_exe(app, tag);
        let debug = exe.with_extension("debug");
        let args: Vec<String> = args
            .iter()
            .map(|a| a.replace("DEBUG", debug.to_str().unwrap()))
            .collect();
        sh(Command::new(&args[0]).args(&args[1..]).arg(&exe));
        let r = run(&exe, "launchA", Some("86"), &[]);
        assert_loads_a(&exe, &r);
    }
}

/// `ld.so ./app`: the kernel runs the loader, so /proc/self/exe is ld.so, not the program.
#[test]
fn launched_through_the_dynamic_loader() {
    let app = std_app();
    let data = std::fs::read(&app.exe).unwrap();
    let interp = {
        use object::{Object, ObjectSection};
        let f = object::File::parse(&*data).unwrap();
        let s = f
            .section_by_name(".interp")
            .unwrap()
            .data()
            .unwrap()
            .to_vec();
        String::from_utf8(s)
            .unwrap()
            .trim_end_matches('\0')
            .to_owned()
    };
    let r = run_via(&[&interp], &app.exe, "launchA", Some("86"), &[]);
    assert_loads_a(&app.exe, &r);
    // Side-file store: found next to the program, not next to ld.so.
    let side = build_app(StoreAt::SideFile, None);
    let r = run_via(&[&interp], &side.exe, "launchA", Some("86"), &[]);
    assert_loads_a(&side.exe, &r);
}

/// Package managers replace files by rename while programs run; an uninstall deletes them.
/// Before its first kernel, the program must still run the code it was built with.
#[test]
fn replaced_or_deleted_before_the_first_kernel() {
    for at in [StoreAt::Mapped, StoreAt::SideFile] {
        for mode in ["replaceA", "unlinkA"] {
            let app = build_app(at, None);
            let r = run(&app.exe, mode, Some("86"), &[]);
            assert_loads_a(&app.exe, &r);
            if mode == "replaceA" {
                assert_eq!(
                    std::fs::read_to_string(&app.exe).unwrap(),
                    "a newer version\n"
                );
            }
        }
    }
}

/// A FIFO (or anything but a regular file) where the side file should be: a clear error,
/// never a process blocked in open(2).
#[test]
fn a_fifo_side_file_is_refused_without_blocking() {
    let app = build_app(StoreAt::SideFile, None);
    let side = fatpack::packed::side_path(&app.exe);
    std::fs::remove_file(&side).unwrap();
    sh(Command::new("mkfifo").arg(&side));
    let r = run_via(&["timeout", "20"], &app.exe, "launchA", Some("86"), &[]);
    r.assert_clean();
    assert_eq!(r.out("launchA").as_deref(), Some("200"), "{}", r.stderr);
    assert!(r.stderr.contains("is a FIFO"), "{}", r.stderr);
    assert!(r.registered().is_empty());
}

/// The store's file rewritten in place after the first module was loaded: what the runtime
/// verified (the index, each entry's kept nvcc header) was copied, so the second module
/// still gets exactly what was verified.
#[test]
fn store_rewritten_between_two_loads_changes_nothing_verified() {
    let app = build_app(StoreAt::SideFile, None);
    let store = &app.store;
    let u32_at = |o: usize| u32::from_le_bytes(store[o..o + 4].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(store[o..o + 8].try_into().unwrap()) as usize;
    // FORMAT.md: index at header 0x18; index header = module, entry, blob counts; records of
    // 64 (blob), 16 (module) and 24 (entry) bytes, then the string pool.
    let index = u64_at(0x18);
    let (modules, entries, blobs) = (u32_at(index), u32_at(index + 4), u32_at(index + 8));
    let entries_at = index + 24 + blobs * 64 + modules * 16;
    let pool = entries_at + entries * 24;
    // app#B's first entry (sm_90a): A has 6 entries.
    let rec = entries_at + 6 * 24;
    assert_eq!(u32_at(rec + 4), 90, "entry 6 is app#B's sm_90a");
    let attrs = pool + u32_at(rec + 12);
    // The arch field of the kept nvcc header (offset 28): a mismatch there is refused
    // when it is read; a copy made before the rewrite never sees it.
    let at = attrs + 28;
    assert_eq!(u32_at(at), 90);
    // Loads A, flips the store file's byte at `at` in place, loads B.
    let tamper = |app: &App, at: usize| -> Run {
        let side = fatpack::packed::side_path(&app.exe);
        let r = run(
            &app.exe,
            "tamper",
            Some("90"),
            &[
                ("TAMPER_FILE", side.to_str().unwrap()),
                ("TAMPER_AT", &at.to_string()),
            ],
        );
        r.assert_clean();
        assert_eq!(r.out("launchA").as_deref(), Some("0"), "{}", r.stderr);
        r
    };
    let side = fatpack::packed::side_path(&app.exe);
    let r = tamper(&app, at);
    assert_eq!(r.out("launchB").as_deref(), Some("0"), "{}", r.stderr);
    assert_eq!(
        r.registered(),
        [vec!["app#A:sm_90a"], vec!["app#B:sm_90a"]],
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read(&side).unwrap()[at], store[at] ^ 0x55);

    // A blob changed the same way is caught when read (its blake3 is in the copied index).
    let blob = u32_at(rec + 8);
    let blob_rec = index + 24 + blob * 64;
    let mid = u64_at(blob_rec) + u64_at(blob_rec + 8) / 2;
    let r = tamper(&build_app(StoreAt::SideFile, None), mid);
    assert_eq!(r.out("launchB").as_deref(), Some("200"), "{}", r.stderr);
    assert!(r.stderr.contains("cannot read sm_90a"), "{}", r.stderr);
}
