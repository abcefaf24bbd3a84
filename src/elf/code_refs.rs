//! Which instructions of a linked x86-64 file name an address range: the check that lets a
//! transform move data no relocation says code uses.
//!
//! Code reaches data through a dynamic relocation (the transform redirects those) or
//! through a value the static linker wrote into the instruction and no relocation records:
//! a RIP-relative displacement (`lea foo(%rip)`), a 64-bit offset from the GOT
//! (`movabs $foo@GOTOFF`, the large code model's way to reach `SHF_X86_64_LARGE` data) or a
//! 64-bit absolute address. Every executable section is decoded linearly from its start
//! (the sweep objdump makes; x86-64 compilers put jump tables in read-only data, not among
//! the instructions) and each such value is checked against the range.

use iced_x86::{Decoder, DecoderOptions, Instruction, OpKind, Register};
use object::elf;

use super::{file_range, Layout, LE};

/// For each range `[lo, hi)` of `ranges`, the address of the first instruction that names
/// an address in it in any of the ways above, or `None` if no instruction of `layout`'s
/// executable sections does. The code is decoded once for all of them. `gots`: the
/// addresses `@GOTOFF` values may be relative to (`_GLOBAL_OFFSET_TABLE_`: the start of
/// `.got.plt`, or of `.got` without one).
pub fn first_references(
    data: &[u8],
    layout: &Layout,
    gots: &[u64],
    ranges: &[(u64, u64)],
) -> Vec<Option<u64>> {
    let mut found = vec![None; ranges.len()];
    for s in &layout.sections {
        let flags = s.sh_flags.get(LE);
        if s.sh_type.get(LE) != elf::SHT_PROGBITS || flags & u64::from(elf::SHF_EXECINSTR) == 0 {
            continue;
        }
        let Some(code) = file_range(data, s.sh_offset.get(LE), s.sh_size.get(LE)) else {
            continue;
        };
        if scan(code, s.sh_addr.get(LE), gots, ranges, &mut found) {
            break;
        }
    }
    found
}

/// Decodes `code` (loaded at `ip`), noting in `found` the first instruction that names an
/// address in each range not found yet; true once every range is found.
fn scan(
    code: &[u8],
    ip: u64,
    gots: &[u64],
    ranges: &[(u64, u64)],
    found: &mut [Option<u64>],
) -> bool {
    let names = |v: u64, (lo, hi): (u64, u64)| {
        let inside = |a: u64| (lo..hi).contains(&a);
        inside(v) || gots.iter().any(|&g| inside(g.wrapping_add(v)))
    };
    let mut left = found.iter().filter(|f| f.is_none()).count();
    let mut decoder = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    let mut ins = Instruction::default();
    while left > 0 && decoder.can_decode() {
        decoder.decode_out(&mut ins);
        values(&ins, &mut |v| {
            for (f, &r) in found.iter_mut().zip(ranges) {
                if f.is_none() && names(v, r) {
                    *f = Some(ins.ip());
                    left -= 1;
                }
            }
        });
    }
    left == 0
}

/// Each value `ins` carries that may be an address: the target of a RIP-relative operand,
/// a 64-bit absolute memory offset, a 64-bit immediate.
fn values(ins: &Instruction, each: &mut dyn FnMut(u64)) {
    for op in 0..ins.op_count() {
        match ins.op_kind(op) {
            OpKind::Memory if ins.is_ip_rel_memory_operand() => each(ins.ip_rel_memory_address()),
            OpKind::Memory
                if ins.memory_base() == Register::None
                    && ins.memory_index() == Register::None
                    && ins.memory_displ_size() == 8 =>
            {
                each(ins.memory_displacement64())
            }
            OpKind::Immediate64 => each(ins.immediate64()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first(code: &[u8], ip: u64, got: Option<u64>, lo: u64, hi: u64) -> Option<u64> {
        let gots: Vec<u64> = got.into_iter().collect();
        let mut found = [None];
        scan(code, ip, &gots, &[(lo, hi)], &mut found);
        found[0]
    }

    #[test]
    fn each_way_code_names_data_is_seen() {
        // nop; lea 0x100(%rip),%rax (next ip 0x1008: names 0x1108)
        let lea = [0x90, 0x48, 0x8d, 0x05, 0x00, 0x01, 0x00, 0x00];
        assert_eq!(first(&lea, 0x1000, None, 0x1100, 0x1200), Some(0x1001));
        assert_eq!(first(&lea, 0x1000, None, 0x1200, 0x1300), None);
        // movabs $-0x1000,%rax: an offset from a GOT at 0x3000 to 0x2000.
        let gotoff = [0x48, 0xb8, 0x00, 0xf0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(
            first(&gotoff, 0x1000, Some(0x3000), 0x2000, 0x2001),
            Some(0x1000)
        );
        assert_eq!(first(&gotoff, 0x1000, None, 0x2000, 0x2001), None);
        // movabs 0x2000,%al: a 64-bit absolute memory offset.
        let moffs = [0xa0, 0x00, 0x20, 0, 0, 0, 0, 0, 0];
        assert_eq!(first(&moffs, 0x1000, None, 0x2000, 0x2001), Some(0x1000));
    }
}
