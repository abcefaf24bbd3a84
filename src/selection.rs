//! Selection policy, shared by `prune`, `split` (through prune), and `inspect --for`: what
//! is kept: exact labels (`--keep sm_90,compute_90`), or, per module, what
//! the runtime and cudart would choose on the GPUs named (`--for 8.9,9.0`), with the same
//! selection function the runtime uses (fatpack-format's `select`), `a`/`f` variants and the
//! PTX a GPU would JIT included.

use std::collections::{BTreeMap, BTreeSet};

pub use fatpack_format::arch::ForTargets;
use fatpack_format::arch::{parse_target_list, ArchParseError, EntryId, EntryKind};
use fatpack_format::select::{self, capability_string};

/// What `--keep`, `--for` or `--dead` asked for cannot be done.
#[derive(Debug, thiserror::Error)]
pub enum SelectionError {
    #[error("--keep: {0}")]
    Keep(#[from] ArchParseError),
    #[error(
        "--for {text}: want compute capabilities such as 8.9,9.0 (or 89;90, sm_89, 9.0a, \
         90a-real){}",
        fatpack_format::arch::did_you_mean(text)
    )]
    Capability { text: String },
    #[error("{option} {text}: {why}")]
    NoSuchCapability {
        option: &'static str,
        text: String,
        why: String,
    },
    #[error(
        "module {module}: --keep {keep} keeps none of its entries (it has {has}); the pruned \
         binary could not run its kernels anywhere (pass --allow-empty to do it anyway)"
    )]
    Emptied {
        module: String,
        keep: String,
        has: String,
    },
    #[error("{}: --keep names {missing} but the file has none of them, only {present}", path.display())]
    Absent {
        path: std::path::PathBuf,
        missing: String,
        present: String,
    },
}

#[derive(Debug, Clone)]
pub enum Selection {
    /// `--keep`: these exact targets, in every module. A module left with nothing is refused
    /// unless `allow_empty` (an `-rdc` program's cudadevrt modules, kept only as PTX, would
    /// silently lose everything).
    Keep {
        targets: BTreeSet<EntryId>,
        allow_empty: bool,
    },
    /// `--for`: these GPUs' compute capabilities (`major * 10 + minor`), and the virtual
    /// archs whose PTX to keep ([`ForTargets`]).
    For(ForTargets),
    /// `--dead`: every entry some GPU would load ([`select::live`]); only the ones no GPU
    /// would ever choose go, so every GPU keeps running what it ran.
    Dead,
}

/// The [`Chosen`] key under which `--dead` counts the entries it dropped.
const DEAD: u32 = u32::MAX;
/// [`Chosen`] keys from here on count the PTX kept for a virtual arch: `PTX_KEY + 90` for
/// `compute_90`.
const PTX_KEY: u32 = 1 << 20;

/// How the report names a [`Chosen`] key: `9.0`, `compute_90`, `none`, `dead`.
pub fn chosen_name(key: u32) -> String {
    match key {
        0 => "none".to_string(),
        DEAD => "dead".to_string(),
        k if k >= PTX_KEY => format!("compute_{}", k - PTX_KEY),
        c => capability_string(c),
    }
}

/// What [`describe`] says of a module that has nothing for a capability.
pub const NOTHING_RUNS: &str = "nothing runs there, before or after pruning";
/// ... and of a module that has nothing for any capability listed.
pub const SMALLEST_KEPT: &str = "only its smallest entry kept";

/// ... and of a container a program loads itself that none of them runs: it is emptied.
pub const EMPTIED: &str = "emptied (the program loads it itself and none of them runs it)";

/// Per capability, which entries were chosen and how often: `9.0 -> {sm_90a: 3}`.
pub type Chosen = BTreeMap<u32, BTreeMap<String, usize>>;

/// Parses `--for`: `8.9,9.0`, `89;90`, `sm_89`, CMake's `89-real`/`90a`, Nix's `8.9` name
/// GPUs; `compute_90`, `90-virtual` name the PTX of a virtual arch; `9.0+PTX` both
/// (fatpack-format's one capability parser, whose lists `--keep` reads too).
pub fn parse_capabilities(text: &str) -> Result<ForTargets, SelectionError> {
    let targets =
        fatpack_format::arch::parse_for_list(text).map_err(|_| SelectionError::Capability {
            text: text.to_string(),
        })?;
    for &cap in targets.gpus.iter().chain(&targets.ptx) {
        known(cap, capability_string).map_err(|why| SelectionError::NoSuchCapability {
            option: "--for",
            text: text.to_string(),
            why,
        })?;
    }
    Ok(targets)
}

