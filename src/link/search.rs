//! Where ld finds each input: `-l` search over the `-L` directories and the linker's own
//! (from `ld --verbose`), sysroot prefixes, `-T` scripts, and implicit linker scripts such as
//! `libc.so`.
//!
//! The order is ld's (checked against `ld --verbose` traces): every `-L` in command-line
//! order, wherever it stands relative to the `-l`; the `SEARCH_DIR`s of `-T` scripts where
//! those scripts stand; `-Y` directories; then the default script's directories, unless a
//! `-T` script replaced that script or `-nostdlib` was given. In each directory `libNAME.so`
//! (dynamic state, not `-r`) then `libNAME.a`; a file for another machine or ELF class is
//! skipped as ld skips it ("skipping incompatible").

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use super::args::{InputFileKind, InputKind, LinkLine, ScriptEntry, ScriptInfo};
use super::real_ld::{self, RealLdError};

/// Linker scripts larger than this are not read for their file lists.
const MAX_SCRIPT_BYTES: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error(transparent)]
    RealLd(#[from] RealLdError),
}

/// What the real linker says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkerDefaults {
    /// The default script's `SEARCH_DIR`s, raw (`=` prefixes kept).
    pub search_dirs: Vec<OsString>,
    /// The default script's `OUTPUT_FORMAT`, e.g. `elf64-x86-64`.
    pub output_format: Option<String>,
    /// `ld --print-sysroot` (the configured sysroot), if not empty.
    pub sysroot: Option<PathBuf>,
}

/// The argument of each `KEYWORD(...)` in `text`: the first quoted string, or the bare text up
/// to `)`, `,` or whitespace.
fn directive_args<'a>(text: &'a [u8], keyword: &[u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(p) = find(&text[at..], keyword) {
        let mut i = at + p + keyword.len();
        at = i;
        while i < text.len() && text[i].is_ascii_whitespace() {
            i += 1;
        }
        if text.get(i) != Some(&b'(') {
            continue;
        }
        i += 1;
        while i < text.len() && text[i].is_ascii_whitespace() {
            i += 1;
        }
        let (start, stop): (usize, &[u8]) = if text.get(i) == Some(&b'"') {
            (i + 1, b"\"")
        } else {
            (i, b"), \t\r\n")
        };
        let end = text[start..]
            .iter()
            .position(|b| stop.contains(b))
            .map_or(text.len(), |e| start + e);
        out.push(&text[start..end]);
        at = end;
    }
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl LinkerDefaults {
    /// Reads `ld --verbose` output: `SEARCH_DIR("=/usr/lib"); ...` and `OUTPUT_FORMAT(...)`.
    pub fn from_verbose(text: &[u8]) -> LinkerDefaults {
        let search_dirs = directive_args(text, b"SEARCH_DIR")
            .into_iter()
            .filter(|d| !d.is_empty())
            .map(|d| OsString::from_vec(d.to_vec()))
            .collect();
        let output_format = directive_args(text, b"OUTPUT_FORMAT")
            .into_iter()
            .next()
            .map(|f| String::from_utf8_lossy(f).into_owned());
        LinkerDefaults {
            search_dirs,
            output_format,
            sysroot: None,
        }
    }

    /// Asks the real linker (`ld [-m EMUL] --verbose`, `ld --print-sysroot`). A linker that
    /// prints no script (gold, lld) gives empty defaults, not an error.
    pub fn query(ld: &Path, emulation: Option<&OsStr>) -> Result<LinkerDefaults, SearchError> {
        let mut args: Vec<&OsStr> = Vec::new();
        if let Some(e) = emulation {
            args.push(OsStr::new("-m"));
            args.push(e);
        }
        args.push(OsStr::new("--verbose"));
        let out = real_ld::capture(ld, &args)?;
        let mut defaults = LinkerDefaults::from_verbose(&out.stdout);
        let sys = real_ld::capture(ld, &["--print-sysroot"])?;
        if sys.status.success() {
            let s = sys.stdout.trim_ascii();
            if !s.is_empty() {
                defaults.sysroot = Some(PathBuf::from(OsStr::from_bytes(s)));
            }
        }
        Ok(defaults)
    }
}

/// [`LinkerDefaults`] per (linker, emulation), asked once per run.
#[derive(Debug, Default)]
pub struct DefaultsCache {
    entries: HashMap<(PathBuf, Option<OsString>), LinkerDefaults>,
}

impl DefaultsCache {
    pub fn new() -> DefaultsCache {
        DefaultsCache::default()
    }

    pub fn get(
        &mut self,
        ld: &Path,
        emulation: Option<&OsStr>,
    ) -> Result<&LinkerDefaults, SearchError> {
        let key = (ld.to_owned(), emulation.map(OsStr::to_owned));
        if !self.entries.contains_key(&key) {
            let d = LinkerDefaults::query(ld, emulation)?;
            self.entries.insert(key.clone(), d);
        }
        Ok(&self.entries[&key])
    }
}

/// The ELF flavour the link produces, to skip libraries built for another one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub class64: bool,
    pub big_endian: bool,
    pub machine: u16,
}

