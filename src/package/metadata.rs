//! The metadata fields a package's output name and relabelled metadata are built from,
//! checked against each ecosystem's own syntax before anything is built from them: a field
//! is copied into a file name (where `../`, `/` or a newline would move or break the
//! output) and into metadata an installer trusts (where a wrapped build number would rank
//! a variant below its fat package). Each checker returns why the value is refused.

/// Debian policy 5.6.1: a package name is at least two characters of `[a-z0-9+.-]`,
/// starting with a letter or digit.
pub(super) fn debian_package(name: &str) -> Result<(), &'static str> {
    let ok = name.len() >= 2
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+.-".contains(&b));
    verdict(
        ok,
        "not a Debian package name (policy 5.6.1: [a-z0-9][a-z0-9+.-]+)",
    )
}

/// Debian policy 5.6.12: `[epoch:]upstream_version[-debian_revision]`; the epoch digits,
/// the upstream version starting with a digit and made of `[A-Za-z0-9.+~-]` (`-` only where
/// a revision follows), the revision of `[A-Za-z0-9.+~]`.
pub(super) fn debian_version(version: &str) -> Result<(), &'static str> {
    const WHY: &str = "not a Debian version (policy 5.6.12: [epoch:]upstream[-revision])";
    let (epoch, rest) = match version.split_once(':') {
        Some((e, r)) => (Some(e), r),
        None => (None, version),
    };
    if epoch.is_some_and(|e| e.is_empty() || !e.bytes().all(|b| b.is_ascii_digit())) {
        return Err(WHY);
    }
    let (upstream, revision) = match rest.rsplit_once('-') {
        Some((u, r)) => (u, Some(r)),
        None => (rest, None),
    };
    let part = |s: &str, extra: &[u8]| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b".+~".contains(&b) || extra.contains(&b))
    };
    let upstream_ok = upstream.starts_with(|c: char| c.is_ascii_digit())
        && part(upstream, if revision.is_some() { b"-" } else { b"" });
    match upstream_ok && revision.is_none_or(|r| part(r, b"")) {
        true => Ok(()),
        false => Err(WHY),
    }
}

/// Debian policy 5.6.8: an architecture is one word of `[a-z0-9-]` (`amd64`, `all`,
/// `linux-any`).
pub(super) fn debian_architecture(arch: &str) -> Result<(), &'static str> {
    let ok = !arch.is_empty()
        && arch.starts_with(|c: char| c.is_ascii_alphanumeric())
        && arch
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    verdict(
        ok,
        "not a Debian architecture (policy 5.6.8: one word of [a-z0-9-])",
    )
}

/// `Ok` where `ok`, else why not.
fn verdict(ok: bool, why: &'static str) -> Result<(), &'static str> {
    match ok {
        true => Ok(()),
        false => Err(why),
    }
}

/// Every byte of `s` an ASCII letter, a digit or one of `extra`.
fn alnum_or(s: &str, extra: &[u8]) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_alphanumeric() || extra.contains(&b))
}

/// `s` starts and ends with an ASCII letter or digit (so it is not empty).
fn alnum_ends(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// conda's package name (conda-build's and rattler's check): lowercase letters, digits and
/// `_.-`, not starting with `.` or `-`.
pub(super) fn conda_name(name: &str) -> Result<(), &'static str> {
    let ok = !name.is_empty()
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"_.-".contains(&b));
    verdict(ok, "not a conda package name ([a-z0-9_][a-z0-9_.-]*)")
}

/// conda's version: `[A-Za-z0-9_.+!*]`, no `-` (it separates name, version and build in the
/// file name) and no space.
pub(super) fn conda_version(version: &str) -> Result<(), &'static str> {
    verdict(
        !version.is_empty() && alnum_or(version, b"_.+!*"),
        "not a conda version ([A-Za-z0-9_.+!*], no '-')",
    )
}

/// conda's build string: `[A-Za-z0-9_.+]`, no `-`.
pub(super) fn conda_build(build: &str) -> Result<(), &'static str> {
    verdict(
        !build.is_empty() && alnum_or(build, b"_.+"),
        "not a conda build string ([A-Za-z0-9_.+], no '-')",
    )
}

