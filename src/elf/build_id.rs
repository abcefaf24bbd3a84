//! The GNU build ID of a packed output made to cover its device code ([`mix_build_id`]).

use std::os::unix::fs::FileExt;

use object::elf;

use super::error::{io_err, malformed as bad, EditError};
use super::open::OpenElf;
use super::LE;

/// Makes the GNU build ID (`.note.gnu.build-id`, if the link wrote one) cover the device
/// code too: ld computed it over the file before the store existed, so two outputs that
/// differ only in their stores (another `--fatpack-level`, another GPU's code) would share
/// it and debuginfod or a crash tool would match the wrong bits. The new ID is the same
/// length: the first bytes of blake3(old ID ‖ store digest), so it stays deterministic.
pub fn mix_build_id(elf: &OpenElf, store_digest: &[u8; 32]) -> Result<bool, EditError> {
    let (path, f, lay) = (&elf.path, &elf.file, &elf.layout);
    let Some((_, sec)) = lay.section_by_name(".note.gnu.build-id") else {
        return Ok(false);
    };
    if sec.sh_type.get(LE) == elf::SHT_NOBITS {
        return Ok(false);
    }
    let (off, size) = (sec.sh_offset.get(LE), sec.sh_size.get(LE));
    let truncated = || bad(path, ".note.gnu.build-id is truncated");
    let mut note = vec![0u8; usize::try_from(size).map_err(|_| truncated())?.min(4096)];
    f.read_exact_at(&mut note, off)
        .map_err(|_| bad(path, ".note.gnu.build-id runs past the end of the file"))?;
    let (header, rest) =
        object::pod::from_bytes::<elf::NoteHeader64<LE>>(&note).map_err(|()| truncated())?;
    let namesz = header.n_namesz.get(LE) as usize;
    let descsz = header.n_descsz.get(LE) as usize;
    // The name is padded to 4 bytes; the ID follows it.
    let desc_at = namesz.div_ceil(4) * 4;
    let id = desc_at
        .checked_add(descsz)
        .and_then(|end| rest.get(desc_at..end))
        .ok_or_else(truncated)?;
    let mut h = blake3::Hasher::new();
    h.update(id);
    h.update(store_digest);
    let mut new = vec![0u8; id.len()];
    h.finalize_xof().fill(&mut new);
    let at = off + (note.len() - rest.len() + desc_at) as u64;
    f.write_all_at(&new, at).map_err(io_err(path))?;
    Ok(true)
}