impl Target {
    /// From a BFD target name (`elf64-x86-64`, `elf64-littleaarch64`, ...); `None` if unknown.
    pub fn from_bfd_name(name: &str) -> Option<Target> {
        use object::elf::*;
        let t = |class64, big_endian, machine| {
            Some(Target {
                class64,
                big_endian,
                machine,
            })
        };
        let table: &[(&str, Option<Target>)] = &[
            ("elf64-x86-64", t(true, false, EM_X86_64)),
            ("elf32-x86-64", t(false, false, EM_X86_64)),
            ("elf32-i386", t(false, false, EM_386)),
            ("elf32-iamcu", t(false, false, EM_IAMCU)),
            ("elf64-littleaarch64", t(true, false, EM_AARCH64)),
            ("elf64-bigaarch64", t(true, true, EM_AARCH64)),
            ("elf32-littleaarch64", t(false, false, EM_AARCH64)),
            ("elf32-littlearm", t(false, false, EM_ARM)),
            ("elf32-bigarm", t(false, true, EM_ARM)),
            ("elf64-powerpcle", t(true, false, EM_PPC64)),
            ("elf64-powerpc", t(true, true, EM_PPC64)),
            ("elf32-powerpc", t(false, true, EM_PPC)),
            ("elf64-littleriscv", t(true, false, EM_RISCV)),
            ("elf32-littleriscv", t(false, false, EM_RISCV)),
            ("elf64-s390", t(true, true, EM_S390)),
        ];
        // Longest match first: `elf64-powerpcle` before `elf64-powerpc`; OS variants
        // (`elf64-x86-64-freebsd`) share their base's flavour.
        table
            .iter()
            .filter(|(n, _)| {
                name == *n
                    || name
                        .strip_prefix(n)
                        .is_some_and(|rest| rest.starts_with('-'))
            })
            .max_by_key(|(n, _)| n.len())
            .and_then(|(_, t)| *t)
    }

    /// Whether an ELF file starting with `header` (at least 20 bytes) can go in this link.
    pub fn accepts(&self, header: &[u8]) -> bool {
        if header.len() < 20 {
            return true;
        }
        let class64 = header[4] == object::elf::ELFCLASS64;
        let big = header[5] == object::elf::ELFDATA2MSB;
        let m = [header[18], header[19]];
        let machine = if big {
            u16::from_be_bytes(m)
        } else {
            u16::from_le_bytes(m)
        };
        class64 == self.class64 && big == self.big_endian && machine == self.machine
    }
}

