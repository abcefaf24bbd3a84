//! The real linker's defaults kept on disk between runs, so that a link asks the linker
//! about itself (`ld --verbose`, `ld --print-sysroot`: two linker start-ups, as long as a
//! small link) once per installed linker, not once per link.
//!
//! An entry is named by a digest of everything the answer depends on: the linker's path
//! as the link names it and its identity (device, inode, size, modification and change
//! times: a linker upgraded or replaced in place gets a new name), the emulation asked for,
//! and this fatpack's version. A wrapper script (Nix's bintools wrapper, say) answers from its
//! environment too (`NIX_LDFLAGS`): its answer is kept only in a folder `$FATPACK_CACHE_DIR`
//! names (the Nix setup hook names one inside the build), under a digest of the script's
//! bytes and of the whole environment but for the shell's own bookkeeping (`_`, `OLDPWD`,
//! `SHLVL`) and fatpack's depth count: in one build that is the same for every link, and the
//! wrapper is run once, not twice more per link (`bench/wrapped_small_links.sh`).
//!
//! Where: `$FATPACK_CACHE_DIR` (empty: no cache), else `$XDG_CACHE_HOME/fatpack`, else
//! `~/.cache/fatpack`. Nothing here is ever an error: an entry that cannot be read is asked
//! again, one that cannot be written is not kept (a read-only home, a build sandbox).

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::LinkerDefaults;

/// The variable that moves the cache (or, empty, turns it off).
pub const CACHE_DIR_ENV: &str = crate::environment::CACHE_DIR;
/// The first line of an entry: what wrote it and in which layout.
const HEADER: &str = "fatpack linker defaults 2";

/// One linker's entry.
pub(super) struct Kept {
    path: PathBuf,
}

impl Kept {
    /// The entry for `ld` with `emulation`, if the cache is on and `ld` may be kept.
    pub(super) fn of(ld: &Path, emulation: Option<&OsStr>) -> Option<Kept> {
        let dir = cache_dir()?;
        // The path as the link names it (not resolved: lld takes its flavour from the name it
        // is run by, `ld.lld` or `ld64.lld`, and both are links to one file), and the file it
        // leads to by identity.
        let meta = std::fs::metadata(ld).ok()?;
        let mut magic = [0u8; 4];
        let mut f = std::fs::File::open(ld).ok()?;
        std::io::Read::read_exact(&mut f, &mut magic).ok()?;
        // SipHash (std's): no CPU-feature probe, which costs a link more than the hash
        // (cpuid traps to the hypervisor on a virtual machine).
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        if &magic != b"\x7fELF" {
            wrapper_context(&mut f, meta.len())?.hash(&mut h);
        }
        ld.as_os_str().as_bytes().hash(&mut h);
        (
            meta.dev(),
            meta.ino(),
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec(),
            meta.ctime(),
            meta.ctime_nsec(),
        )
            .hash(&mut h);
        emulation.map(OsStr::as_bytes).hash(&mut h);
        env!("CARGO_PKG_VERSION").hash(&mut h);
        let name = format!("{:016x}", h.finish());
        Some(Kept {
            path: dir.join("linker-defaults").join(name),
        })
    }

    /// The defaults kept, if the entry is there and whole.
    pub(super) fn read(&self) -> Option<LinkerDefaults> {
        decode(&std::fs::read(&self.path).ok()?)
    }

    /// Keeps `d` (best effort: written beside the entry and renamed over it, so a reader
    /// sees a whole entry or none).
    pub(super) fn write(&self, d: &LinkerDefaults) {
        let Some(dir) = self.path.parent() else {
            return;
        };
        if std::fs::create_dir_all(dir).is_err() {
            return;
        }
        let Ok(mut tmp) = tempfile::NamedTempFile::new_in(dir) else {
            return;
        };
        if tmp.write_all(&encode(d)).is_ok() {
            let _ = tmp.persist(&self.path);
        }
    }
}

/// A wrapper script's bytes and the environment it runs in, as [`wrapper_context`] takes them.
type WrapperContext = (Vec<u8>, Vec<(OsString, OsString)>);

