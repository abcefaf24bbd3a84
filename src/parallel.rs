//! One way to spread independent work over the CPUs: scoped threads taking items from a
//! shared counter, results in item order (so output never depends on the thread count).

use std::sync::atomic::{AtomicUsize, Ordering};

/// How many threads fatpack's parallel steps use: one per CPU, or `FATPACK_THREADS` when it
/// is set to a number of at least 1 (parallel links under `make -j` or a build farm's
/// scheduler should not each take every CPU). Outputs never depend on it.
pub fn threads() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let Some(v) = std::env::var_os("FATPACK_THREADS") else {
        return cpus;
    };
    match v.to_str().and_then(|s| s.trim().parse::<usize>().ok()) {
        Some(n) if n >= 1 => n,
        _ => {
            static SAID: std::sync::Once = std::sync::Once::new();
            SAID.call_once(|| {
                eprintln!(
                    "fatpack: warning: FATPACK_THREADS={} is not a number of threads (1 or \
                     more); using one per CPU ({cpus})",
                    v.to_string_lossy()
                )
            });
            cpus
        }
    }
}

/// `f` of every item, on up to [`threads`] threads, in `items`' order. A panic in `f` is
/// passed on (it is a bug, not an input error).
pub fn map_ordered<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = threads().min(items.len());
    if threads <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(item) = items.get(i) else {
                            return done;
                        };
                        done.push((i, f(item)));
                    }
                })
            })
            .collect();
        for w in workers {
            for (i, r) in w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)) {
                out[i] = Some(r);
            }
        }
    });
    out.into_iter()
        .map(|r| r.expect("every index is taken by one worker"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_items_order() {
        let items: Vec<u64> = (0..10_000).collect();
        let got = map_ordered(&items, |&x| x * x);
        assert_eq!(got, items.iter().map(|x| x * x).collect::<Vec<_>>());
        assert!(map_ordered(&[] as &[u8], |&x| x).is_empty());
    }
}
