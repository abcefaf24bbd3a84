//! What the real linker says about itself (`ld --verbose`): its default search directories
//! and output format, asked once per linker and kept (in this run, and on disk between runs:
//! [`cache`]).
//!
//! The same call shows where the linker looks for a library, the directories a wrapper adds
//! included: Nix's bintools wrapper, the `ld` a Nix build's driver runs, adds `-L` for every
//! input of the build (`NIX_LDFLAGS`) to what it is given, so a library the line names
//! (`-lcublas_static`) is found in directories the line does not name. The call asks for a
//! library that is nowhere (`-l:` [`PROBE`]) after a directory that is nowhere either
//! (`-L` [`MARKER`]); GNU ld and gold, with `--verbose`, say each file they try ("attempt to
//! open DIR/NAME failed"), in the order they search: the directories before the marker were
//! put ahead of the line's by the command that ran the linker, those after it behind them.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use super::real::{self as real_ld, RealLdError};

pub(crate) mod cache;

/// What the real linker says about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkerDefaults {
    /// The default script's `SEARCH_DIR`s, raw (`=` prefixes kept).
    pub search_dirs: Vec<OsString>,
    /// The default script's `OUTPUT_FORMAT`, e.g. `elf64-x86-64`.
    pub output_format: Option<String>,
    /// `ld --print-sysroot` (the configured sysroot), if not empty.
    pub sysroot: Option<PathBuf>,
    /// Library directories the linker command searches ahead of the line's own `-L`s: a
    /// wrapper's `-L` options before the arguments it is given.
    pub dirs_before: Vec<PathBuf>,
    /// Library directories the linker command searches after the line's own `-L`s and before
    /// its defaults: a wrapper's `-L` options after the arguments it is given (`NIX_LDFLAGS`);
    /// for a linker that prints no default script (gold), its built-in directories too.
    pub dirs_after: Vec<PathBuf>,
}

/// The directory the probe names with `-L` (none such exists): where the line's own `-L`s
/// would be among the directories the linker says it searched.
pub const MARKER: &str = "/nonexistent/fatpack-search-marker";
/// The file the probe asks for with `-l:` (none such exists anywhere).
pub const PROBE: &str = "fatpack-search-probe.none";

/// The directories, in order and each once, that `out` (the linker's stdout and stderr) says
/// were tried for [`PROBE`]: split at [`MARKER`], those before it and those after it; `None`
/// where the linker said nothing of it (lld, mold) or never reached the marker.
fn probed_dirs(out: &[&[u8]]) -> Option<(Vec<PathBuf>, Vec<PathBuf>)> {
    let suffix = format!("/{PROBE} failed");
    let mut seen: Vec<PathBuf> = Vec::new();
    for text in out {
        for line in text.split(|&b| b == b'\n') {
            let line = line.trim_ascii_end();
            // GNU ld: "attempt to open DIR/NAME failed"; gold: "ld.gold: Attempt to open ...".
            let Some(at) = find(line, b"ttempt to open ") else {
                continue;
            };
            let path = &line[at + b"ttempt to open ".len()..];
            let Some(dir) = path.strip_suffix(suffix.as_bytes()) else {
                continue;
            };
            let dir = PathBuf::from(OsStr::from_bytes(dir));
            if !seen.contains(&dir) {
                seen.push(dir);
            }
        }
    }
    let marker = seen.iter().position(|d| d == Path::new(MARKER))?;
    let after = seen.split_off(marker + 1);
    seen.pop();
    Some((seen, after))
}

/// The argument of each `KEYWORD(...)` in `text`: the first quoted string, or the bare text up
/// to `)`, `,` or whitespace.
pub(super) fn directive_args<'a>(text: &'a [u8], keyword: &[u8]) -> Vec<&'a [u8]> {
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

