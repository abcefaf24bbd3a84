//! End-to-end tests of libfatpack_rt.a without a GPU: a packed "nvcc-like" program linked
//! with --wrap against a fake cudart, run against a fake libcuda.so.1.

use std::process::Command;

use crate::rt_harness::*;
use cubin_store::Store;

fn one_module(r: &Run) -> Vec<String> {
    let regs = r.registered();
    assert_eq!(
        regs.len(),
        1,
        "expected one registration:\n{}\n{}",
        r.log,
        r.stderr
    );
    regs.into_iter().next().unwrap()
}

#[test]
fn host_only_run_opens_nothing_and_calls_nothing() {
    let app = std_app();
    // No libcuda.so.1 anywhere.
    let r = run(&app.exe, "host", None, &[]);
    r.assert_clean();
    assert_eq!(r.stdout.trim(), "host ok");
    assert_eq!(r.stderr, "");
    assert_eq!(r.log, "", "cudart must not be called before first use");
    // With a driver present, it is still never touched.
    let r = run(&app.exe, "host", Some("86"), &[]);
    r.assert_clean();
    assert_eq!(r.cuda_log, "");
    assert_eq!(r.log, "");

    // strace, where ptrace is allowed: no file opened for fatpack's sake.
    let d = scratch("strace");
    let trace = d.join("trace");
    let st = Command::new("strace")
        .args(["-f", "-e", "trace=open,openat,openat2", "-o"])
        .arg(&trace)
        .arg(&app.exe)
        .arg("host")
        .env("LD_LIBRARY_PATH", fakes().join("cuda"))
        .output();
    match st {
        Ok(o) if o.status.success() && trace.exists() => {
            let t = std::fs::read_to_string(&trace).unwrap();
            let exe = format!("\"{}\"", app.exe.display());
            for bad in ["libcuda.so", "/proc/self", &exe, ".fatpack\""] {
                assert!(!t.contains(bad), "host-only run opened {bad}:\n{t}");
            }
        }
        _ => eprintln!("strace unavailable here; relying on the fakes' logs"),
    }
}

#[test]
fn first_launch_registers_one_module_with_the_right_entry() {
    let app = std_app();
    let cases: &[(&str, &str, &[&str])] = &[
        // (devices, mode, expected entries in the registered container)
        ("86", "launchA", &["app#A:sm_86"]), // exact
        ("89", "launchA", &["app#A:sm_86"]), // same major, lower minor
        ("87", "launchA", &["app#A:sm_86"]),
        ("80", "launchA", &["app#A:sm_80"]),
        ("90", "launchA", &["app#A:sm_90a"]),      // exact `a`
        ("103", "launchA", &["app#A:sm_100f"]),    // family
        ("120", "launchA", &["app#A:compute_90"]), // PTX fallback
        ("90,86", "launchA", &["app#A:sm_86", "app#A:sm_90a"]), // two devices
        ("86,86", "launchA", &["app#A:sm_86"]),    // same capability once
        ("103", "launchB", &["app#B:compute_80"]), // `a` only exact
        ("100", "launchB", &["app#B:sm_100a"]),
        ("90", "launchB", &["app#B:sm_90a"]),
    ];
    for (devs, mode, want) in cases {
        let r = run(&app.exe, mode, Some(devs), &[]);
        r.assert_clean();
        assert_eq!(one_module(&r), *want, "devices {devs} {mode}:\n{}", r.log);
        let tag = if *mode == "launchA" {
            "launchA"
        } else {
            "launchB"
        };
        assert_eq!(r.out(tag).as_deref(), Some("0"), "{}", r.stdout);
        assert_eq!(r.stderr, "", "silent by default");
        // Replayed registrations arrive under the real handle, then the end call.
        assert!(r.log.contains("end 1"), "{}", r.log);
        if *mode == "launchA" {
            assert!(r.log.contains("function 1 kernA"));
            assert!(r.log.contains("var 1 varA size=4"));
            assert!(r.log.contains("managedvar 1 mvarA"));
            // A second launch does not register again (one_module checked it) and works.
            assert_eq!(r.out("launchA2").as_deref(), Some("0"));
        }
        // dim3 by value, stack arguments: all passed through unchanged.
        assert!(
            r.log
                .contains("grid=2,3,4 block=5,6,7 shared=128 stream=0x1234"),
            "{}",
            r.log
        );
        // At exit the fake handle's unregister reaches cudart with the real handle.
        assert!(r.log.trim_end().ends_with("unregister 1"), "{}", r.log);
    }
}

