//! The `fatpack` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "fatpack",
    version,
    about = "Capability-aware fat-binary packager and linker wrapper for CUDA"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show the device code inside objects, archives, libraries, executables, fatbins, cubins and stores.
    Inspect {
        /// Files to inspect.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// List kernel names (demangled) under each entry.
        #[arg(long)]
        kernels: bool,
        /// Print JSON (an array with one report per file) instead of a table.
        #[arg(long)]
        json: bool,
    },
}

fn inspect(files: &[PathBuf], kernels: bool, json: bool) -> anyhow::Result<()> {
    let mut reports = Vec::with_capacity(files.len());
    for f in files {
        reports.push(fatpack::inspect::inspect_path(f)?);
    }
    // Everything is checked before anything is printed: a bad file gives an error, not half a report.
    if json {
        let text = serde_json::to_string_pretty(&reports).context("serialising report")?;
        println!("{text}");
    } else {
        for (i, r) in reports.iter().enumerate() {
            if i > 0 {
                println!();
            }
            print!("{}", fatpack::inspect::render(r, kernels));
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Inspect {
            files,
            kernels,
            json,
        } => inspect(files, *kernels, *json),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fatpack: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
