//! The integration tests: one test binary of modules (the shared helpers compile once).
//! Each module exercises the `fatpack` binary or library from the outside, on real nvcc 13
//! output (tests/fixtures) and real linkers.

mod campaign;
mod campaign_packages;
mod common;
mod rt_harness;

mod extract_cli;
mod fatbin_model;
mod fresh_nvcc;
mod golden;
mod hostile_packages;
mod inspect_cli;
mod integrations;
mod jobserver;
mod ld_args;
mod ld_direct;
mod ld_fork;
mod ld_pack;
mod ld_wrapped;
mod package_memory;
mod prune_conda;
mod prune_cut;
mod prune_deb;
mod prune_package;
mod prune_refusals;
mod prune_tail;
mod prune_wheel;
mod repack;
mod rewrite;
mod run_cli;
mod runtime_fake;
mod runtime_nvcc;
mod runtime_safety;
mod runtime_shared;
mod split;
mod split_conda;
mod split_deb;
mod split_folder;
mod split_wheel;
mod walkthrough;
mod writers;
