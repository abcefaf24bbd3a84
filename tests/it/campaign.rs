//! The mutation campaign: mutants of every kind of input fatpack reads (objects, archives,
//! thin archives, shared libraries, executables, fatbins, cubins, packed outputs with the
//! store inside and beside, split hosts and their packs, bare stores) through every command
//! (inspect, inspect --json, prune --for, prune --keep, split, join, repack, extract). Per
//! command it must show: no panic, no signal death, no hang, no output that fails
//! `fatpack inspect`, no store accepted that does not match its binary, no input modified,
//! nothing left behind (no temp file, no output of a failed run).
//!
//! The README's test command runs it reduced (`FATPACK_CAMPAIGN_MUTANTS`, default 12 per
//! input kind); `FATPACK_CAMPAIGN_MUTANTS=512 FATPACK_CAMPAIGN_TABLE=FILE` is the full run
//! whose table the closing note of 2026-12-03 gives.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::common::{fatpack_bin, fixture};
use crate::rt_harness::{build_app, StoreAt};

/// xorshift64*: the same mutants on every run.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Files by name and bytes.
type Files = Vec<(String, Vec<u8>)>;

/// One input kind: its files (the first is what commands are given) by name and bytes.
struct Kind {
    name: &'static str,
    files: Vec<(String, Vec<u8>)>,
}

fn kinds() -> Vec<Kind> {
    let fx = |n: &str| std::fs::read(fixture(n)).unwrap();
    let one = |name: &'static str, file: &str, fixture_name: &str| Kind {
        name,
        files: vec![(file.to_string(), fx(fixture_name))],
    };
    let side = build_app(StoreAt::SideFile, None);
    let side_files = vec![
        ("app".to_string(), std::fs::read(&side.exe).unwrap()),
        (
            "app.fatpack".to_string(),
            std::fs::read(fatpack::packed::side_path(&side.exe)).unwrap(),
        ),
    ];
    // A split host and its packs.
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(fixture("packed_exe"), d.path().join("app")).unwrap();
    let st = Command::new(fatpack_bin())
        .arg("split")
        .arg(d.path().join("app"))
        .arg("--into")
        .arg(d.path().join("s"))
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let mut split: Vec<(String, Vec<u8>)> = std::fs::read_dir(d.path().join("s"))
        .unwrap()
        .flatten()
        .map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            (n, std::fs::read(e.path()).unwrap())
        })
        .collect();
    split.sort_by_key(|(n, _)| n != "app");
    vec![
        one("object", "k.o", "kernels.o"),
        one("archive", "lib.a", "libfixture.a"),
        Kind {
            name: "thin archive",
            files: vec![
                ("thin.a".into(), fx("libfixture_thin.a")),
                ("kernels.o".into(), fx("kernels.o")),
                ("other.o".into(), fx("other.o")),
            ],
        },
        one("shared library", "lib.so", "libfixture.so"),
        one("executable", "exe", "fixture_exe"),
        one("fatbin", "k.fatbin", "kernels.fatbin"),
        one("cubin", "k.cubin", "kernels_sm86.cubin"),
        one("packed (store inside)", "app", "packed_exe"),
        Kind {
            name: "packed (side file)",
            files: side_files.clone(),
        },
        Kind {
            name: "split host + packs",
            files: split,
        },
        Kind {
            name: "store",
            files: vec![("app.fatpack".into(), side_files[1].1.clone())],
        },
    ]
}

