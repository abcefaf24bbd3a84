//! The files a link reads, in the order ld reads them: each input of the line and, for an
//! input that is an implicit linker script (`libc.so`, a `libdev.so` holding
//! `INPUT(libdevreal.a)`), the files its `INPUT` and `GROUP` entries name, depth first.

use std::fs::Metadata;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use super::line::{Input, InputFileKind, LinkLine, ScriptEntry, ScriptInfo};
use super::target::Probe;

/// A file the link reads.
pub struct LinkFile<'a> {
    /// The line's input it is, or whose script names it.
    pub input: &'a Input,
    /// Its entry's place in that input's script, and in the scripts inside that one: empty
    /// for the input itself.
    pub within: Vec<usize>,
    pub path: &'a Path,
    pub kind: Option<InputFileKind>,
    /// What the search saw of it.
    pub probe: Option<&'a Probe>,
}

impl LinkFile<'_> {
    /// Its metadata as the search saw it (a regular file only).
    pub fn meta(&self) -> Option<&Metadata> {
        self.probe?.meta.as_ref()
    }

    /// The whole file, where the search read all of it.
    pub fn whole(&self) -> Option<&Arc<[u8]>> {
        self.probe?.whole.as_ref()
    }

    /// Its ELF type (`e_type`), where it is an ELF file.
    pub fn elf_type(&self) -> Option<u16> {
        self.probe?.elf_type()
    }

    /// Whether it is a file whose device code a link takes in: an object or an archive
    /// (not a `-b binary` input, not a shared library, whose device code is its own: told
    /// from the header the search read, as libc.so.6 and libstdc++.so are on every line).
    pub fn may_hold_linked_device_code(&self) -> bool {
        !self.input.binary
            && matches!(
                self.kind,
                Some(InputFileKind::Elf | InputFileKind::Archive | InputFileKind::ThinArchive)
            )
            && self.elf_type() != Some(object::elf::ET_DYN)
    }
}

impl LinkLine {
    /// Every file the link reads (found or named by a script), in ld's order; inputs not
    /// found are left out.
    pub fn files(&self) -> Vec<LinkFile<'_>> {
        let mut files = Vec::with_capacity(self.inputs.len());
        for input in &self.inputs {
            if let Some(path) = &input.resolved {
                files.push(LinkFile {
                    input,
                    within: Vec::new(),
                    path,
                    kind: input.file_kind,
                    probe: input.probe.as_ref(),
                });
            }
            if let Some(script) = &input.script {
                push_entries(input, script, &mut Vec::new(), &mut files);
            }
        }
        files
    }
}

fn push_entries<'a>(
    input: &'a Input,
    script: &'a ScriptInfo,
    within: &mut Vec<usize>,
    files: &mut Vec<LinkFile<'a>>,
) {
    for (i, e) in script.entries.iter().enumerate() {
        within.push(i);
        if let (Some(path), Some(probe)) = (&e.resolved, &e.probe) {
            files.push(LinkFile {
                input,
                within: within.clone(),
                path,
                kind: Some(probe.kind),
                probe: Some(probe),
            });
        }
        if let Some(inner) = &e.script {
            push_entries(input, inner, within, files);
        }
        within.pop();
    }
}

/// A script's entry cannot be named in a copy of the script.
#[derive(Debug, thiserror::Error)]
#[error("{} cannot be named in a linker script (it holds a double quote)", path.display())]
pub struct UnquotablePath {
    pub path: std::path::PathBuf,
}

/// The text of a copy of `script` that names `replace(i)` for each entry `i` it gives a file
/// for, and for each other entry given by path the file ld found for it: the copy is read
/// from another folder, where ld would look for a relative name anew. `-l` entries stay as
/// written (the search path is the same wherever the script is).
pub fn rewrite_script(
    script: &ScriptInfo,
    mut replace: impl FnMut(usize, &ScriptEntry) -> Option<std::path::PathBuf>,
) -> Result<Vec<u8>, UnquotablePath> {
    let text = &script.text[..];
    let mut out = Vec::with_capacity(text.len() + 256);
    let mut at = 0;
    for (i, e) in script.entries.iter().enumerate() {
        let name = match replace(i, e) {
            Some(p) => p,
            None if e.library => continue,
            None => match &e.resolved {
                Some(p) => p.clone(),
                None => continue,
            },
        };
        let bytes = name.as_os_str().as_bytes();
        if bytes.contains(&b'"') {
            return Err(UnquotablePath { path: name });
        }
        out.extend_from_slice(&text[at..e.span.start]);
        out.push(b'"');
        out.extend_from_slice(bytes);
        out.push(b'"');
        at = e.span.end;
    }
    out.extend_from_slice(&text[at..]);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ld::parse_script;
    use std::path::PathBuf;

    #[test]
    fn a_copy_names_the_replacement_and_what_ld_found() {
        let text = b"/* GNU ld script */\nOUTPUT_FORMAT(elf64-x86-64)\nGROUP ( libdevreal.a \
                     \"sub/other.o\" -lm AS_NEEDED ( missing.so ) )\n";
        let mut info = parse_script(text);
        info.entries[1].resolved = Some(PathBuf::from("/lib/sub/other.o"));
        info.entries[2].resolved = Some(PathBuf::from("/usr/lib/libm.so"));
        let copy = rewrite_script(&info, |i, _| {
            (i == 0).then(|| PathBuf::from("/tmp/w/0000-libdevreal.a"))
        })
        .unwrap();
        assert_eq!(
            String::from_utf8(copy).unwrap(),
            "/* GNU ld script */\nOUTPUT_FORMAT(elf64-x86-64)\nGROUP ( \"/tmp/w/0000-libdevreal.a\" \
             \"/lib/sub/other.o\" -lm AS_NEEDED ( missing.so ) )\n"
        );
        // The copy reads back as the same entries, in the same commands.
        let again = parse_script(&rewrite_script(&info, |_, _| None).unwrap());
        let shape = |i: &ScriptInfo| {
            i.entries
                .iter()
                .map(|e| (e.library, e.as_needed, e.in_group))
                .collect::<Vec<_>>()
        };
        assert_eq!(shape(&again), shape(&info));
        let bad = rewrite_script(&info, |_, _| Some(PathBuf::from("/tmp/a\"b")));
        assert!(bad.unwrap_err().to_string().contains("double quote"));
    }
}
