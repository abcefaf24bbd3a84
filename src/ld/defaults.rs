//! What the real linker says about itself (`ld --verbose`): its default search directories
//! and output format, asked once per linker and kept (in this run, and on disk between runs:
//! [`super::defaults_cache`]).

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use super::real::{self as real_ld};
use super::search::SearchError;

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
            sysroot: None,
        }
    }

    /// Asks the real linker (`ld [-m EMUL] --verbose`, `ld --print-sysroot`, both at once).
    /// A linker that prints no script (gold, lld) gives empty defaults, not an error.
    pub fn query(ld: &Path, emulation: Option<&OsStr>) -> Result<LinkerDefaults, SearchError> {
        let mut args: Vec<&OsStr> = Vec::new();
        if let Some(e) = emulation {
            args.push(OsStr::new("-m"));
            args.push(e);
        }
        args.push(OsStr::new("--verbose"));
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
            let kept = super::defaults_cache::Kept::of(ld, emulation);
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
