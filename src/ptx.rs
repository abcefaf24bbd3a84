//! Just enough PTX reading for inspection: the `.target` and the `.entry` names.

/// Names of `.entry` functions, in order of appearance.
pub fn kernels(text: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(text);
    let mut out = Vec::new();
    for line in text.lines() {
        let mut words = line.split_whitespace().peekable();
        while let Some(w) = words.next() {
            if w == ".entry" {
                if let Some(name) = words.next() {
                    let name = name.split('(').next().unwrap_or(name);
                    if !name.is_empty() {
                        out.push(name.to_string());
                    }
                }
                break;
            }
        }
    }
    out
}

/// The `.target` line's first arch, e.g. `sm_90a`.
pub fn target(text: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(text);
    text.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix(".target"))
        .and_then(|rest| rest.split([',', ' ', '\t']).find(|w| !w.is_empty()))
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    #[test]
    fn finds_entries_and_target() {
        let ptx = b".version 9.0\n.target sm_90a\n.address_size 64\n.visible .entry _Z1kPi(\n\t.param .u64 p)\n{ ret; }\n.entry plain( ) { }\n.func notakernel() {}\n";
        assert_eq!(super::kernels(ptx), vec!["_Z1kPi", "plain"]);
        assert_eq!(super::target(ptx).as_deref(), Some("sm_90a"));
    }
}
