//! The mutation campaign over packages: mutants of a valid package of every format prune
//! reads (wheel, `.conda`, `.tar.bz2`, deb; tests/it/packages/big.py writes them), through
//! `prune --for 9.0` and `inspect`. Per command it must show: no panic, no signal death, no
//! hang, no input modified, nothing left behind, and no mutant accepted but damaged: a prune
//! that succeeds must write the package the original gives, member for member
//! (tests/it/packages/list_members.py reads both with Python's own readers), which inspect
//! reads. Damage that no check covers (times, modes, padding) may pass; damage to anything
//! a package vouches for may not.
//!
//! The README's test command runs it reduced (`FATPACK_CAMPAIGN_MUTANTS`, default 12 per
//! format); `FATPACK_CAMPAIGN_MUTANTS=512 FATPACK_CAMPAIGN_TABLE=FILE` is the long form.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use crate::campaign::{each_in_parallel, listing, mutate, report_table, run_limited, Rng};
use crate::common::*;

const FORMATS: [&str; 4] = ["wheel", "conda", "tarbz2", "deb"];

#[derive(Default, Clone, Copy)]
struct Row {
    runs: usize,
    ok: usize,
    refused: usize,
    panics: usize,
    signals: usize,
    hangs: usize,
    damaged_accepted: usize,
    inputs_modified: usize,
    left_behind: usize,
}

impl Row {
    fn bad(&self) -> usize {
        self.panics
            + self.signals
            + self.hangs
            + self.damaged_accepted
            + self.inputs_modified
            + self.left_behind
    }
}

/// The byte ranges of a package's members as its outer container lays them out: a zip's
/// members' data (wheel, `.conda`), an ar archive's members' bodies (deb); none for a
/// `.tar.bz2`, one stream.
fn member_ranges(b: &[u8]) -> Vec<std::ops::Range<usize>> {
    if b.starts_with(b"PK\x03\x04") {
        let Ok(mut zip) = zip::ZipArchive::new(std::io::Cursor::new(b)) else {
            return Vec::new();
        };
        (0..zip.len())
            .filter_map(|i| {
                let m = zip.by_index_raw(i).ok()?;
                let start = m.data_start() as usize;
                Some(start..start + m.compressed_size() as usize)
            })
            .filter(|r| r.end <= b.len() && !r.is_empty())
            .collect()
    } else if b.starts_with(b"!<arch>\n") {
        let mut out = Vec::new();
        let mut at = 8;
        while at + 60 <= b.len() {
            let size: usize = std::str::from_utf8(&b[at + 48..at + 58])
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            out.push(at + 60..(at + 60 + size).min(b.len()));
            at += 60 + size + size % 2;
        }
        out.retain(|r| !r.is_empty());
        out
    } else {
        Vec::new()
    }
}

/// A mutant of a package: half the time damage anywhere ([`mutate`]), half the time a bit
/// flipped inside one member, each member as likely as the next, so that a package's small
/// members (`info-*.tar.zst`, `control.tar.gz`, whose checksums were once not checked) are
/// hit as often as its big one.
fn mutate_package(b: &[u8], r: &mut Rng) -> Vec<u8> {
    let members = member_ranges(b);
    if members.is_empty() || r.below(2) == 0 {
        return mutate(b, r);
    }
    let m = &members[r.below(members.len())];
    let mut v = b.to_vec();
    let at = m.start + r.below(m.len());
    v[at] ^= 1 << r.below(8);
    v
}

fn packages() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/packages")
}

/// `list_members.py` of `package`: its content, member by member.
fn members(venv: &Path, package: &Path) -> Option<String> {
    let (code, out, _) = run(Command::new(venv.join("bin/python"))
        .arg(packages().join("list_members.py"))
        .arg(package));
    (code == 0).then_some(out)
}

/// The one file in `dir`.
fn only_file(dir: &Path) -> Option<PathBuf> {
    let names = listing(dir);
    (names.len() == 1).then(|| dir.join(&names[0]))
}

/// What a command that writes wrote into `out`, member by member (`prune`: its one package;
/// `split`: every package, by name), if every package reads and `inspect` reads each.
fn written(venv: &Path, cmd: &str, out: &Path) -> Option<String> {
    let files: Vec<PathBuf> = match cmd {
        "prune" => vec![only_file(out)?],
        _ => listing(out).iter().map(|n| out.join(n)).collect(),
    };
    let mut all = String::new();
    for f in files {
        if run(Command::new(fatpack_bin()).arg("inspect").arg(&f)).0 != 0 {
            return None;
        }
        all += &format!(
            "== {}\n{}",
            f.file_name()?.to_string_lossy(),
            members(venv, &f)?
        );
    }
    Some(all)
}

/// A command's arguments on `input`, writing into `out`.
fn command(cmd: &str, input: &Path, out: &Path) -> Vec<std::ffi::OsString> {
    match cmd {
        "prune" => vec![
            "prune".into(),
            "--for".into(),
            "9.0".into(),
            input.into(),
            "-o".into(),
            out.into(),
        ],
        "split" => vec!["split".into(), input.into(), "--into".into(), out.into()],
        _ => vec!["inspect".into(), input.into()],
    }
}

