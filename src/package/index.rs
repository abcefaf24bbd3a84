//! `fatpack index WHEELS -o OUT`: the package indexes that serve a fat wheel and its pruned
//! variants so that every installer picks right.
//!
//! - `OUT/simple/`: a PEP 503 simple index of the fat wheels and their PEP 825 variant
//!   wheels, with each version's `{name}-{version}-variants.json` (the index-level variant
//!   metadata, merged from the wheels' own `variant.json`: a label that means two things
//!   is refused). Today's pip installs the fat wheel from it; a variant-aware installer
//!   picks the variant for the machine's GPU.
//! - `OUT/<label>/simple/`: one index per local label (`1.0+cu130.sm90` is served from
//!   `OUT/sm90/simple/` and nowhere else). pip ranks a local version above its public one
//!   and `==1.0` matches it, so a local-label wheel beside the fat one would be installed
//!   everywhere: each variant gets an index of its own, as PyTorch's `/whl/cu130` does.
//!
//! Every wheel is copied to `OUT/files/` and linked with its sha256, which pip checks.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::Digest;

use super::tarball::{hex, sha256_file};
use super::{metadata, variant};
use crate::commit::Outputs;
use crate::error::io_at;
use crate::prune::PruneError;

/// What `index` wrote: each index and the wheels it serves.
#[derive(Debug, Default)]
pub struct IndexReport {
    /// Index folder (relative to OUT) -> wheel file names.
    pub indexes: BTreeMap<String, Vec<String>>,
}

/// One wheel found.
struct Wheel {
    file: String,
    project: String,
    /// The version as the file name spells it.
    version: String,
    /// A PEP 825 variant label.
    label: Option<String>,
    /// The local-label variant it is, if fatpack labelled its version.
    local: Option<String>,
    sha256: String,
}

