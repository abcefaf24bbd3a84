//! Which fatbins a library keeps in its own data (`embedded` device sections: cuBLASLt's
//! `.cask_resource`, cuFFT's `.data`) the cut may move with the registered device code.
//!
//! Such a section holds containers and the library's other data between them, and the
//! library reaches both through pointers. The cut moves the whole section (containers
//! shrunk, the data between them copied byte for byte, each piece at an address congruent
//! to its old one modulo the section's alignment) only where every pointer into it can be
//! found and redirected, that is where:
//!
//! - the file is a shared library or PIE (`ET_DYN`): every pointer its data holds has an
//!   `R_*_RELATIVE` relocation, and there are no text relocations and no `RELR` table (whose
//!   packed words the cut does not rewrite);
//! - every container is the target of a relocation, and none points inside a container (a
//!   pointer into a pruned container would mean nothing);
//! - no relocation applies to a word inside the section, and no dynamic symbol is defined in
//!   it (another module could hold its address);
//! - no instruction names an address in it (`elf::code_refs`, x86-64 only).
//!
//! Anything else stays where it is, pruned in place, and the report says why and how many
//! bytes stay.

use std::collections::BTreeSet;

use object::elf;

use crate::elf::{c_str, code_refs, file_range, records, Layout, Rela, Sym, LE};
use crate::inputs::{DeviceSection, Scanned};

/// The embedded sections that may move (section indices), and why each other one stays
/// (its name and the reason).
#[derive(Debug, Default)]
pub(super) struct EmbeddedMoves {
    pub can_move: BTreeSet<usize>,
    pub stay: Vec<(String, String)>,
}

/// Decides, for each embedded device section of `scanned`, whether it may move.
pub(super) fn embedded_moves(data: &[u8], layout: &Layout, scanned: &Scanned) -> EmbeddedMoves {
    let mut out = EmbeddedMoves::default();
    let embedded: Vec<&DeviceSection> = scanned.sections.iter().filter(|d| d.embedded).collect();
    if embedded.is_empty() {
        return out;
    }
    if let Some(why) = file_refusal(data, layout) {
        out.stay = embedded
            .iter()
            .map(|d| (d.section.clone(), why.clone()))
            .collect();
        return out;
    }
    // The relocation checks first, then one decode of the code for every section left.
    let mut left: Vec<(usize, &DeviceSection, (u64, u64))> = Vec::new();
    // Why each section stays, by its place among the embedded ones (the report's order).
    let mut stay: Vec<(usize, String, String)> = Vec::new();
    for (i, d) in embedded.iter().enumerate() {
        match pointers_redirectable(data, layout, d) {
            Ok(range) => left.push((i, d, range)),
            Err(why) => stay.push((i, d.section.clone(), why)),
        }
    }
    let gots: Vec<u64> = [".got.plt", ".got"]
        .iter()
        .filter_map(|n| layout.section_by_name(n).map(|(_, s)| s.sh_addr.get(LE)))
        .collect();
    let ranges: Vec<(u64, u64)> = left.iter().map(|&(.., r)| r).collect();
    // (No range left: nothing is decoded.)
    let named = code_refs::first_references(data, layout, &gots, &ranges);
    for ((i, d, _), at) in left.into_iter().zip(named) {
        match at {
            Some(at) => stay.push((
                i,
                d.section.clone(),
                format!("the instruction at {at:#x} names an address in it"),
            )),
            None => {
                out.can_move.insert(d.section_index);
            }
        }
    }
    stay.sort_by_key(|s| s.0);
    out.stay = stay.into_iter().map(|(_, name, why)| (name, why)).collect();
    out
}

/// Why no embedded section of this file may move, if something about the whole file says so.
fn file_refusal(data: &[u8], layout: &Layout) -> Option<String> {
    if layout.file_type() != elf::ET_DYN {
        return Some("an executable's data holds addresses no relocation records".into());
    }
    if layout.machine() != elf::EM_X86_64 {
        return Some("fatpack checks which code names it only on x86-64".into());
    }
    if layout
        .sections
        .iter()
        .any(|s| s.sh_type.get(LE) == elf::SHT_RELR)
    {
        return Some("the file packs its relocations in a RELR table".into());
    }
    if has_text_relocations(data, layout) {
        return Some("the file has text relocations".into());
    }
    None
}

