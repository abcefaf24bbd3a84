//! Which member names a package may have: relative paths that stay inside the folder an
//! installer unpacks into, spelled one way. Anything else is how an archive writes outside
//! its target (`../`, `/etc/...`, `a/../../b`, Windows' `..\`), or how two names reach one
//! file; prune refuses it rather than carry it into a package it signs.

/// Why `name` (a member of a package; `dir`: a folder entry, which ends in `/`) is not a
/// safe relative path, or `None` if it is.
pub(super) fn unsafe_name(name: &str, dir: bool) -> Option<&'static str> {
    let body = if dir {
        name.strip_suffix('/').unwrap_or(name)
    } else {
        name
    };
    if body.is_empty() {
        return Some("an empty name");
    }
    if body.contains('\0') {
        return Some("a NUL byte in the name");
    }
    if body.contains('\\') {
        return Some("a backslash in the name (a Windows path separator: `..\\` escapes there)");
    }
    if body.starts_with('/') {
        return Some("an absolute path");
    }
    if body.as_bytes().get(1) == Some(&b':') {
        return Some("a drive letter");
    }
    for part in body.split('/') {
        match part {
            "" => return Some("an empty path component (`//` or a trailing `/`)"),
            "." => return Some("a `.` component"),
            ".." => return Some("a `..` component (it would land outside the install folder)"),
            _ => {}
        }
    }
    if body.chars().any(char::is_control) {
        return Some("a control character in the name");
    }
    None
}

/// Why a symlink member's `target` (relative to the folder of `name`) leaves the package,
/// or `None` if it stays inside.
pub(super) fn escaping_link(name: &str, target: &str) -> Option<&'static str> {
    if target.starts_with('/') {
        return Some("a symlink to an absolute path");
    }
    if target.contains(['\0', '\\']) {
        return Some("a symlink whose target has a NUL or a backslash");
    }
    let mut depth = name.split('/').count() as i64 - 1;
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." => depth -= 1,
            _ => depth += 1,
        }
        if depth < 0 {
            return Some("a symlink that points outside the package");
        }
    }
    None
}

/// How a package's absolute symlink targets are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Absolute {
    /// Refused: the package installs into a prefix it cannot know (wheels, conda).
    Refused,
    /// Read against the root the package installs into, as Debian policy 10.5 asks of a
    /// link between top-level folders (`/lib/x.so.1`, meaning `<root>/lib/x.so.1`).
    FromRoot,
}

/// Every symlink of a package, to check each entry against all of them: a link's target
/// resolved through the package's other links (`l2 -> ..`, then `l1 -> l2/../..`) must
/// stay inside, and no entry may be written through a link (`d -> /tmp`, then `d/x.so`),
/// whatever order the archive lists them in.
pub(super) struct Links {
    links: std::collections::HashMap<String, String>,
    absolute: Absolute,
}

/// As Linux: past this many links in one resolution, a loop.
const MAX_HOPS: usize = 40;