/// A mutant of `b`: one of a few kinds of damage fuzzers and disks do.
pub(crate) fn mutate(b: &[u8], r: &mut Rng) -> Vec<u8> {
    let mut v = b.to_vec();
    let len = v.len().max(1);
    match r.below(9) {
        0 => {
            for _ in 0..1 + r.below(4) {
                let i = r.below(len);
                if let Some(x) = v.get_mut(i) {
                    *x ^= 1 << r.below(8);
                }
            }
        }
        1 => {
            // Headers: the ELF header, program headers, archive headers, store index.
            let i = r.below(len.min(4096));
            if let Some(x) = v.get_mut(i) {
                *x = r.next() as u8;
            }
        }
        2 => v.truncate(r.below(len)),
        3 => {
            let interesting = [
                0u64,
                u64::MAX,
                0xffff_ffff,
                0x8000_0000,
                len as u64,
                len as u64 + 1,
                1 << 40,
            ];
            let at = r.below(len) & !7;
            let val = interesting[r.below(interesting.len())].to_le_bytes();
            for (k, x) in val.iter().enumerate() {
                if let Some(y) = v.get_mut(at + k) {
                    *y = *x;
                }
            }
        }
        4 => {
            let at = r.below(len);
            let end = (at + 1 + r.below(256)).min(v.len());
            if at < end {
                v[at..end].fill(0);
            }
        }
        5 => {
            // The section header table, where an ELF file has one.
            if v.len() >= 64 && v.starts_with(b"\x7fELF") {
                let shoff = u64::from_le_bytes(v[0x28..0x30].try_into().unwrap()) as usize;
                if shoff < v.len() {
                    let i = shoff + r.below(v.len() - shoff);
                    v[i] = r.next() as u8;
                }
            }
        }
        6 | 7 if v.len() >= 64 && v.starts_with(b"\x7fELF") => elf_field(&mut v, r),
        6 | 7 if v.starts_with(b"!<arch>\n") => {
            // A member header's name or size field: bytes ar and fatpack must both survive
            // (a Latin-1 name, a size past the end).
            let heads = member_headers(&v);
            if let Some(&h) = heads.get(r.below(heads.len())) {
                let (at, width) = if r.below(2) == 0 {
                    (h, 16)
                } else {
                    (h + 48, 10)
                };
                let i = at + r.below(width);
                v[i] = [0xb3, b'/', b' ', b'9', 0, b'\n'][r.below(6)];
            }
        }
        _ => {
            let at = r.below(len);
            let n = r.below(64).min(v.len().saturating_sub(at));
            let chunk: Vec<u8> = v[at..at + n].to_vec();
            let to = r.below(len);
            v.splice(to.min(v.len())..to.min(v.len()), chunk);
        }
    }
    v
}

/// A field of the ELF header, a program header or a section header set to a value that
/// breaks assumptions (0, all ones, the file's length, a type no one writes).
fn elf_field(v: &mut [u8], r: &mut Rng) {
    let rd = |v: &[u8], at: usize, n: usize| -> u64 {
        let mut b = [0u8; 8];
        b[..n].copy_from_slice(&v[at..at + n]);
        u64::from_le_bytes(b)
    };
    let len = v.len() as u64;
    let (phoff, phnum) = (rd(v, 0x20, 8), rd(v, 0x38, 2));
    let (shoff, shnum) = (rd(v, 0x28, 8), rd(v, 0x3c, 2));
    // (offset, width) of the field to change.
    let field = match r.below(3) {
        0 => [
            (16, 2),
            (0x20, 8),
            (0x28, 8),
            (0x38, 2),
            (0x3c, 2),
            (0x3e, 2),
        ][r.below(6)],
        1 if phnum > 0 => {
            let e = phoff + 56 * r.below(phnum as usize) as u64;
            let (o, w) = [(0, 4), (4, 4), (8, 8), (16, 8), (32, 8), (40, 8), (48, 8)][r.below(7)];
            (e as usize + o, w)
        }
        _ if shnum > 0 => {
            let e = shoff + 64 * r.below(shnum as usize) as u64;
            let (o, w) = [
                (4, 4),
                (8, 8),
                (16, 8),
                (24, 8),
                (32, 8),
                (40, 4),
                (48, 8),
                (56, 8),
            ][r.below(8)];
            (e as usize + o, w)
        }
        _ => (16, 2),
    };
    let values = [0, u64::MAX, len, len + 1, 4, 0xffff_ffff, 1 << 31, 3];
    let val = values[r.below(values.len())].to_le_bytes();
    if field.0 + field.1 <= v.len() {
        v[field.0..field.0 + field.1].copy_from_slice(&val[..field.1]);
    }
}

/// Offsets of an archive's member headers.
fn member_headers(v: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut at = 8;
    while at + 60 <= v.len() && out.len() < 4096 {
        out.push(at);
        let size: usize = match std::str::from_utf8(&v[at + 48..at + 58])
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            Some(s) => s,
            None => break,
        };
        at += 60 + size + (size & 1);
    }
    out
}

#[derive(Default, Clone)]
struct Row {
    runs: usize,
    ok: usize,
    refused: usize,
    panics: usize,
    signals: usize,
    hangs: usize,
    bad_outputs: usize,
    foreign_accepted: usize,
    inputs_modified: usize,
    left_behind: usize,
    /// inspect exited 0 on a packed file whose entries extract could not all read: a
    /// problem inspect did not report.
    hidden: usize,
}

const COMMANDS: [&str; 8] = [
    "inspect",
    "inspect --json",
    "prune --for",
    "prune --keep",
    "split",
    "join",
    "repack",
    "extract",
];

