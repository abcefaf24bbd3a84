//! One way to spread independent work over the CPUs: scoped threads taking items from a
//! shared counter, results in item order (so output never depends on the thread count).
//!
//! How many threads a step gets is [`workers`]'s answer: at most [`threads`] (one per CPU,
//! `--fatpack-threads`, `FATPACK_THREADS`), and, under a GNU make jobserver, only as many
//! more than one as the jobserver grants at that moment: parallel links under `make -j8`
//! share eight CPUs instead of each taking all of them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// `--fatpack-threads=N` of the link being run (0: not given).
static THREADS_OPTION: AtomicUsize = AtomicUsize::new(0);

/// The jobserver named in `MAKEFLAGS`, if this process was given one it can use.
static JOBSERVER: OnceLock<Option<jobserver::Client>> = OnceLock::new();

/// Takes the GNU make jobserver from the environment (`MAKEFLAGS=... --jobserver-auth=R,W`
/// or `fifo:PATH`). Call it first thing in `main`, before any file is opened: the pipe form
/// names file descriptors, which must still be make's when they are checked.
pub fn init_jobserver() {
    JOBSERVER.get_or_init(|| {
        // SAFETY: called at the start of main, before this process opened any file, so the
        // descriptors MAKEFLAGS names are make's pipe or not open at all; `check_pipe` makes
        // sure they are pipes (make 4.3 closes them for recipes not marked `+`), and nothing
        // else in fatpack uses them afterwards.
        let from = unsafe { jobserver::Client::from_env_ext(true) };
        from.client.ok()
    });
}

/// Sets the thread cap `--fatpack-threads=N` asks for (it wins over `FATPACK_THREADS`).
pub fn set_threads(n: usize) {
    THREADS_OPTION.store(n, Ordering::Relaxed);
}