impl Links {
    /// `links`: each symlink's name (relative, checked by [`unsafe_name`]) and target.
    pub(super) fn new<'a>(
        links: impl IntoIterator<Item = (&'a str, &'a str)>,
        absolute: Absolute,
    ) -> Links {
        Links {
            links: links
                .into_iter()
                .map(|(n, t)| (n.to_string(), t.to_string()))
                .collect(),
            absolute,
        }
    }

    /// Why the entry `name` is refused: a folder above it is a symlink, or (a symlink
    /// itself) its target leaves the package once every link on the way is followed.
    pub(super) fn check(&self, name: &str) -> Option<String> {
        let parts: Vec<&str> = name.split('/').collect();
        for end in 1..parts.len() {
            let above = parts[..end].join("/");
            if self.links.contains_key(&above) {
                return Some(format!(
                    "it lies under {above}, a symlink: an installer would write it wherever \
                     that link points"
                ));
            }
        }
        let target = self.links.get(name)?;
        let mut hops = 0;
        let mut at: Vec<String> = parts[..parts.len() - 1]
            .iter()
            .map(|s| s.to_string())
            .collect();
        self.walk(&mut at, target, &mut hops)
            .err()
            .map(|why| format!("its target {target:?} {why}"))
    }

    /// Follows `target` from the folder `at` (a stack of components below the root),
    /// through every link it meets.
    fn walk(&self, at: &mut Vec<String>, target: &str, hops: &mut usize) -> Result<(), String> {
        if target.contains(['\0', '\\']) {
            return Err("has a NUL or a backslash".into());
        }
        if target.starts_with('/') {
            match self.absolute {
                Absolute::Refused => return Err("is an absolute path".into()),
                Absolute::FromRoot => at.clear(),
            }
        }
        for part in target.split('/') {
            match part {
                "" | "." => {}
                ".." => {
                    if at.pop().is_none() {
                        return Err("points outside the package".into());
                    }
                }
                _ => {
                    at.push(part.to_string());
                    let here = at.join("/");
                    if let Some(next) = self.links.get(&here) {
                        *hops += 1;
                        if *hops > MAX_HOPS {
                            return Err("is a loop of symlinks".into());
                        }
                        at.pop();
                        self.walk(at, next, hops)?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_leave_the_install_folder_are_refused() {
        for bad in [
            "../escape",
            "/abs/x",
            "a/../../b",
            "demo\\..\\..\\x.so",
            "a//b",
            "./a",
            "a/./b",
            "",
            "C:/x",
            "a\0b",
            "a/\nb",
        ] {
            assert!(unsafe_name(bad, false).is_some(), "{bad:?} passed");
        }
        for good in [
            "a",
            "pkg/lib/libx.so.1",
            "pkg-1.0.dist-info/RECORD",
            "a..b/c",
        ] {
            assert_eq!(unsafe_name(good, false), None, "{good:?}");
        }
        assert_eq!(unsafe_name("pkg/lib/", true), None);
        assert!(unsafe_name("pkg/lib/", false).is_some());
    }

    #[test]
    fn symlinks_must_stay_inside() {
        assert_eq!(escaping_link("pkg/lib/libx.so", "libx.so.1"), None);
        assert_eq!(escaping_link("pkg/lib/libx.so", "../bin/x"), None);
        assert!(escaping_link("pkg/lib/libx.so", "../../../etc/passwd").is_some());
        assert!(escaping_link("pkg/x", "/etc/passwd").is_some());
        assert!(escaping_link("x", "../x").is_some());
    }

    #[test]
    fn links_are_followed_through_each_other() {
        let links = |l: &[(&str, &str)], abs| Links::new(l.iter().copied(), abs);
        // l2 -> .. (the root), then l1 -> l2/../..: lexically inside, really outside.
        let chain = links(&[("a/l2", ".."), ("a/l1", "l2/../..")], Absolute::Refused);
        assert_eq!(chain.check("a/l2"), None);
        assert!(chain.check("a/l1").unwrap().contains("outside"));
        let through = links(&[("usr/lib/d", "/tmp")], Absolute::FromRoot);
        assert_eq!(through.check("usr/lib/d"), None);
        assert!(through
            .check("usr/lib/d/x.so")
            .unwrap()
            .contains("usr/lib/d"));
        let abs = links(&[("usr/lib/x.so", "/lib/x.so.1")], Absolute::Refused);
        assert!(abs.check("usr/lib/x.so").unwrap().contains("absolute"));
        let up = links(&[("usr/x", "../../../etc")], Absolute::FromRoot);
        assert!(up.check("usr/x").unwrap().contains("outside"));
        let lp = links(&[("a", "b"), ("b", "a")], Absolute::Refused);
        assert!(lp.check("a").unwrap().contains("loop"));
        let fine = links(
            &[("lib/libx.so", "libx.so.1"), ("lib64", "lib")],
            Absolute::Refused,
        );
        assert_eq!(fine.check("lib/libx.so"), None);
        assert_eq!(fine.check("lib64"), None);
        assert_eq!(fine.check("lib/libx.so.1"), None);
    }
}
