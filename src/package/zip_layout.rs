//! The zip container of wheels and `.conda` packages, checked as one layout before any
//! member is trusted: every member's local header names what the central directory names
//! (Python's `zipfile` refuses a mismatch; an installer reading local headers would see
//! other files), and no two members share bytes (twenty central entries over one 200 MiB
//! local entry make a 408 KB wheel that writes 4.2 GB). Members' CRC-32s are checked as
//! they are read to their end, by the zip reader.

use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use crate::error::io_at;
use crate::prune::PruneError;

/// A local file header (APPNOTE 4.3.7): its signature, its fixed size, and where the
/// lengths of its name and extra field are.
const LOCAL_SIGNATURE: u32 = 0x0403_4b50;
const LOCAL_FIXED: usize = 30;
const NAME_LEN_AT: usize = 26;
const EXTRA_LEN_AT: usize = 28;

fn bad(path: &Path, message: String) -> PruneError {
    PruneError::Package {
        path: path.to_path_buf(),
        message,
    }
}

/// Checks the layout of `zip` (the file `input`): see the module's doc.
pub(super) fn check<R: Read + Seek>(
    input: &Path,
    zip: &mut zip::ZipArchive<R>,
) -> Result<(), PruneError> {
    let mut file = BufReader::new(std::fs::File::open(input).map_err(io_at(input))?);
    let le16 = |h: &[u8], at: usize| u64::from(u16::from_le_bytes([h[at], h[at + 1]]));
    let mut spans = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let m = zip
            .by_index_raw(i)
            .map_err(|e| bad(input, format!("member {i}: {e}")))?;
        let central = m.name_raw().to_vec();
        let shown = String::from_utf8_lossy(&central).into_owned();
        let (start, data, len) = (m.header_start(), m.data_start(), m.compressed_size());
        drop(m);
        let mut header = [0u8; LOCAL_FIXED];
        file.seek(SeekFrom::Start(start))
            .and_then(|_| file.read_exact(&mut header))
            .map_err(|e| bad(input, format!("member {shown:?}: its local header: {e}")))?;
        let sig = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        let mut local = vec![0u8; le16(&header, NAME_LEN_AT) as usize];
        file.read_exact(&mut local)
            .map_err(|e| bad(input, format!("member {shown:?}: its local header: {e}")))?;
        if sig != LOCAL_SIGNATURE || local != central {
            return Err(bad(
                input,
                format!(
                    "member {shown:?}: its local header names {:?}, not what the central \
                     directory names; refused",
                    String::from_utf8_lossy(&local)
                ),
            ));
        }
        let header_len = LOCAL_FIXED as u64 + local.len() as u64 + le16(&header, EXTRA_LEN_AT);
        if data != start + header_len {
            return Err(bad(
                input,
                format!("member {shown:?}: its data does not follow its local header; refused"),
            ));
        }
        let end = data
            .checked_add(len)
            .ok_or_else(|| bad(input, format!("member {shown:?}: an impossible size")))?;
        spans.push((start, end, shown));
    }
    spans.sort();
    let directory = zip.central_directory_start();
    for pair in spans.windows(2) {
        let ((_, end, a), (next, _, b)) = (&pair[0], &pair[1]);
        if end > next {
            return Err(bad(
                input,
                format!("members {a:?} and {b:?} share bytes (overlapping entries); refused"),
            ));
        }
    }
    if let Some((_, end, name)) = spans.last() {
        if *end > directory {
            return Err(bad(
                input,
                format!("member {name:?} runs into the central directory; refused"),
            ));
        }
    }
    Ok(())
}