/// `--keep`'s targets, each an arch some GPU has ([`known`]).
fn check_keep(text: &str, targets: &BTreeSet<EntryId>) -> Result<(), SelectionError> {
    for t in targets {
        known(t.arch, |c| format!("sm_{c}")).map_err(|why| SelectionError::NoSuchCapability {
            option: "--keep",
            text: text.to_string(),
            why,
        })?;
    }
    Ok(())
}

/// Whether `cap` is a compute capability that exists: one of the GPUs NVIDIA has shipped
/// or announced ([`select::REAL_GPUS`], Maxwell 5.0 to Blackwell 12.1, the capabilities
/// nvcc 13 builds for among them), or a newer one that the nvcc on `PATH` lists
/// (`nvcc --list-gpu-arch`). A typo (`90.0`, `sm_91`, `sm_20`) would otherwise select
/// nothing a GPU runs and write a package that serves no one. `spell`: how the option
/// spells a capability, for the suggestion.
fn known(cap: u32, spell: impl Fn(u32) -> String) -> Result<(), String> {
    if select::REAL_GPUS.contains(&cap) || nvcc_lists(cap) {
        return Ok(());
    }
    // The nearest capability that exists, preferring the same major version.
    let nearest = select::REAL_GPUS
        .iter()
        .copied()
        .min_by_key(|&c| ((c / 10).abs_diff(cap / 10), c.abs_diff(cap)))
        .expect("a list of GPUs");
    let scaled = [cap / 10, cap / 100]
        .into_iter()
        .find(|c| select::REAL_GPUS.contains(c));
    let suggestion = spell(scaled.unwrap_or(nearest));
    Err(format!(
        "no GPU has compute capability {} (they run from 5.0 to 12.1, and newer ones where \
         the nvcc on PATH lists them); did you mean {suggestion}?",
        capability_string(cap)
    ))
}

/// Whether `nvcc --list-gpu-arch` (the nvcc on `PATH`, if any) lists `sm_{cap}` or
/// `compute_{cap}`: an arch newer than fatpack, that the user's toolkit builds for.
fn nvcc_lists(cap: u32) -> bool {
    let out = std::process::Command::new("nvcc")
        .arg("--list-gpu-arch")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    let Ok(out) = out else { return false };
    let text = String::from_utf8_lossy(&out.stdout);
    out.status.success()
        && text.split_whitespace().any(|w| {
            let number = w.trim_start_matches("sm_").trim_start_matches("compute_");
            number.trim_end_matches(['a', 'f']) == cap.to_string()
        })
}

impl Selection {
    /// `--for` these GPUs, no virtual arch.
    pub fn for_gpus(caps: &[u32]) -> Selection {
        Selection::For(ForTargets {
            gpus: caps.to_vec(),
            ptx: Vec::new(),
        })
    }

    /// Which of a module's entries to keep (`sizes`: each entry's stored bytes). With
    /// `--for`, what the runtime would choose for each capability; a capability nothing in
    /// the module runs on could not run it before either (cuBLAS has hundreds of modules for
    /// sm_100 or sm_120 only), so that is reported, not refused. A module that none of the
    /// listed GPUs can run keeps only its smallest entry: it stays a well-formed container
    /// to register, and stops costing the space of code those GPUs never load.
    pub fn choose(
        &self,
        module: &str,
        cands: &[EntryId],
        sizes: &[u64],
        chosen: &mut Chosen,
    ) -> Result<Vec<bool>, SelectionError> {
        match self {
            Selection::Keep {
                targets,
                allow_empty,
            } => {
                let keep = named(targets, cands);
                if !allow_empty && !cands.is_empty() && !keep.contains(&true) {
                    return Err(SelectionError::Emptied {
                        module: module.to_string(),
                        keep: join(targets),
                        has: select::list(cands),
                    });
                }
                Ok(keep)
            }
            Selection::Dead => Ok(drop_dead(cands, chosen)),
            Selection::For(targets) => {
                let mut keep = chosen_for(targets, cands, chosen, true);
                if !keep.contains(&true) {
                    if let Some(i) = (0..cands.len()).min_by_key(|&i| sizes.get(i).copied()) {
                        keep[i] = true;
                        let what = format!("{SMALLEST_KEPT} ({})", cands[i].name());
                        *chosen.entry(0).or_default().entry(what).or_default() += 1;
                    }
                }
                Ok(keep)
            }
        }
    }

