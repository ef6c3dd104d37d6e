//! The `vkcuda` binary: parse arguments, run, print the summary, and map the
//! outcome to a documented exit code (see the README).

use std::process::ExitCode;

mod bench;
mod checkdump;
mod cli;
mod controls;
mod headless;
mod peers;
mod viewer;
mod words;

use crate::bench::Interrupted;
use crate::cli::BenchArgs;
use crate::cli::{Args, CheckDumpArgs, CheckKernelArgs, Command};
use vkcuda_run::base::kinds::{Place, ProducerId, Renders};
use vkcuda_run::diagnostics::xid;
use vkcuda_run::drive::sink::FrameDiff;
use vkcuda_run::drive::to_end::{MadeBy, Summary};
use vkcuda_run::error::failure::RunError;
use vkcuda_run::kernel::nvrtc::CompileError;
use vkcuda_run::kernel::user as userkernel;
use vkcuda_run::metrics::footprint::change;
use vkcuda_run::metrics::stats::micros;

/// Exit codes (documented in the README).
mod exit {
    pub const RUNTIME: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const MISMATCH: u8 = 3;
    pub const VALIDATION: u8 = 4;
}

fn main() -> ExitCode {
    vkcuda_run::diagnostics::logger::init();
    if let Some(code) = producer_child() {
        return code;
    }
    let args = match Args::from_command_line() {
        Ok(a) => a,
        Err(e) if e.use_stderr() => {
            eprintln!("vkcuda: {} (vkcuda --help lists every option)", one_line(&e.to_string()));
            return ExitCode::from(exit::USAGE);
        }
        Err(e) => {
            // --help, --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
    };
    if let Some(shard) = args.shard.filter(|_| args.headless && args.frame_count() == 0) {
        let all = args.all_frames();
        println!("vkcuda: shard {shard} of {all} frames has none of them: nothing to render");
        return ExitCode::SUCCESS;
    }
    if let Err(e) = args.check() {
        eprintln!("vkcuda: {e}");
        return ExitCode::from(exit::USAGE);
    }
    if let Some(Command::Doctor) = args.command {
        return doctor();
    }
    if args.list_gpus {
        return list_gpus(&args);
    }
    match &args.command {
        Some(Command::Bench(bench)) => return run_bench(&args, bench),
        Some(Command::CheckKernel(check)) => return check_kernel(check),
        Some(Command::CheckDump(check)) => return check_dump(check),
        Some(Command::Doctor) | None => {}
    }
    let outcome = if args.headless { headless::run(&args) } else { viewer::run(&args) };
    match outcome {
        Ok(summary) => report(&args, &summary),
        Err(e) => failure(&e),
    }
}

/// The producer's child process (`vkcuda producer-child FD`, which a run
/// starts with the socket it inherits as FD): serves the run until it says
/// stop; exit 1 after an error (said to the run, and here).
fn producer_child() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != cli::CHILD_COMMAND {
        return None;
    }
    let fd = args.next()?;
    use vkcuda_run::drive::child;
    // SAFETY: the run that started this process passed it this descriptor, for it alone;
    // nothing in this process took it before.
    let served = unsafe { child::inherited_socket(&fd) }.and_then(child::serve);
    Some(match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("vkcuda (the producer's process): {}", one_line(&format!("{e:#}")));
            ExitCode::from(exit::RUNTIME)
        }
    })
}

/// `vkcuda doctor`: the checklist, and 0, 1 or 2 as far as this machine gets.
fn doctor() -> ExitCode {
    let report = vkcuda_run::frames::doctor::examine();
    print!("{}", report.render(&|u| words::use_name(u).to_string()));
    ExitCode::from(report.exit_code())
}

/// `--list-gpus`: both orders, paired by UUID.
fn list_gpus(args: &Args) -> ExitCode {
    let listed = vkcuda_run::frames::gpu::vulkan_instance(false, &[])
        .and_then(|instance| vkcuda_run::cuda::pairing::Pairing::new(&instance, args.producer));
    match listed {
        Ok(pairing) => {
            print!("{}", pairing.table());
            ExitCode::SUCCESS
        }
        Err(e) => failure(&e),
    }
}

