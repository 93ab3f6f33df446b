//! The AFL++ fuzzing loop of one target: `h5-fuzz TARGET`, built with `cargo afl build` and run
//! by `cargo afl fuzz` (see `scripts/fuzz`).

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    let Some(f) = h5_fuzz::target(&name) else {
        let names: Vec<&str> = h5_fuzz::TARGETS.iter().map(|(n, _)| *n).collect();
        eprintln!("usage: h5-fuzz TARGET (one of {})", names.join(", "));
        std::process::exit(2);
    };
    afl::fuzz!(|data: &[u8]| {
        h5_fuzz::run(f, data);
    });
}
