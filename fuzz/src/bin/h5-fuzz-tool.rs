//! Helpers of the fuzz targets that need no AFL:
//!
//! * `h5-fuzz-tool list`: the targets' names, one a line;
//! * `h5-fuzz-tool seeds OUT DIR...`: writes the seed corpus of every target, cut from the HDF5
//!   files under the DIRs, as `OUT/<target>/seed-NNNN`;
//! * `h5-fuzz-tool run TARGET FILE...`: runs a target on files (a finding, a regression input)
//!   with checksum verification off, as the fuzzer does; a panic shows its message and location.

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("list") => {
            for (name, _) in h5_fuzz::TARGETS {
                println!("{name}");
            }
            ExitCode::SUCCESS
        }
        Some("seeds") if args.len() >= 3 => {
            let dirs: Vec<&Path> = args[2..].iter().map(Path::new).collect();
            match h5_fuzz::seeds::from_dirs(&dirs).and_then(|s| {
                let n = s.write(Path::new(&args[1]))?;
                Ok((n, s))
            }) {
                Ok((n, s)) => {
                    for (target, v) in &s.0 {
                        println!("{target}: {} seeds", v.len());
                    }
                    println!("{n} seeds written to {}", args[1]);
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("h5-fuzz-tool: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Some("run") if args.len() >= 3 => {
            let Some(f) = h5_fuzz::target(&args[1]) else {
                eprintln!("h5-fuzz-tool: no target {}", args[1]);
                return ExitCode::FAILURE;
            };
            for path in &args[2..] {
                let data = match std::fs::read(path) {
                    Ok(d) => d,
                    Err(e) => {
                        eprintln!("h5-fuzz-tool: {path}: {e}");
                        return ExitCode::FAILURE;
                    }
                };
                // Named before it runs: a crash leaves the name as the last line.
                eprintln!("{path}");
                let t = Instant::now();
                h5_fuzz::run(f, &data);
                println!("{path}: returned in {:?}", t.elapsed());
            }
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!(
                "usage: h5-fuzz-tool list | h5-fuzz-tool seeds OUT DIR... | h5-fuzz-tool run TARGET FILE..."
            );
            ExitCode::from(2)
        }
    }
}
