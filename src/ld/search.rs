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
use std::fs::{self};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use super::line::{InputFileKind, InputKind, LinkLine, ScriptEntry, ScriptInfo};
use super::real::RealLdError;

use super::defaults::*;
use super::script::*;
use super::target::*;

#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    #[error(transparent)]
    RealLd(#[from] RealLdError),
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
        self.find_library_in(name, verbatim, static_only, &mut Probes::default())
    }

    /// [`Self::find_library`], each file found opened once per line (`probes`).
    fn find_library_in(
        &self,
        name: &OsStr,
        verbatim: bool,
        static_only: bool,
        probes: &mut Probes,
    ) -> Option<PathBuf> {
        let target = self.target.as_ref();
        self.library_candidates(name, verbatim, static_only)
            .into_iter()
            .find(|c| {
                let p = probes.get(c);
                p.regular && p.compatible(target)
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

pub(super) fn is_under(path: &Path, root: Option<&Path>) -> bool {
    let Some(root) = root.filter(|r| !r.as_os_str().is_empty() && *r != Path::new("/")) else {
        return false;
    };
    match (fs::canonicalize(path), fs::canonicalize(root)) {
        (Ok(p), Ok(r)) => p.starts_with(r),
        _ => false,
    }
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

    // -L and -T SEARCH_DIRs go into one list in command-line order, behind the -L options a
    // wrapper that is the real linker puts ahead of the line ([`LinkerDefaults::dirs_before`]).
    let mut dirs: Vec<PathBuf> = defaults.dirs_before.clone();
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
    // A wrapper's -L options behind the line's (Nix's NIX_LDFLAGS): command-line directories,
    // searched whatever script or -nostdlib the line has.
    dirs.extend(defaults.dirs_after.iter().cloned());
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
        relocatable: line.kind == super::line::OutputKind::Relocatable,
    };

    let notes = resolve_inputs(&mut line.inputs, &search);
    line.diagnostics.extend(notes);
    search
}

/// Finds each input as ld would on `search`, with its kind (and a script's own entries);
/// returns a note for each library not found.
fn resolve_inputs(inputs: &mut [super::line::Input], search: &SearchPath) -> Vec<String> {
    let mut notes = Vec::new();
    let mut r = Resolver::new(search);
    for input in inputs.iter_mut() {
        input.resolved = match input.kind {
            InputKind::Path | InputKind::JustSymbols => Some(PathBuf::from(&input.name)),
            InputKind::Library { verbatim, .. } => {
                let found = r.library(&input.name, verbatim, input.static_search);
                if let (None, Some(lib)) = (&found, input.library_spelling()) {
                    notes.push(format!("cannot find {lib}"));
                }
                found
            }
        };
        input.file_kind = Some(match (&input.resolved, input.binary) {
            (None, _) => InputFileKind::Missing,
            (Some(p), true) if p.exists() => InputFileKind::Binary,
            (Some(_), true) => InputFileKind::Missing,
            (Some(p), false) => {
                let probe = r.probes.get(p).clone();
                let kind = probe.kind;
                input.probe = Some(probe);
                kind
            }
        });
        if input.file_kind == Some(InputFileKind::Script) {
            if let Some(p) = input.resolved.clone() {
                input.script = r.script(&p, input.static_search);
            }
        }
    }
    notes
}

/// One line's searches, each made once: gcc names its support libraries twice (`-lgcc
/// -lgcc_s -lc -lgcc -lgcc_s`) and `libgcc_s.so` names `-lgcc` again. Each library search,
/// each file's probe (there or not) and each script with its entries found are kept for the
/// line (the files do not change meanwhile).
struct Resolver<'a> {
    search: &'a SearchPath,
    probes: Probes,
    /// By (name, verbatim, static only).
    libraries: HashMap<(OsString, bool, bool), Option<PathBuf>>,
    /// By (path, static only): a script's entries are searched in the state it is named in.
    scripts: HashMap<(PathBuf, bool), Option<ScriptInfo>>,
}

impl<'a> Resolver<'a> {
    fn new(search: &'a SearchPath) -> Self {
        Resolver {
            search,
            probes: Probes::default(),
            libraries: HashMap::new(),
            scripts: HashMap::new(),
        }
    }

    /// The file ld takes for `-lNAME` (`-l:NAME` when `verbatim`).
    fn library(&mut self, name: &OsStr, verbatim: bool, static_only: bool) -> Option<PathBuf> {
        let key = (name.to_owned(), verbatim, static_only);
        if let Some(found) = self.libraries.get(&key) {
            return found.clone();
        }
        let found = self
            .search
            .find_library_in(name, verbatim, static_only, &mut self.probes);
        self.libraries.insert(key, found.clone());
        found
    }

    /// The script at `path` with its entries found, named where `static_only` holds or not;
    /// an entry that is a script itself has its own entries found too (`in_progress`: the
    /// scripts being resolved, outer first, so that a script naming itself ends).
    fn script(&mut self, path: &Path, static_only: bool) -> Option<ScriptInfo> {
        self.script_within(path, static_only, &mut Vec::new())
    }

    fn script_within(
        &mut self,
        path: &Path,
        static_only: bool,
        in_progress: &mut Vec<PathBuf>,
    ) -> Option<ScriptInfo> {
        let key = (path.to_path_buf(), static_only);
        if let Some(info) = self.scripts.get(&key) {
            return info.clone();
        }
        let info = match self.probes.get(path).small_script() {
            Some(text) => Some(parse_script(text)),
            None => read_script(path),
        };
        in_progress.push(path.to_path_buf());
        let info = info.map(|mut info| {
            for e in &mut info.entries {
                e.resolved = self.entry(e, path, static_only);
                let Some(found) = &e.resolved else { continue };
                let probe = self.probes.get(found).clone();
                if probe.kind == InputFileKind::Script
                    && in_progress.len() < MAX_SCRIPT_DEPTH
                    && !in_progress.contains(found)
                {
                    e.script = self
                        .script_within(found, static_only, in_progress)
                        .map(Box::new);
                }
                e.probe = Some(probe);
            }
            info
        });
        in_progress.pop();
        self.scripts.insert(key, info.clone());
        info
    }

    /// Where ld finds a file named in an implicit script: a library by search; an absolute
    /// path as is (inside the sysroot if the script is); a relative one in the current
    /// directory, the script's directory, then the search path.
    fn entry(&mut self, entry: &ScriptEntry, script: &Path, static_only: bool) -> Option<PathBuf> {
        if entry.library {
            return self.library(&entry.name, entry.verbatim, static_only);
        }
        let sysroot = self.search.sysroot.as_deref();
        let b = entry.name.as_bytes();
        // Each candidate is probed (and the probe kept): the scan reads what it found.
        let mut there = |p: &Path| self.probes.get(p).kind != InputFileKind::Missing;
        if b.starts_with(b"=") || b.starts_with(b"$SYSROOT") {
            return Some(sysroot_path(&entry.name, sysroot)).filter(|p| there(p));
        }
        let p = PathBuf::from(&entry.name);
        if p.is_absolute() {
            if is_under(script, sysroot) {
                let inside = sysroot_path(&OsString::from_vec([b"=", b].concat()), sysroot);
                if there(&inside) {
                    return Some(inside);
                }
            }
            return there(&p).then_some(p);
        }
        let script_dir = script.parent().map(|d| d.join(&p));
        std::iter::once(p.clone())
            .chain(script_dir)
            .chain(self.search.dirs.iter().map(|d| d.join(&p)))
            .find(|c| self.probes.get(c).regular)
    }
}

/// Implicit scripts named inside implicit scripts are followed this deep (ld has no limit;
/// a real one is two deep, `libncurses.so` naming `libtinfo.so`).
const MAX_SCRIPT_DEPTH: usize = 8;

/// Each file's [`Probe`], once per line, whether it is there or not.
#[derive(Default)]
pub(super) struct Probes(HashMap<PathBuf, Probe>);

impl Probes {
    fn get(&mut self, path: &Path) -> &Probe {
        self.0
            .entry(path.to_path_buf())
            .or_insert_with(|| Probe::of(path))
    }
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
