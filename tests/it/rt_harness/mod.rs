//! Shared harness for the runtime's integration tests: builds the fake CUDA libraries, a
//! store, the glue object and a packed program, then runs it against the fakes.
#![allow(dead_code, unused_imports)]

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use cubin_store::ArchVariant;
use cubin_store::{EntryKind, EntryMeta, StoreWriter, WriteOptions};
pub use fatpack::format::arch::EntryId;
use fatpack::format::fatbin::flags::{
    ADDR_64 as FLAG_ADDR_64, ARCH_FAMILY as FLAG_ARCH_FAMILY, ARCH_SPECIFIC as FLAG_ARCH_SPECIFIC,
    COMPRESSED_ZSTD as FLAG_COMPRESSED_ZSTD, HOST_LINUX as FLAG_HOST_LINUX,
};
pub use fatpack::format::fatbin::flags::{
    ARCH_FAMILY, ARCH_SPECIFIC, COMPRESSED_LZ4, COMPRESSED_ZSTD,
};
use fatpack::format::fatbin::{KIND_ELF, KIND_PTX};

pub const FAKE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fake");

/// The modules of tests/fake/app.c and what the store has for each.
pub const APP_MODULES: &[(&str, &[&str])] = &[
    (
        "app#A",
        &[
            "sm_80",
            "sm_86",
            "sm_90a",
            "sm_100f",
            "compute_80",
            "compute_90",
        ],
    ),
    ("app#B", &["sm_90a", "sm_100a", "compute_80"]),
    ("app#D", &["sm_80", "sm_86"]),
    ("app#R", &["sm_80", "compute_90"]),
];

pub fn sh(cmd: &mut Command) -> std::process::Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A directory that lives for the whole test process, kept after it so that failures can be
/// inspected; the first call sweeps those of earlier test processes that have exited.
pub fn scratch(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    static SWEPT: OnceLock<()> = OnceLock::new();
    SWEPT.get_or_init(sweep_scratch);
    let base = std::env::temp_dir().join(format!("fatpack-rt-tests-{}", std::process::id()));
    let d = base.join(format!("{tag}-{}", N.fetch_add(1, Ordering::Relaxed)));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Removes `fatpack-rt-tests-<pid>` folders whose process is gone.
fn sweep_scratch() {
    let Ok(dir) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in dir.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("fatpack-rt-tests-"))
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the process exists.
        let gone = pid > 0
            && unsafe { libc::kill(pid, 0) } != 0
            && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
        if gone {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// The fake libraries: `<dir>/libfakecudart.so` and `<dir>/cuda/libcuda.so.1`.
pub fn fakes() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = scratch("fakes");
        std::fs::create_dir_all(d.join("cuda")).unwrap();
        sh(Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-pthread", "-o"])
            .arg(d.join("libfakecudart.so"))
            .arg(format!("{FAKE_DIR}/fakecudart.c")));
        sh(Command::new("cc")
            .args(["-shared", "-fPIC", "-O1", "-Wl,-soname,libcuda.so.1", "-o"])
            .arg(d.join("cuda/libcuda.so.1"))
            .arg(format!("{FAKE_DIR}/fakecuda.c")));
        d
    })
}

/// libfatpack_rt.a: `FATPACK_RT_ARCHIVE` if set (another build of the runtime), else the one
/// this fatpack carries (build.rs's one recipe), written out once per test process.
pub fn archive() -> PathBuf {
    if let Some(p) = std::env::var_os("FATPACK_RT_ARCHIVE") {
        return PathBuf::from(p);
    }
    static A: OnceLock<PathBuf> = OnceLock::new();
    A.get_or_init(|| {
        let a = scratch("runtime").join("libfatpack_rt.a");
        std::fs::write(&a, fatpack::link::runtime::host().bytes).unwrap();
        a
    })
    .clone()
}

/// One entry of a container, as the tests look at it.
#[derive(Debug)]
pub struct Parsed<'a> {
    pub kind: u16,
    pub arch: u32,
    pub flags: u64,
    pub header: &'a [u8],
    pub payload: &'a [u8],
}

/// The container at the start of `b` (fatpack-format's reader); None if malformed.
pub fn parse_container(b: &[u8]) -> Option<(u16, Vec<Parsed<'_>>)> {
    let (c, entries, _) = fatpack::format::fatbin::read_container(b)?;
    let v = entries
        .into_iter()
        .map(|e| Parsed {
            kind: e.header.kind,
            arch: e.header.arch_number,
            flags: e.header.flags,
            header: e.header_bytes,
            payload: e.payload,
        })
        .collect();
    Some((c.version, v))
}

