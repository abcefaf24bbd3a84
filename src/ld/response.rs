//! Response files (`@file`), expanded as libiberty does, and written back when a line grows
//! too long for `execve`.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use super::line::*;

pub(super) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// Splits response-file text into arguments exactly as libiberty's `buildargv` does:
/// whitespace separates, `'...'` and `"..."` group, a backslash takes the next byte as is
/// (inside quotes too). Text that is empty or all whitespace gives no argument; text after a
/// NUL byte is not seen (libiberty works on a C string).
pub fn split_response_text(text: &[u8]) -> Vec<OsString> {
    let text = match text.iter().position(|&b| b == 0) {
        Some(n) => &text[..n],
        None => text,
    };
    let mut out = Vec::new();
    if text.iter().all(|&b| is_space(b)) {
        return out;
    }
    let mut i = 0;
    loop {
        while i < text.len() && is_space(text[i]) {
            i += 1;
        }
        let (mut sq, mut dq, mut bs) = (false, false, false);
        let mut arg = Vec::new();
        while i < text.len() {
            let c = text[i];
            if is_space(c) && !sq && !dq && !bs {
                break;
            }
            if bs {
                bs = false;
                arg.push(c);
            } else if c == b'\\' {
                bs = true;
            } else if sq {
                if c == b'\'' {
                    sq = false;
                } else {
                    arg.push(c);
                }
            } else if dq {
                if c == b'"' {
                    dq = false;
                } else {
                    arg.push(c);
                }
            } else if c == b'\'' {
                sq = true;
            } else if c == b'"' {
                dq = true;
            } else {
                arg.push(c);
            }
            i += 1;
        }
        out.push(OsString::from_vec(arg));
        while i < text.len() && is_space(text[i]) {
            i += 1;
        }
        if i >= text.len() {
            break;
        }
    }
    out
}

/// One argument quoted for a response file, so that [`split_response_text`] gives it back.
pub fn quote_response_arg(arg: &OsStr) -> Vec<u8> {
    let b = arg.as_bytes();
    if b.is_empty() {
        // libiberty's writeargv writes nothing here, losing the argument; quotes keep it.
        return b"''".to_vec();
    }
    let mut out = Vec::with_capacity(b.len() + 2);
    for &c in b {
        if is_space(c) || matches!(c, b'\\' | b'\'' | b'"') {
            out.push(b'\\');
        }
        out.push(c);
    }
    out
}

/// Writes `args` to `path` as a response file, one per line.
pub fn write_response_file(path: &Path, args: &[OsString]) -> io::Result<()> {
    let mut text = Vec::new();
    for a in args {
        text.extend_from_slice(&quote_response_arg(a));
        text.push(b'\n');
    }
    fs::write(path, text)
}

/// If `args` add up to more than `limit` bytes, writes them to `<dir>/<name>` and returns the
/// single argument `@<dir>/<name>`; else returns them as they are. Linux refuses an `execve`
/// whose arguments pass about 2 MiB, or any one argument over 128 KiB.
pub fn fold_into_response_file(
    args: Vec<OsString>,
    dir: &Path,
    name: &str,
    limit: usize,
) -> io::Result<Vec<OsString>> {
    let total: usize = args.iter().map(|a| a.len() + 1).sum();
    if total <= limit {
        return Ok(args);
    }
    let path = dir.join(name);
    write_response_file(&path, &args)?;
    let mut at = OsString::from("@");
    at.push(path.as_os_str());
    Ok(vec![at])
}

pub(super) struct Expander {
    pub(super) slots: Vec<Slot>,
    pub(super) files: Vec<ResponseFile>,
    pub(super) chain: Vec<PathBuf>,
    pub(super) count: usize,
}

impl Expander {
    /// libiberty's `expandargv`, recursively so that a loop can be named: an `@file` that
    /// cannot be read stays a literal argument; a directory is an error.
    pub(super) fn expand(
        &mut self,
        arg: &OsStr,
        top: usize,
        from_file: bool,
    ) -> Result<(), ArgsError> {
        let b = arg.as_bytes();
        if b.first() != Some(&b'@') {
            self.slots.push(Slot {
                value: arg.to_owned(),
                top,
                from_file,
            });
            return Ok(());
        }
        let path = PathBuf::from(OsStr::from_bytes(&b[1..]));
        let literal = |s: &mut Self| {
            s.slots.push(Slot {
                value: arg.to_owned(),
                top,
                from_file,
            })
        };
        let meta = match fs::metadata(&path) {
            Ok(m) => m,
            Err(_) => {
                literal(self);
                return Ok(());
            }
        };
        if meta.is_dir() {
            return Err(ArgsError::ResponseFileIsDirectory { path });
        }
        // libiberty reads as many bytes as seeking to the end reports: a regular file's
        // size, 0 for a device such as /dev/zero. Never more (a growing or endless file
        // cannot make us read without bound), and a FIFO or device is not even opened (it
        // could block): its content is empty, as ld sees it.
        let text = if meta.is_file() {
            let read = fs::File::open(&path).and_then(|f| {
                let mut t = Vec::new();
                io::Read::read_to_end(&mut io::Read::take(f, meta.len()), &mut t).map(|_| t)
            });
            match read {
                Ok(t) => t,
                Err(_) => {
                    literal(self);
                    return Ok(());
                }
            }
        } else {
            Vec::new()
        };
        self.count += 1;
        if self.count >= MAX_RESPONSE_FILES {
            return Err(ArgsError::TooManyResponseFiles {
                limit: MAX_RESPONSE_FILES,
            });
        }
        let canon = fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if self.chain.contains(&canon) {
            let chain = self
                .chain
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" -> ");
            return Err(ArgsError::ResponseFileLoop { path, chain });
        }
        self.files.push(ResponseFile {
            arg_index: top,
            path,
            depth: self.chain.len(),
        });
        self.chain.push(canon);
        for a in split_response_text(&text) {
            self.expand(&a, top, true)?;
        }
        self.chain.pop();
        Ok(())
    }
}
