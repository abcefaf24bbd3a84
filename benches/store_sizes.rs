//! Store size and speed against nvcc's own compression, on real cubins.
//!
//!   cargo bench --bench store_sizes -- [--levels=3,9,...] [--no-dictionary] [--no-nvcc] FILE...
//!                                                   (objects, archives, libraries, fatbins)
//!
//! For the registered device code of all FILEs (what a link stores; fatbins embedded in a
//! library's own data are counted apart): raw size; nvcc's `-compress-all` and
//! `--compress-mode=size -compress-all` (the same entries repacked by `fatbinary`, so every
//! row holds exactly the same cubins); and the store at several zstd levels, with and
//! without a trained dictionary: size, write throughput, and single-arch read throughput.
//! Needs `fatbinary` on PATH (`source scripts/cuda-env.sh`).

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use cubin_store::{Store, StoreWriter, WriteOptions};
use fatpack::fatbin::{EntryKind, Fatbin};

fn mib(n: u64) -> f64 {
    n as f64 / (1024.0 * 1024.0)
}

/// Repack `fb`'s entries with nvcc's `fatbinary` and the given flags; the resulting size.
fn nvcc_repack(dir: &Path, idx: usize, fb: &Fatbin, flags: &[&str]) -> u64 {
    let mut args: Vec<String> = vec![
        format!("--create={}/m{idx}.fatbin", dir.display()),
        "-64".into(),
    ];
    for (j, e) in fb.entries.iter().enumerate() {
        let payload = e.payload().expect("decompress");
        let (kind, ext) = match e.kind() {
            EntryKind::Ptx => ("ptx", "ptx"),
            _ => ("elf", "cubin"),
        };
        let f = dir.join(format!("m{idx}_{j}.{ext}"));
        // PTX payloads are NUL-padded; fatbinary wants the text.
        let end = if kind == "ptx" {
            payload
                .iter()
                .position(|&b| b == 0)
                .unwrap_or(payload.len())
        } else {
            payload.len()
        };
        std::fs::write(&f, &payload[..end]).unwrap();
        let sm = e.arch().sm_name().trim_start_matches("sm_").to_string();
        let arch = if kind == "ptx" {
            format!("compute_{sm}")
        } else {
            format!("sm_{sm}")
        };
        args.push(format!(
            "--image3=kind={kind},sm={},file={}",
            arch.trim_start_matches("sm_")
                .trim_start_matches("compute_"),
            f.display()
        ));
    }
    args.extend(flags.iter().map(|s| s.to_string()));
    let st = Command::new("fatbinary")
        .args(&args)
        .status()
        .expect("run fatbinary");
    assert!(st.success(), "fatbinary {args:?}");
    std::fs::metadata(dir.join(format!("m{idx}.fatbin")))
        .unwrap()
        .len()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let files: Vec<PathBuf> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .map(PathBuf::from)
        .collect();
    let levels: Vec<i32> = args
        .iter()
        .find_map(|a| a.strip_prefix("--levels="))
        .map(|l| match l {
            // The nvcc rows alone (bench/store_shipped.sh measures fatpack's own stores).
            "none" => Vec::new(),
            l => l.split(',').map(|x| x.parse().expect("--levels")).collect(),
        })
        .unwrap_or_else(|| vec![3, 9, 15, 19, 22]);
    let with_dictionary = !args.iter().any(|a| a == "--no-dictionary");
    // nvcc's size mode writes about 3-5 MB/s: `--no-nvcc` leaves its rows out of a rerun.
    let with_nvcc = !args.iter().any(|a| a == "--no-nvcc");
    assert!(
        !files.is_empty(),
        "usage: cargo bench --bench store_sizes -- FILE..."
    );
    let mut modules: Vec<(String, Fatbin)> = Vec::new();
    // The containers as the files hold them (NVIDIA's own compression, if any).
    let mut shipped: Vec<Fatbin> = Vec::new();
    // Containers embedded in a library's own data (cuBLASLt's PTX, which it loads through
    // the driver API) are no module of a link's store: left out, or every row would not be
    // the same entries as `fatpack ld` stores (bench/store_shipped.sh takes its anchor here).
    let mut embedded = (0usize, 0u64);
    for f in &files {
        let s = fatpack::inputs::scan(f).unwrap_or_else(|e| panic!("{e}"));
        for sec in s.sections {
            if sec.embedded {
                embedded.0 += sec.containers.len();
                embedded.1 += sec
                    .containers
                    .iter()
                    .map(|c| c.encoded_len() as u64)
                    .sum::<u64>();
                continue;
            }
            for (i, fb) in sec.containers.into_iter().enumerate() {
                let plain = Fatbin {
                    version: fb.version,
                    entries: fb
                        .entries
                        .iter()
                        .map(|e| e.to_uncompressed().unwrap())
                        .collect(),
                };
                modules.push((format!("{}#{i}", sec.origin), plain));
                shipped.push(fb);
            }
        }
    }
    let raw: u64 = modules
        .iter()
        .flat_map(|m| &m.1.entries)
        .map(|e| e.raw_len())
        .sum();
    let fatbin_plain: u64 = modules.iter().map(|m| m.1.encoded_len() as u64).sum();
    let n_entries: usize = modules.iter().map(|m| m.1.entries.len()).sum();
    println!(
        "input: {} files, {} modules, {} entries, raw payload {:.2} MiB (left out: {} containers \
         embedded in the files' own data, {:.2} MiB, which no link stores)",
        files.len(),
        modules.len(),
        n_entries,
        mib(raw),
        embedded.0,
        mib(embedded.1)
    );
    println!();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "| form | size (MiB) | vs uncompressed fatbin | vs nvcc size mode | write MB/s, one core | write MB/s, wall on {cpus} CPUs | read one arch MB/s |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|");
    println!(
        "| fatbin, `--compress-mode=none` | {:.2} | 1.000 | - | - | - | - |",
        mib(fatbin_plain)
    );
    let as_shipped: u64 = shipped.iter().map(|f| f.encoded_len() as u64).sum();
    let tmp = tempfile::tempdir().unwrap();
    let nvcc_rows: Vec<(&str, Vec<&str>)> = if with_nvcc {
        vec![
            (
                "nvcc `-Xfatbin=-compress-all` (default mode)",
                vec!["-compress-all"],
            ),
            (
                "nvcc `--compress-mode=size -compress-all`",
                vec!["-compress-all", "--compress-mode=size"],
            ),
        ]
    } else {
        Vec::new()
    };
    // nvcc's repacks first: size mode is what issue 12 measures every row against.
    let nvcc: Vec<(&str, u64, f64)> = nvcc_rows
        .iter()
        .map(|(label, flags)| {
            let t = Instant::now();
            let total: u64 = modules
                .iter()
                .enumerate()
                .map(|(i, (_, fb))| nvcc_repack(tmp.path(), i, fb, flags))
                .sum();
            (*label, total, raw as f64 / 1e6 / t.elapsed().as_secs_f64())
        })
        .collect();
    let size_mode = nvcc.last().map(|r| r.1);
    let vs_size =
        |n: u64| size_mode.map_or("-".to_string(), |s| format!("{:.3}", n as f64 / s as f64));
    println!(
        "| as the files hold it | {:.2} | {:.3} | {} | - | - | - |",
        mib(as_shipped),
        as_shipped as f64 / fatbin_plain as f64,
        vs_size(as_shipped)
    );
    for (label, total, rate) in &nvcc {
        println!(
            "| {label} | {:.2} | {:.3} | {} | {rate:.0} (fatbinary, incl. process start) | - | - |",
            mib(*total),
            *total as f64 / fatbin_plain as f64,
            vs_size(*total)
        );
    }
    // A dictionary trained on a sample of the cubins themselves.
    let samples: Vec<Vec<u8>> = modules
        .iter()
        .flat_map(|m| &m.1.entries)
        .step_by(3)
        .take(256)
        .map(|e| e.payload().unwrap().into_owned())
        .collect();
    let refs: Vec<&[u8]> = samples.iter().map(|s| s.as_slice()).collect();
    let dict = with_dictionary
        .then(|| cubin_store::train_dictionary(&refs, 112 * 1024).ok())
        .flatten();
    // What `fatpack ld` and `repack` write is measured on their own output, not here:
    // bench/store_shipped.sh.
    let mut configs: Vec<(String, WriteOptions)> = levels
        .iter()
        .map(|&l| {
            (
                format!("store zstd -{l}"),
                WriteOptions {
                    level: l,
                    dictionary: None,
                    ..Default::default()
                },
            )
        })
        .collect();
    if let Some(d) = &dict {
        for l in [3, 19] {
            configs.push((
                format!("store zstd -{l} + 112 KiB dictionary"),
                WriteOptions {
                    level: l,
                    dictionary: Some(d.clone()),
                    ..Default::default()
                },
            ));
        }
    }
    for (label, opts) in configs {
        let t = Instant::now();
        let mut w = StoreWriter::new(Cursor::new(Vec::new()), opts.clone()).unwrap();
        for (name, fb) in &modules {
            let id = w.add_module(name).unwrap();
            for e in &fb.entries {
                w.add_entry(id, fatpack::store::entry_meta(e), &e.payload().unwrap())
                    .unwrap();
            }
        }
        let (cur, summary) = w.finish().unwrap();
        let write_s = t.elapsed().as_secs_f64();
        let bytes = cur.into_inner();
        // The same store on every CPU: a batch per window of at least 16 MiB of raw device
        // code (the link cuts its windows at 16 MiB of containers instead; the batching
        // changes no byte, checked below).
        let t = Instant::now();
        let mut w = StoreWriter::new(Cursor::new(Vec::new()), opts).unwrap();
        let payloads: Vec<Vec<_>> = modules
            .iter()
            .map(|(_, fb)| fb.entries.iter().map(|e| e.payload().unwrap()).collect())
            .collect();
        let mut at = 0;
        while at < modules.len() {
            let (mut end, mut size) = (at, 0u64);
            while end < modules.len() && (end == at || size < 16 << 20) {
                size += modules[end]
                    .1
                    .entries
                    .iter()
                    .map(|e| e.raw_len())
                    .sum::<u64>();
                end += 1;
            }
            let mut batch = Vec::new();
            for i in at..end {
                let id = w.add_module(&modules[i].0).unwrap();
                for (e, raw) in modules[i].1.entries.iter().zip(&payloads[i]) {
                    batch.push(cubin_store::NewEntry {
                        module: id,
                        meta: fatpack::store::entry_meta(e),
                        raw,
                        frame: None,
                    });
                }
            }
            w.add_entries(batch, 0).unwrap();
            at = end;
        }
        let (cur_all, _) = w.finish().unwrap();
        let wall_s = t.elapsed().as_secs_f64();
        assert!(
            cur_all.into_inner() == bytes,
            "{label}: threads changed the bytes"
        );
        // What the runtime does: open, pick one arch per module, decompress and check it.
        let t = Instant::now();
        let store = Store::parse(&bytes).unwrap();
        let mut read = 0u64;
        for m in store.modules() {
            if let Some(e) = m
                .entries()
                .find(|e| e.arch() == 90 && e.kind() == cubin_store::EntryKind::Sass)
            {
                read += store.read_entry(&e).unwrap().len() as u64;
            }
        }
        let read_s = t.elapsed().as_secs_f64();
        println!(
            "| {label} | {:.2} | {:.3} | {} | {:.0} | {:.0} | {:.0} |",
            mib(summary.file_len),
            summary.file_len as f64 / fatbin_plain as f64,
            vs_size(summary.file_len),
            raw as f64 / 1e6 / write_s,
            raw as f64 / 1e6 / wall_s,
            read as f64 / 1e6 / read_s
        );
    }
}
