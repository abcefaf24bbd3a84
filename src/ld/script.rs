//! Linker scripts as far as ld's file lists go: `INPUT`, `GROUP`, `AS_NEEDED`, `SEARCH_DIR`
//! in `-T` scripts and implicit scripts such as `libc.so`.

use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::ops::Range;
use std::os::unix::ffi::OsStringExt;
use std::path::Path;
use std::sync::Arc;

use super::defaults::find;
use super::line::{ScriptEntry, ScriptInfo};

/// Linker scripts larger than this are not read for their file lists.
pub(super) const MAX_SCRIPT_BYTES: u64 = 1 << 20;

/// Splits linker-script text into words and the punctuation that matters for file lists,
/// each with its bytes' range in `text` (a quoted word's quotes included).
pub(super) fn script_tokens(text: &[u8]) -> Vec<(Vec<u8>, Range<usize>)> {
    let mut toks = Vec::new();
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        if text[i..].starts_with(b"/*") {
            i = find(&text[i + 2..], b"*/").map_or(text.len(), |e| i + 2 + e + 2);
        } else if c.is_ascii_whitespace() || c == b',' || c == b';' {
            i += 1;
        } else if matches!(c, b'(' | b')' | b'{' | b'}') {
            toks.push((vec![c], i..i + 1));
            i += 1;
        } else if c == b'"' {
            let end = text[i + 1..]
                .iter()
                .position(|&b| b == b'"')
                .map_or(text.len(), |e| i + 1 + e);
            toks.push((text[i + 1..end].to_vec(), i..(end + 1).min(text.len())));
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
            toks.push((text[start..i].to_vec(), start..i));
        }
    }
    toks
}

/// Reads the parts of a linker script that name files: `INPUT(...)`, `GROUP(...)` (with
/// `AS_NEEDED(...)` inside), `SEARCH_DIR(...)`, `INCLUDE`, and whether it uses `INSERT`.
pub fn parse_script(text: &[u8]) -> ScriptInfo {
    let (toks, spans): (Vec<Vec<u8>>, Vec<Range<usize>>) = script_tokens(text).into_iter().unzip();
    let mut info = ScriptInfo {
        text: Arc::from(text),
        ..ScriptInfo::default()
    };
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
                                span: spans[i].clone(),
                                resolved: None,
                                probe: None,
                                script: None,
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

pub(super) fn read_script(path: &Path) -> Option<ScriptInfo> {
    let f = File::open(path).ok()?;
    let mut text = Vec::new();
    f.take(MAX_SCRIPT_BYTES).read_to_end(&mut text).ok()?;
    Some(parse_script(&text))
}