#[test]
fn registered_container_is_well_formed() {
    let app = std_app();
    let r = run(&app.exe, "launchA", Some("90,120"), &[]);
    r.assert_clean();
    let bytes = std::fs::read(r.dump.join("reg-1.bin")).unwrap();
    let (version, entries) = parse_container(&bytes).expect("a valid container");
    assert_eq!(version, 1);
    assert_eq!(entries.len(), 2);
    for (e, arch) in entries.iter().zip(["sm_90a", "compute_90"]) {
        let c = cand(arch);
        let raw = payload("app#A", arch);
        let orig = nvcc_header(&c, raw.len());
        assert_eq!(e.arch, c.arch);
        assert_eq!(e.flags & (COMPRESSED_LZ4 | COMPRESSED_ZSTD), 0);
        assert_eq!(
            e.flags,
            u64::from_le_bytes(orig[40..48].try_into().unwrap()) & !COMPRESSED_ZSTD
        );
        assert_eq!(&e.header[..8], &orig[..8]);
        assert_eq!(&e.header[20..40], &orig[20..40]);
        assert_eq!(&e.header[16..20], &[0; 4], "compressed size cleared");
        assert_eq!(&e.header[56..64], &[0; 8], "uncompressed size cleared");
        assert_eq!(e.payload.len(), raw.len().div_ceil(8) * 8);
        assert_eq!(&e.payload[..raw.len()], &raw[..]);
    }
}

#[test]
fn nothing_fits_is_a_clear_error_not_a_crash() {
    let app = std_app();
    let r = run(&app.exe, "launchA", Some("75"), &[]);
    r.assert_clean();
    assert_eq!(r.out("launchA").as_deref(), Some("209"));
    assert_eq!(
        r.out("launchA2").as_deref(),
        Some("209"),
        "the error is sticky"
    );
    assert!(r.registered().is_empty(), "nothing registered: {}", r.log);
    assert!(r.stderr.contains("\"app#A\""), "{}", r.stderr);
    assert!(r.stderr.contains("compute capability 7.5"), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("available: sm_80, sm_86, sm_90a, sm_100f, compute_80, compute_90"),
        "{}",
        r.stderr
    );
    assert_eq!(
        r.stderr.matches("error:").count(),
        1,
        "reported once: {}",
        r.stderr
    );
    // The call still reached cudart, which refused the unknown kernel (no wrong kernel ran).
    assert!(r.log.contains("launch unknown-function"));
    assert!(!r.log.contains("launch kernA"));

    // One device without code among others: load for the others, warn about it.
    let r = run(&app.exe, "launchB", Some("75,90"), &[]);
    r.assert_clean();
    assert_eq!(one_module(&r), ["app#B:sm_90a"]);
    assert_eq!(r.out("launchB").as_deref(), Some("0"));
    assert!(
        r.stderr.contains("warning:") && r.stderr.contains("compute capability 7.5"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("error:"), "{}", r.stderr);
}

#[test]
fn fatpack_arch_forces_an_entry() {
    let app = std_app();
    let r = run(
        &app.exe,
        "launchA",
        Some("90"),
        &[("FATPACK_ARCH", "sm_80")],
    );
    r.assert_clean();
    assert_eq!(one_module(&r), ["app#A:sm_80"]);
    assert!(
        r.stderr
            .contains("does not run on compute capability 9.0 (device 0)"),
        "{}",
        r.stderr
    );

    let r = run(
        &app.exe,
        "launchA",
        Some("86"),
        &[("FATPACK_ARCH", "compute_90")],
    );
    r.assert_clean();
    assert_eq!(one_module(&r), ["app#A:compute_90"]);

    let r = run(
        &app.exe,
        "launchA",
        Some("90,86"),
        &[("FATPACK_ARCH", "sm_90a")],
    );
    r.assert_clean();
    assert_eq!(one_module(&r), ["app#A:sm_90a"]);

    let r = run(
        &app.exe,
        "launchA",
        Some("90"),
        &[("FATPACK_ARCH", "sm_70")],
    );
    r.assert_clean();
    assert_eq!(r.out("launchA").as_deref(), Some("209"));
    assert!(
        r.stderr.contains("no sm_70") && r.stderr.contains("FATPACK_ARCH"),
        "{}",
        r.stderr
    );
    assert!(r.registered().is_empty());

    let r = run(
        &app.exe,
        "launchA",
        Some("90"),
        &[("FATPACK_ARCH", "volta")],
    );
    r.assert_clean();
    assert_eq!(r.out("launchA").as_deref(), Some("209"));
    assert!(r.stderr.contains("not an arch name"), "{}", r.stderr);
}

#[test]
fn thirty_two_racing_threads_load_once() {
    let app = std_app();
    for _ in 0..3 {
        let r = run(&app.exe, "race", Some("86"), &[]);
        r.assert_clean();
        assert_eq!(r.stdout.trim(), "race ok=32");
        assert_eq!(one_module(&r), ["app#A:sm_86"]);
        assert_eq!(r.log.matches("function 1 kernA").count(), 1);
        assert_eq!(r.log.matches("launch kernA").count(), 32, "{}", r.log);
    }
}

#[test]
fn fork_after_load_is_safe() {
    let app = std_app();
    let r = run(&app.exe, "fork", Some("86"), &[]);
    r.assert_clean();
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "parent_before=0",
            "child_A=0",
            "child_B=0",
            "child_exit=0",
            "parent_B=0"
        ],
        "{}\n{}",
        r.stdout,
        r.stderr
    );
}

