//! The copy route where a rewritten input is named inside an implicit linker script
//! (`-ldev` finding `libdev.so`, which is `INPUT(libdevreal.a)`): the line cannot name the
//! copy itself, so the script is replaced by a copy of it that names the copy (and a script
//! naming that script by a copy of its own, and so on up to the line's input).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::LinkError;
use crate::ld::{InputId, LinkLine, ScriptInfo};

/// A rewritten input: the line's input it is or whose script names it, where in that
/// script ([`super::plan::Planned::within`]), its copy and the file it copies.
pub(super) struct Copied<'a> {
    pub(super) id: InputId,
    pub(super) within: &'a [usize],
    pub(super) copy: PathBuf,
    pub(super) original: &'a Path,
}

/// What the real link is given instead of the user's files.
#[derive(Default)]
pub(super) struct Replacements {
    /// Input id -> the file the line names instead: a rewritten input or a script's copy.
    pub(super) replace: BTreeMap<InputId, PathBuf>,
    /// Every file written for the link, with the user's file it stands for (what ld says
    /// about one names the other).
    pub(super) copies: Vec<(PathBuf, PathBuf)>,
}

/// The line's replacements for `copied`; `write(script, text)` puts a script's copy where
/// the link reads it and says where.
pub(super) fn replacements<'a>(
    line: &LinkLine,
    copied: impl IntoIterator<Item = Copied<'a>>,
    mut write: impl FnMut(&Path, Vec<u8>) -> Result<PathBuf, LinkError>,
) -> Result<Replacements, LinkError> {
    let mut r = Replacements::default();
    let mut in_scripts: BTreeMap<InputId, BTreeMap<Vec<usize>, PathBuf>> = BTreeMap::new();
    for c in copied {
        r.copies.push((c.copy.clone(), c.original.to_path_buf()));
        if c.within.is_empty() {
            r.replace.insert(c.id, c.copy);
        } else {
            in_scripts
                .entry(c.id)
                .or_default()
                .insert(c.within.to_vec(), c.copy);
        }
    }
    for (id, copies) in in_scripts {
        let input = line.input(id);
        let (Some(script), Some(path)) = (
            input.and_then(|i| i.script.as_ref()),
            input.and_then(|i| i.resolved.as_deref()),
        ) else {
            unreachable!("the scan plans a script's entry only for an input that is a script")
        };
        let mut at = Vec::new();
        if let Some(copy) = copy_script(script, path, &mut at, &copies, &mut write, &mut r)? {
            r.replace.insert(id, copy);
        }
    }
    Ok(r)
}

/// A copy of the script at `path` (`at`: its place under the line's input) naming the
/// copies of its entries and of the scripts inside it, if any of them has one.
fn copy_script(
    script: &ScriptInfo,
    path: &Path,
    at: &mut Vec<usize>,
    copies: &BTreeMap<Vec<usize>, PathBuf>,
    write: &mut impl FnMut(&Path, Vec<u8>) -> Result<PathBuf, LinkError>,
    r: &mut Replacements,
) -> Result<Option<PathBuf>, LinkError> {
    let mut named = BTreeMap::new();
    for (i, e) in script.entries.iter().enumerate() {
        at.push(i);
        if let Some(copy) = copies.get(at.as_slice()) {
            named.insert(i, copy.clone());
        } else if let (Some(inner), Some(inner_path)) = (&e.script, &e.resolved) {
            if let Some(copy) = copy_script(inner, inner_path, at, copies, write, r)? {
                named.insert(i, copy);
            }
        }
        at.pop();
    }
    if named.is_empty() {
        return Ok(None);
    }
    let text =
        crate::ld::rewrite_script(script, |i, _| named.get(&i).cloned()).map_err(|source| {
            LinkError::ScriptCopy {
                script: path.to_path_buf(),
                source,
            }
        })?;
    let copy = write(path, text)?;
    r.copies.push((copy.clone(), path.to_path_buf()));
    Ok(Some(copy))
}