/// The file byte range of section `name` of an ELF file.
pub fn find_section(bytes: &[u8], name: &str) -> Option<std::ops::Range<usize>> {
    use object::{Object, ObjectSection};
    let f = object::File::parse(bytes).ok()?;
    let (off, len) = f.section_by_name(name)?.file_range()?;
    Some(off as usize..(off + len) as usize)
}

pub fn cand(name: &str) -> EntryId {
    EntryId::parse(name).unwrap()
}

/// Recognisable payload bytes for an entry (the fake cudart logs their printable prefix).
pub fn payload(module: &str, arch: &str) -> Vec<u8> {
    let mut v = format!("{module}:{arch}:").into_bytes();
    // Some bulk so zstd has something to do, and an odd length to exercise padding.
    v.extend_from_slice(&[b'.'; 301]);
    v.push(0);
    v
}

/// A header like nvcc 13 writes for a zstd-compressed entry (what `fatpack ld` keeps in
/// `attrs`): the runtime must clear the compression fields.
pub fn nvcc_header(c: &EntryId, raw_len: usize) -> Vec<u8> {
    let mut h = vec![0u8; 64];
    let put = |h: &mut Vec<u8>, o: usize, v: &[u8]| h[o..o + v.len()].copy_from_slice(v);
    let kind = match c.kind {
        EntryKind::Ptx => KIND_PTX,
        _ => KIND_ELF,
    };
    let mut flags = FLAG_ADDR_64 | FLAG_HOST_LINUX | FLAG_COMPRESSED_ZSTD;
    match c.variant {
        ArchVariant::Plain => {}
        ArchVariant::Specific => flags |= FLAG_ARCH_SPECIFIC,
        ArchVariant::Family => flags |= FLAG_ARCH_FAMILY,
    }
    let csize = raw_len / 3;
    put(&mut h, 0, &kind.to_le_bytes());
    put(&mut h, 2, &0x0101u16.to_le_bytes());
    put(&mut h, 4, &64u32.to_le_bytes());
    put(&mut h, 8, &((csize as u64).div_ceil(8) * 8).to_le_bytes());
    put(&mut h, 16, &(csize as u32).to_le_bytes());
    let code_version: u32 = if kind == KIND_PTX {
        0x0009_0000
    } else {
        0x0001_0008
    };
    put(&mut h, 24, &code_version.to_le_bytes());
    put(&mut h, 28, &c.arch.to_le_bytes());
    put(&mut h, 40, &flags.to_le_bytes());
    put(&mut h, 56, &(raw_len as u64).to_le_bytes());
    h
}

/// A store of `modules` (name, arch names) with [`payload`] contents; returns it and its digest.
pub fn make_store(modules: &[(&str, &[&str])]) -> (Vec<u8>, [u8; 32]) {
    make_store_with(modules, payload)
}

/// [`make_store`] with entries made by `payload`.
pub fn make_store_with(
    modules: &[(&str, &[&str])],
    payload: fn(&str, &str) -> Vec<u8>,
) -> (Vec<u8>, [u8; 32]) {
    let mut w = StoreWriter::new(Cursor::new(Vec::new()), WriteOptions::default()).unwrap();
    for (name, archs) in modules {
        let m = w.add_module(name).unwrap();
        for a in *archs {
            let c = cand(a);
            let raw = payload(name, a);
            let mut meta = EntryMeta::new(c.kind, c.arch, c.variant);
            meta.attrs = nvcc_header(&c, raw.len());
            w.add_entry(m, meta, &raw).unwrap();
        }
    }
    let (cur, summary) = w.finish().unwrap();
    (cur.into_inner(), summary.digest)
}

pub fn c_array(bytes: &[u8]) -> String {
    let body: Vec<String> = bytes.iter().map(|b| format!("0x{b:02x}")).collect();
    format!("{{{}}}", body.join(","))
}

/// The glue object: `__fatpack_store_digest`, hidden, in allocated `.fatpack_digest`.
pub fn glue(dir: &Path) -> PathBuf {
    // fatpack ld's own glue object: the zeroed slot and the note that reserves the store's
    // program header.
    let bytes = fatpack::link::glue::glue_object(object::Architecture::X86_64).unwrap();
    let obj = dir.join("glue.o");
    std::fs::write(&obj, bytes).unwrap();
    obj
}