#[test]
fn info_log_reports_each_choice() {
    let app = std_app();
    let r = run(
        &app.exe,
        "launchA",
        Some("90,86"),
        &[("FATPACK_LOG", "info")],
    );
    r.assert_clean();
    let e = &r.stderr;
    assert!(
        e.contains("fatpack: module app#A: compute capability 9.0 (device 0): sm_90a"),
        "{e}"
    );
    assert!(
        e.contains("fatpack: module app#A: compute capability 8.6 (device 1): sm_86"),
        "{e}"
    );
    assert!(e.contains("registered 2 entries ("), "{e}");
    // Two GPUs of one capability: one choice, one entry, both devices named.
    let r = run(
        &app.exe,
        "launchA",
        Some("90,86,90"),
        &[("FATPACK_LOG", "info")],
    );
    r.assert_clean();
    let e = &r.stderr;
    assert!(
        e.contains("fatpack: module app#A: compute capability 9.0 (devices 0, 2): sm_90a"),
        "{e}"
    );
    assert_eq!(e.matches("compute capability 9.0").count(), 1, "{e}");
    assert_eq!(r.registered(), [vec!["app#A:sm_86", "app#A:sm_90a"]]);
    assert!(
        e.contains(" bytes decompressed) in ") && e.contains(" ms"),
        "{e}"
    );
    // Only the module used was loaded.
    assert!(!e.contains("app#B"), "{e}");

    let r = run(&app.exe, "launchA", Some("86"), &[("FATPACK_LOG", "debug")]);
    r.assert_clean();
    assert!(r.stderr.contains("registration recorded"), "{}", r.stderr);
    assert!(
        r.stderr.contains("store: mapped with the image"),
        "{}",
        r.stderr
    );
}

#[test]
fn every_kind_of_call_loads_its_module_first() {
    let app = std_app();
    let r = run(&app.exe, "apis", Some("86"), &[]);
    r.assert_clean();
    assert_eq!(r.out("memcpytosymbol").as_deref(), Some("0"), "{}", r.log);
    assert_eq!(
        r.out("funcgetattributes").as_deref(),
        Some("0"),
        "{}",
        r.log
    );
    assert_eq!(
        r.registered(),
        [vec!["app#A:sm_86"], vec!["app#B:compute_80"]]
    );

    let r = run(&app.exe, "graph", Some("90"), &[]);
    r.assert_clean();
    assert_eq!(
        r.out("graphaddkernelnode").as_deref(),
        Some("0"),
        "{}",
        r.log
    );
    assert_eq!(r.out("graphaddnode").as_deref(), Some("0"), "{}", r.log);
    assert_eq!(r.registered(), [vec!["app#A:sm_90a"], vec!["app#B:sm_90a"]]);

    for (mode, key) in [("exc", "launchex"), ("getkernel", "getkernel")] {
        let r = run(&app.exe, mode, Some("80"), &[]);
        r.assert_clean();
        assert_eq!(r.out(key).as_deref(), Some("0"), "{mode}: {}", r.log);
        assert_eq!(one_module(&r), ["app#A:sm_80"]);
    }

    // Host access to a __managed__ variable goes through __cudaInitModule(fake handle).
    let r = run(&app.exe, "managed", Some("86"), &[]);
    r.assert_clean();
    assert_eq!(
        r.out("initmodule").as_deref(),
        Some("1 managed=set"),
        "{}",
        r.log
    );
    assert!(r.log.contains("initmodule 1"));
}