/// Whether the dynamic section asks for text relocations (`DT_TEXTREL`, `DF_TEXTREL`).
fn has_text_relocations(data: &[u8], layout: &Layout) -> bool {
    layout
        .sections
        .iter()
        .filter(|s| s.sh_type.get(LE) == elf::SHT_DYNAMIC)
        .filter_map(|s| file_range(data, s.sh_offset.get(LE), s.sh_size.get(LE)))
        .flat_map(records::<elf::Dyn64<LE>>)
        .any(|d| {
            let (tag, val) = (d.d_tag.get(LE), d.d_val.get(LE));
            tag == u64::from(elf::DT_TEXTREL)
                || (tag == u64::from(elf::DT_FLAGS) && val & u64::from(elf::DF_TEXTREL) != 0)
        })
}

/// Why section `d` must stay, as far as relocations and symbols tell, or its address range
/// if every pointer into it that they record can be redirected (code is checked apart).
fn pointers_redirectable(
    data: &[u8],
    layout: &Layout,
    d: &DeviceSection,
) -> Result<(u64, u64), String> {
    let s = layout
        .sections
        .get(d.section_index)
        .ok_or("its section header is missing")?;
    let (lo, size) = (s.sh_addr.get(LE), s.sh_size.get(LE));
    let hi = lo + size;
    let starts: BTreeSet<u64> = d.offsets().map(|o| lo + o).collect();
    let mut pointed = BTreeSet::new();
    for rel in relocations(data, layout) {
        let (at, addend) = (rel.r_offset.get(LE), rel.r_addend.get(LE) as u64);
        if (lo..hi).contains(&at) {
            return Err(format!("a relocation applies to a word in it, at {at:#x}"));
        }
        if !(lo..hi).contains(&addend) {
            continue;
        }
        if let Some(&(o, _)) = d.spans.iter().find(|&&(o, len)| {
            let start = lo + o;
            addend > start && addend < start + len
        }) {
            return Err(format!(
                "a pointer leads inside its container at {:#x}",
                lo + o
            ));
        }
        pointed.insert(addend);
    }
    if let Some(missed) = starts.iter().find(|a| !pointed.contains(a)) {
        return Err(format!(
            "no relocation points at its container at {missed:#x}, which the library finds \
             some other way"
        ));
    }
    if let Some(name) = dynamic_symbol_in(data, layout, d.section_index) {
        return Err(format!("it defines the exported symbol {name}"));
    }
    Ok((lo, hi))
}

/// Every `RELA` relocation of the file.
fn relocations<'a>(data: &'a [u8], layout: &'a Layout) -> impl Iterator<Item = &'a Rela> {
    layout
        .sections
        .iter()
        .filter(|s| {
            s.sh_type.get(LE) == elf::SHT_RELA
                && s.sh_flags.get(LE) & u64::from(elf::SHF_ALLOC) != 0
        })
        .filter_map(|s| file_range(data, s.sh_offset.get(LE), s.sh_size.get(LE)))
        .flat_map(records::<Rela>)
}

/// The name of a defined `.dynsym` symbol in section `shndx`, if any.
fn dynamic_symbol_in(data: &[u8], layout: &Layout, shndx: usize) -> Option<String> {
    let (_, dynsym) = layout
        .sections
        .iter()
        .enumerate()
        .find(|(_, s)| s.sh_type.get(LE) == elf::SHT_DYNSYM)?;
    let syms = file_range(data, dynsym.sh_offset.get(LE), dynsym.sh_size.get(LE))?;
    let strtab = layout.sections.get(dynsym.sh_link.get(LE) as usize)?;
    let names = file_range(data, strtab.sh_offset.get(LE), strtab.sh_size.get(LE))?;
    records::<Sym>(syms)
        .iter()
        .find(|s| usize::from(s.st_shndx.get(LE)) == shndx)
        .map(|s| {
            let name = c_str(names, s.st_name.get(LE) as usize).unwrap_or_default();
            String::from_utf8_lossy(name).into_owned()
        })
}
