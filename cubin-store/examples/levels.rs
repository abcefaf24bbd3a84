//! Compression trade-offs on real device code.
//!
//! `cargo run --release -p cubin-store --example levels -- FILE_OR_DIR...`
//!
//! Every file (directories are walked) becomes one entry. For each configuration this writes a
//! whole store in memory and reports the stored/raw ratio, write throughput (raw MB/s,
//! including blake3 and any dictionary training) and single-entry read throughput (raw MB/s
//! over reading every entry one at a time, which is what a loader does for one arch).
//! `--levels=1,3,19` overrides the default set; `--no-dict` skips the dictionary rows;
//! `--threads=N` adds a column for the same store written with `add_entries` on N threads
//! (0 = all CPUs).

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cubin_store::{
    train_dictionary, ArchVariant, EntryKind, EntryMeta, NewEntry, Store, StoreWriter, WriteOptions,
};

fn collect(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        entries.sort();
        for p in entries {
            collect(&p, out);
        }
    } else if path.is_file() {
        out.push(path.to_path_buf());
    }
}

fn mbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64().max(1e-9)
}

struct Row {
    label: String,
    stored: u64,
    file_len: u64,
    write: Duration,
    read: Duration,
    read_bytes: u64,
    par_write: Option<Duration>,
}

fn meta(i: usize) -> EntryMeta {
    EntryMeta::new(EntryKind::Sass, 50 + i as u32, ArchVariant::Plain)
}

/// Writes the same store through the parallel batch API; returns its time and bytes.
fn run_parallel(files: &[Vec<u8>], opts: WriteOptions, threads: usize) -> (Duration, Vec<u8>) {
    let t = Instant::now();
    let mut w = StoreWriter::new(Cursor::new(Vec::new()), opts).expect("writer");
    let m = w.add_module("bench").expect("module");
    let batch = files
        .iter()
        .enumerate()
        .map(|(i, raw)| NewEntry {
            module: m,
            meta: meta(i),
            raw,
            frame: None,
        })
        .collect();
    w.add_entries(batch, threads).expect("entries");
    let (cur, _) = w.finish().expect("finish");
    (t.elapsed(), cur.into_inner())
}

fn run(
    label: String,
    files: &[Vec<u8>],
    opts: WriteOptions,
    extra: Duration,
    threads: Option<usize>,
) -> Row {
    let t = Instant::now();
    let mut w = StoreWriter::new(Cursor::new(Vec::new()), opts.clone()).expect("writer");
    let m = w.add_module("bench").expect("module");
    for (i, raw) in files.iter().enumerate() {
        w.add_entry(m, meta(i), raw).expect("entry");
    }
    let (cur, summary) = w.finish().expect("finish");
    let write = t.elapsed() + extra;
    let bytes = cur.into_inner();

    let par_write = threads.map(|n| {
        let (d, par) = run_parallel(files, opts, n);
        assert!(par == bytes, "parallel write must be byte-identical");
        d + extra
    });

    let store = Store::parse(&bytes).expect("parse");
    let mut read_bytes = 0u64;
    let t = Instant::now();
    // Repeat until the timing is meaningful.
    while t.elapsed() < Duration::from_millis(300) || read_bytes == 0 {
        for e in store.entries() {
            read_bytes += store.read_entry(&e).expect("read").len() as u64;
        }
        if read_bytes == 0 {
            break;
        }
    }
    Row {
        label,
        stored: summary.stored_bytes,
        file_len: summary.file_len,
        write,
        read: t.elapsed(),
        read_bytes,
        par_write,
    }
}

fn main() {
    let mut levels = vec![3, 9, 19, 22];
    let mut dict = true;
    let mut threads = None;
    let mut paths = Vec::new();
    for a in std::env::args().skip(1) {
        if let Some(l) = a.strip_prefix("--levels=") {
            levels = l.split(',').filter_map(|s| s.parse().ok()).collect();
        } else if let Some(n) = a.strip_prefix("--threads=") {
            threads = n.parse().ok();
        } else if a == "--no-dict" {
            dict = false;
        } else {
            collect(Path::new(&a), &mut paths);
        }
    }
    if paths.is_empty() {
        eprintln!("usage: levels [--levels=3,9,19,22] [--no-dict] [--threads=N] FILE_OR_DIR...");
        std::process::exit(2);
    }
    let files: Vec<Vec<u8>> = paths.iter().filter_map(|p| std::fs::read(p).ok()).collect();
    let raw: u64 = files.iter().map(|f| f.len() as u64).sum();
    let mut distinct: Vec<&Vec<u8>> = files.iter().collect();
    distinct.sort();
    distinct.dedup();
    let unique: u64 = distinct.iter().map(|f| f.len() as u64).sum();
    println!(
        "{} files, {} raw bytes, {} distinct files / {} unique bytes (dedup), largest {}",
        files.len(),
        raw,
        distinct.len(),
        unique,
        files.iter().map(Vec::len).max().unwrap_or(0)
    );

    let mut rows = Vec::new();
    for &level in &levels {
        let opts = WriteOptions {
            level,
            dictionary: None,
            ..Default::default()
        };
        rows.push(run(
            format!("zstd -{level}"),
            &files,
            opts,
            Duration::ZERO,
            threads,
        ));
    }
    if dict {
        // Training on the store's own blobs is legitimate: the dictionary travels in the store.
        // Cap the training input so huge inputs do not make training dominate.
        let mut samples: Vec<&[u8]> = Vec::new();
        let mut budget = 64usize << 20;
        for f in &distinct {
            let take = f.len().min(budget);
            if take == 0 {
                break;
            }
            samples.push(&f[..take]);
            budget -= take;
        }
        for size in [64 << 10, 110 << 10] {
            let t = Instant::now();
            match train_dictionary(&samples, size) {
                Ok(d) => {
                    let train = t.elapsed();
                    let label = format!("zstd -19 + dict {}K/{}K", size >> 10, d.len() >> 10);
                    println!("trained {} byte dictionary in {:.2?}", d.len(), train);
                    let opts = WriteOptions {
                        level: 19,
                        dictionary: Some(d),
                        ..Default::default()
                    };
                    rows.push(run(label, &files, opts, train, threads));
                }
                Err(e) => println!("dictionary {size}: {e}"),
            }
        }
    }

    let par_head = match threads {
        Some(0) => "par(all) MB/s".to_string(),
        Some(n) => format!("par({n}) MB/s"),
        None => String::new(),
    };
    println!(
        "{:<26} {:>12} {:>12} {:>8} {:>12} {:>14} {:>12}",
        "config", "stored", "store file", "ratio", "write MB/s", par_head, "read MB/s"
    );
    for r in rows {
        let par = r
            .par_write
            .map(|d| format!("{:.1}", mbps(raw, d)))
            .unwrap_or_default();
        println!(
            "{:<26} {:>12} {:>12} {:>7.2}% {:>12.1} {:>14} {:>12.1}",
            r.label,
            r.stored,
            r.file_len,
            100.0 * r.file_len as f64 / raw.max(1) as f64,
            mbps(raw, r.write),
            par,
            mbps(r.read_bytes, r.read),
        );
    }
}