/// Static cudart fills a `__managed__` host pointer only when it loads the module into a
/// context; a module registered after the context exists (the lazy load, when the program
/// made any CUDA call first) was left with a NULL pointer by `__cudaInitModule`, and the
/// host access then crashed (H200, static cudart 13.0). The fake cudart reproduces that
/// with FAKE_CUDART_STATIC=1; the runtime must leave the pointer filled in every order.
#[test]
fn managed_variables_are_filled_whatever_came_first() {
    let app = std_app();
    for mode in ["managed", "initmanaged"] {
        for static_cudart in ["0", "1"] {
            let r = run(
                &app.exe,
                mode,
                Some("86"),
                &[("FAKE_CUDART_STATIC", static_cudart)],
            );
            r.assert_clean();
            assert_eq!(
                r.out("initmodule").as_deref(),
                Some("1 managed=set"),
                "{mode} static={static_cudart}: {}\n{}",
                r.log,
                r.stderr
            );
        }
    }
}

#[test]
fn no_driver_or_no_device_leaves_the_error_to_cudart() {
    let app = std_app();
    let mut cases = vec![
        run(&app.exe, "launchA", Some(""), &[]),
        run(
            &app.exe,
            "launchA",
            Some("86"),
            &[("FAKE_CUDA_INIT_FAIL", "1")],
        ),
    ];
    if !system_has_libcuda() {
        cases.push(run(&app.exe, "launchA", None, &[]));
    }
    for r in cases {
        r.assert_clean();
        assert_eq!(
            r.out("launchA").as_deref(),
            Some("98"),
            "cudart's own answer"
        );
        assert!(r.registered().is_empty());
        assert_eq!(r.stderr, "");
    }
    // Without a device the store is never even opened.
    let r = run(&app.exe, "launchA", Some(""), &[("FATPACK_LOG", "debug")]);
    assert!(!r.stderr.contains("store"), "{}", r.stderr);
}

#[test]
fn device_linked_module_passes_prelinked_inputs_only_when_needed() {
    let app = std_app();
    // SASS for the device in the linked module: plain registration, no JIT inputs.
    let r = run(&app.exe, "launchD", Some("86"), &[]);
    r.assert_clean();
    assert_eq!(one_module(&r), ["app#D:sm_86"]);
    assert!(r.log.contains("register 1 version=1"), "{}", r.log);
    assert!(r.prelinked().is_empty());
    // sm_90: the linked module has nothing; cudart JIT-links the relocatable PTX.
    let r = run(&app.exe, "launchD", Some("90"), &[("FATPACK_LOG", "info")]);
    r.assert_clean();
    assert_eq!(r.out("launchD").as_deref(), Some("0"));
    assert!(r.log.contains("register 1 version=2"), "{}", r.log);
    assert_eq!(r.prelinked(), [vec!["app#R:compute_90"]], "{}", r.log);
    assert!(
        r.stderr.contains("prelinked app#R: compute_90"),
        "{}",
        r.stderr
    );
    // Nothing anywhere for 7.5.
    let r = run(&app.exe, "launchD", Some("75"), &[]);
    r.assert_clean();
    assert_eq!(r.out("launchD").as_deref(), Some("209"));
    assert!(r.stderr.contains("\"app#D\""), "{}", r.stderr);
}

/// Byte offset of `.fatpack` in a file, and the store inside it.
fn store_section(bytes: &[u8]) -> std::ops::Range<usize> {
    find_section(bytes, ".fatpack").expect("a .fatpack section")
}

