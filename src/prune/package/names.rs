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
}