/// Puts `store` where `at` says and patches the slot with `digest` (the store's, or
/// another to test refusal), the way `fatpack ld` finishes an output.
pub fn install_store(exe: &Path, store: &[u8], at: StoreAt, digest: &[u8; 32]) {
    use fatpack::format::link::StoreLocation;
    use std::io::Write;
    match at {
        StoreAt::Mapped => {
            fatpack::packed::append_store(exe, |w| -> Result<(), fatpack::packed::OutputError> {
                w.write_all(store).unwrap();
                Ok(())
            })
            .unwrap();
            let m = fatpack::packed::finish(exe, digest, true).unwrap();
            assert!(m.is_some(), "{}: the store was not mapped", exe.display());
        }
        StoreAt::Section => {
            let sp = exe.with_extension("store.bin");
            std::fs::write(&sp, store).unwrap();
            sh(Command::new("objcopy")
                .arg(format!("--add-section=.fatpack={}", sp.display()))
                .arg("--set-section-flags=.fatpack=readonly")
                .arg(exe));
            fatpack::packed::patch_slot(exe, digest, None, StoreLocation::Section).unwrap();
        }
        StoreAt::UnmappedSection => {
            fatpack::packed::append_store(exe, |w| -> Result<(), fatpack::packed::OutputError> {
                w.write_all(store).unwrap();
                Ok(())
            })
            .unwrap();
            fatpack::packed::patch_slot(exe, digest, None, StoreLocation::Section).unwrap();
        }
        StoreAt::SideFile => {
            std::fs::write(fatpack::packed::side_path(exe), store).unwrap();
            fatpack::packed::patch_slot(exe, digest, None, StoreLocation::SideFile).unwrap();
        }
        StoreAt::Nowhere => {
            fatpack::packed::patch_slot(exe, digest, None, StoreLocation::SideFile).unwrap();
        }
    }
}

/// Links `objects` into `out` the way `fatpack ld` does: --wrap list (with --exclude-libs
/// for a shared object), the archive, then cudart (the fake) and the system libraries.
pub fn link(driver: &str, objects: &[PathBuf], out: &Path, extra: &[&str]) {
    let mut cmd = Command::new(driver);
    cmd.arg("-o").arg(out).args(objects);
    for a in fatpack::format::link::link_args(extra.contains(&"-shared")) {
        cmd.arg(format!("-Wl,{a}"));
    }
    cmd.arg(archive());
    cmd.arg(format!("-L{}", fakes().display()))
        .arg("-lfakecudart")
        .arg(format!("-Wl,-rpath,{}", fakes().display()));
    cmd.args(fatpack::format::link::SYSTEM_LIBS).args(extra);
    sh(&mut cmd);
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum StoreAt {
    /// Mapped with the image by its own PT_LOAD: what `fatpack ld` makes.
    Mapped,
    /// A non-allocated section, read through the file (a linker that left no header), added
    /// by objcopy.
    Section,
    /// The same, written where `fatpack ld` writes it when no program header is free.
    UnmappedSection,
    /// `<exe>.fatpack`.
    SideFile,
    /// The slot says side file, and there is none.
    Nowhere,
}

pub struct App {
    pub dir: PathBuf,
    pub exe: PathBuf,
    pub store: Vec<u8>,
    pub digest: [u8; 32],
}

/// Builds tests/fake/app.c as a packed program.
pub fn build_app(at: StoreAt, glue_digest: Option<[u8; 32]>) -> App {
    build_app_with(at, glue_digest, payload)
}

/// [`build_app`] with entries made by `payload`.
pub fn build_app_with(
    at: StoreAt,
    glue_digest: Option<[u8; 32]>,
    payload: fn(&str, &str) -> Vec<u8>,
) -> App {
    let dir = scratch("app");
    let (store, digest) = make_store_with(APP_MODULES, payload);
    let mut h = String::new();
    for (macro_, name) in [
        ("STUB_A", "app#A"),
        ("STUB_B", "app#B"),
        ("STUB_D", "app#D"),
        ("STUB_R", "app#R"),
    ] {
        let flags = if name == "app#R" {
            fatpack::format::stub::FLAG_RELOCATABLE
        } else {
            0
        };
        h += &format!(
            "#define {macro_} {}\n",
            c_array(&fatpack::format::stub::encode(name, flags))
        );
    }
    std::fs::write(dir.join("stubs.h"), h).unwrap();
    let obj = dir.join("app.o");
    sh(Command::new("cc")
        .args(["-c", "-O1", "-fPIC", "-pthread", "-Wall", "-Werror"])
        .arg(format!("-I{}", dir.display()))
        .arg(format!("{FAKE_DIR}/app.c"))
        .arg("-o")
        .arg(&obj));
    let g = glue(&dir);
    let exe = dir.join("app");
    link("cc", &[obj, g], &exe, &["-pthread"]);
    install_store(&exe, &store, at, &glue_digest.unwrap_or(digest));
    App {
        dir,
        exe,
        store,
        digest,
    }
}

/// The standard app (store mapped, as fatpack ld makes it), built once.
pub fn std_app() -> &'static App {
    static APP: OnceLock<App> = OnceLock::new();
    APP.get_or_init(|| build_app(StoreAt::Mapped, None))
}

pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// The fake cudart's log.
    pub log: String,
    /// The fake driver's log.
    pub cuda_log: String,
    pub dump: PathBuf,
}

