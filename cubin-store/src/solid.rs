//! Solid groups (format 1.1): several blobs in one zstd frame, so that what repeats across
//! entries (kernels of one library for one GPU family) is stored once. The reader's side for
//! the CLI: groups decoded whole are kept, a bounded few, so that a command reading every
//! entry decodes each group once rather than once per blob.

use std::sync::{Arc, Mutex};

/// At most this many decoded bytes are kept (the last group decoded is always kept). Reading
/// blob after blob needs one group at a time; reading entries module by module needs one per
/// GPU family and kind (eight or so): 8 MiB groups take 64 MiB, 32 MiB groups 256.
const KEEP_BYTES: usize = 256 << 20;

/// Decoded groups by frame offset, least recently used first.
#[derive(Default)]
pub(crate) struct GroupCache(Mutex<Vec<(u64, Arc<Vec<u8>>)>>);

impl GroupCache {
    /// The group whose frame is at `offset`, if it is kept.
    pub(crate) fn get(&self, offset: u64) -> Option<Arc<Vec<u8>>> {
        let mut kept = self.0.lock().ok()?;
        let i = kept.iter().position(|(o, _)| *o == offset)?;
        let hit = kept.remove(i);
        let group = Arc::clone(&hit.1);
        kept.push(hit);
        Some(group)
    }

    /// Keeps a decoded group, letting the least recently used go past [`KEEP_BYTES`].
    pub(crate) fn keep(&self, offset: u64, group: Vec<u8>) {
        if let Ok(mut kept) = self.0.lock() {
            kept.push((offset, Arc::new(group)));
            let mut total: usize = kept.iter().map(|(_, g)| g.len()).sum();
            while total > KEEP_BYTES && kept.len() > 1 {
                total -= kept.remove(0).1.len();
            }
        }
    }
}
