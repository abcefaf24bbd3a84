//! stderr logging: errors always, choices with `FATPACK_LOG=info`, more with `debug`.

use core::sync::atomic::{AtomicU8, Ordering};

use crate::prelude::*;

pub(crate) const INFO: u8 = 1;
pub(crate) const DEBUG: u8 = 2;
const UNSET: u8 = u8::MAX;

static LEVEL: AtomicU8 = AtomicU8::new(UNSET);

pub(crate) use super::sys::env;

pub(crate) fn level() -> u8 {
    let l = LEVEL.load(Ordering::Relaxed);
    if l != UNSET {
        return l;
    }
    let l = match env(fatpack_format::link::ENV_LOG) {
        Some(b"debug" | b"DEBUG" | b"2") => DEBUG,
        Some(b"info" | b"INFO" | b"1") => INFO,
        _ => 0,
    };
    LEVEL.store(l, Ordering::Relaxed);
    l
}

/// One line to stderr in a single write, so lines of racing threads do not interleave.
pub(crate) fn emit(args: core::fmt::Arguments<'_>) {
    let line = format!("fatpack: {args}\n");
    super::sys::write_stderr(line.as_bytes());
}

macro_rules! log_at {
    ($lvl:expr, $($t:tt)*) => {
        if $crate::rt::log::level() >= $lvl {
            $crate::rt::log::emit(format_args!($($t)*));
        }
    };
}

macro_rules! info {
    ($($t:tt)*) => { log_at!($crate::rt::log::INFO, $($t)*) };
}

macro_rules! debug {
    ($($t:tt)*) => { log_at!($crate::rt::log::DEBUG, $($t)*) };
}

/// Always printed: the user must learn why a kernel cannot run.
macro_rules! error {
    ($($t:tt)*) => { $crate::rt::log::emit(format_args!("error: {}", format_args!($($t)*))) };
}

macro_rules! warn {
    ($($t:tt)*) => { $crate::rt::log::emit(format_args!("warning: {}", format_args!($($t)*))) };
}