fn read_prefix(f: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// What `path` holds, by its first bytes. An empty or text file is a script, as ld takes it.
pub fn sniff(path: &Path) -> InputFileKind {
    // Opening a FIFO or a device could block; ld has no use for them either.
    match fs::metadata(path) {
        Ok(m) if m.is_file() => {}
        Ok(_) => return InputFileKind::Other,
        Err(_) => return InputFileKind::Missing,
    }
    let Ok(mut f) = File::open(path) else {
        return InputFileKind::Missing;
    };
    let mut buf = [0u8; 512];
    let Ok(n) = read_prefix(&mut f, &mut buf) else {
        return InputFileKind::Missing;
    };
    let b = &buf[..n];
    if b.starts_with(b"\x7fELF") {
        InputFileKind::Elf
    } else if b.starts_with(b"!<arch>\n") {
        InputFileKind::Archive
    } else if b.starts_with(b"!<thin>\n") {
        InputFileKind::ThinArchive
    } else if b.starts_with(b"BC\xc0\xde") || b.starts_with(b"\xde\xc0\x17\x0b") {
        InputFileKind::Bitcode
    } else if !b.contains(&0) {
        InputFileKind::Script
    } else {
        InputFileKind::Other
    }
}

/// The first 20 bytes of the first ELF member of a regular archive.
fn first_member_header(f: &mut File) -> io::Result<Option<[u8; 20]>> {
    let len = f.metadata()?.len();
    let mut pos = 8u64;
    let mut hdr = [0u8; 60];
    while pos + 60 <= len {
        f.seek(SeekFrom::Start(pos))?;
        if read_prefix(f, &mut hdr)? < 60 || &hdr[58..60] != b"`\n" {
            return Ok(None);
        }
        let size: u64 = std::str::from_utf8(&hdr[48..58])
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        let name = &hdr[..16];
        // Symbol tables and the long-name table are not objects.
        let special =
            name.starts_with(b"/ ") || name.starts_with(b"//") || name.starts_with(b"/SYM64/");
        if !special && !name.starts_with(b"__.SYMDEF") {
            let mut m = [0u8; 20];
            if read_prefix(f, &mut m)? == 20 && m.starts_with(b"\x7fELF") {
                return Ok(Some(m));
            }
        }
        pos += 60 + size + (size & 1);
    }
    Ok(None)
}

/// Whether ld would take `path` for this target (an unknown target takes everything).
pub fn compatible(path: &Path, target: Option<&Target>) -> bool {
    let Some(target) = target else {
        return true;
    };
    let Ok(mut f) = File::open(path) else {
        return false;
    };
    let mut buf = [0u8; 20];
    let Ok(n) = read_prefix(&mut f, &mut buf) else {
        return false;
    };
    if buf[..n].starts_with(b"\x7fELF") {
        return target.accepts(&buf[..n]);
    }
    if buf[..n].starts_with(b"!<arch>\n") {
        return match first_member_header(&mut f) {
            Ok(Some(h)) => target.accepts(&h),
            _ => true,
        };
    }
    true
}

/// `=DIR` and `$SYSROOTDIR` name DIR inside the sysroot (plain `DIR` with no sysroot).
pub fn sysroot_path(raw: &OsStr, sysroot: Option<&Path>) -> PathBuf {
    let b = raw.as_bytes();
    let rest = b.strip_prefix(b"=").or_else(|| b.strip_prefix(b"$SYSROOT"));
    match rest {
        None => PathBuf::from(raw),
        Some(rest) => {
            let mut v = sysroot
                .map(|s| s.as_os_str().as_bytes().to_vec())
                .unwrap_or_default();
            while v.len() > 1 && v.last() == Some(&b'/') {
                v.pop();
            }
            if v == b"/" {
                v.clear();
            }
            v.extend_from_slice(rest);
            PathBuf::from(OsString::from_vec(v))
        }
    }
}

/// The directories ld searches, in order, and what decides which file it takes.
#[derive(Debug, Clone, Default)]
pub struct SearchPath {
    pub dirs: Vec<PathBuf>,
    pub sysroot: Option<PathBuf>,
    pub target: Option<Target>,
    /// `-r`: ld looks for no shared library.
    pub relocatable: bool,
}

impl SearchPath {
    /// The files ld tries for `-lNAME` (or `-l:NAME` when `verbatim`), in order.
    pub fn library_candidates(
        &self,
        name: &OsStr,
        verbatim: bool,
        static_only: bool,
    ) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let with = |pre: &str, suf: &str| {
            let mut v = pre.as_bytes().to_vec();
            v.extend_from_slice(name.as_bytes());
            v.extend_from_slice(suf.as_bytes());
            OsString::from_vec(v)
        };
        for d in &self.dirs {
            if verbatim {
                out.push(d.join(name));
                continue;
            }
            if !static_only && !self.relocatable {
                out.push(d.join(with("lib", ".so")));
            }
            out.push(d.join(with("lib", ".a")));
        }
        out
    }

    /// The file ld takes for `-lNAME`, if any.
    pub fn find_library(&self, name: &OsStr, verbatim: bool, static_only: bool) -> Option<PathBuf> {
        self.library_candidates(name, verbatim, static_only)
            .into_iter()
            .find(|c| {
                fs::metadata(c).is_ok_and(|m| m.is_file()) && compatible(c, self.target.as_ref())
            })
    }

    /// A `-T` script as ld looks for it: as named, then in `dirs` (those in force at that point).
    fn find_script(name: &OsStr, dirs: &[PathBuf]) -> Option<PathBuf> {
        let p = PathBuf::from(name);
        if p.is_file() {
            return Some(p);
        }
        dirs.iter().map(|d| d.join(name)).find(|c| c.is_file())
    }
}

