//! The glue object added to every packed link: the slot where the store's digest is patched
//! in after the link, under the hidden symbol the runtime reads.

use object::write::{Object, Symbol, SymbolSection};
use object::{
    Architecture, BinaryFormat, Endianness, SectionFlags, SectionKind, SymbolFlags, SymbolKind,
    SymbolScope,
};

use super::abi::{
    segment_note, StoreSlot, RUNTIME_FEATURES, SEGMENT_NOTE_ALIGN, SEGMENT_NOTE_SECTION,
};
pub use super::abi::{DIGEST_SECTION, DIGEST_SYMBOL};

#[derive(Debug, thiserror::Error)]
#[error("cannot write the glue object: {0}")]
pub struct GlueError(String);

/// The host architecture of a link, from its ELF inputs' `e_machine`.
pub fn architecture(e_machine: u16) -> Option<Architecture> {
    match e_machine {
        object::elf::EM_X86_64 => Some(Architecture::X86_64),
        object::elf::EM_AARCH64 => Some(Architecture::Aarch64),
        object::elf::EM_PPC64 => Some(Architecture::PowerPc64),
        _ => None,
    }
}

/// A relocatable object defining `__fatpack_store_digest`: the [`StoreSlot`] placeholder in an
/// allocated, read-only section of its own, so it can be found by name and patched in the
/// output; and the allocated note whose program header becomes the store's `PT_LOAD`.
pub fn glue_object(arch: Architecture) -> Result<Vec<u8>, GlueError> {
    let mut obj = Object::new(BinaryFormat::Elf, arch, Endianness::Little);
    // Without it GNU ld would make the whole output's stack executable.
    obj.add_section(Vec::new(), b".note.GNU-stack".to_vec(), SectionKind::Note);
    let note = obj.add_section(
        Vec::new(),
        SEGMENT_NOTE_SECTION.as_bytes().to_vec(),
        SectionKind::Note,
    );
    obj.append_section_data(note, &segment_note(), SEGMENT_NOTE_ALIGN);
    obj.section_mut(note).flags = SectionFlags::Elf {
        sh_flags: u64::from(object::elf::SHF_ALLOC),
    };
    let sec = obj.add_section(
        Vec::new(),
        DIGEST_SECTION.as_bytes().to_vec(),
        SectionKind::ReadOnlyData,
    );
    // The placeholder already says what this runtime reads; fatpack ld patches the rest.
    let placeholder = StoreSlot {
        features: RUNTIME_FEATURES,
        ..StoreSlot::default()
    };
    let off = obj.append_section_data(sec, &placeholder.to_bytes(), 16);
    obj.add_symbol(Symbol {
        name: DIGEST_SYMBOL.as_bytes().to_vec(),
        value: off,
        size: StoreSlot::LEN as u64,
        kind: SymbolKind::Data,
        // Hidden: each packed library reads its own slot, never another's.
        scope: SymbolScope::Linkage,
        weak: false,
        section: SymbolSection::Section(sec),
        flags: SymbolFlags::None,
    });
    obj.write().map_err(|e| GlueError(e.to_string()))
}