/// The std app's store section, the store's length, and the blob of app#A's sm_86 entry.
fn sm86_blob_of_a(exe_bytes: &[u8]) -> (std::ops::Range<usize>, usize, cubin_store::BlobView) {
    let sec = store_section(exe_bytes);
    let store = Store::parse(&exe_bytes[sec.clone()]).unwrap();
    let blob = store
        .module_by_name("app#A")
        .unwrap()
        .find(
            cubin_store::EntryKind::Sass,
            86,
            cubin_store::ArchVariant::Plain,
        )
        .unwrap()
        .blob();
    (sec, store.stats().file_len as usize, blob)
}

#[test]
fn damaged_or_foreign_stores_fail_cleanly() {
    let app = std_app();
    let exe_bytes = std::fs::read(&app.exe).unwrap();
    let (sec, store_len, blob) = sm86_blob_of_a(&exe_bytes);
    let index_at = sec.start + store_len - 8;
    let variant = |name: &str, at: usize| {
        let d = scratch(name);
        let exe = d.join("app");
        let mut b = exe_bytes.clone();
        b[at] ^= 0x55;
        crate::common::write_executable(&exe, b);
        exe
    };
    let cases = [
        // A flipped byte inside the sm_86 blob: caught by its blake3 when read.
        (
            variant(
                "blob",
                sec.start + blob.offset as usize + blob.stored_len as usize / 2,
            ),
            "cannot read sm_86",
            200,
        ),
        // A flipped byte in the index: the store does not parse.
        (variant("index", index_at), "damaged", 200),
    ];
    for (exe, msg, code) in cases {
        let r = run(&exe, "launchA", Some("86"), &[]);
        r.assert_clean();
        assert_eq!(r.out("launchA"), Some(code.to_string()), "{}", r.stderr);
        assert!(r.stderr.contains(msg), "want {msg:?}: {}", r.stderr);
        assert!(r.registered().is_empty());
        // Other entries of the same store remain usable when only a blob is bad.
        if msg.starts_with("cannot read") {
            let r = run(&exe, "launchA", Some("90"), &[]);
            assert_eq!(one_module(&r), ["app#A:sm_90a"]);
        }
    }

    // The store of another build (digest slot holds something else).
    let other = build_app(StoreAt::Section, Some([0xAB; 32]));
    let r = run(&other.exe, "launchA", Some("86"), &[]);
    r.assert_clean();
    assert_eq!(r.out("launchA").as_deref(), Some("200"));
    assert!(
        r.stderr.contains("does not belong to this binary"),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains(&"ab".repeat(32)), "{}", r.stderr);

    // The digest slot never patched.
    let unpatched = build_app(StoreAt::Section, Some([0; 32]));
    let r = run(&unpatched.exe, "launchA", Some("86"), &[]);
    r.assert_clean();
    assert!(
        r.stderr.contains("not finished by fatpack ld"),
        "{}",
        r.stderr
    );

    // No store at all.
    let none = build_app(StoreAt::Nowhere, None);
    let r = run(&none.exe, "launchA", Some("86"), &[]);
    r.assert_clean();
    assert_eq!(r.out("launchA").as_deref(), Some("200"));
    assert!(r.stderr.contains("no device code store"), "{}", r.stderr);
    assert!(r.stderr.contains("app.fatpack"), "{}", r.stderr);
    // ...but the program still runs its host code.
    let r = run(&none.exe, "host", Some("86"), &[]);
    r.assert_clean();
}

#[test]
fn side_file_store() {
    let app = build_app(StoreAt::SideFile, None);
    let r = run(&app.exe, "launchA", Some("86"), &[("FATPACK_LOG", "debug")]);
    r.assert_clean();
    assert_eq!(one_module(&r), ["app#A:sm_86"]);
    assert!(r.stderr.contains("app.fatpack"), "{}", r.stderr);

    // Truncated side file.
    let side = app.dir.join("app.fatpack");
    std::fs::write(&side, &app.store[..app.store.len() / 2]).unwrap();
    let r = run(&app.exe, "launchA", Some("86"), &[]);
    r.assert_clean();
    assert_eq!(r.out("launchA").as_deref(), Some("200"));
    assert!(r.stderr.contains("truncated"), "{}", r.stderr);

    // Empty side file.
    std::fs::write(&side, b"").unwrap();
    let r = run(&app.exe, "launchA", Some("86"), &[]);
    r.assert_clean();
    assert_eq!(r.out("launchA").as_deref(), Some("200"));
}