/// The largest build number a variant may be given: a JSON integer every client reads
/// exactly (2^53 - 1, JavaScript's and many JSON readers' largest exact integer), so that
/// the bump prune adds can never wrap or round.
pub(super) const MAX_BUILD_NUMBER: u64 = (1 << 53) - 1;

/// A conda build number as `index.json` must hold it: a non-negative JSON integer (not a
/// string, float or negative number), small enough that a variant's bump cannot overflow.
pub(super) fn conda_build_number(value: &serde_json::Value) -> Result<u64, &'static str> {
    match value.as_u64() {
        Some(n) if n <= MAX_BUILD_NUMBER => Ok(n),
        Some(_) => Err("too large a build_number (over 2^53 - 1)"),
        None => Err("build_number is not a non-negative integer"),
    }
}

/// A wheel file name's distribution part (PEP 427 as `packaging` writes it: a PEP 508 name,
/// `-` escaped to `_`): letters, digits, `_` and `.`, starting and ending with a letter or
/// digit.
pub(super) fn wheel_distribution(dist: &str) -> Result<(), &'static str> {
    verdict(
        alnum_ends(dist) && alnum_or(dist, b"_."),
        "not a wheel's distribution name (PEP 427: [A-Za-z0-9_.])",
    )
}

/// A wheel file name's version part (PEP 440 as PEP 427 writes it): letters, digits and
/// `.+!_`, starting with a digit (or `v`).
pub(super) fn wheel_version(version: &str) -> Result<(), &'static str> {
    verdict(
        version.starts_with(|c: char| c.is_ascii_digit() || c == 'v') && alnum_or(version, b".+!_"),
        "not a wheel's version (PEP 440: [A-Za-z0-9.+!_])",
    )
}

/// A wheel file name's other parts (build tag, compatibility tags, PEP 825 label): letters,
/// digits, `_` and `.`.
pub(super) fn wheel_tag(tag: &str) -> Result<(), &'static str> {
    verdict(
        !tag.is_empty() && alnum_or(tag, b"_."),
        "not a wheel tag ([A-Za-z0-9_.])",
    )
}

/// A wheel file name's parts (distribution, version, then its tags and label), each
/// checked; the first refused part and why.
pub(super) fn wheel_name<'a>(
    dist: &'a str,
    version: &'a str,
    tags: &[&'a str],
) -> Result<(), (&'a str, &'static str)> {
    wheel_distribution(dist).map_err(|why| (dist, why))?;
    wheel_version(version).map_err(|why| (version, why))?;
    for &t in tags {
        wheel_tag(t).map_err(|why| (t, why))?;
    }
    Ok(())
}

/// A file name made of checked fields: one plain component, so that it lands in the folder
/// it is joined to. A last line of defence behind the field checks.
pub(super) fn plain_file_name(name: &str) -> Result<(), &'static str> {
    let ok = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
        && !name.chars().any(char::is_control);
    verdict(ok, "not a plain file name")
}

/// PEP 503's normalized project name: `re.sub(r"[-_.]+", "-", name).lower()`.
pub(super) fn normalize(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        match c {
            '-' | '_' | '.' if out.ends_with('-') => {}
            '-' | '_' | '.' => out.push('-'),
            c => out.push(c.to_ascii_lowercase()),
        }
    }
    out
}

/// A PEP 508 project name: ASCII letters and digits, with `-`, `_` and `.` inside.
pub(super) fn project_name(name: &str) -> Result<(), &'static str> {
    verdict(
        alnum_ends(name) && alnum_or(name, b"-_."),
        "not a project name (PEP 508: [A-Za-z0-9._-])",
    )
}

/// The end of a core metadata file's header: where its first empty line starts (the body,
/// a description, follows it), or its end.
fn header_end(text: &str) -> usize {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_end_matches(['\r', '\n']).is_empty() {
            return at;
        }
        at += line.len();
    }
    at
}

/// The value of a core metadata file's first `Name:` header field.
pub(super) fn metadata_name(text: &str) -> Option<&str> {
    text[..header_end(text)]
        .lines()
        .find_map(|l| l.strip_prefix("Name:"))
        .map(str::trim)
}