fn run_bench(args: &Args, bench: &BenchArgs) -> ExitCode {
    match bench::run(args, bench) {
        Ok(report) => {
            print!("{}", bench::table(&report));
            if let Some(v) = report.validation {
                println!("validation: {v}");
                if !v.clean() {
                    eprintln!("vkcuda: error: the validation layer reported {v}");
                    return ExitCode::from(exit::VALIDATION);
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => failure(&e),
    }
}

/// `vkcuda check-kernel`: nothing and 0, or the diagnostics (FILE:LINE) and 2.
fn check_kernel(check: &CheckKernelArgs) -> ExitCode {
    match userkernel::compile_checked(&check.file, &check.entry, &check.arch) {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => match e.downcast_ref::<CompileError>() {
            Some(CompileError::Source(diagnostics)) => {
                eprint!("{diagnostics}");
                ExitCode::from(exit::USAGE)
            }
            _ => failure(&e),
        },
    }
}

fn check_dump(args: &CheckDumpArgs) -> ExitCode {
    match checkdump::check(&args.dir, args.frames, args.dump_every) {
        Ok(v) => {
            print!("{}", checkdump::report(&args.dir, &v));
            match v.whole() {
                true => ExitCode::SUCCESS,
                false => ExitCode::from(exit::MISMATCH),
            }
        }
        Err(e) => failure(&e),
    }
}

/// A clap error on one line: its message and hints, without the usage block.
fn one_line(text: &str) -> String {
    let kept: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:"))
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
        .collect();
    kept.join(" ").trim_start_matches("error: ").to_string()
}

/// Prints an error and maps it to its exit code.
fn failure(e: &anyhow::Error) -> ExitCode {
    eprintln!("vkcuda: error: {}", words::said(e));
    // A frame that never came: a kernel that never ends, or a GPU a CUDA fault left stuck.
    let timed_out = vkcuda_run::error::failure::timed_out(e)
        || e.chain().any(|c| matches!(c.downcast_ref::<RunError>(), Some(RunError::TimedOut(_))));
    if timed_out {
        xid::say_fault_hint_once();
    }
    if let Some(Interrupted(sig)) = e.downcast_ref::<Interrupted>() {
        return ExitCode::from(128 + *sig as u8);
    }
    let usage = vkcuda_run::error::failure::is_usage(e);
    ExitCode::from(if usage { exit::USAGE } else { exit::RUNTIME })
}

/// Writes the summary (and `--json`), and says how the run ended: its exit code.
fn report(args: &Args, s: &Summary) -> ExitCode {
    if let Some(path) = &args.json {
        let json = headless::summary_json(args, s);
        let written = serde_json::to_string_pretty(&json)
            .map_err(anyhow::Error::from)
            .and_then(|text| vkcuda_run::output::outfile::write_atomically(path, text.as_bytes()));
        if let Err(e) = written {
            return failure(&e);
        }
    }
    print_timing(args, s);
    print_output(args, s);
    print_run(args, s);
    verdict(args, s)
}

/// The rate and where the time went: per frame, per thread, in memory.
fn print_timing(args: &Args, s: &Summary) {
    println!(
        "vkcuda: {} frames, {:.1} fps ({} {}, {} producer, sync {}, {} buffers)",
        s.frames,
        s.fps,
        args.kernel.as_ref().map_or_else(|| args.scene.to_string(), |k| k.display().to_string()),
        s.size,
        s.producer,
        args.sync,
        args.buffers
    );
    // --gpu all: the frames and rates above are the GPUs' sums.
    for line in &s.gpus {
        println!("  {line}");
    }
    println!(
        "  median per frame: {} {}, Vulkan GPU {}, rendered → consumed {}",
        match s.producer {
            MadeBy::Producer(ProducerId { renders: Renders::Cuda, place: Place::InProcess }) => "CUDA kernel",
            MadeBy::Producer(ProducerId { renders: Renders::Staging, .. }) => "CUDA kernel + copy to host",
            _ => "CPU render",
        },
        micros(s.producer_median),
        micros(s.vulkan_median),
        micros(s.latency_median)
    );
    println!(
        "  CPU time per frame: producer thread {}, consumer thread {}",
        micros(s.producer_cpu),
        micros(s.consumer_cpu)
    );
    if let Some(readings) = s.footprint {
        let kept: Vec<_> = readings.iter().flatten().collect();
        let when =
            if kept.len() == 3 { "after warm-up → half-way → end" } else { "after warm-up → end" };
        let resident = change(&kept.iter().map(|f| f.resident).collect::<Vec<_>>());
        let gpu: Option<Vec<u64>> = kept.iter().map(|f| f.gpu_used).collect();
        let gpu = gpu.map_or(String::new(), |g| format!(", GPU memory in use {}", change(&g)));
        println!("  memory {when}: resident {resident}{gpu}");
    }
}

/// What was written and verified.
fn print_output(args: &Args, s: &Summary) {
    if (args.headless && args.dump_every > 0) || s.sink.written > 0 {
        println!("  PNG files written: {} in {}", s.sink.written, args.out.display());
        if s.sink.written > 0 {
            let stages = s.sink.stages.medians();
            let verify =
                if args.verify { format!("verify {}, ", micros(stages.verify)) } else { String::new() };
            println!(
                "  PNG writer, median per frame in one of its {} threads: {verify}encode {}, write {}; \
                 consumer thread: hand-off {}, waiting for a free buffer {} (no host copy; {} readback buffers)",
                s.sink.workers,
                micros(stages.encode),
                micros(stages.write),
                micros(stages.handoff),
                micros(stages.buffer_wait),
                s.sink.readback_buffers
            );
        }
    }
    let worst = s.sink.worst.map(|w| {
        format!(", worst frame {}: {} pixels differ, max diff {}", w.frame, w.diff.differing, w.diff.max)
    });
    if args.verify {
        println!(
            "  verify: {} frames compared, {} mismatches{}",
            s.sink.verified,
            s.sink.mismatched,
            worst.unwrap_or_default()
        );
    }
}

/// The run's part of a longer one, what it found in its folder, validation.
fn print_run(args: &Args, s: &Summary) {
    if let Some(shard) = args.shard {
        let std::ops::Range { start: first, end } = args.frame_range();
        println!(
            "  shard {shard}: frames {first} to {} of the run's {}",
            end.saturating_sub(1),
            args.all_frames()
        );
    }
    if s.leftovers_removed > 0 {
        println!("  removed {} temporary files a killed run left", s.leftovers_removed);
    }
    if let Some(kept) = s.kept {
        println!("  resumed: {kept} dumped frames kept, {} frames rendered", s.frames);
    }
    if args.validate {
        println!("  validation: {}", s.validation);
    }
}

/// The exit code: a signal's, a mismatch's, validation's, or success (each with its line).
fn verdict(args: &Args, s: &Summary) -> ExitCode {
    if let Some(sig) = s.interrupted {
        println!("  interrupted by signal {sig}: stopped after {} frames", s.frames);
        return ExitCode::from(128 + sig as u8);
    }
    if let Some(dir) = &args.compare_to {
        println!(
            "  compare: {} frames compared with {}, {} differ",
            s.sink.verified,
            dir.display(),
            s.sink.mismatched
        );
    }
    if s.sink.mismatched > 0 {
        let listed: Vec<String> = (s.sink.differing.iter())
            .map(|FrameDiff { frame, diff: d }| {
                format!("frame {frame}: {} of {} pixels, largest difference {}", d.differing, d.pixels, d.max)
            })
            .collect();
        let more = s.sink.mismatched.saturating_sub(listed.len() as u64);
        let more = if more > 0 { format!("; and {more} more") } else { String::new() };
        let against = match &args.compare_to {
            Some(dir) => format!("{} (tolerance {})", dir.display(), args.tolerance),
            None => "the CPU reference".into(),
        };
        eprintln!(
            "vkcuda: error: {} frames differ from {against}: {}{more}",
            s.sink.mismatched,
            listed.join("; ")
        );
        return ExitCode::from(exit::MISMATCH);
    }
    if !s.validation.clean() {
        eprintln!("vkcuda: error: the validation layer reported {}", s.validation);
        return ExitCode::from(exit::VALIDATION);
    }
    let _ = exit::RUNTIME;
    ExitCode::SUCCESS
}
