//! Rewrite objects and archives given on the command line into DIR (a development aid).
use std::path::Path;
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let dir = Path::new(&args[0]);
    for f in &args[1..] {
        let path = Path::new(f);
        let data = std::fs::read(path).unwrap();
        let scanned = fatpack::inputs::scan(path).unwrap();
        let out = dir.join(path.file_name().unwrap());
        let mut n = |o: &str, i: usize| format!("{o}#{i}");
        if scanned.kind == fatpack::inputs::FileKind::Archive {
            let archive = object::read::archive::ArchiveFile::parse(&*data).unwrap();
            let mut members = Vec::new();
            for m in archive.members() {
                let m = m.unwrap();
                let name = String::from_utf8_lossy(m.name()).into_owned();
                let bytes = m.data(&*data).unwrap();
                let origin = format!("{f}({name})");
                let secs: Vec<_> = scanned
                    .sections
                    .iter()
                    .filter(|s| s.origin == origin)
                    .cloned()
                    .collect();
                let bytes = if secs.is_empty() {
                    bytes.to_vec()
                } else {
                    fatpack::rewrite::rewrite_object(&origin, bytes, &secs, &mut n)
                        .unwrap()
                        .0
                };
                members.push(fatpack::rewrite::archive::Member { name, data: bytes });
            }
            std::fs::write(&out, fatpack::rewrite::archive::write_archive(&members)).unwrap();
        } else {
            let (bytes, ex) =
                fatpack::rewrite::rewrite_object(f, &data, &scanned.sections, &mut n).unwrap();
            std::fs::write(&out, bytes).unwrap();
            eprintln!("{f}: {} modules", ex.len());
        }
    }
}
