//! What the real linker writes about files names the user's files, as plain ld would: its
//! messages, `--trace` and `-Map` output and `--dependency-file` name fatpack's temp copies
//! (`/tmp/fatpack-ld-*/0002-other.o`), its temp output and its runtime. This maps them back:
//! each rewritten copy to the input it stands for, the temp output to the real one, and the
//! runtime's own complaints (a link without cudart) to one line that says what is missing.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// fatpack's files in a packed link and the user's names for them.
pub(super) struct UserNames {
    /// (what the real linker was given, what the user gave), longest first.
    pairs: Vec<(Vec<u8>, Vec<u8>)>,
    /// fatpack's private folder: files in it that have no user name (the glue object, the
    /// runtime archive) are fatpack's, not the user's.
    work: Vec<u8>,
    runtime: Vec<u8>,
}

fn bytes(p: &Path) -> Vec<u8> {
    p.as_os_str().as_bytes().to_vec()
}

/// Replaces every occurrence of `from` in `hay` by `to`.
fn replace(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    if from.is_empty() || hay.len() < from.len() {
        return hay.to_vec();
    }
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

/// ld's second line of a message about the same function: `(.text.f+0x22): ...`, maybe
/// after the linker's name (`/usr/bin/ld: (.text...`).
fn is_continuation(line: &[u8]) -> bool {
    line.starts_with(b"(") || line.windows(3).take(200).any(|w| w == b": (")
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

impl UserNames {
    /// `copies`: (rewritten copy, original input); `tmp_out`/`output`: the temp and the real
    /// output; `work`: fatpack's temp folder; `runtime`: the runtime archive given to ld.
    pub(super) fn new(
        copies: &[(PathBuf, PathBuf)],
        tmp_out: &Path,
        output: &Path,
        work: &Path,
        runtime: &Path,
    ) -> UserNames {
        let mut pairs: Vec<(Vec<u8>, Vec<u8>)> = copies
            .iter()
            .map(|(copy, orig)| (bytes(copy), bytes(orig)))
            .collect();
        // ld prints the output as given, or made absolute (in a dependency file).
        pairs.push((bytes(tmp_out), bytes(output)));
        // fatpack's own files get names that say so, not paths that are gone after the link.
        for f in ["libfatpack_rt.a", "fatpack-glue.o"] {
            pairs.push((bytes(&work.join(f)), format!("<fatpack>/{f}").into_bytes()));
        }
        if let Ok(cwd) = std::env::current_dir() {
            if tmp_out.is_relative() {
                pairs.push((bytes(&cwd.join(tmp_out)), bytes(&cwd.join(output))));
            }
        }
        pairs.sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
        UserNames {
            pairs,
            work: bytes(work),
            runtime: bytes(runtime),
        }
    }

    /// `text` with every fatpack file named as the user knows it.
    pub(super) fn map(&self, text: &[u8]) -> Vec<u8> {
        let mut t = text.to_vec();
        for (from, to) in &self.pairs {
            if contains(&t, from) {
                t = replace(&t, from, to);
            }
        }
        t
    }

    /// The real linker's messages, mapped. Undefined references from inside the runtime
    /// archive mean the CUDA runtime is not linked: they become one line saying so.
    pub(super) fn messages(&self, text: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(text.len());
        let mut missing_cudart = false;
        let mut in_runtime = false;
        for line in text.split_inclusive(|&b| b == b'\n') {
            if contains(line, &self.runtime) {
                in_runtime = true;
            } else if !is_continuation(line) {
                in_runtime = false;
            }
            if in_runtime
                && (contains(line, b"undefined reference to") || contains(line, b"in function"))
            {
                missing_cudart |= contains(line, b"undefined reference to");
                continue;
            }
            out.extend(self.map(line));
        }
        if missing_cudart {
            out.extend_from_slice(
                b"fatpack ld: error: the CUDA runtime is not in this link: a packed output calls \
                  cudart's registration functions (add -lcudart_static or -lcudart; nvcc adds one \
                  itself)\n",
            );
        }
        out
    }

    /// A dependency file (`--dependency-file`), rewritten: the real output as the target,
    /// the user's inputs as prerequisites, fatpack's own temp files left out.
    pub(super) fn depfile(&self, text: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(text.len());
        for line in text.split_inclusive(|&b| b == b'\n') {
            let mapped = self.map(line);
            // The glue object and the runtime are fatpack's: no prerequisite of the user's.
            if contains(&mapped, b"<fatpack>/") || contains(&mapped, &self.work) {
                continue;
            }
            out.extend(mapped);
        }
        out
    }
}

/// Files the real linker writes about the link that name files: `--dependency-file` and
/// `-Map` (each `=FILE` or `FILE`, one or two dashes), as given on the expanded command line.
pub(super) fn reports(args: &[std::ffi::OsString]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut deps, mut maps) = (Vec::new(), Vec::new());
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_bytes();
        if a == b"--" {
            break;
        }
        let a = a.strip_prefix(b"-").unwrap_or(a);
        let a = a.strip_prefix(b"-").unwrap_or(a);
        for (name, list) in [
            (&b"dependency-file"[..], &mut deps),
            (&b"Map"[..], &mut maps),
        ] {
            if a == name {
                if let Some(v) = args.get(i + 1) {
                    list.push(PathBuf::from(v));
                    i += 1;
                }
            } else if let Some(v) = a.strip_prefix(name).and_then(|r| r.strip_prefix(b"=")) {
                list.push(PathBuf::from(OsStr::from_bytes(v)));
            }
        }
        i += 1;
    }
    (deps, maps)
}
