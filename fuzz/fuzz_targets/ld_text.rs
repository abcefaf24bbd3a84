//! ld's text inputs: response files (split, then quoted and split again: the same arguments)
//! and linker scripts (the file lists ld reads from them).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let args = fatpack::ld::split_response_text(data);
    let mut again = Vec::new();
    for a in &args {
        again.extend_from_slice(&fatpack::ld::quote_response_arg(a));
        again.push(b'\n');
    }
    assert_eq!(fatpack::ld::split_response_text(&again), args);
    let _ = fatpack::ld::parse_script(data);
});
