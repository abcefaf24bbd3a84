//! The GNU ar writer: any members (names, bytes) give an archive that object's reader reads
//! back with the same names (any bytes, UTF-8 or not) and bytes, in order.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Members: [name len u8][name][data len u16][data], repeated.
    let mut members = Vec::new();
    let mut p = 0;
    while p + 3 <= data.len() && members.len() < 64 {
        let nl = data[p] as usize % 40 + 1;
        let Some(name) = data.get(p + 1..p + 1 + nl) else {
            break;
        };
        let at = p + 1 + nl;
        let Some(len) = data.get(at..at + 2) else {
            break;
        };
        let dl = u16::from_le_bytes([len[0], len[1]]) as usize % 4096;
        let Some(body) = data.get(at + 2..at + 2 + dl) else {
            break;
        };
        // Any bytes but '/' (the writer keeps what follows the last one) and NUL: names
        // need not be UTF-8 (a Latin-1 `k\xb3.o`). A name the format cannot hold (a newline)
        // must be an error, never a corrupt archive.
        let name: Vec<u8> = name
            .iter()
            .map(|&b| if b == b'/' || b == 0 { b'_' } else { b })
            .collect();
        members.push(fatpack::rewrite::archive::Member {
            name,
            data: body.to_vec().into(),
            pieces: None,
        });
        p = at + 2 + dl;
    }
    let Ok(bytes) = fatpack::rewrite::archive::write_archive(&members) else {
        assert!(members.iter().any(|m| m.name.contains(&b'\n') || m.name.is_empty()));
        return;
    };
    let ar = object::read::archive::ArchiveFile::parse(&*bytes).expect("written archive parses");
    let got: Vec<_> = ar.members().map(|m| m.expect("member")).collect();
    assert_eq!(got.len(), members.len());
    for (g, m) in got.iter().zip(&members) {
        assert_eq!(g.name(), &m.name[..]);
        assert_eq!(g.data(&*bytes).unwrap(), &m.data[..]);
    }
});