/// Splits linker-script text into words and the punctuation that matters for file lists.
fn script_tokens(text: &[u8]) -> Vec<Vec<u8>> {
    let mut toks = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        if text[i..].starts_with(b"/*") {
            i = find(&text[i + 2..], b"*/").map_or(text.len(), |e| i + 2 + e + 2);
        } else if c.is_ascii_whitespace() || c == b',' || c == b';' {
            i += 1;
        } else if matches!(c, b'(' | b')' | b'{' | b'}') {
            toks.push(vec![c]);
            i += 1;
        } else if c == b'"' {
            let end = text[i + 1..]
                .iter()
                .position(|&b| b == b'"')
                .map_or(text.len(), |e| i + 1 + e);
            toks.push(text[i + 1..end].to_vec());
            i = end + 1;
        } else {
            let start = i;
            while i < text.len()
                && !text[i].is_ascii_whitespace()
                && !matches!(text[i], b',' | b';' | b'(' | b')' | b'{' | b'}' | b'"')
                && !text[i..].starts_with(b"/*")
            {
                i += 1;
            }
            toks.push(text[start..i].to_vec());
        }
    }
    toks
}

/// Reads the parts of a linker script that name files: `INPUT(...)`, `GROUP(...)` (with
/// `AS_NEEDED(...)` inside), `SEARCH_DIR(...)`, `INCLUDE`, and whether it uses `INSERT`.
pub fn parse_script(text: &[u8]) -> ScriptInfo {
    let toks = script_tokens(text);
    let mut info = ScriptInfo::default();
    let mut i = 0;
    while i < toks.len() {
        let t = toks[i].as_slice();
        let open = toks.get(i + 1).is_some_and(|n| n == b"(");
        match t {
            b"INPUT" | b"GROUP" if open => {
                let in_group = t == b"GROUP";
                let mut depth = 0usize;
                let mut as_needed_depth = None;
                i += 1;
                while i < toks.len() {
                    let w = toks[i].as_slice();
                    match w {
                        b"(" => depth += 1,
                        b")" => {
                            depth -= 1;
                            if as_needed_depth == Some(depth) {
                                as_needed_depth = None;
                            }
                            if depth == 0 {
                                break;
                            }
                        }
                        b"AS_NEEDED" if toks.get(i + 1).is_some_and(|n| n == b"(") => {
                            as_needed_depth = Some(depth)
                        }
                        _ => {
                            let (name, library, verbatim) = match w.strip_prefix(b"-l") {
                                Some(rest) => match rest.strip_prefix(b":") {
                                    Some(v) => (v, true, true),
                                    None => (rest, true, false),
                                },
                                None => (w, false, false),
                            };
                            info.entries.push(ScriptEntry {
                                name: OsString::from_vec(name.to_vec()),
                                library,
                                verbatim,
                                as_needed: as_needed_depth.is_some(),
                                in_group,
                                resolved: None,
                            });
                        }
                    }
                    i += 1;
                }
            }
            b"SEARCH_DIR" if open => {
                if let Some(d) = toks.get(i + 2).filter(|d| d.as_slice() != b")") {
                    info.search_dirs.push(OsString::from_vec(d.clone()));
                }
                i += 2;
            }
            b"INCLUDE" => {
                if let Some(f) = toks.get(i + 1) {
                    info.includes.push(OsString::from_vec(f.clone()));
                }
                i += 1;
            }
            b"INSERT" => info.has_insert = true,
            _ => {}
        }
        i += 1;
    }
    info
}

fn read_script(path: &Path) -> Option<ScriptInfo> {
    let f = File::open(path).ok()?;
    let mut text = Vec::new();
    f.take(MAX_SCRIPT_BYTES).read_to_end(&mut text).ok()?;
    Some(parse_script(&text))
}

fn is_under(path: &Path, root: Option<&Path>) -> bool {
    let Some(root) = root.filter(|r| !r.as_os_str().is_empty() && *r != Path::new("/")) else {
        return false;
    };
    match (fs::canonicalize(path), fs::canonicalize(root)) {
        (Ok(p), Ok(r)) => p.starts_with(r),
        _ => false,
    }
}