/// A core metadata file with its `Name:` set to `name` and `add` (whole field lines) at the
/// end of its header, its body kept; `None` without a `Name:` field.
pub(super) fn edit_metadata(text: &str, name: &str, add: &[String]) -> Option<String> {
    let end = header_end(text);
    let (header, body) = text.split_at(end);
    let mut out = String::with_capacity(text.len() + 64 * add.len());
    let mut named = false;
    for line in header.split_inclusive('\n') {
        match line.strip_prefix("Name:") {
            Some(_) if !named => {
                out.push_str(&format!("Name: {name}\n"));
                named = true;
            }
            _ => out.push_str(line),
        }
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    for l in add {
        out.push_str(l);
        out.push('\n');
    }
    out.push_str(body);
    named.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_fields_follow_policy() {
        for good in ["libcut1", "g++", "libstdc++6", "a.b-c"] {
            assert!(debian_package(good).is_ok(), "{good}");
        }
        for bad in ["../escaped", "x", "Lib", "a b", "a\nb", "-a", "a/b", ""] {
            assert!(debian_package(bad).is_err(), "{bad:?}");
        }
        for good in [
            "1.0-1",
            "1:2.3~rc1-0ubuntu1",
            "2.11.0",
            "1.0-1-1",
            "0.9+dfsg-2",
        ] {
            assert!(debian_version(good).is_ok(), "{good}");
        }
        for bad in [
            "1.0/../../x",
            "a1.0",
            "1.0 1",
            ":1.0",
            "x:1.0",
            "1.0-",
            "1.0-a/b",
            "",
        ] {
            assert!(debian_version(bad).is_err(), "{bad:?}");
        }
        for good in ["amd64", "all", "linux-any"] {
            assert!(debian_architecture(good).is_ok(), "{good}");
        }
        for bad in ["aml64 i386", "../x", "AMD64", ""] {
            assert!(debian_architecture(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn conda_fields_follow_conda() {
        assert!(conda_name("libcublas").is_ok() && conda_name("_openmp_mutex").is_ok());
        for bad in ["../../x", "a\nb", "A", "a b", "-x", ""] {
            assert!(conda_name(bad).is_err(), "{bad:?}");
        }
        assert!(conda_version("12.9.1.4").is_ok() && conda_version("1.0+cu130").is_ok());
        assert!(conda_version("1.0-1").is_err() && conda_version("1/0").is_err());
        assert!(conda_build("h1234_0").is_ok() && conda_build("h1234-0").is_err());
        assert!(wheel_distribution("nvidia_cublas_cu12").is_ok());
        for bad in ["<script>", "a\"b", "_x", "a b", ""] {
            assert!(wheel_distribution(bad).is_err(), "{bad:?}");
        }
        assert!(wheel_version("2.11.0+cu130").is_ok() && wheel_version("1.0\"").is_err());
        assert!(wheel_tag("manylinux_2_28_x86_64").is_ok() && wheel_tag("a<b").is_err());
        use serde_json::json;
        assert_eq!(conda_build_number(&json!(3)), Ok(3));
        for bad in [
            json!(u64::MAX),
            json!(-5),
            json!("7"),
            json!(1e300),
            json!(2.5),
        ] {
            assert!(conda_build_number(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn metadata_is_renamed_and_extended_with_its_body_kept() {
        let m = "Metadata-Version: 2.1\nName: cut-fix\nVersion: 1.0\n\nName: in the body\n";
        assert_eq!(metadata_name(m), Some("cut-fix"));
        let out = edit_metadata(m, "cut-fix-host", &["Provides-Extra: sm90".into()]).unwrap();
        assert_eq!(
            out,
            "Metadata-Version: 2.1\nName: cut-fix-host\nVersion: 1.0\nProvides-Extra: sm90\n\n\
             Name: in the body\n"
        );
        assert_eq!(edit_metadata("Version: 1\n", "x", &[]), None);
        assert_eq!(metadata_name("Version: 1\n\nName: x\n"), None);
        assert!(project_name("nvidia-curand-cu12").is_ok());
        assert!(project_name("a b").is_err() && project_name("-a").is_err());
        assert_eq!(normalize("Cut__Fix.x"), "cut-fix-x");
    }
}