#[test]
fn eager_mode_loads_at_registration() {
    let app = std_app();
    let r = run(&app.exe, "host", Some("86"), &[("FATPACK_EAGER", "1")]);
    r.assert_clean();
    // A, B and the device-linked D (R is only D's prelinked input).
    assert_eq!(r.registered().len(), 3, "{}", r.log);
}

#[test]
fn archive_defines_exactly_the_wrapped_symbols() {
    // readelf, not nm: binutils' nm may load an LLVM plugin that cannot read Rust's objects.
    let out = sh(Command::new("readelf").arg("-sW").arg(archive()));
    let syms = String::from_utf8_lossy(&out.stdout);
    // (binding, section, name) of every symbol.
    let rows: Vec<(&str, &str, &str)> = syms
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 8 && f[0].trim_end_matches(':').parse::<u64>().is_ok())
                .then(|| (f[4], f[6], f[7]))
        })
        .collect();
    // Defined globals: the wrapped entry points and nothing else (no zstd, blake3 or Rust std
    // symbol to clash with the program's own).
    let mut defined: Vec<&str> = rows
        .iter()
        .filter(|(bind, ndx, _)| *bind != "LOCAL" && *ndx != "UND")
        .map(|(_, _, name)| *name)
        .collect();
    defined.sort_unstable();
    let mut want: Vec<String> = fatpack::format::link::WRAPPED_SYMBOLS
        .iter()
        .map(|s| format!("__wrap_{s}"))
        .collect();
    want.sort_unstable();
    assert_eq!(defined, want);
    let undefined: Vec<&str> = rows
        .iter()
        .filter(|(_, ndx, _)| *ndx == "UND")
        .map(|(_, _, name)| *name)
        .collect();
    for s in fatpack::format::link::WRAPPED_SYMBOLS {
        assert!(
            undefined.contains(&format!("__real_{s}").as_str()),
            "__real_{s} not referenced"
        );
    }
    assert!(undefined.contains(&"__fatpack_store_digest"));
}

/// Each entry of registration `id` as cudart was handed it: its payload decoded where it came
/// as a zstd frame (the compressed size from its header), and whether it did.
fn handed(r: &Run, id: usize) -> Vec<(Vec<u8>, bool)> {
    let bytes = std::fs::read(r.dump.join(format!("reg-{id}.bin"))).unwrap();
    let (_, entries) = parse_container(&bytes).expect("a valid container");
    entries
        .iter()
        .map(|e| {
            let zstd = e.flags & COMPRESSED_ZSTD != 0;
            if !zstd {
                return (e.payload.to_vec(), false);
            }
            let csize = u32::from_le_bytes(e.header[16..20].try_into().unwrap()) as usize;
            let usize_ = u64::from_le_bytes(e.header[56..64].try_into().unwrap()) as usize;
            let d = zstd::bulk::decompress(&e.payload[..csize], usize_).unwrap();
            assert_eq!(d.len(), usize_, "the header's decoded size");
            (d, true)
        })
        .collect()
}

fn starts_with_payload(got: &[u8], module: &str, arch: &str) -> bool {
    let want = payload(module, arch);
    got.len() >= want.len() && got[..want.len()] == want[..]
}

const HANDOFF: (&str, &str) = ("FATPACK_DECODE", "auto");

/// A driver that decodes nvcc's compressed entries is handed the store's frames as they
/// are (flagged as nvcc flags them), and the module is loaded by a lookup of the function
/// whose use asked for it, before that use reaches cudart; the check runs beside it.
#[test]
fn a_driver_that_decodes_is_handed_the_stored_frames() {
    let app = std_app();
    let env = [HANDOFF, ("FAKE_CUDART_ZSTD", "1"), ("FATPACK_LOG", "info")];
    let r = run(&app.exe, "seq A B", Some("86"), &env);
    r.assert_clean();
    assert_eq!(r.out("A").as_deref(), Some("0"), "{}", r.stderr);
    assert_eq!(r.out("B").as_deref(), Some("0"), "{}", r.stderr);
    assert_eq!(r.out("lasterror").as_deref(), Some("0"));
    for (id, module, arch) in [(1, "app#A", "sm_86"), (2, "app#B", "compute_80")] {
        let got = handed(&r, id);
        assert_eq!(got.len(), 1, "{}", r.log);
        assert!(got[0].1, "registration {id} is not compressed:\n{}", r.log);
        assert!(starts_with_payload(&got[0].0, module, arch), "{}", r.log);
    }
    let probe = r
        .log
        .find("funcgetattributes kernA")
        .expect("a load by lookup");
    let launch = r.log.find("launch kernA").expect("the launch");
    assert!(probe < launch, "{}", r.log);
    assert!(r.stderr.contains("the driver took"), "{}", r.stderr);
    assert!(!r.log.contains("unregister 1\nregister"), "{}", r.log);

    // FATPACK_DECODE=runtime, eager loading, and a device-linked module keep the runtime's
    // own decoding.
    for env in [
        vec![("FATPACK_DECODE", "runtime"), ("FAKE_CUDART_ZSTD", "1")],
        vec![HANDOFF, ("FAKE_CUDART_ZSTD", "1"), ("FATPACK_EAGER", "1")],
    ] {
        let r = run(&app.exe, "launchA", Some("86"), &env);
        r.assert_clean();
        assert!(!handed(&r, 1)[0].1, "{env:?}: {}", r.log);
    }
}