/// Runs fatpack with a deadline; `None` if it had to be killed.
pub(crate) fn run_limited(
    args: &[std::ffi::OsString],
    cwd: &Path,
) -> Option<(std::process::ExitStatus, String)> {
    let mut child = Command::new(fatpack_bin())
        .args(args)
        .current_dir(cwd)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return Some((st, reader.join().unwrap()));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

pub(crate) fn listing(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn inspect_ok(path: &Path) -> bool {
    Command::new(fatpack_bin())
        .arg("inspect")
        .arg(path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

/// Whether inspect lists device code in `path` (extract refuses a file without any).
fn has_device_code(path: &Path) -> bool {
    let out = Command::new(fatpack_bin())
        .args(["inspect", "--json"])
        .arg(path)
        .output()
        .unwrap();
    serde_json::from_slice::<serde_json::Value>(&out.stdout)
        .ok()
        .and_then(|v| v[0]["modules"].as_array().map(|m| !m.is_empty()))
        .unwrap_or(false)
}

/// Whether the packed file `path` (a mutant) holds a store that is not its own: inspect
/// reads it and says the digest does not match.
fn foreign_store(path: &Path) -> bool {
    let out = Command::new(fatpack_bin())
        .args(["inspect", "--json"])
        .arg(path)
        .output()
        .unwrap();
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
        return false;
    };
    v[0]["packed"]["digest_matches"] == false
}

/// One mutant through every command; the row of each command updated.
fn one_mutant(
    files: &[(String, Vec<u8>)],
    rows: &Mutex<BTreeMap<&'static str, Row>>,
    packed: bool,
) {
    let dir = tempfile::tempdir().unwrap();
    for (n, b) in files {
        std::fs::write(dir.path().join(n), b).unwrap();
    }
    let input = dir.path().join(&files[0].0);
    let before = listing(dir.path());
    let foreign = packed && foreign_store(&input);
    let mut codes: BTreeMap<&str, Option<i32>> = BTreeMap::new();
    for cmd in COMMANDS {
        let out = dir.path().join("out");
        let mut args: Vec<std::ffi::OsString> = cmd.split(' ').map(Into::into).collect();
        match cmd {
            "prune --for" => args.push("9.0".into()),
            "prune --keep" => args.push("sm_90".into()),
            _ => {}
        }
        args.push(input.clone().into());
        match cmd {
            "inspect" | "inspect --json" => {}
            "split" => args.extend(["--into".into(), out.clone().into()]),
            _ => args.extend(["-o".into(), out.clone().into()]),
        }
        let result = run_limited(&args, dir.path());
        let mut row = Row {
            runs: 1,
            ..Row::default()
        };
        match &result {
            None => row.hangs = 1,
            Some((st, err)) => {
                if err.contains("panicked") || st.code() == Some(101) {
                    row.panics = 1;
                }
                if st.signal().is_some() {
                    row.signals = 1;
                }
                match st.code() {
                    Some(0) => row.ok = 1,
                    Some(_) => row.refused = 1,
                    None => {}
                }
            }
        }
        codes.insert(cmd, result.as_ref().and_then(|(s, _)| s.code()));
        let succeeded = row.ok == 1;
        let writes = !cmd.starts_with("inspect");
        if succeeded && writes {
            let checked = match cmd {
                "split" => std::fs::read_dir(&out)
                    .unwrap()
                    .flatten()
                    .find(|e| !e.file_name().to_string_lossy().ends_with(".fatpack"))
                    .map(|e| e.path()),
                "extract" => None,
                _ => Some(out.clone()),
            };
            if let Some(p) = checked {
                if !inspect_ok(&p) {
                    row.bad_outputs = 1;
                }
            }
            if foreign {
                row.foreign_accepted = 1;
            }
        }
        for (n, b) in files {
            if std::fs::read(dir.path().join(n)).ok().as_ref() != Some(b) {
                row.inputs_modified = 1;
            }
        }
        // What is there now besides the inputs: the outputs of a successful run only.
        let now = listing(dir.path());
        let extra: Vec<&String> = now.iter().filter(|n| !before.contains(n)).collect();
        let allowed = |n: &str| succeeded && (n == "out" || n == "out.fatpack");
        if extra.iter().any(|n| !allowed(n)) {
            row.left_behind = 1;
        }
        if out.is_dir() && listing(&out).iter().any(|n| n.starts_with('.')) {
            row.left_behind = 1;
        }
        let _ = std::fs::remove_dir_all(&out);
        let _ = std::fs::remove_file(&out);
        let _ = std::fs::remove_file(dir.path().join("out.fatpack"));
        let mut rows = rows.lock().unwrap();
        let r = rows.entry(cmd).or_default();
        r.runs += row.runs;
        r.ok += row.ok;
        r.refused += row.refused;
        r.panics += row.panics;
        r.signals += row.signals;
        r.hangs += row.hangs;
        r.bad_outputs += row.bad_outputs;
        r.foreign_accepted += row.foreign_accepted;
        r.inputs_modified += row.inputs_modified;
        r.left_behind += row.left_behind;
        if cmd == "extract"
            && packed
            && codes["inspect"] == Some(0)
            && codes["extract"] == Some(1)
            && has_device_code(&input)
        {
            row.hidden = 1;
            rows.entry("inspect").or_default().hidden += 1;
        }
        if row.hidden
            + row.panics
            + row.signals
            + row.hangs
            + row.bad_outputs
            + row.foreign_accepted
            + row.inputs_modified
            + row.left_behind
            > 0
        {
            // Kept for the failure message: where to look.
            let keep = std::env::temp_dir().join(format!(
                "fatpack-campaign-failure-{}-{}",
                std::process::id(),
                rows.values().map(|r| r.runs).sum::<usize>()
            ));
            let _ = std::fs::create_dir_all(&keep);
            for (n, b) in files {
                let _ = std::fs::write(keep.join(n), b);
            }
            eprintln!(
                "campaign: {cmd} failed on the mutant kept in {}: {:?}",
                keep.display(),
                result
            );
        }
    }
}

fn table(rows: &BTreeMap<&'static str, Row>, mutants: usize, kinds: usize) -> String {
    let mut t = format!(
        "{mutants} mutants ({} per input kind, {kinds} kinds) x {} commands\n\n\
         | command | runs | exit 0 | refused (exit 1) | panics | signal deaths | hangs | outputs failing inspect | foreign stores accepted | inputs modified | left behind | problems inspect hid |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
        mutants / kinds.max(1),
        COMMANDS.len()
    );
    for cmd in COMMANDS {
        let r = rows.get(cmd).cloned().unwrap_or_default();
        t += &format!(
            "| {cmd} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.runs,
            r.ok,
            r.refused,
            r.panics,
            r.signals,
            r.hangs,
            r.bad_outputs,
            r.foreign_accepted,
            r.inputs_modified,
            r.left_behind,
            r.hidden
        );
    }
    t
}

/// Runs `f` on every item of `work`, on as many threads as the machine has (at most 16).
pub(crate) fn each_in_parallel<T: Sync>(work: &[T], f: impl Fn(&T) + Sync) {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(16);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while let Some(item) =
                    work.get(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
                {
                    f(item);
                }
            });
        }
    });
}

