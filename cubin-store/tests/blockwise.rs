//! Entries are decoded a zstd block at a time into the caller's buffer, and the digest sink
//! hears of each finished prefix: what the runtime's hash-beside-decoding relies on.

mod common;

use std::io::Cursor;

use common::*;
use cubin_store::*;

/// Records what the reader tells it, checking the contract as it goes.
#[derive(Default)]
struct Recorder {
    lens: Vec<usize>,
    seen: Vec<u8>,
}

impl Blake3Sink for &mut Recorder {
    fn progress(&mut self, decoded: &[u8]) {
        // Each prefix extends the one before and never rewrites it.
        assert!(decoded.len() >= self.seen.len());
        assert_eq!(&decoded[..self.seen.len()], &self.seen[..]);
        self.seen = decoded.to_vec();
        self.lens.push(decoded.len());
    }
    fn finish(self, out: &[u8]) -> [u8; 32] {
        *blake3::hash(out).as_bytes()
    }
}

/// A store holding `raw` once, compressed by the writer or given as `frame`.
fn store_of(raw: &[u8], frame: Option<&[u8]>) -> Vec<u8> {
    let mut w = StoreWriter::new(Cursor::new(Vec::new()), WriteOptions::default()).unwrap();
    let m = w.add_module("m").unwrap();
    w.add_entries(
        vec![NewEntry {
            module: m,
            meta: meta(EntryKind::Sass, 90, ArchVariant::Plain, b""),
            raw,
            frame,
        }],
        1,
    )
    .unwrap();
    w.finish().unwrap().0.into_inner()
}

fn read_with(bytes: &[u8], rec: &mut Recorder) -> Result<Vec<u8>, StoreError> {
    let store = Store::parse(bytes).unwrap();
    let e = store.entries().next().unwrap();
    let mut out = vec![0u8; e.raw_len() as usize];
    let stored = store.stored_bytes(&e).unwrap();
    store.read_entry_from_into(&e, stored, &mut out, rec)?;
    Ok(out)
}

#[test]
fn a_large_entry_is_reported_block_by_block() {
    // 1 MB: at least eight zstd blocks of at most 128 KB.
    let raw = fake_cubin(7, 1 << 20);
    let bytes = store_of(&raw, None);
    let mut rec = Recorder::default();
    assert_eq!(read_with(&bytes, &mut rec).unwrap(), raw);
    assert!(rec.lens.len() >= 8, "{:?}", rec.lens);
    assert!(rec.lens.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(rec.lens.last(), Some(&raw.len()));
    // And the plain sink reads the same.
    let store = Store::parse(&bytes).unwrap();
    let e = store.entries().next().unwrap();
    assert_eq!(store.read_entry(&e).unwrap(), raw);
}

#[test]
fn a_kept_frame_with_a_checksum_is_checked_too() {
    // nvcc's frames may carry zstd's own checksum; the block-by-block decoder verifies it.
    let raw = fake_cubin(9, 300_000);
    let mut c = zstd::bulk::Compressor::new(5).unwrap();
    c.include_checksum(true).unwrap();
    c.include_contentsize(true).unwrap();
    let frame = c.compress(&raw).unwrap();
    let bytes = store_of(&raw, Some(&frame));
    let store = Store::parse(&bytes).unwrap();
    let e = store.entries().next().unwrap();
    assert_eq!(
        store.stored_bytes(&e).unwrap(),
        &frame[..],
        "the frame was kept"
    );
    assert_eq!(read_with(&bytes, &mut Recorder::default()).unwrap(), raw);

    // The checksum is the frame's last 4 bytes: damaged, the read fails in the decoder.
    let at = bytes
        .windows(frame.len())
        .position(|w| w == &frame[..])
        .unwrap()
        + frame.len()
        - 1;
    let mut bad = bytes.clone();
    bad[at] ^= 0x55;
    match read_with(&bad, &mut Recorder::default()) {
        Err(StoreError::CorruptFrame { message, .. }) => {
            assert!(message.contains("checksum"), "{message}")
        }
        other => panic!("expected a corrupt frame, got {other:?}"),
    }
}

#[test]
fn a_damaged_block_fails_and_reports_only_what_decoded() {
    let raw = fake_cubin(11, 600_000);
    let bytes = store_of(&raw, None);
    let store = Store::parse(&bytes).unwrap();
    let e = store.entries().next().unwrap();
    let stored = store.stored_bytes(&e).unwrap();
    let start = stored.as_ptr() as usize - bytes.as_ptr() as usize;
    // Somewhere in the second half of the frame: some blocks decode before the damage.
    let mut bad = bytes.clone();
    for b in &mut bad[start + stored.len() * 3 / 4..start + stored.len() * 3 / 4 + 64] {
        *b ^= 0xA5;
    }
    let mut rec = Recorder::default();
    let err = read_with(&bad, &mut rec).unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::CorruptFrame { .. } | StoreError::BlobDigestMismatch { .. }
        ),
        "{err:?}"
    );
    assert!(rec.lens.iter().all(|&n| n <= raw.len()));
}