/// Where ld finds a file named in an implicit script: a library by search; an absolute path
/// as is (inside the sysroot if the script is); a relative one in the current directory, the
/// script's directory, then the search path.
fn resolve_entry(
    entry: &ScriptEntry,
    script: &Path,
    search: &SearchPath,
    static_only: bool,
) -> Option<PathBuf> {
    if entry.library {
        return search.find_library(&entry.name, entry.verbatim, static_only);
    }
    let b = entry.name.as_bytes();
    if b.starts_with(b"=") || b.starts_with(b"$SYSROOT") {
        return Some(sysroot_path(&entry.name, search.sysroot.as_deref())).filter(|p| p.exists());
    }
    let p = PathBuf::from(&entry.name);
    if p.is_absolute() {
        if is_under(script, search.sysroot.as_deref()) {
            let inside = sysroot_path(
                &OsString::from_vec([b"=", b].concat()),
                search.sysroot.as_deref(),
            );
            if inside.exists() {
                return Some(inside);
            }
        }
        return p.exists().then_some(p);
    }
    let script_dir = script.parent().map(|d| d.join(&p));
    std::iter::once(p.clone())
        .chain(script_dir)
        .chain(search.dirs.iter().map(|d| d.join(&p)))
        .find(|c| c.is_file())
}

/// Fills in where every input of `line` comes from (`resolved`, `file_kind`, `script`) and
/// each `-T` script, using the linker's defaults. Returns the search path it used.
pub fn resolve(line: &mut LinkLine, defaults: &LinkerDefaults) -> SearchPath {
    let sysroot = line.sysroot.clone().or_else(|| defaults.sysroot.clone());
    let sys = sysroot.as_deref();
    let cmdline: Vec<PathBuf> = line
        .library_dirs
        .iter()
        .filter(|d| !d.from_y)
        .map(|d| sysroot_path(&d.raw, sys))
        .collect();
    let y_dirs: Vec<PathBuf> = line
        .library_dirs
        .iter()
        .filter(|d| d.from_y)
        .map(|d| sysroot_path(&d.raw, sys))
        .collect();

    // -L and -T SEARCH_DIRs go into one list in command-line order.
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut next_l = 0;
    let mut replaces_default = false;
    for script in line.scripts.iter_mut().filter(|s| !s.default_script) {
        while next_l < script.library_dirs_before.min(cmdline.len()) {
            dirs.push(cmdline[next_l].clone());
            next_l += 1;
        }
        script.resolved = SearchPath::find_script(&script.name, &dirs);
        script.info = script.resolved.as_deref().and_then(read_script);
        match &script.info {
            Some(info) => {
                if !line.nostdlib {
                    dirs.extend(info.search_dirs.iter().map(|d| sysroot_path(d, sys)));
                }
                replaces_default |= !info.has_insert;
            }
            None => {
                line.diagnostics.push(format!(
                    "cannot find linker script {}",
                    script.name.to_string_lossy()
                ));
                replaces_default = true;
            }
        }
    }
    dirs.extend(cmdline[next_l..].iter().cloned());
    dirs.extend(y_dirs);

    if !replaces_default {
        // The last -dT stands in for the built-in default script.
        let dir_snapshot = dirs.clone();
        let default_script = line.scripts.iter_mut().rev().find(|s| s.default_script);
        let script_dirs = match default_script {
            Some(s) => {
                s.resolved = SearchPath::find_script(&s.name, &dir_snapshot);
                s.info = s.resolved.as_deref().and_then(read_script);
                s.info
                    .as_ref()
                    .map(|i| i.search_dirs.clone())
                    .unwrap_or_default()
            }
            None => defaults.search_dirs.clone(),
        };
        if !line.nostdlib {
            dirs.extend(script_dirs.iter().map(|d| sysroot_path(d, sys)));
        }
    }

    let search = SearchPath {
        dirs,
        sysroot,
        target: defaults
            .output_format
            .as_deref()
            .and_then(Target::from_bfd_name),
        relocatable: line.kind == super::args::OutputKind::Relocatable,
    };

    let mut notes = Vec::new();
    for input in &mut line.inputs {
        input.resolved = match input.kind {
            InputKind::Path | InputKind::JustSymbols => Some(PathBuf::from(&input.name)),
            InputKind::Library { verbatim, .. } => {
                let found = search.find_library(&input.name, verbatim, input.static_search);
                if found.is_none() {
                    let colon = if verbatim { ":" } else { "" };
                    notes.push(format!(
                        "cannot find -l{colon}{}",
                        input.name.to_string_lossy()
                    ));
                }
                found
            }
        };
        input.file_kind = Some(match (&input.resolved, input.binary) {
            (None, _) => InputFileKind::Missing,
            (Some(p), true) if p.exists() => InputFileKind::Binary,
            (Some(_), true) => InputFileKind::Missing,
            (Some(p), false) => sniff(p),
        });
        if input.file_kind == Some(InputFileKind::Script) {
            if let Some(p) = input.resolved.clone() {
                input.script = read_script(&p).map(|mut info| {
                    for e in &mut info.entries {
                        e.resolved = resolve_entry(e, &p, &search, input.static_search);
                    }
                    info
                });
            }
        }
    }
    line.diagnostics.extend(notes);
    search
}