/// A campaign's table: printed, and written where `FATPACK_CAMPAIGN_TABLE` says.
pub(crate) fn report_table(t: &str) {
    eprintln!("{t}");
    if let Ok(p) = std::env::var("FATPACK_CAMPAIGN_TABLE") {
        std::fs::write(PathBuf::from(p), t).unwrap();
    }
}

#[test]
fn mutants_of_every_input_kind_through_every_command() {
    let per_kind: usize = std::env::var("FATPACK_CAMPAIGN_MUTANTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let kinds = kinds();
    // Every mutant, decided up front: (kind index, files with one of them mutated).
    let mut work: Vec<(usize, Files)> = Vec::new();
    for (ki, k) in kinds.iter().enumerate() {
        let mut r = Rng(0x9e37_79b9_7f4a_7c15 ^ (ki as u64 + 1).wrapping_mul(0x1000_0001));
        for m in 0..per_kind {
            let mut files = k.files.clone();
            // Mostly the file given; sometimes a companion (side file, pack, thin member).
            let which = if files.len() > 1 && m % 3 == 2 {
                1 + r.below(files.len() - 1)
            } else {
                0
            };
            files[which].1 = mutate(&files[which].1, &mut r);
            work.push((ki, files));
        }
    }
    let rows = Mutex::new(BTreeMap::new());
    each_in_parallel(&work, |(ki, files)| {
        let packed = kinds[*ki].name.starts_with("packed") || kinds[*ki].name.starts_with("split");
        one_mutant(files, &rows, packed);
    });
    let rows = rows.into_inner().unwrap();
    let t = table(&rows, work.len(), kinds.len());
    report_table(&t);
    let bad: usize = rows
        .values()
        .map(|r| {
            r.panics
                + r.signals
                + r.hangs
                + r.bad_outputs
                + r.foreign_accepted
                + r.inputs_modified
                + r.left_behind
                + r.hidden
        })
        .sum();
    assert_eq!(bad, 0, "the campaign found failures:\n{t}");
    // A campaign in which nothing succeeds or nothing is refused tests nothing.
    let (ok, refused): (usize, usize) = rows
        .values()
        .fold((0, 0), |a, r| (a.0 + r.ok, a.1 + r.refused));
    assert!(ok > 0 && refused > 0, "{t}");
}