pub(super) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
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
            ..LinkerDefaults::default()
        }
    }

    /// Asks the real linker (`ld [-m EMUL] --verbose -L MARKER -l:PROBE`, which fails, and
    /// `ld --print-sysroot`, both at once). A linker that prints no script (gold, lld) gives
    /// empty defaults, not an error; one that says nothing of its search (lld, mold), no
    /// directories of its own.
    pub fn query(ld: &Path, emulation: Option<&OsStr>) -> Result<LinkerDefaults, RealLdError> {
        let mut args: Vec<&OsStr> = Vec::new();
        if let Some(e) = emulation {
            args.push(OsStr::new("-m"));
            args.push(e);
        }
        args.push(OsStr::new("--verbose"));
        args.push(OsStr::new("-L"));
        args.push(OsStr::new(MARKER));
        let probe = format!("-l:{PROBE}");
        args.push(OsStr::new(&probe));
        // Two linker start-ups, side by side: a small link's own time is about one.
        let (out, sys) = std::thread::scope(|s| {
            let sysroot = s.spawn(|| real_ld::capture(ld, &["--print-sysroot"]));
            let verbose = real_ld::capture(ld, &args);
            (verbose, sysroot.join().expect("a capture does not panic"))
        });
        let (out, sys) = (out?, sys?);
        let mut defaults = LinkerDefaults::from_verbose(&out.stdout);
        if sys.status.success() {
            let s = sys.stdout.trim_ascii();
            if !s.is_empty() {
                defaults.sysroot = Some(PathBuf::from(OsStr::from_bytes(s)));
            }
        }
        if let Some((before, after)) = probed_dirs(&[&out.stdout, &out.stderr]) {
            // Behind the marker come the command's own -L directories, then the default
            // script's (sysroot applied), which the search adds itself where they apply.
            let sys = defaults.sysroot.as_deref();
            let defaults_dirs: Vec<PathBuf> = defaults
                .search_dirs
                .iter()
                .map(|d| sysroot_path(d, sys))
                .collect();
            defaults.dirs_before = before;
            defaults.dirs_after = after
                .into_iter()
                .filter(|d| !defaults_dirs.contains(d))
                .collect();
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
    ) -> Result<&LinkerDefaults, RealLdError> {
        let key = (ld.to_owned(), emulation.map(OsStr::to_owned));
        if !self.entries.contains_key(&key) {
            let kept = cache::Kept::of(ld, emulation);
            let d = match kept.as_ref().and_then(|k| k.read()) {
                Some(d) => d,
                None => {
                    let d = LinkerDefaults::query(ld, emulation)?;
                    if let Some(k) = &kept {
                        k.write(&d);
                    }
                    d
                }
            };
            self.entries.insert(key.clone(), d);
        }
        Ok(&self.entries[&key])
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// What GNU ld (stdout) and gold (stderr) print of the probe's search, a wrapper's
    /// directories around the marker; each directory once, in order.
    #[test]
    fn the_probe_splits_the_search_at_the_marker() {
        let gnu = format!(
            "GNU ld (GNU Binutils) 2.42\n  Supported emulations:\n\
             attempt to open /nix/a/lib/{PROBE} failed\n\
             attempt to open /nix/a/lib/{PROBE} failed\n\
             attempt to open {MARKER}/{PROBE} failed\n\
             attempt to open /nix/b/lib/{PROBE} failed\n\
             attempt to open /usr/lib/{PROBE} failed\n\
             attempt to open /nix/a/lib/{PROBE} failed\n\
             attempt to open /usr/lib/libother.so failed\n"
        );
        let (before, after) = probed_dirs(&[gnu.as_bytes(), b""]).unwrap();
        assert_eq!(before, vec![PathBuf::from("/nix/a/lib")]);
        assert_eq!(
            after,
            vec![PathBuf::from("/nix/b/lib"), PathBuf::from("/usr/lib")]
        );
        let gold = format!(
            "ld.gold: Attempt to open {MARKER}/{PROBE} failed\r\n\
             ld.gold: Attempt to open //lib/x86_64-linux-gnu/{PROBE} failed\n\
             ld.gold: error: cannot find -l:{PROBE}\n"
        );
        let (before, after) = probed_dirs(&[b"", gold.as_bytes()]).unwrap();
        assert!(before.is_empty());
        assert_eq!(after, vec![PathBuf::from("/lib/x86_64-linux-gnu")]);
        // lld and mold say nothing of their search; a search that never reached the marker
        // tells nothing either.
        assert_eq!(
            probed_dirs(&[b"", b"ld.lld: error: unable to find library -l:x\n"]),
            None
        );
        let no_marker = format!("attempt to open /usr/lib/{PROBE} failed\n");
        assert_eq!(probed_dirs(&[no_marker.as_bytes()]), None);
    }

    /// The real GNU ld of this machine: nothing ahead of the line, nothing behind it but its
    /// default script's directories (so no directory is searched twice or out of order).
    #[test]
    fn gnu_ld_alone_adds_no_directories() {
        let d = LinkerDefaults::query(Path::new("ld"), None).unwrap();
        assert!(!d.search_dirs.is_empty(), "{d:?}");
        assert!(d.dirs_before.is_empty(), "{d:?}");
        assert!(d.dirs_after.is_empty(), "{d:?}");
    }
}
