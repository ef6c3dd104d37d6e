//! The `vkcuda` binary: parse arguments, run, print the summary, and map the
//! outcome to a documented exit code (see the README).

use std::process::ExitCode;

use clap::Parser;
use vkcuda::cli::Args;
use vkcuda::headless::{self, Summary};
use vkcuda::stats::micros;
use vkcuda::UsageError;

/// Exit codes (documented in the README).
mod exit {
    pub const RUNTIME: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const MISMATCH: u8 = 3;
    pub const VALIDATION: u8 = 4;
}

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { exit::USAGE } else { 0 });
        }
    };
    if let Err(e) = args.check() {
        eprintln!("vkcuda: {e}");
        return ExitCode::from(exit::USAGE);
    }
    let outcome = if args.headless { headless::run(&args) } else { vkcuda::viewer::run(&args) };
    match outcome {
        Ok(summary) => report(&args, &summary),
        Err(e) => {
            eprintln!("vkcuda: error: {e:#}");
            let usage = e.chain().any(|c| c.downcast_ref::<UsageError>().is_some());
            ExitCode::from(if usage { exit::USAGE } else { exit::RUNTIME })
        }
    }
}

fn report(args: &Args, s: &Summary) -> ExitCode {
    println!(
        "vkcuda: {} frames, {:.1} fps ({} {}, {} producer, sync {}, {} buffers)",
        s.frames, s.fps, args.scene, s.size, s.producer, args.sync, args.buffers
    );
    println!(
        "  median per frame: {} {}, Vulkan GPU {}",
        if s.producer == "cuda" { "CUDA kernel" } else { "CPU render" },
        micros(s.producer_median),
        micros(s.vulkan_median)
    );
    if (args.headless && args.dump_every > 0) || s.sink.written > 0 {
        println!("  PNG files written: {} in {}", s.sink.written, args.out.display());
    }
    let worst = s
        .sink
        .worst
        .map(|(f, d)| format!(", worst frame {f}: {} pixels differ, max diff {}", d.differing, d.max));
    if args.verify {
        println!(
            "  verify: {} frames compared, {} mismatches{}",
            s.sink.verified,
            s.sink.mismatched,
            worst.unwrap_or_default()
        );
    }
    let (errors, warnings) = s.validation;
    if args.validate {
        println!("  validation: {errors} errors, {warnings} warnings");
    }
    if let Some(sig) = s.interrupted {
        println!("  interrupted by signal {sig}: stopped after {} frames", s.frames);
        return ExitCode::from(128 + sig as u8);
    }
    if s.sink.mismatched > 0 {
        eprintln!("vkcuda: error: {} frames differ from the CPU reference", s.sink.mismatched);
        return ExitCode::from(exit::MISMATCH);
    }
    if errors + warnings > 0 {
        eprintln!("vkcuda: error: the validation layer reported {errors} errors and {warnings} warnings");
        return ExitCode::from(exit::VALIDATION);
    }
    let _ = exit::RUNTIME;
    ExitCode::SUCCESS
}