/// The first module handed to a driver that refuses the frames is unregistered and
/// registered again decoded (cudart's error for it cleared: it is not the program's), and no
/// later module of the process is offered to the driver again.
#[test]
fn a_driver_that_refuses_the_frames_gets_the_module_decoded_here() {
    let app = std_app();
    let env = [HANDOFF, ("FATPACK_LOG", "info")];
    let r = run(&app.exe, "seq A B", Some("86"), &env);
    r.assert_clean();
    assert_eq!(r.out("A").as_deref(), Some("0"), "{}\n{}", r.stderr, r.log);
    assert_eq!(r.out("B").as_deref(), Some("0"), "{}", r.stderr);
    assert_eq!(r.out("lasterror").as_deref(), Some("0"), "{}", r.log);
    assert!(handed(&r, 1)[0].1, "{}", r.log);
    assert!(r.log.contains("refused: compressed entries"), "{}", r.log);
    let again = handed(&r, 2);
    assert!(!again[0].1 && starts_with_payload(&again[0].0, "app#A", "sm_86"));
    let b = handed(&r, 3);
    assert!(!b[0].1 && starts_with_payload(&b[0].0, "app#B", "compute_80"));
    assert!(
        r.log.find("unregister 1").unwrap() < r.log.find("register 2").unwrap(),
        "{}",
        r.log
    );
    assert_eq!(
        r.stderr.matches("refused its entries").count(),
        1,
        "{}",
        r.stderr
    );
}

/// A frame that fails its check while the driver holds the module: the module is withdrawn
/// before the use that asked for it reaches cudart, and the use gets the runtime's own error.
/// The std app with one byte flipped in the middle of app#A's sm_86 blob, in scratch `name`.
fn app_with_a_damaged_sm86_blob(name: &str) -> std::path::PathBuf {
    let app = std_app();
    let exe_bytes = std::fs::read(&app.exe).unwrap();
    let (sec, _, blob) = sm86_blob_of_a(&exe_bytes);
    let exe = scratch(name).join("app");
    let mut b = exe_bytes;
    b[sec.start + blob.offset as usize + blob.stored_len as usize / 2] ^= 0x55;
    crate::common::write_executable(&exe, b);
    exe
}

#[test]
fn a_damaged_frame_fails_closed_while_the_driver_holds_it() {
    let exe = app_with_a_damaged_sm86_blob("handoff-damaged");
    let r = run(
        &exe,
        "launchA",
        Some("86"),
        &[HANDOFF, ("FAKE_CUDART_ZSTD", "1")],
    );
    r.assert_clean();
    assert_eq!(r.out("launchA").as_deref(), Some("200"), "{}", r.stderr);
    assert!(r.stderr.contains("cannot read sm_86"), "{}", r.stderr);
    assert!(r.log.contains("funcgetattributes kernA"), "{}", r.log);
    assert!(r.log.contains("unregister 1"), "{}", r.log);
    assert!(!r.log.contains("launch kernA"), "a kernel ran:\n{}", r.log);
}

const AHEAD: (&str, &str) = ("FATPACK_AHEAD", "32");