    /// [`Selection::choose`] for a container the program loads itself (a fatbin in a
    /// library's `.data` that it hands the driver): one that none of the GPUs listed runs
    /// is emptied, not kept in part, since nothing registers it at start-up and loading it
    /// on those GPUs fails before pruning as after.
    pub fn choose_unregistered(&self, cands: &[EntryId], chosen: &mut Chosen) -> Vec<bool> {
        let keep: Vec<bool> = match self {
            Selection::Dead => return drop_dead(cands, chosen),
            Selection::Keep { targets, .. } => named(targets, cands),
            Selection::For(targets) => chosen_for(targets, cands, chosen, false),
        };
        if !keep.contains(&true) {
            let what = format!("{EMPTIED} (had {})", select::list(cands));
            *chosen.entry(0).or_default().entry(what).or_default() += 1;
        }
        keep
    }

    /// `--keep` must name something the file has; targets it lacks are returned, for the
    /// report (a list meant for many files, e.g. `sm_90,compute_90` over a package, names
    /// some that one library does not have).
    pub fn check_present(
        &self,
        path: &std::path::Path,
        present: &BTreeSet<EntryId>,
    ) -> Result<Vec<String>, SelectionError> {
        let Selection::Keep { targets, .. } = self else {
            return Ok(Vec::new());
        };
        let missing: Vec<String> = targets.difference(present).map(|t| t.to_string()).collect();
        if present.is_empty() || targets.intersection(present).next().is_some() {
            return Ok(missing);
        }
        Err(SelectionError::Absent {
            path: path.to_path_buf(),
            missing: missing.join(", "),
            present: join(present),
        })
    }
}

