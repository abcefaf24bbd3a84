//! `--replace-path OLD=NEW`: byte strings replaced, each by one of the same length, in a
//! file prune reads (and, in a folder, in every file and link target it copies).

use std::io::{Read, Write};
use std::path::Path;

/// Byte strings to replace, each by one of the same length, in every file and link target.
#[derive(Debug, Clone, Default)]
pub struct Relocate(Vec<(Vec<u8>, Vec<u8>)>);

impl Relocate {
    /// From `OLD=NEW` arguments; each pair must be the same length and OLD non-empty.
    pub fn parse(pairs: &[String]) -> Result<Relocate, String> {
        let mut out = Vec::new();
        for p in pairs {
            let (old, new) = p
                .split_once('=')
                .ok_or_else(|| format!("--replace-path {p}: want OLD=NEW"))?;
            if old.is_empty() || old.len() != new.len() {
                return Err(format!(
                    "--replace-path {p}: OLD and NEW must be non-empty and of the same length \
                     ({} and {} bytes): files are rewritten in place, byte for byte",
                    old.len(),
                    new.len()
                ));
            }
            out.push((old.as_bytes().to_vec(), new.as_bytes().to_vec()));
        }
        Ok(Relocate(out))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Replaces every pair in `buf`, in place.
    pub fn apply(&self, buf: &mut [u8]) {
        for (old, new) in &self.0 {
            let at: Vec<usize> = memchr::memmem::find_iter(buf, old).collect();
            for i in at {
                buf[i..i + new.len()].copy_from_slice(new);
            }
        }
    }

    fn longest(&self) -> usize {
        self.0.iter().map(|(o, _)| o.len()).max().unwrap_or(0)
    }

    /// Copies `from` to `to`, replacing as it goes (in blocks that overlap by a pair's
    /// length, so a mention across two blocks is found).
    pub(crate) fn copy(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        let mut r = std::fs::File::open(from)?;
        let mut w = std::io::BufWriter::new(std::fs::File::create(to)?);
        let keep = self.longest().saturating_sub(1);
        let mut buf: Vec<u8> = Vec::new();
        let mut block = vec![0u8; 1 << 20];
        loop {
            let n = r.read(&mut block)?;
            buf.extend_from_slice(&block[..n]);
            self.apply(&mut buf);
            if n == 0 {
                w.write_all(&buf)?;
                return w.flush();
            }
            let done = buf.len().saturating_sub(keep);
            w.write_all(&buf[..done])?;
            buf.drain(..done);
        }
    }
}
