//! What the runtime reads from its own image, shared with the CLI in fatpack-format: the ELF
//! section finder, stubs, and the fatbin container encoder (encode, then read back: the same
//! entries).
#![no_main]

use fatpack::format::fatbin::{encode_container, read_container, EntryInput};
use fatpack::format::arch::EntryId;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = fatpack::format::elf::find_section(data, ".fatpack");
    let _ = fatpack::format::stub::parse_all(data);
    let _ = read_container(data);
    // Entries: [kind u8][arch u8][header len u8][payload len u16] then the bytes.
    let names = [
        "sm_75",
        "sm_80",
        "sm_90a",
        "sm_100f",
        "compute_80",
        "compute_90",
    ];
    let mut inputs = Vec::new();
    let mut p = 0;
    while p + 5 <= data.len() && inputs.len() < 16 {
        let c = EntryId::parse(names[data[p] as usize % names.len()]).unwrap();
        let hl = data[p + 2] as usize;
        let pl = u16::from_le_bytes([data[p + 3], data[p + 4]]) as usize % 2048;
        let Some(header) = data.get(p + 5..p + 5 + hl) else {
            break;
        };
        let Some(payload) = data.get(p + 5 + hl..p + 5 + hl + pl) else {
            break;
        };
        inputs.push(EntryInput {
            candidate: c,
            attrs: header,
            payload,
        });
        p += 5 + hl + pl;
    }
    if let Ok(bytes) = encode_container(&inputs) {
        let (_, entries, used) = read_container(&bytes).expect("encoded container reads back");
        assert_eq!(used, bytes.len());
        assert_eq!(entries.len(), inputs.len());
        for (e, i) in entries.iter().zip(&inputs) {
            assert_eq!(&e.payload[..i.payload.len()], i.payload);
            assert_eq!(e.header.arch_number, i.candidate.arch);
        }
    }
});
