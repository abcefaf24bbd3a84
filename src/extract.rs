//! `fatpack extract FILE -o DIR`: the device code of anything fatpack reads (objects,
//! archives, libraries, executables, fatbins, stores, packed outputs), as files NVIDIA's tools
//! take: one `.cubin` (SASS) or `.ptx` per entry, or with `--fatbin` one uncompressed
//! `.fatbin` per module (its entries with their original headers), which `cuobjdump` reads.
//! Packed outputs cannot be read by `cuobjdump` themselves: their code is in the store.
//!
//! Everything is decoded and checked (store digests, nvcc's compression) before anything is
//! written; files are written into a temp folder inside DIR and moved into place at the end.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use fatpack_format::arch::EntryId;
use fatpack_format::arch::EntryKind;
use fatpack_format::fatbin::{encode_container, EntryInput};

use crate::inputs::{self, FileKind, InputError};
use crate::packed;

#[derive(Debug, thiserror::Error)]
pub enum ExtractError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error(transparent)]
    Packed(#[from] packed::OutputError),
    #[error(transparent)]
    Store(#[from] crate::error::StoreAt),
    #[error("{origin}: {message}")]
    Entry { origin: String, message: String },
    #[error("{}: no device code{}", path.display(), if *.filtered { " of the archs asked for" } else { "" })]
    Nothing { path: PathBuf, filtered: bool },
    #[error(transparent)]
    Io(#[from] crate::error::IoError),
    #[error(transparent)]
    Commit(#[from] crate::commit::CommitError),
    #[error(transparent)]
    Split(Box<crate::packed::SplitReadError>),
}

/// One entry: its identity, its original fatbin header (empty when there is none, e.g. a
/// standalone cubin) and its raw payload.
struct Item {
    kind: EntryKind,
    arch: u32,
    variant: fatpack_format::arch::Variant,
    header: Vec<u8>,
    raw: Vec<u8>,
}

impl Item {
    fn target(&self) -> Option<EntryId> {
        EntryId::code(self.kind, self.arch, self.variant)
    }

    fn name(&self) -> String {
        fatpack_format::arch::arch_name(self.kind, self.arch, self.variant)
    }
}

/// A module: its name and entries.
type Module = (String, Vec<Item>);

/// A module's name as a file name: path separators and shell-unfriendly bytes become `_`.
fn file_stem(origin: &str) -> String {
    origin
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '+') {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_start_matches('.')
        .to_string()
}

/// Every module of a store with its entries, each read by `read`.
fn store_items(
    store: &cubin_store::Store<'_>,
    read: impl Fn(&cubin_store::EntryView<'_>) -> Result<Vec<u8>, ExtractError>,
) -> Result<Vec<(String, Vec<Item>)>, ExtractError> {
    let mut out = Vec::new();
    for m in store.modules() {
        let mut items = Vec::new();
        for e in m.entries() {
            let meta = e.meta();
            items.push(Item {
                kind: meta.id.kind,
                arch: meta.id.arch,
                variant: meta.id.variant,
                header: meta.attrs.clone(),
                raw: read(&e)?,
            });
        }
        out.push((m.name().to_string(), items));
    }
    Ok(out)
}

/// Every module of `path` with its entries, decoded.
/// Every module of `path` and its entries, decoded; and how many entries were left out
/// because they are of a kind fatpack does not run and do not decode (cuFFT's obfuscated
/// NVVM IR, which cuobjdump cannot read either).
fn read_modules(path: &Path) -> Result<(Vec<Module>, usize), ExtractError> {
    let map = inputs::read_file(path)?;
    let data: &[u8] = &map;
    let kind = inputs::sniff(data);
    let store_err = |source| ExtractError::from(crate::error::store_at(path)(source));
    if kind == FileKind::Store {
        let store = cubin_store::Store::parse(data).map_err(store_err)?;
        return Ok((
            store_items(&store, |e| store.read_entry(e).map_err(store_err))?,
            0,
        ));
    }
    if let Some(p) = packed::locate(path, data)? {
        let bytes = p.store.bytes();
        if fatpack_format::split::is_manifest(bytes) {
            // A split binary: each entry from its pack next to it, checked against the index.
            // Split's errors name the file already.
            let split_err = |e: crate::packed::SplitReadError| ExtractError::Split(Box::new(e));
            let c = crate::packed::SplitContents::open(path, bytes, &p.recorded_digest)
                .map_err(split_err)?;
            let items = store_items(&c.store, |e| c.read_entry(e).map_err(split_err))?;
            return Ok((items, 0));
        }
        // Only the binary's own store: a side file from another build is refused, never
        // extracted as this binary's code.
        let store = p.own_store(path)?;
        return Ok((
            store_items(&store, |e| store.read_entry(e).map_err(store_err))?,
            0,
        ));
    }
    let scanned = inputs::scan_bytes(path, data)?;
    let mut out = Vec::new();
    let mut skipped = 0;
    if let (Some(info), Some(bytes)) = (&scanned.cubin, &scanned.cubin_bytes) {
        out.push((
            path.display().to_string(),
            vec![Item {
                kind: EntryKind::Sass,
                arch: info.arch.number,
                variant: info.arch.variant,
                header: Vec::new(),
                raw: bytes.clone(),
            }],
        ));
    }
    for sec in &scanned.sections {
        for (index, fb) in sec.containers.iter().enumerate() {
            let mut items = Vec::new();
            for e in &fb.entries {
                let raw = match e.payload() {
                    Ok(raw) => raw,
                    Err(_) if matches!(e.kind(), EntryKind::Other(_)) => {
                        skipped += 1;
                        continue;
                    }
                    Err(err) => {
                        return Err(ExtractError::Entry {
                            origin: format!("{}#{index}", sec.origin),
                            message: err.to_string(),
                        })
                    }
                };
                items.push(Item {
                    kind: e.kind(),
                    arch: e.header.arch_number,
                    variant: e.header.variant(),
                    header: crate::store::entry_meta(e).attrs,
                    raw: raw.into_owned(),
                });
            }
            out.push((format!("{}#{index}", sec.origin), items));
        }
    }
    Ok((out, skipped))
}

/// What was written, for the report.
#[derive(Debug, Default)]
pub struct Extracted {
    pub files: Vec<PathBuf>,
    /// Entries not written: of kinds fatpack does not run, and not decodable.
    pub undecodable: usize,
}

/// Extracts the entries of `input` whose target is in `only` (all when `None`) into `dir`.
pub fn extract(
    input: &Path,
    dir: &Path,
    only: Option<&BTreeSet<EntryId>>,
    fatbins: bool,
) -> Result<Extracted, ExtractError> {
    let io_at = |p: &Path| {
        let p = p.to_path_buf();
        move |source| ExtractError::Io(crate::error::IoError { path: p, source })
    };
    let mut outs = crate::commit::Outputs::new(&[input]).verbatim();
    let (modules, undecodable) = read_modules(input)?;
    // Everything to write, decided (and every fatbin encoded) before a file is touched.
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut seen = BTreeSet::new();
    for (origin, items) in &modules {
        let chosen: Vec<&Item> = items
            .iter()
            .filter(|i| only.is_none_or(|o| i.target().is_some_and(|t| o.contains(&t))))
            .collect();
        if chosen.is_empty() {
            continue;
        }
        let stem = file_stem(origin);
        // Two origins can map to one stem; numbering keeps every file.
        let mut stem_unique = stem.clone();
        let mut n = 1;
        while !seen.insert(stem_unique.clone()) {
            stem_unique = format!("{stem}~{n}");
            n += 1;
        }
        if fatbins {
            let inputs: Vec<EntryInput<'_>> = chosen
                .iter()
                .map(|i| EntryInput {
                    candidate: EntryId::new(i.kind, i.arch, i.variant),
                    attrs: &i.header,
                    payload: &i.raw,
                })
                .collect();
            let bytes = encode_container(&inputs).map_err(|e| ExtractError::Entry {
                origin: origin.clone(),
                message: e.to_string(),
            })?;
            files.push((format!("{stem_unique}.fatbin"), bytes));
        } else {
            for i in chosen {
                let (ext, bytes) = match i.kind {
                    // PTX payloads are NUL-padded text; the tools want the text.
                    EntryKind::Ptx => {
                        let end = i.raw.iter().position(|&b| b == 0).unwrap_or(i.raw.len());
                        ("ptx", i.raw[..end].to_vec())
                    }
                    EntryKind::Sass => ("cubin", i.raw.clone()),
                    EntryKind::Other(_) => ("bin", i.raw.clone()),
                };
                files.push((format!("{stem_unique}.{}.{ext}", i.name()), bytes));
            }
        }
    }
    if files.is_empty() {
        return Err(ExtractError::Nothing {
            path: input.to_path_buf(),
            filtered: only.is_some(),
        });
    }
    // Two entries can still name one file (a damaged fatbin: two entries of one kind and
    // arch); each keeps its own.
    let mut taken = BTreeSet::new();
    for (name, _) in &mut files {
        let mut n = 1;
        let base = name.clone();
        while !taken.insert(name.clone()) {
            *name = format!("{n}~{base}");
            n += 1;
        }
    }
    outs.folder(dir)?;
    let mut set = Vec::with_capacity(files.len());
    for (name, bytes) in &files {
        let dest = dir.join(name);
        let mut t = outs.file(&dest)?;
        std::io::Write::write_all(t.named(), bytes).map_err(io_at(&dest))?;
        set.push(t);
    }
    let out = Extracted {
        undecodable,
        files: set.iter().map(|t| t.dest().to_path_buf()).collect(),
    };
    outs.commit(set)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn stems_are_file_names() {
        assert_eq!(super::file_stem("lib/a.a(k.o)#0"), "lib_a.a_k.o__0");
        assert_eq!(super::file_stem("../x.o#1"), "_x.o_1");
    }
}