fn bad(path: &Path, message: impl Into<String>) -> PruneError {
    PruneError::Package {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Text for HTML, escaped (PEP 503 pages carry file names; the checks in [`read_wheel`]
/// already keep them to safe characters).
fn html(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// Reads the wheel `path` as it is copied into `files` (streamed: a torch wheel is
/// gigabytes, and is never held whole).
fn read_wheel(path: &Path, files: &Path) -> Result<(Wheel, Option<serde_json::Value>), PruneError> {
    let file = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string();
    let stem = file.strip_suffix(".whl").unwrap_or(&file);
    let parts: Vec<&str> = stem.split('-').collect();
    let (dist, version) = match parts.as_slice() {
        [d, v, ..] if (5..=7).contains(&parts.len()) => (d.to_string(), v.to_string()),
        _ => {
            return Err(bad(
                path,
                "not a wheel file name ({name}-{version}-...-{platform}.whl)",
            ))
        }
    };
    // Each part goes into a URL, a page and a file name: checked before any is used.
    metadata::wheel_name(&dist, &version, &parts[2..])
        .map_err(|(part, why)| bad(path, format!("its name's part {part:?} is {why}; refused")))?;
    let copy = files.join(&file);
    std::fs::copy(path, &copy).map_err(io_at(path))?;
    let (sha256, _) = sha256_file(&copy)?;
    let opened = std::fs::File::open(&copy).map_err(io_at(&copy))?;
    let mut zip = zip::ZipArchive::new(std::io::BufReader::new(opened))
        .map_err(|e| bad(path, super::zip_problem(&e)))?;
    let vjson = format!("{dist}-{version}.dist-info/variant.json");
    let variant = match zip.by_name(&vjson) {
        Ok(f) => {
            let mut text = String::new();
            // Metadata, not a payload: a few KB, never more than this.
            f.take(16 << 20)
                .read_to_string(&mut text)
                .map_err(|e| bad(path, format!("{vjson}: {e}")))?;
            Some(
                serde_json::from_str::<serde_json::Value>(&text)
                    .map_err(|e| bad(path, format!("{vjson}: {e}")))?,
            )
        }
        Err(_) => None,
    };
    // build? python abi platform label?: with variant.json the last part is the label.
    let label = variant.as_ref().map(|_| parts[parts.len() - 1].to_string());
    let (dist, version) = (dist.as_str(), version.as_str());
    if let (Some(l), Some(v)) = (&label, &variant) {
        if v["variants"].get(l).is_none() {
            return Err(bad(
                path,
                format!("{vjson} does not define the file name's label {l}"),
            ));
        }
    }
    let local = version.split_once('+').and_then(|(_, local)| {
        let segs: Vec<&str> = local.split('.').collect();
        let ours = segs
            .iter()
            .rev()
            .take_while(|s| variant::is_ours(s))
            .count();
        (ours > 0).then(|| segs[segs.len() - ours..].join("."))
    });
    Ok((
        Wheel {
            project: super::metadata::normalize(dist),
            file,
            version: version.to_string(),
            label,
            local,
            sha256,
        },
        variant,
    ))
}

/// Writes the indexes of the wheels in `dir` into the new folder `output`.
pub fn index(dir: &Path, output: &Path) -> Result<IndexReport, PruneError> {
    let outs = Outputs::new(&[dir]);
    outs.check(output)?;
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io_at(dir))?
        .map(|e| e.map(|e| e.path()).map_err(io_at(dir)))
        .collect::<Result<_, _>>()?;
    paths.retain(|p| p.extension().is_some_and(|e| e == "whl"));
    paths.sort();
    if paths.is_empty() {
        return Err(bad(dir, "holds no wheel (*.whl)"));
    }
    let staging = outs.dir(output)?;
    let root = staging.path();
    let files = root.join("files");
    std::fs::create_dir(&files).map_err(io_at(&files))?;
    // (project, version) -> the merged variants.json.
    let mut variants: BTreeMap<(String, String, String), serde_json::Value> = BTreeMap::new();
    // index folder -> project -> wheels.
    let mut indexes: BTreeMap<String, BTreeMap<String, Vec<Wheel>>> = BTreeMap::new();
    for path in &paths {
        let (wheel, vjson) = read_wheel(path, &files)?;
        if let (Some(label), Some(v)) = (&wheel.label, vjson) {
            let dist = wheel.file.split('-').next().unwrap_or_default().to_string();
            let key = (wheel.project.clone(), dist, wheel.version.clone());
            let merged = variants.entry(key).or_insert_with(|| {
                let mut m = v.clone();
                m["variants"] = serde_json::json!({});
                m
            });
            let props = &v["variants"][label];
            match merged["variants"].get(label) {
                Some(old) if old != props => {
                    return Err(bad(
                        path,
                        format!(
                            "variant label {label} means other GPUs in another wheel of {}",
                            wheel.version
                        ),
                    ))
                }
                _ => merged["variants"][label] = props.clone(),
            }
        }
        let folder = match &wheel.local {
            Some(l) => format!("{l}/simple"),
            None => "simple".to_string(),
        };
        indexes
            .entry(folder)
            .or_default()
            .entry(wheel.project.clone())
            .or_default()
            .push(wheel);
    }
    let mut extra: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for ((project, dist, version), doc) in &variants {
        let name = format!("{dist}-{version}-variants.json");
        let mut text = serde_json::to_string_pretty(doc).expect("a JSON value serializes");
        text.push('\n');
        let at = files.join(&name);
        std::fs::write(&at, &text).map_err(io_at(&at))?;
        let sha = hex(&sha2::Sha256::digest(text.as_bytes()));
        extra.entry(project.clone()).or_default().push((name, sha));
    }
    let mut report = IndexReport::default();
    for (folder, projects) in &indexes {
        let base = root.join(folder);
        let up = "../".repeat(folder.split('/').count() + 1);
        let mut links = Vec::new();
        for (project, wheels) in projects {
            let mut rows: Vec<(String, String)> = wheels
                .iter()
                .map(|w| (w.file.clone(), w.sha256.clone()))
                .collect();
            if folder == "simple" {
                rows.extend(extra.get(project).cloned().unwrap_or_default());
            }
            let page: String = rows
                .iter()
                .map(|(f, sha)| {
                    let f = html(f);
                    format!("<a href=\"{up}files/{f}#sha256={sha}\">{f}</a><br>\n")
                })
                .collect();
            let pdir = base.join(project);
            std::fs::create_dir_all(&pdir).map_err(io_at(&pdir))?;
            let doc = format!("<!DOCTYPE html>\n<html><body>\n{page}</body></html>\n");
            std::fs::write(pdir.join("index.html"), doc).map_err(io_at(&pdir))?;
            let p = html(project);
            links.push(format!("<a href=\"{p}/\">{p}</a><br>\n"));
            report
                .indexes
                .entry(folder.clone())
                .or_default()
                .extend(rows.into_iter().map(|(f, _)| f));
        }
        let html = format!(
            "<!DOCTYPE html>\n<html><body>\n{}</body></html>\n",
            links.concat()
        );
        std::fs::write(base.join("index.html"), html).map_err(io_at(&base))?;
    }
    outs.commit(vec![staging])?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_names_are_normalized_as_pep_503_says() {
        assert_eq!(super::metadata::normalize("Nvidia_CuFFT"), "nvidia-cufft");
        assert_eq!(super::metadata::normalize("a.-_b"), "a-b");
        assert_eq!(super::metadata::normalize("_x__Y"), "-x-y");
        assert_eq!(html("<a href=\"x\">"), "&lt;a href=&quot;x&quot;&gt;");
    }
}
