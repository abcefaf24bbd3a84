//! Reading a device ELF (cubin): its arch and its kernel names.

use object::elf;
use object::read::elf::{FileHeader, SectionHeader, Sym};
use object::LittleEndian as LE;

use crate::arch::{Arch, Variant};

pub use fatpack_format::elf::EM_CUDA;
/// `st_other` bit nvcc sets on `__global__` functions.
const STO_CUDA_ENTRY: u8 = 0x10;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CubinError {
    #[error("not a 64-bit little-endian ELF")]
    NotElf64,
    #[error("ELF machine {0} is not EM_CUDA (190)")]
    NotCuda(u16),
    #[error("malformed cubin: {0}")]
    Malformed(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CubinInfo {
    pub arch: Arch,
    /// Relocatable (`-rdc=true` before device link) rather than linked.
    pub relocatable: bool,
    /// Mangled names of `__global__` functions, in symbol-table order.
    pub kernels: Vec<String>,
}

pub fn is_cubin(data: &[u8]) -> bool {
    crate::elf::Ident::read(data).is_some_and(|i| !i.big_endian && i.machine == EM_CUDA)
}

pub fn read(data: &[u8]) -> Result<CubinInfo, CubinError> {
    let hdr = elf::FileHeader64::<LE>::parse(data).map_err(|_| CubinError::NotElf64)?;
    let e = LE;
    let machine = hdr.e_machine(e);
    if machine != EM_CUDA {
        return Err(CubinError::NotCuda(machine));
    }
    let number = fatpack_format::elf::cubin_sm(data)
        .ok_or_else(|| CubinError::Malformed("unreadable ELF header".into()))?;
    let malformed = |err: object::Error| CubinError::Malformed(err.to_string());
    let sections = hdr.sections(e, data).map_err(malformed)?;
    let mut variant = Variant::Plain;
    // ptxas records its command line in .note.nv.tkinfo; that is where `-arch sm_90a`
    // survives (the ELF flags are the same for sm_90 and sm_90a).
    if let Some((_, sec)) = sections
        .iter()
        .enumerate()
        .find(|(_, s)| sections.section_name(e, s).ok() == Some(b".note.nv.tkinfo".as_slice()))
    {
        if let Ok(bytes) = sec.data(e, data) {
            variant = variant_from_tool_args(bytes, number).unwrap_or(Variant::Plain);
        }
    }
    let symbols = sections
        .symbols(e, data, elf::SHT_SYMTAB)
        .map_err(malformed)?;
    let mut kernels = Vec::new();
    for sym in symbols.iter() {
        if sym.st_type() == elf::STT_FUNC && sym.st_other() & STO_CUDA_ENTRY != 0 {
            if let Ok(name) = symbols.symbol_name(e, sym) {
                kernels.push(String::from_utf8_lossy(name).into_owned());
            }
        }
    }
    Ok(CubinInfo {
        arch: Arch::with_variant(number, variant),
        relocatable: hdr.e_type(e) == elf::ET_REL,
        kernels,
    })
}

fn variant_from_tool_args(note: &[u8], number: u32) -> Option<Variant> {
    let text = String::from_utf8_lossy(note);
    let want = format!("sm_{number}");
    let pos = text.find(&want)? + want.len();
    match text.as_bytes().get(pos) {
        Some(b'a') => Some(Variant::Specific),
        Some(b'f') => Some(Variant::Family),
        _ => Some(Variant::Plain),
    }
}