fn join(targets: &BTreeSet<EntryId>) -> String {
    targets
        .iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `9.0: sm_90a (3 modules), compute_90 (1)` for each capability.
/// `--keep`: the entries `targets` names.
fn named(targets: &BTreeSet<EntryId>, cands: &[EntryId]) -> Vec<bool> {
    cands
        .iter()
        .map(|c| EntryId::code(c.kind, c.arch, c.variant).is_some_and(|t| targets.contains(&t)))
        .collect()
}

/// `--for`: per capability, the entry the runtime would choose, counted in `chosen`; with
/// `note_nothing`, a capability nothing runs on is counted too.
fn chosen_for(
    targets: &ForTargets,
    cands: &[EntryId],
    chosen: &mut Chosen,
    note_nothing: bool,
) -> Vec<bool> {
    let mut keep = vec![false; cands.len()];
    // A virtual arch: the PTX a GPU of its capability would JIT, had it no SASS (listed
    // only when one is asked for: this runs once per module).
    let ptx: Vec<usize> = match targets.ptx.is_empty() {
        true => Vec::new(),
        false => (0..cands.len())
            .filter(|&i| cands[i].kind == EntryKind::Ptx)
            .collect(),
    };
    let ptx_cands: Vec<EntryId> = ptx.iter().map(|&i| cands[i]).collect();
    let wanted = targets
        .gpus
        .iter()
        .map(|&c| (c, select::select(c, cands)))
        .chain(targets.ptx.iter().map(|&c| {
            let at = select::select(c, &ptx_cands).map(|j| ptx[j]);
            (PTX_KEY + c, at)
        }));
    for (key, at) in wanted {
        let name = match at {
            Some(i) => {
                keep[i] = true;
                cands[i].name()
            }
            None if note_nothing => format!("{NOTHING_RUNS} (has {})", select::list(cands)),
            None => continue,
        };
        *chosen.entry(key).or_default().entry(name).or_default() += 1;
    }
    keep
}

/// `--dead`: the live entries, counting the dead ones (a module none of whose entries any
/// GPU runs, say sm_35 SASS alone, is left as it is).
fn drop_dead(cands: &[EntryId], chosen: &mut Chosen) -> Vec<bool> {
    let live = select::live(cands);
    if !live.contains(&true) {
        return vec![true; cands.len()];
    }
    for (c, _) in cands.iter().zip(&live).filter(|(_, l)| !**l) {
        *chosen.entry(DEAD).or_default().entry(c.name()).or_default() += 1;
    }
    live
}

/// The report of what was kept, one line per capability, and one more per capability for
/// the modules it runs nothing of: those are summed, with every arch they have, instead of
/// one clause per combination of archs (static cuBLAS has dozens: a line of several KB).
pub fn describe(chosen: &Chosen) -> Vec<String> {
    let plural = |k: usize| if k == 1 { "" } else { "s" };
    let mut lines = Vec::new();
    for (cap, names) in chosen {
        let mut parts = Vec::new();
        // Modules summed per kind of note ("nothing runs", "smallest kept"), with their archs.
        let mut notes: Vec<(&str, usize, Vec<String>)> = Vec::new();
        for (n, k) in names {
            let note = [NOTHING_RUNS, SMALLEST_KEPT, EMPTIED]
                .into_iter()
                .find(|p| n.starts_with(p));
            match note {
                Some(note) => {
                    let archs = n[note.len()..]
                        .trim_matches(|c: char| c == ' ' || c == '(' || c == ')')
                        .trim_start_matches("has ")
                        .trim_start_matches("had ")
                        .split(", ")
                        .filter(|a| !a.is_empty())
                        .map(str::to_string);
                    match notes.iter_mut().find(|(m, ..)| *m == note) {
                        Some((_, count, all)) => {
                            *count += k;
                            all.extend(archs);
                        }
                        None => notes.push((note, *k, archs.collect())),
                    }
                }
                // A GPU that gets PTX: the driver compiles it when the module first loads.
                None if n.starts_with("compute_") && (1..PTX_KEY).contains(cap) && *cap != DEAD => {
                    parts.push(format!(
                        "{n} ({k} module{}; PTX, JIT-compiled at first load)",
                        plural(*k)
                    ))
                }
                None => parts.push(format!("{n} ({k} module{})", plural(*k))),
            }
        }
        let head = match *cap {
            // Modules none of the capabilities runs.
            0 => "for none of them".to_string(),
            DEAD => "dead entries (no GPU would load them) dropped from".to_string(),
            k => format!("for {}", chosen_name(k)),
        };
        if !parts.is_empty() {
            lines.push(format!("{head}: {}", parts.join(", ")));
        }
        for (note, count, mut archs) in notes {
            let key = |a: &String| (fatpack_format::arch::EntryId::parse(a), a.clone());
            archs.sort_by_key(key);
            archs.dedup();
            // Nothing runs: the archs those modules have; smallest kept: the entries kept.
            let what = match note {
                NOTHING_RUNS => "their archs: ",
                EMPTIED => "they had: ",
                _ => "",
            };
            lines.push(format!(
                "{head}: {note}: {count} module{} ({what}{})",
                plural(count),
                archs.join(", ")
            ));
        }
    }
    lines
}

/// The set of targets to keep, from `--keep` (nvcc or CMake spellings).
pub fn parse_keep(text: &str) -> Result<BTreeSet<EntryId>, SelectionError> {
    let targets = parse_target_list(text)?.into_iter().collect();
    check_keep(text, &targets)?;
    Ok(targets)
}

/// Which entries of one container prune keeps, the one decision prune makes and `inspect
/// --for` reports. `entries`: each entry as selection sees it (`None`: a kind it never
/// chooses, NVVM IR a library hands its own JIT or one nvcc may add, always kept) and its
/// stored size. `registered`: cudart registers the container at start-up (not a fatbin the
/// program loads itself).
pub fn keep_in_container(
    module: &str,
    entries: &[(Option<EntryId>, u64)],
    sel: &Selection,
    registered: bool,
    chosen: &mut Chosen,
) -> Result<Kept, SelectionError> {
    let mut code: Vec<usize> = (0..entries.len())
        .filter(|&i| entries[i].0.is_some())
        .collect();
    // A container the program loads itself that also holds NVVM (cuSPARSE's `.rodata`
    // pairs NVVM with PTX) feeds the program's own JIT link, not the driver's choice: whole.
    if !registered && code.len() < entries.len() {
        code.clear();
    }
    let mut keep = vec![true; entries.len()];
    if code.is_empty() {
        return Ok(Kept {
            keep,
            cands: Vec::new(),
            flags: Vec::new(),
        });
    }
    let cands: Vec<EntryId> = code.iter().filter_map(|&i| entries[i].0).collect();
    let sizes: Vec<u64> = code.iter().map(|&i| entries[i].1).collect();
    let flags = match registered {
        true => sel.choose(module, &cands, &sizes, chosen)?,
        false => sel.choose_unregistered(&cands, chosen),
    };
    for (&i, &k) in code.iter().zip(&flags) {
        keep[i] = k;
    }
    Ok(Kept { keep, cands, flags })
}

/// What [`keep_in_container`] decided.
pub struct Kept {
    /// A flag per entry.
    pub keep: Vec<bool>,
    /// The SASS and PTX entries selection chose among, and its flags for them (what
    /// [`fatpack_format::select::Runs`] notes); empty where the container is kept whole.
    pub cands: Vec<EntryId>,
    pub flags: Vec<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Static cuBLAS for 9.0: dozens of "nothing runs" clauses become one summed line.
    #[test]
    fn the_report_sums_the_modules_nothing_runs_in() {
        let mut chosen = Chosen::new();
        let for90 = chosen.entry(90).or_default();
        for90.insert("sm_90".into(), 74);
        for (has, k) in [
            ("sm_100", 780),
            ("sm_100, compute_120, sm_120", 139),
            ("sm_75", 6),
        ] {
            for90.insert(format!("{NOTHING_RUNS} (has {has})"), k);
        }
        let lines = describe(&chosen);
        assert_eq!(
            lines,
            [
                "for 9.0: sm_90 (74 modules)".to_string(),
                format!(
                    "for 9.0: {NOTHING_RUNS}: 925 modules (their archs: sm_75, sm_100, \
                     sm_120, compute_120)"
                ),
            ]
        );
        assert!(lines.iter().all(|l| l.len() < 120));
    }

    #[test]
    fn a_container_the_program_loads_is_emptied_where_nothing_runs() {
        let c = |n: &str| EntryId::parse(n).unwrap();
        let mut chosen = Chosen::new();
        let only_100 = [c("sm_100")];
        let sel = Selection::for_gpus(&[90]);
        assert_eq!(sel.choose_unregistered(&only_100, &mut chosen), [false]);
        assert!(chosen[&0].keys().any(|k| k.starts_with(EMPTIED)));
        // PTX a 9.0 GPU would JIT stays, as the runtime would choose it.
        let ptx = [c("compute_75")];
        assert_eq!(sel.choose_unregistered(&ptx, &mut chosen), [true]);
        // A registered module keeps its smallest entry instead.
        let kept = sel.choose("m", &only_100, &[10], &mut chosen).unwrap();
        assert_eq!(kept, [true]);
        let keep = Selection::Keep {
            targets: [c("sm_90")].into(),
            allow_empty: false,
        };
        assert_eq!(keep.choose_unregistered(&only_100, &mut chosen), [false]);
    }

    #[test]
    fn for_keeps_what_the_runtime_would_choose() {
        let c = |n: &str| EntryId::parse(n).unwrap();
        let cands = [c("sm_80"), c("sm_90"), c("sm_90a"), c("compute_90")];
        let mut chosen = Chosen::new();
        let sizes = [40, 30, 20, 10];
        let keep = Selection::for_gpus(&[90, 86, 120])
            .choose("m", &cands, &sizes, &mut chosen)
            .unwrap();
        // 9.0 runs sm_90a, 8.6 sm_80, 12.0 JITs compute_90.
        assert_eq!(keep, vec![true, false, true, true]);
        assert_eq!(chosen[&90]["sm_90a"], 1);
        // Nothing runs on 7.5: said, and only the smallest entry stays.
        let keep = Selection::for_gpus(&[75])
            .choose("m", &cands, &sizes, &mut chosen)
            .unwrap();
        assert_eq!(keep, vec![false, false, false, true]);
        let (what, n) = chosen[&75].iter().next().unwrap();
        assert!(what.starts_with(NOTHING_RUNS) && *n == 1, "{what}");
        assert!(chosen[&0].keys().next().unwrap().contains("compute_90"));
    }
}