/// The most threads fatpack's parallel steps use: `--fatpack-threads`, else
/// `FATPACK_THREADS` when it is a number of at least 1, else one per CPU. Outputs never
/// depend on it.
pub fn threads() -> usize {
    let given = THREADS_OPTION.load(Ordering::Relaxed);
    if given >= 1 {
        return given;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let Some(v) = std::env::var_os(crate::environment::THREADS) else {
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

/// The threads one parallel step may run, held until dropped: this process's own (make's
/// implicit token) plus the jobserver tokens it could take without waiting, up to
/// [`threads`] and the number of items.
pub struct Workers {
    count: usize,
    /// Given back to the jobserver on drop.
    _tokens: Vec<jobserver::Acquired>,
    started: std::time::SystemTime,
}

impl Workers {
    pub fn count(&self) -> usize {
        self.count
    }
}

/// The threads a step over `items` items may use now (see [`Workers`]).
pub fn workers(items: usize) -> Workers {
    let want = threads().min(items.max(1));
    let mut tokens = Vec::new();
    let count = match JOBSERVER.get() {
        Some(Some(client)) => {
            // Never wait for a token: this process already runs on one, so it always
            // makes progress, and a token freed later is left to the next job make starts.
            while tokens.len() + 1 < want {
                match client.try_acquire() {
                    Ok(Some(t)) => tokens.push(t),
                    _ => break,
                }
            }
            tokens.len() + 1
        }
        _ => want,
    };
    Workers {
        count,
        _tokens: tokens,
        started: std::time::SystemTime::now(),
    }
}

impl Drop for Workers {
    /// With `FATPACK_TRACE_WORKERS=FILE`, appends `pid start_ns end_ns threads` for the
    /// step (how the tests check, across processes, that a jobserver's limit holds).
    fn drop(&mut self) {
        let Some(path) = std::env::var_os(crate::environment::TRACE_WORKERS) else {
            return;
        };
        let ns = |t: std::time::SystemTime| {
            t.duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        };
        let line = format!(
            "{} {} {} {}\n",
            std::process::id(),
            ns(self.started),
            ns(std::time::SystemTime::now()),
            self.count
        );
        // One append of one short line: lines of concurrent processes never interleave.
        // A trace that cannot be written is not the link's failure.
        use std::io::Write;
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
    }
}

/// `f` of every item, on the threads [`workers`] gives, in `items`' order. A panic in `f`
/// is passed on (it is a bug, not an input error).
pub fn map_ordered<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let budget = workers(items.len());
    map_on(items, budget.count(), f)
}

/// [`map_ordered`] on one thread fewer than it would take (at least one): for work done while
/// another process runs beside this one on a CPU of its own (the real linker).
pub fn map_ordered_beside<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let budget = workers(items.len());
    let threads = budget.count().min(threads().saturating_sub(1).max(1));
    map_on(items, threads, f)
}

fn map_on<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = threads.min(items.len());
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

/// What [`stream_ordered`] shares between its threads.
struct Stream<R, E> {
    /// Whether the source is spent (or failed, or the consumer stopped, or a worker panicked).
    ended: bool,
    /// Weight taken and not yet consumed.
    in_flight: u64,
    /// Index of the next item the source gives.
    next: usize,
    /// Results not yet consumed, by index, with their weight.
    done: std::collections::BTreeMap<usize, (R, u64)>,
    /// The source's error (it ends the stream where the item it failed to give would be).
    failed: Option<E>,
    /// A worker's panic, resumed on the calling thread.
    panicked: Option<Box<dyn std::any::Any + Send>>,
}

/// Runs `work` on the items `source` gives (called under a lock, in order: `Ok(None)` when it
/// is spent), on the threads [`workers`] grants, with at most `cap` of their weight (the
/// second of each pair) taken and not yet consumed (at least one item), and gives each
/// result to `consume` on the calling thread, in the source's order. No wait for a whole
/// batch: a thread takes the next item as soon as it is done, so one large item holds up
/// nothing but its own result. Only `active()` threads take items (at least one): fewer
/// while another process needs a CPU. The first error, of the source or of `consume`, ends
/// it (items in flight finish first); a panic in `work` is resumed here.
pub fn stream_ordered<T, R: Send, E: Send>(
    cap: u64,
    active: &(dyn Fn() -> usize + Sync),
    source: impl FnMut() -> Result<Option<(T, u64)>, E> + Send,
    work: impl Fn(T) -> R + Sync,
    mut consume: impl FnMut(R) -> Result<(), E>,
) -> Result<(), E> {
    use std::sync::{Condvar, Mutex, MutexGuard};
    let budget = workers(usize::MAX);
    let threads = budget.count().max(1);
    let state = Mutex::new(Stream::<R, E> {
        ended: false,
        in_flight: 0,
        next: 0,
        done: Default::default(),
        failed: None,
        panicked: None,
    });
    let source = Mutex::new(source);
    // Told when an item is taken or done, weight is let go, or the stream ends.
    let changed = Condvar::new();
    fn lock<S>(m: &Mutex<S>) -> MutexGuard<'_, S> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }
    std::thread::scope(|scope| -> Result<(), E> {
        for k in 0..threads {
            let (state, source, changed, work) = (&state, &source, &changed, &work);
            scope.spawn(move || loop {
                let mut st = lock(state);
                // Wait for room, and for this thread's turn while fewer may run (polled: the
                // count changes from outside).
                while !st.ended
                    && ((st.in_flight > 0 && st.in_flight >= cap) || k >= active().max(1))
                {
                    st = changed
                        .wait_timeout(st, std::time::Duration::from_millis(20))
                        .map(|(g, _)| g)
                        .unwrap_or_else(|e| e.into_inner().0);
                }
                if st.ended {
                    return;
                }
                let given = (*lock(source))();
                let (item, weight) = match given {
                    Ok(Some(x)) => x,
                    Ok(None) | Err(_) => {
                        st.ended = true;
                        st.failed = given.err();
                        changed.notify_all();
                        return;
                    }
                };
                let at = st.next;
                st.next += 1;
                st.in_flight += weight;
                drop(st);
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(item)));
                let mut st = lock(state);
                match r {
                    Ok(r) => {
                        st.done.insert(at, (r, weight));
                    }
                    Err(p) => {
                        st.ended = true;
                        st.panicked.get_or_insert(p);
                    }
                }
                changed.notify_all();
            });
        }
        // The consumer: results in order, as they come.
        for want in 0.. {
            let mut st = lock(&state);
            let (r, weight) = loop {
                if let Some(p) = st.panicked.take() {
                    drop(st);
                    std::panic::resume_unwind(p);
                }
                if let Some(r) = st.done.remove(&want) {
                    break r;
                }
                if st.ended && want >= st.next {
                    return st.failed.take().map_or(Ok(()), Err);
                }
                st = changed.wait(st).unwrap_or_else(|e| e.into_inner());
            };
            drop(st);
            let outcome = consume(r);
            let mut st = lock(&state);
            st.in_flight -= weight;
            st.ended |= outcome.is_err();
            changed.notify_all();
            drop(st);
            outcome?;
        }
        Ok(())
    })
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

    /// A stream gives every result in the source's order, whatever order the work finishes
    /// in, never holds more than its cap in flight, and stops at the first error.
    #[test]
    fn a_stream_keeps_the_order_and_its_cap() {
        use std::sync::atomic::AtomicU64;
        let held = AtomicU64::new(0);
        let most = AtomicU64::new(0);
        let mut n = 0u64;
        let mut got = Vec::new();
        let r: Result<(), String> = stream_ordered(
            10,
            &|| 4,
            || {
                n += 1;
                Ok((n <= 200).then_some((n, 1 + n % 5)))
            },
            |x| {
                let now = held.fetch_add(1 + x % 5, Ordering::SeqCst) + 1 + x % 5;
                most.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_micros((x * 37) % 300));
                held.fetch_sub(1 + x % 5, Ordering::SeqCst);
                x * 2
            },
            |y| {
                got.push(y);
                Ok(())
            },
        );
        assert_eq!(r, Ok(()));
        assert_eq!(got, (1..=200).map(|x| x * 2).collect::<Vec<u64>>());
        // At most the cap, or one item over it where one item alone was let in.
        assert!(most.load(Ordering::SeqCst) <= 10 + 5, "{most:?}");

        let mut n = 0u64;
        let mut seen = 0;
        let r = stream_ordered(
            4,
            &|| 2,
            || {
                n += 1;
                match n {
                    50 => Err("the source failed".to_string()),
                    _ => Ok(Some((n, 1))),
                }
            },
            |x| x,
            |_| {
                seen += 1;
                Ok(())
            },
        );
        assert_eq!(r, Err("the source failed".to_string()));
        assert_eq!(seen, 49);
        let mut n = 0u64;
        let r = stream_ordered(
            4,
            &|| 2,
            || {
                n += 1;
                Ok(Some((n, 1)))
            },
            |x| x,
            |x| match x {
                7 => Err(format!("stopped at {x}")),
                _ => Ok(()),
            },
        );
        assert_eq!(r, Err("stopped at 7".to_string()));
    }
}