/// What a wrapper script's answer depends on besides its path and identity: its bytes and the
/// environment (sorted; the shell's bookkeeping and fatpack's depth count left out). `None`
/// where a wrapper's answer is not kept: no `$FATPACK_CACHE_DIR` named, or a "script" over
/// 1 MiB (not a wrapper).
fn wrapper_context(script: &mut std::fs::File, len: u64) -> Option<WrapperContext> {
    std::env::var_os(CACHE_DIR_ENV).filter(|d| !d.is_empty())?;
    if len > 1 << 20 {
        return None;
    }
    let mut bytes = Vec::with_capacity(len as usize);
    std::io::Seek::rewind(script).ok()?;
    std::io::Read::read_to_end(script, &mut bytes).ok()?;
    let skip = ["_", "OLDPWD", "SHLVL", crate::ld::real::DEPTH_ENV];
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| !skip.iter().any(|s| k == s))
        .collect();
    env.sort();
    Some((bytes, env))
}

/// The cache folder, or `None` when it is off or there is no home to put it in.
pub(crate) fn cache_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os(CACHE_DIR_ENV) {
        return (!d.is_empty()).then(|| PathBuf::from(d));
    }
    let base = match std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").filter(|d| !d.is_empty())?).join(".cache"),
    };
    Some(base.join("fatpack"))
}

/// An entry's bytes: the header, one `KEY HEX` line per value, `end`.
fn encode(d: &LinkerDefaults) -> Vec<u8> {
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let mut s = format!("{HEADER}\n");
    if let Some(f) = &d.output_format {
        s += &format!("format {}\n", hex(f.as_bytes()));
    }
    if let Some(r) = &d.sysroot {
        s += &format!("sysroot {}\n", hex(r.as_os_str().as_bytes()));
    }
    for dir in &d.search_dirs {
        s += &format!("dir {}\n", hex(dir.as_bytes()));
    }
    for dir in &d.dirs_before {
        s += &format!("before {}\n", hex(dir.as_os_str().as_bytes()));
    }
    for dir in &d.dirs_after {
        s += &format!("after {}\n", hex(dir.as_os_str().as_bytes()));
    }
    s += "end\n";
    s.into_bytes()
}

/// The defaults an entry holds; `None` for anything but a whole entry of this layout.
fn decode(bytes: &[u8]) -> Option<LinkerDefaults> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut lines = text.lines();
    if lines.next()? != HEADER {
        return None;
    }
    let unhex = |h: &str| -> Option<Vec<u8>> {
        (h.len() % 2 == 0)
            .then(|| {
                (0..h.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok())
                    .collect()
            })
            .flatten()
    };
    let mut d = LinkerDefaults::default();
    for line in lines {
        if line == "end" {
            return Some(d);
        }
        let (key, value) = line.split_once(' ')?;
        let value = unhex(value)?;
        match key {
            "format" => d.output_format = Some(String::from_utf8(value).ok()?),
            "sysroot" => d.sysroot = Some(PathBuf::from(OsString::from_vec(value))),
            "dir" => d.search_dirs.push(OsString::from_vec(value)),
            "before" => d.dirs_before.push(OsString::from_vec(value).into()),
            "after" => d.dirs_after.push(OsString::from_vec(value).into()),
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_reads_back_whole_or_not_at_all() {
        let d = LinkerDefaults {
            search_dirs: vec!["=/usr/lib".into(), "/opt/odd dir\u{e9}".into()],
            output_format: Some("elf64-x86-64".into()),
            sysroot: Some(PathBuf::from("/")),
            dirs_before: vec![PathBuf::from("/nix/store/x-glibc/lib")],
            dirs_after: vec![PathBuf::from("/nix/store/y cuda/lib"), PathBuf::from("/z")],
        };
        let bytes = encode(&d);
        assert_eq!(decode(&bytes), Some(d.clone()));
        assert_eq!(decode(&bytes[..bytes.len() - 4]), None, "cut short");
        assert_eq!(decode(b"something else\nend\n"), None);
        let mut odd = bytes.clone();
        odd.insert(HEADER.len() + 8, b'x');
        assert_eq!(decode(&odd), None, "a damaged value");
        let empty = LinkerDefaults::default();
        assert_eq!(decode(&encode(&empty)), Some(empty));
    }
}
