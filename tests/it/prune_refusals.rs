//! What `prune` refuses of its own inputs and options, one class each: targets no GPU has
//! (a typo that would write a package for nobody), an object whose relocation section is
//! SHT_NULL (once a panic), and a variant relabelled for a GPU it does not serve.

use std::process::Command;

use crate::common::*;

#[test]
fn targets_no_gpu_has_are_refused_with_a_suggestion_the_option_takes() {
    let dir = tempfile::tempdir().unwrap();
    let obj = fixture("kernels.o");
    for (args, want) in [
        (["--for", "90.0"], "did you mean 9.0?"),
        (["--for", "sm_91"], "no GPU has compute capability 9.1"),
        (["--for", "1.0"], "no GPU has compute capability 1.0"),
        (["--for", "sm_20"], "no GPU has compute capability 2.0"),
        (["--keep", "sm_91"], "did you mean sm_90?"),
        (["--keep", "sm-90"], "did you mean sm_90?"),
        (["--for", "sm-90"], "did you mean 9.0 (sm_90)?"),
    ] {
        let out = dir.path().join("out.o");
        let (code, err) = prune_with(&args, &obj, &out);
        // A value that means nothing is a usage error, as clap's own are.
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!out.exists(), "{args:?}");
    }
    // The suggestion is taken by the option that made it.
    let (code, err) = prune_with(&["--keep", "sm_90"], &obj, &dir.path().join("k.o"));
    assert_eq!(code, 0, "{err}");
    // Every capability a GPU has is taken, old and new.
    for cap in ["5.0", "6.1", "7.5", "8.6", "10.1", "11.0", "12.1"] {
        let out = dir.path().join(format!("for{cap}.o"));
        let (code, err) = prune_with(&["--for", cap], &obj, &out);
        assert_eq!(code, 0, "{cap}: {err}");
    }
}

/// `kernels.o` with its first relocation section's type set to SHT_NULL (ld and inspect
/// read it: the section is inactive).
fn with_null_relocations(dir: &std::path::Path) -> std::path::PathBuf {
    let mut d = std::fs::read(fixture("kernels.o")).unwrap();
    let le = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap());
    let shoff = le(&d[0x28..0x30]) as usize;
    let (size, count) = (
        u16::from_le_bytes([d[0x3a], d[0x3b]]) as usize,
        u16::from_le_bytes([d[0x3c], d[0x3d]]) as usize,
    );
    let rela = (0..count)
        .map(|i| shoff + i * size)
        .find(|&at| u32::from_le_bytes(d[at + 4..at + 8].try_into().unwrap()) == 4)
        .expect("a SHT_RELA section");
    d[rela + 4..rela + 8].copy_from_slice(&0u32.to_le_bytes());
    let path = dir.join("nullrel.o");
    std::fs::write(&path, d).unwrap();
    path
}

#[test]
fn a_null_relocation_section_is_read_as_ld_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let obj = with_null_relocations(d);
    let out = d.join("pruned.o");
    let (code, err) = prune_with(&["--for", "9.0"], &obj, &out);
    assert_eq!(code, 0, "{err}");
    assert_eq!(archs_of(&out), ["sm_90"]);
    let (code, _, err) = run(Command::new("ld")
        .args(["-r", "-o"])
        .arg(d.join("relinked.o"))
        .arg(&out));
    assert_eq!(code, 0, "{err}");
    // Inside an archive, the same.
    let ar = d.join("libnull.a");
    let (code, _, err) = run(Command::new("ar").arg("rcs").arg(&ar).arg(&obj));
    assert_eq!(code, 0, "{err}");
    let (code, err) = prune_with(&["--for", "9.0"], &ar, &d.join("pruned.a"));
    assert_eq!(code, 0, "{err}");
}

/// A signal at any moment of a prune: either the command fails by it and nothing is in
/// place, or the output is whole and the command says so with 0 (a late SIGTERM once told
/// the user it failed with the complete output already in place).
#[test]
fn a_signal_either_leaves_nothing_or_a_whole_output_and_exit_0() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = d.join("prefix");
    std::fs::create_dir(&src).unwrap();
    for i in 0..8 {
        std::fs::copy(fixture("libfixture.so"), src.join(format!("lib{i}.so"))).unwrap();
    }
    let prune = |out: &std::path::Path| {
        Command::new(fatpack_bin())
            .args(["prune", "--for", "9.0"])
            .arg(&src)
            .arg("-o")
            .arg(out)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    // How long one takes here, to spread the signals over its whole run.
    let t0 = std::time::Instant::now();
    assert!(prune(&d.join("timed")).wait().unwrap().success());
    let took = t0.elapsed().as_micros() as u64;
    let (mut by_signal, mut whole) = (0, 0);
    for i in 0..40u64 {
        let out = d.join(format!("out{i}"));
        let mut child = prune(&out);
        std::thread::sleep(std::time::Duration::from_micros(took * (i + 10) / 40));
        // SAFETY: a plain syscall on the child this test started.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let status = child.wait().unwrap();
        match status.code() {
            Some(0) => {
                whole += 1;
                let (code, _, err) = run(Command::new(fatpack_bin()).arg("inspect").arg(&out));
                assert_eq!(
                    code, 0,
                    "round {i}: exit 0 but the output does not read: {err}"
                );
                assert_eq!(std::fs::read_dir(&out).unwrap().count(), 8, "round {i}");
            }
            _ => {
                by_signal += 1;
                assert!(
                    status.signal() == Some(libc::SIGTERM) || status.code() == Some(143),
                    "round {i}: {status:?}"
                );
                assert!(
                    !out.exists(),
                    "round {i}: failed, yet {} exists",
                    out.display()
                );
            }
        }
    }
    let left: Vec<_> = std::fs::read_dir(d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("fatpack") || n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "temps left: {left:?}");
    eprintln!("{by_signal} ended by the signal, {whole} whole");
}