/// [`resolve`] with the defaults of the linker at `ld` (asked once per run through `cache`).
pub fn resolve_with(
    line: &mut LinkLine,
    ld: &Path,
    cache: &mut DefaultsCache,
) -> Result<SearchPath, SearchError> {
    let emulation = line.emulation.clone();
    let defaults = cache.get(ld, emulation.as_deref())?.clone();
    Ok(resolve(line, &defaults))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbose_output() {
        let text = br#"OUTPUT_FORMAT("elf64-x86-64", "elf64-x86-64",
              "elf64-x86-64")
SEARCH_DIR("=/usr/local/lib/x86_64-linux-gnu"); SEARCH_DIR("=/lib/x86_64-linux-gnu"); SEARCH_DIR(/opt/x);"#;
        let d = LinkerDefaults::from_verbose(text);
        assert_eq!(
            d.search_dirs,
            vec![
                "=/usr/local/lib/x86_64-linux-gnu",
                "=/lib/x86_64-linux-gnu",
                "/opt/x"
            ]
        );
        assert_eq!(d.output_format.as_deref(), Some("elf64-x86-64"));
    }

    #[test]
    fn sysroot_prefixes() {
        let s = Some(Path::new("/sys/root/"));
        assert_eq!(
            sysroot_path(OsStr::new("=/usr/lib"), s),
            Path::new("/sys/root/usr/lib")
        );
        assert_eq!(
            sysroot_path(OsStr::new("$SYSROOT/lib"), s),
            Path::new("/sys/root/lib")
        );
        assert_eq!(
            sysroot_path(OsStr::new("=/usr/lib"), None),
            Path::new("/usr/lib")
        );
        assert_eq!(
            sysroot_path(OsStr::new("=/usr/lib"), Some(Path::new("/"))),
            Path::new("/usr/lib")
        );
        assert_eq!(
            sysroot_path(OsStr::new("/usr/lib"), s),
            Path::new("/usr/lib")
        );
    }

    #[test]
    fn targets() {
        let t = Target::from_bfd_name("elf64-x86-64").unwrap();
        assert!(t.class64 && t.machine == object::elf::EM_X86_64);
        assert_eq!(Target::from_bfd_name("elf64-x86-64-freebsd"), Some(t));
        assert_eq!(
            Target::from_bfd_name("elf64-powerpcle").map(|t| t.big_endian),
            Some(false)
        );
        assert_eq!(
            Target::from_bfd_name("elf64-powerpc").map(|t| t.big_endian),
            Some(true)
        );
        assert_eq!(Target::from_bfd_name("pei-x86-64"), None);
    }

    #[test]
    fn libc_style_script() {
        let text = b"/* GNU ld script */\nOUTPUT_FORMAT(elf64-x86-64)\nGROUP ( /lib/x86_64-linux-gnu/libc.so.6 \
/usr/lib/x86_64-linux-gnu/libc_nonshared.a  AS_NEEDED ( /lib64/ld-linux-x86-64.so.2 ) )\nINPUT(-lm, -l:x.a)\n";
        let info = parse_script(text);
        let names: Vec<_> = info
            .entries
            .iter()
            .map(|e| (e.name.to_str().unwrap(), e.as_needed, e.library))
            .collect();
        assert_eq!(
            names,
            vec![
                ("/lib/x86_64-linux-gnu/libc.so.6", false, false),
                ("/usr/lib/x86_64-linux-gnu/libc_nonshared.a", false, false),
                ("/lib64/ld-linux-x86-64.so.2", true, false),
                ("m", false, true),
                ("x.a", false, true),
            ]
        );
        assert!(info.entries[0].in_group && !info.entries[3].in_group && info.entries[4].verbatim);
        assert!(!info.has_insert);
        let info =
            parse_script(b"SEARCH_DIR(\"/a b\") SECTIONS { .x : { *(.x) } } INSERT AFTER .text;");
        assert_eq!(info.search_dirs, vec!["/a b"]);
        assert!(info.has_insert);
    }
}
