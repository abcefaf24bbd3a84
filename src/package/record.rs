//! A wheel's `RECORD` (PEP 376/427): one CSV line per file, `path,algo=digest,size`, the
//! digest URL-safe base64 without padding. Read to check every member of the input against
//! it before prune trusts a byte of it; written anew for the output from what was written.

use std::collections::BTreeMap;

use sha2::Digest;

/// One line of `RECORD`: how the file must hash, and how long it is (if stated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Line {
    pub algo: Algo,
    /// As written: URL-safe base64, no padding.
    pub digest: String,
    pub size: Option<u64>,
}

/// The hashes pip accepts in `RECORD` (sha256 and stronger).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Algo {
    Sha256,
    Sha384,
    Sha512,
}

/// A running hash of one member, in `RECORD`'s algorithm.
pub(super) enum Hasher {
    Sha256(sha2::Sha256),
    Sha384(sha2::Sha384),
    Sha512(sha2::Sha512),
}

impl Hasher {
    pub fn new(algo: Algo) -> Self {
        match algo {
            Algo::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
            Algo::Sha384 => Hasher::Sha384(sha2::Sha384::new()),
            Algo::Sha512 => Hasher::Sha512(sha2::Sha512::new()),
        }
    }

    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            Hasher::Sha256(h) => h.update(bytes),
            Hasher::Sha384(h) => h.update(bytes),
            Hasher::Sha512(h) => h.update(bytes),
        }
    }

    /// The digest as `RECORD` spells it.
    pub fn finish(self) -> String {
        match self {
            Hasher::Sha256(h) => base64_url(&h.finalize()),
            Hasher::Sha384(h) => base64_url(&h.finalize()),
            Hasher::Sha512(h) => base64_url(&h.finalize()),
        }
    }
}

/// A parsed `RECORD`: path to line; the lines without a hash (`RECORD` itself, and
/// signatures) are kept apart, since nothing can be checked against them.
#[derive(Debug, Default)]
pub(super) struct Record {
    pub files: BTreeMap<String, Line>,
    pub unhashed: Vec<String>,
}

/// Parses `RECORD` (`text`); refuses what pip would refuse or what would let a member
/// through unchecked: an unknown or weak hash, a path listed twice, a malformed line.
pub(super) fn parse(text: &str) -> Result<Record, String> {
    let mut record = Record::default();
    for (n, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let at = |m: String| format!("RECORD line {}: {m}", n + 1);
        let fields = csv_fields(raw).ok_or_else(|| at("unbalanced quotes".into()))?;
        let [path, hash, size] = fields.as_slice() else {
            return Err(at(format!("{} fields, not 3", fields.len())));
        };
        if hash.is_empty() {
            record.unhashed.push(path.clone());
            continue;
        }
        let (algo, digest) = hash
            .split_once('=')
            .ok_or_else(|| at(format!("hash {hash:?} is not algo=digest")))?;
        let algo = match algo {
            "sha256" => Algo::Sha256,
            "sha384" => Algo::Sha384,
            "sha512" => Algo::Sha512,
            other => {
                return Err(at(format!(
                    "hash algorithm {other:?} (want sha256 or stronger)"
                )))
            }
        };
        let size = match size.as_str() {
            "" => None,
            s => Some(
                s.parse()
                    .map_err(|_| at(format!("size {s:?} is not a number")))?,
            ),
        };
        let line = Line {
            algo,
            digest: digest.to_string(),
            size,
        };
        if record.files.insert(path.clone(), line).is_some() {
            return Err(at(format!("{path} is listed twice")));
        }
    }
    Ok(record)
}

/// The fields of one CSV line (RFC 4180 quoting, as Python's csv module writes it).
fn csv_fields(line: &str) -> Option<Vec<String>> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut chars = line.chars().peekable();
    let mut quoted = false;
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (false, '"') if field.is_empty() => quoted = true,
            (false, ',') => fields.push(std::mem::take(&mut field)),
            (_, c) => field.push(c),
        }
    }
    if quoted {
        return None;
    }
    fields.push(field);
    Some(fields)
}

/// `name,sha256=<urlsafe base64, no padding>,size`, as a wheel's RECORD lists a file.
pub(super) fn line(name: &str, digest: &str, size: u64) -> String {
    format!("{},sha256={digest},{size}", csv_field(name))
}

/// The `RECORD` of the files `written` (name, sha256 as RECORD spells it, size), itself
/// listed last without a hash, as PEP 376 has it.
pub(super) fn write(written: &[(String, String, u64)], record_name: &str) -> String {
    let mut record = String::new();
    for (name, digest, size) in written {
        record.push_str(&line(name, digest, *size));
        record.push('\n');
    }
    record.push_str(&format!("{},,\n", csv_field(record_name)));
    record
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// sha256 of `data`, as RECORD spells it.
pub(super) fn sha256(data: &[u8]) -> String {
    base64_url(&sha2::Sha256::digest(data))
}

/// URL-safe base64 without padding (RFC 4648 section 5), as PEP 376/427 hash RECORD entries.
fn base64_url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = c
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..=c.len() {
            out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_hashes_are_urlsafe_base64_without_padding() {
        // sha256 of "" as pip writes it in RECORD.
        assert_eq!(
            line("a,b", &sha256(b""), 0),
            "\"a,b\",sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0"
        );
        assert_eq!(base64_url(b"\xfb\xff"), "-_8");
    }

    #[test]
    fn record_reads_back_what_it_writes_and_refuses_what_pip_would() {
        let written = vec![
            ("a,b".to_string(), sha256(b"x"), 1),
            ("p/q.so".to_string(), sha256(b""), 0),
        ];
        let r = parse(&write(&written, "p-1.dist-info/RECORD")).unwrap();
        assert_eq!(r.files["a,b"].digest, sha256(b"x"));
        assert_eq!(r.files["p/q.so"].size, Some(0));
        assert_eq!(r.unhashed, ["p-1.dist-info/RECORD"]);
        for bad in [
            "a,md5=xx,1\n",
            "a,sha256=xx,1\na,sha256=xx,1\n",
            "a,sha256=xx\n",
            "\"a,sha256=xx,1\n",
            "a,sha256=xx,one\n",
        ] {
            assert!(parse(bad).is_err(), "{bad:?} passed");
        }
        let mut h = Hasher::new(Algo::Sha256);
        h.update(b"x");
        assert_eq!(h.finish(), sha256(b"x"));
    }
}