impl Run {
    /// Container payload prefixes per "register" (one Vec per registration, in order).
    pub fn registered(&self) -> Vec<Vec<String>> {
        self.entries("register")
    }

    pub fn prelinked(&self) -> Vec<Vec<String>> {
        self.entries("prelinked")
    }

    fn entries(&self, tag: &str) -> Vec<Vec<String>> {
        let mut out: Vec<Vec<String>> = Vec::new();
        let mut last: Option<String> = None;
        for l in self.log.lines() {
            let Some(rest) = l.strip_prefix(&format!("{tag} ")) else {
                continue;
            };
            let (id, rest) = rest.split_once(' ').unwrap_or((rest, ""));
            if rest.starts_with("version=") {
                continue;
            }
            if last.as_deref() != Some(id) && !rest.starts_with("entries=") {
                out.push(Vec::new());
                last = Some(id.to_owned());
            }
            if let Some(p) = rest.split("payload=").nth(1) {
                // "app#A:sm_86:...." -> "app#A:sm_86"
                let p: Vec<&str> = p.splitn(3, ':').collect();
                out.last_mut()
                    .unwrap()
                    .push(format!("{}:{}", p[0], p.get(1).unwrap_or(&"")));
            }
        }
        out
    }

    pub fn out(&self, key: &str) -> Option<String> {
        self.stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")).map(str::to_owned))
    }

    pub fn assert_clean(&self) {
        assert_eq!(self.code, Some(0), "exit status; stderr:\n{}", self.stderr);
        assert!(
            !self.log.contains("BAD"),
            "fake cudart saw bad input:\n{}",
            self.log
        );
    }

    /// The `ahead` modes: a clean run whose allocation and both launches (A, B) returned 0,
    /// with `n` modules registered as decoded ahead.
    pub fn assert_launched_decoded_ahead(&self, n: usize) {
        self.assert_clean();
        for k in ["malloc", "A", "B"] {
            assert_eq!(self.out(k).as_deref(), Some("0"), "{k}: {}", self.stderr);
        }
        assert_eq!(
            self.stderr.matches("bytes decoded ahead").count(),
            n,
            "{}",
            self.stderr
        );
    }
}

/// Runs `exe mode...` (mode split at spaces); `devices` None means no libcuda.so.1 at all.
pub fn run(exe: &Path, mode: &str, devices: Option<&str>, env: &[(&str, &str)]) -> Run {
    run_via(&[], exe, mode, devices, env)
}

/// [`run`], with the executable started by `launcher` (e.g. `["timeout", "20"]`, or the
/// dynamic loader).
pub fn run_via(
    launcher: &[&str],
    exe: &Path,
    mode: &str,
    devices: Option<&str>,
    env: &[(&str, &str)],
) -> Run {
    let d = scratch("run");
    let log = d.join("cudart.log");
    let cuda_log = d.join("cuda.log");
    let dump = d.join("dump");
    std::fs::create_dir_all(&dump).unwrap();
    let mut cmd = match launcher.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    cmd.args(mode.split(' '))
        .env_remove("FATPACK_LOG")
        .env_remove("FATPACK_ARCH")
        .env_remove("FATPACK_EAGER")
        // The runtime's own decoding unless a test asks for the driver's (runtime_fake's
        // handoff tests): a refusing fake driver would add a registration to every log.
        .env("FATPACK_DECODE", "runtime")
        // Nothing decoded ahead unless a test asks (runtime_fake's ahead tests): a helper
        // thread racing the first launch would make every log's order a matter of timing.
        .env("FATPACK_AHEAD", "0")
        .env("FAKE_CUDART_LOG", &log)
        .env("FAKE_CUDA_LOG", &cuda_log)
        .env("FAKE_CUDART_DUMP", &dump);
    match devices {
        Some(devs) => {
            cmd.env("LD_LIBRARY_PATH", fakes().join("cuda"))
                .env("FAKE_CUDA_DEVICES", devs);
        }
        None => {
            cmd.env_remove("LD_LIBRARY_PATH");
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    // ETXTBSY: another test thread forked while this executable was still open for writing.
    let mut tries = 0;
    let out = loop {
        match cmd.output() {
            Err(e) if e.raw_os_error() == Some(26) && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => break r.unwrap(),
        }
    };
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        log: std::fs::read_to_string(&log).unwrap_or_default(),
        cuda_log: std::fs::read_to_string(&cuda_log).unwrap_or_default(),
        dump,
    }
}

/// A real libcuda on this machine would make the "no driver" cases meaningless.
pub fn system_has_libcuda() -> bool {
    Command::new("sh")
        .args(["-c", "ldconfig -p 2>/dev/null | grep -q 'libcuda.so.1 '"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}