/// Once a call has initialised the driver, a helper decodes the pending modules (checked as a
/// load checks them), and their first launches register what it decoded: nothing is decoded
/// or handed to the driver at the launch. `FATPACK_AHEAD=0` turns it off.
#[test]
fn modules_are_decoded_ahead_once_the_driver_is_initialised() {
    let app = std_app();
    let env = [
        AHEAD,
        HANDOFF,
        ("FAKE_CUDART_ZSTD", "1"),
        ("FATPACK_LOG", "info"),
    ];
    let r = run(&app.exe, "ahead", Some("86"), &env);
    r.assert_launched_decoded_ahead(2);
    assert!(!r.stderr.contains("the driver took"), "{}", r.stderr);
    for (id, module, arch) in [(1, "app#A", "sm_86"), (2, "app#B", "compute_80")] {
        let got = handed(&r, id);
        assert_eq!(got.len(), 1, "{}", r.log);
        assert!(!got[0].1, "registration {id} is compressed:\n{}", r.log);
        assert!(starts_with_payload(&got[0].0, module, arch), "{}", r.log);
    }
    let r = run(
        &app.exe,
        "ahead",
        Some("86"),
        &[("FATPACK_AHEAD", "0"), ("FATPACK_LOG", "info")],
    );
    r.assert_clean();
    assert_eq!(r.out("A").as_deref(), Some("0"), "{}", r.stderr);
    assert!(!r.stderr.contains("decoded ahead"), "{}", r.stderr);
}

/// The helper starts with the program's first call that needs the driver, not after it: it
/// reads the devices once the call has initialised the driver and decodes while the call
/// creates its context (the fake's takes 300 ms), so a kernel launched right after that call
/// finds its module decoded. Started after the call, as before, the helper would still be
/// starting when the launch came.
#[test]
fn decoding_ahead_runs_while_the_first_call_initialises_the_driver() {
    let app = std_app();
    let env = [
        AHEAD,
        HANDOFF,
        ("FAKE_CUDART_ZSTD", "1"),
        ("FAKE_CUDART_CONTEXT_MS", "300"),
        ("FATPACK_LOG", "debug"),
    ];
    let r = run(&app.exe, "aheadnow", Some("86"), &env);
    r.assert_launched_decoded_ahead(2);
    // The helper's last line: "decoding ahead: N modules, B bytes, in T ms".
    let done = r
        .stderr
        .lines()
        .position(|l| l.contains("decoding ahead: ") && l.contains(" bytes, in "));
    let returned = r
        .stderr
        .lines()
        .position(|l| l == "app: the first call returned");
    assert!(
        matches!((done, returned), (Some(d), Some(c)) if d < c),
        "the modules were not decoded during the first call:\n{}",
        r.stderr
    );
    assert!(!r.stderr.contains("the driver took"), "{}", r.stderr);
}

/// A blob that fails its digest ahead is not reported ahead: the module's own load decodes
/// it, fails closed with the load's message, and registers nothing; the other module loads.
#[test]
fn a_damaged_blob_decoded_ahead_fails_closed_at_its_load() {
    let exe = app_with_a_damaged_sm86_blob("ahead-damaged");
    let r = run(&exe, "ahead", Some("86"), &[AHEAD, ("FATPACK_LOG", "info")]);
    r.assert_clean();
    assert_eq!(r.out("A").as_deref(), Some("200"), "{}", r.stderr);
    assert_eq!(r.out("B").as_deref(), Some("0"), "{}", r.stderr);
    assert_eq!(
        r.stderr.matches("cannot read sm_86").count(),
        1,
        "{}",
        r.stderr
    );
    assert_eq!(
        r.stderr.matches("bytes decoded ahead").count(),
        1,
        "{}",
        r.stderr
    );
    assert!(!r.log.contains("launch kernA"), "a kernel ran:\n{}", r.log);
}

/// A fork just after decoding ahead started: the child loads both modules itself (a module
/// the parent's helper was on is not waited for), and the parent goes on as before.
#[test]
fn fork_while_decoding_ahead_is_safe() {
    let app = std_app();
    for _ in 0..5 {
        let r = run(&app.exe, "aheadfork", Some("86"), &[AHEAD]);
        r.assert_clean();
        for k in [
            "malloc",
            "child_A",
            "child_B",
            "parent_A",
            "child_exit",
            "parent_B",
        ] {
            assert_eq!(
                r.out(k).as_deref(),
                Some("0"),
                "{k}: {}\n{}",
                r.stderr,
                r.log
            );
        }
    }
}
