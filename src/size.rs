//! Byte counts as people read them, one way everywhere fatpack prints one: `999 B`,
//! `20.5 KiB`, `1.1 GiB`; never `0.0 MiB` for bytes that are there.

/// `n` bytes in the largest binary unit that keeps the number at 1 or more.
pub fn human(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn small_counts_keep_their_bytes() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(999), "999 B");
        assert_eq!(human(20_992), "20.5 KiB");
        assert_eq!(human(3 << 20), "3.0 MiB");
        assert_eq!(human(1_181_116_006), "1.1 GiB");
    }
}