/// One mutant (`name`, `bytes`) of `format` through `cmds`; `want`: what the original gave
/// the command among them that writes, member by member.
fn one_mutant(
    venv: &Path,
    (format, cmds): (&'static str, &[&str]),
    name: &str,
    bytes: &[u8],
    want: &str,
    rows: &Mutex<BTreeMap<String, Row>>,
) {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join(name);
    std::fs::write(&input, bytes).unwrap();
    let before = listing(dir.path());
    for &cmd in cmds {
        let out = dir.path().join("out");
        let result = run_limited(&command(cmd, &input, &out), dir.path());
        let mut row = Row {
            runs: 1,
            ..Row::default()
        };
        match &result {
            None => row.hangs = 1,
            Some((st, err)) => {
                row.panics = usize::from(err.contains("panicked") || st.code() == Some(101));
                row.signals = usize::from(st.signal().is_some());
                match st.code() {
                    Some(0) => row.ok = 1,
                    Some(_) => row.refused = 1,
                    None => {}
                }
            }
        }
        if cmd != "inspect" && row.ok == 1 && written(venv, cmd, &out).as_deref() != Some(want) {
            row.damaged_accepted = 1;
        }
        if std::fs::read(&input).ok().as_deref() != Some(bytes) {
            row.inputs_modified = 1;
        }
        let now = listing(dir.path());
        let allowed = |n: &String| before.contains(n) || (row.ok == 1 && *n == "out");
        let extra = match (cmd, row.ok) {
            ("split", 1) => false,
            (_, 1) => out.is_dir() && listing(&out).len() > 1,
            _ => out.is_dir() && !listing(&out).is_empty(),
        };
        if !now.iter().all(allowed) || extra {
            row.left_behind = 1;
        }
        let _ = std::fs::remove_dir_all(&out);
        if row.bad() > 0 {
            let keep = std::env::temp_dir().join(format!(
                "fatpack-package-campaign-{}-{format}-{}",
                std::process::id(),
                rows.lock().unwrap().values().map(|r| r.runs).sum::<usize>()
            ));
            let _ = std::fs::create_dir_all(&keep);
            let _ = std::fs::write(keep.join(name), bytes);
            eprintln!(
                "campaign: {cmd} of a {format} mutant (kept in {}): {result:?}",
                keep.display()
            );
        }
        let mut rows = rows.lock().unwrap();
        let r = rows.entry(format!("{cmd} {format}")).or_default();
        r.runs += row.runs;
        r.ok += row.ok;
        r.refused += row.refused;
        r.panics += row.panics;
        r.signals += row.signals;
        r.hangs += row.hangs;
        r.damaged_accepted += row.damaged_accepted;
        r.inputs_modified += row.inputs_modified;
        r.left_behind += row.left_behind;
    }
}

fn table(rows: &BTreeMap<String, Row>, per_format: usize, commands: usize) -> String {
    let mut t = format!(
        "{per_format} mutants per format x {} formats x {commands} commands\n\n\
         | command | runs | exit 0 | refused | panics | signal deaths | hangs | accepted but damaged | inputs modified | left behind |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
        FORMATS.len()
    );
    for (cmd, r) in rows {
        t += &format!(
            "| {cmd} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.runs,
            r.ok,
            r.refused,
            r.panics,
            r.signals,
            r.hangs,
            r.damaged_accepted,
            r.inputs_modified,
            r.left_behind
        );
    }
    t
}

#[test]
fn mutants_of_every_package_format_through_prune_and_inspect() {
    campaign(&["prune", "inspect"], "libfixture.so");
}

/// The same over packages whose program fatpack packed, through `split`: every package a
/// split of a mutant writes must be what the original's split wrote.
#[test]
fn mutants_of_every_package_format_through_split() {
    campaign(&["split"], "packed_exe");
}

/// `cmds` (the first one writes) over mutants of a package of each format holding the
/// fixture `member`.
fn campaign(cmds: &'static [&'static str], member: &str) {
    let per_format: usize = std::env::var("FATPACK_CAMPAIGN_MUTANTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let dir = tempfile::tempdir().unwrap();
    let venv = venv_with(dir.path(), &["zstandard==0.23.0"]);
    // Each format's original, and what the command that writes gives it, member by member.
    let mut work = Vec::new();
    for (fi, format) in FORMATS.into_iter().enumerate() {
        let at = dir.path().join(format);
        let (code, out, err) = run(Command::new(venv.join("bin/python"))
            .arg(packages().join("big.py"))
            .arg(&at)
            .args([format, "elf", "0"])
            .arg(fixture(member)));
        assert_eq!(code, 0, "{err}");
        let original = PathBuf::from(out.trim());
        let out = at.join("out");
        let (code, _, err) =
            run(Command::new(fatpack_bin()).args(command(cmds[0], &original, &out)));
        assert_eq!(code, 0, "{format}: {err}");
        let want = written(&venv, cmds[0], &out).expect("the original's output reads");
        let bytes = std::fs::read(&original).unwrap();
        let name = original.file_name().unwrap().to_string_lossy().into_owned();
        let mut r = Rng(0x5851_f42d_4c95_7f2d ^ (fi as u64 + 1).wrapping_mul(0x1000_0001));
        for _ in 0..per_format {
            work.push((
                format,
                name.clone(),
                mutate_package(&bytes, &mut r),
                want.clone(),
            ));
        }
    }
    let rows = Mutex::new(BTreeMap::new());
    each_in_parallel(&work, |(format, name, bytes, want)| {
        one_mutant(&venv, (format, cmds), name, bytes, want, &rows);
    });
    let rows = rows.into_inner().unwrap();
    let t = table(&rows, per_format, cmds.len());
    report_table(&t);
    let bad: usize = rows.values().map(Row::bad).sum();
    assert_eq!(bad, 0, "the campaign found failures:\n{t}");
    let (ok, refused) = rows
        .values()
        .fold((0, 0), |a, r| (a.0 + r.ok, a.1 + r.refused));
    assert!(ok > 0 && refused > 0, "{t}");
}
