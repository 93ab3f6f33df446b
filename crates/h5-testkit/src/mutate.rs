//! The mutation run: every HDF5 file of the fixture corpus damaged at random (1–8 changed bytes,
//! overwritten runs, values stamped over fields, truncations) and read by the `h5` command
//! (`h5 dump --json`, `h5 ls -r -v`, `h5 stat` by default) in a child process under an address-space
//! limit (`prlimit --as`) and a time limit. A run succeeds when every child ended with exit status
//! 0 or 1 (a typed error printed as `h5: error: ...`): a panic (status 101), an abort or another
//! signal (a failed allocation under the limit aborts), and a hang are failures, and each failing
//! mutant is saved for a regression test.
//!
//! Mutants are reproducible: mutant `i` of a run with seed `s` is always the same bytes of the
//! same corpus file ([`Corpus::mutant`]), so a failure is named by `(seed, index)`. `scripts/mutate`
//! runs the full campaign; `crates/h5-cli/tests/mutate.rs` runs a small sample in CI.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The superblock signature (at offset 0, 512, 1024, ... of an HDF5 file).
const SIGNATURE: &[u8; 8] = b"\x89HDF\r\n\x1a\n";

/// Signatures of the metadata structures, where mutations are aimed half of the time (a byte
/// changed at random mostly lands in raw data otherwise).
const STRUCTURES: [&[u8; 4]; 18] = [
    b"OHDR", b"OCHK", b"TREE", b"HEAP", b"SNOD", b"GCOL", b"FRHP", b"FHDB", b"FHIB", b"BTHD",
    b"BTIN", b"BTLF", b"FAHD", b"FADB", b"EAHD", b"EAIB", b"EASB", b"EADB",
];

/// A small deterministic generator (SplitMix64): mutants must be reproducible from a seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// A number in `lo..=hi`.
    pub fn between(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// One file of the corpus, with the offsets of its metadata structures.
#[derive(Debug)]
pub struct Seed {
    /// Where it came from.
    pub path: PathBuf,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Offsets of superblocks and structure signatures found in it.
    pub structures: Vec<usize>,
}

/// The files mutants are made from.
#[derive(Debug)]
pub struct Corpus {
    /// Every HDF5 file found, in path order.
    pub seeds: Vec<Seed>,
}

/// What was done to a seed to make a mutant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// Bytes at these offsets set to new values.
    Bytes(Vec<usize>),
    /// A run of bytes overwritten from `at` (length `len`).
    Run {
        /// First byte.
        at: usize,
        /// Number of bytes.
        len: usize,
    },
    /// A little-endian value (`width` bytes) stamped at `at`.
    Stamp {
        /// First byte.
        at: usize,
        /// Field width in bytes.
        width: usize,
    },
    /// The file cut to `len` bytes.
    Truncate {
        /// The new length.
        len: usize,
    },
}

/// Values stamped over a field: the limits and the values that break size arithmetic.
const STAMPS: [u64; 10] = [
    0,
    1,
    0x7f,
    0xff,
    0xffff,
    0xffff_ffff,
    1 << 31,
    1 << 62,
    u64::MAX,
    u64::MAX - 1,
];

impl Corpus {
    /// Every file under `dirs` (recursively) that starts with the HDF5 signature at offset 0
    /// or after a user block (512, 1024, ... bytes).
    pub fn load(dirs: &[PathBuf]) -> std::io::Result<Corpus> {
        let mut paths = Vec::new();
        for d in dirs {
            collect(d, &mut paths)?;
        }
        paths.sort();
        let mut seeds = Vec::new();
        for path in paths {
            let bytes = std::fs::read(&path)?;
            if !is_hdf5(&bytes) {
                continue;
            }
            let structures = structure_offsets(&bytes);
            seeds.push(Seed {
                path,
                bytes,
                structures,
            });
        }
        Ok(Corpus { seeds })
    }

    /// Mutant `index` of the run with `seed`: the seed file it comes from, its bytes, and what
    /// was done.
    pub fn mutant(&self, seed: u64, index: u64) -> (&Seed, Vec<u8>, Mutation) {
        let mut rng = Rng::new(seed ^ index.wrapping_mul(0xd605_bbb5_8c8a_bcd3));
        let s = &self.seeds[rng.below(self.seeds.len())];
        let mut b = s.bytes.clone();
        let m = mutate(&mut rng, &mut b, &s.structures);
        (s, b, m)
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            collect(&p, out)?;
        } else {
            out.push(p);
        }
    }
    Ok(())
}

/// Whether `bytes` hold the HDF5 signature where libhdf5 looks for it.
fn is_hdf5(bytes: &[u8]) -> bool {
    let mut at = 0usize;
    while at + SIGNATURE.len() <= bytes.len() {
        if &bytes[at..at + SIGNATURE.len()] == SIGNATURE {
            return true;
        }
        at = if at == 0 { 512 } else { at * 2 };
    }
    false
}

/// Offsets of every superblock and structure signature in `bytes`.
fn structure_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut v = Vec::new();
    for i in 0..bytes.len().saturating_sub(8) {
        if &bytes[i..i + 8] == SIGNATURE || STRUCTURES.iter().any(|s| &bytes[i..i + 4] == *s) {
            v.push(i);
        }
    }
    v
}

/// A position to damage: half of the time within 256 bytes after a structure's start.
fn position(rng: &mut Rng, len: usize, structures: &[usize]) -> usize {
    if !structures.is_empty() && rng.chance(50) {
        let s = structures[rng.below(structures.len())];
        (s + rng.below(256)).min(len - 1)
    } else {
        rng.below(len)
    }
}

/// Damages `b` in one of the ways of [`Mutation`].
fn mutate(rng: &mut Rng, b: &mut Vec<u8>, structures: &[usize]) -> Mutation {
    let len = b.len();
    match rng.below(100) {
        0..=44 => {
            let n = rng.between(1, 8);
            let mut at = Vec::with_capacity(n);
            for _ in 0..n {
                let p = position(rng, len, structures);
                b[p] = match rng.below(3) {
                    0 => b[p] ^ (1 << rng.below(8)),
                    1 => b[p] ^ 0xff,
                    _ => rng.next_u64() as u8,
                };
                at.push(p);
            }
            Mutation::Bytes(at)
        }
        45..=69 => {
            let at = position(rng, len, structures);
            let n = rng.between(2, 64).min(len - at);
            let fill = match rng.below(4) {
                0 => Some(0u8),
                1 => Some(0xff),
                2 => None,
                _ => Some(rng.next_u64() as u8),
            };
            for i in 0..n {
                b[at + i] = fill.unwrap_or_else(|| rng.next_u64() as u8);
            }
            Mutation::Run { at, len: n }
        }
        70..=84 => {
            let at = position(rng, len, structures);
            let width = [1, 2, 4, 8][rng.below(4)];
            let v = STAMPS[rng.below(STAMPS.len())].to_le_bytes();
            let n = width.min(len - at);
            b[at..at + n].copy_from_slice(&v[..n]);
            Mutation::Stamp { at, width }
        }
        _ => {
            let cut = if rng.chance(50) {
                position(rng, len, structures)
            } else {
                rng.below(len)
            };
            b.truncate(cut);
            Mutation::Truncate { len: cut }
        }
    }
}

/// How one run of the `h5` command ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Exit status 0 or 1 (a typed error): fine.
    Clean,
    /// Panicked (status 101, or "panicked at" on standard error).
    Panic(String),
    /// Killed by a signal (an abort: a failed allocation under the limit), or another status.
    Crash(String),
    /// Still running after the time limit (killed).
    Hang,
    /// Killed at the time limit while its output still grew over the second half of the limit
    /// (`bytes` written in all): a file that declares more data than can be printed in the
    /// limit (a mutated extent of a dataset of fill values), which a streaming `dump` prints for
    /// as long as it is let. Progress, not a failure; counted in [`Report::still_writing`].
    StillWriting(u64),
}

impl Verdict {
    /// Whether the run is a failure (a panic, a crash or a hang).
    pub fn is_failure(&self) -> bool {
        matches!(self, Verdict::Panic(_) | Verdict::Crash(_) | Verdict::Hang)
    }
}

/// Settings of a mutation run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The `h5` binary.
    pub h5: PathBuf,
    /// Directories of the corpus.
    pub corpus: Vec<PathBuf>,
    /// The run's seed.
    pub seed: u64,
    /// The first mutant index (to resume or to split a run).
    pub first: u64,
    /// Number of mutants.
    pub mutants: u64,
    /// Commands each mutant goes through (arguments of `h5` before the file name).
    pub commands: Vec<Vec<String>>,
    /// Address-space limit of each child, in bytes.
    pub address_space: u64,
    /// Time limit of each child.
    pub timeout: Duration,
    /// Children run at once.
    pub jobs: usize,
    /// Where mutants are written while they run, and failing ones kept.
    pub work: PathBuf,
    /// Print progress every so many mutants (0: never).
    pub progress: u64,
}

impl Config {
    /// The default commands: `dump --json`, `ls -r -v`, `stat`.
    pub fn default_commands() -> Vec<Vec<String>> {
        [&["dump", "--json"][..], &["ls", "-r", "-v"], &["stat"]]
            .iter()
            .map(|c| c.iter().map(|s| (*s).to_owned()).collect())
            .collect()
    }
}

/// One failure of a run.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The mutant's index.
    pub index: u64,
    /// The corpus file it was made from.
    pub seed_file: PathBuf,
    /// What was done to it.
    pub mutation: Mutation,
    /// The command (arguments of `h5`).
    pub command: Vec<String>,
    /// How it ended.
    pub verdict: Verdict,
    /// Where the mutant was saved.
    pub saved: PathBuf,
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Mutants run.
    pub mutants: u64,
    /// Child processes run.
    pub executions: u64,
    /// Children that ended with a typed error (status 1).
    pub errors: u64,
    /// Children stopped at the time limit while still writing output ([`Verdict::StillWriting`]).
    pub still_writing: u64,
    /// Every failure.
    pub failures: Vec<Failure>,
    /// Wall time.
    pub elapsed: Duration,
}

/// Runs `config.h5` with `args` on `file` under the limits.
pub fn run_one(config: &Config, args: &[String], file: &Path) -> std::io::Result<(Verdict, bool)> {
    let mut child = Command::new("prlimit")
        .arg(format!("--as={}", config.address_space))
        .arg("--core=0")
        .arg("--")
        .arg(&config.h5)
        .args(args)
        .arg(file)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // Standard output is counted (and dropped) on a thread: a run stopped at the limit while its
    // output still grows is writing, not hanging.
    let written = Arc::new(AtomicU64::new(0));
    let mut stdout = child.stdout.take().expect("piped");
    let counter = Arc::clone(&written);
    let counting = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 {
                break;
            }
            counter.fetch_add(n as u64, Ordering::Relaxed);
        }
    });
    let mut stderr = child.stderr.take().expect("piped");
    // Standard error is drained on a thread so that a child writing a lot never blocks.
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = (&mut stderr).take(1 << 16).read_to_end(&mut buf);
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
        buf
    });
    let start = Instant::now();
    // Output written by half the limit (None until then): a streaming dump reads a block (a
    // second or more under load) between bursts of output, so growth is judged over the second
    // half of the limit.
    let watch_from = config.timeout / 2;
    let mut written_before_limit = None;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break Some(s);
        }
        let elapsed = start.elapsed();
        if written_before_limit.is_none() && elapsed >= watch_from {
            written_before_limit = Some(written.load(Ordering::Relaxed));
        }
        if elapsed > config.timeout {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let err = String::from_utf8_lossy(&reader.join().unwrap_or_default()).into_owned();
    let _ = counting.join();
    let Some(status) = status else {
        let total = written.load(Ordering::Relaxed);
        let grew = written_before_limit.is_some_and(|before| total > before);
        return Ok((
            if grew {
                Verdict::StillWriting(total)
            } else {
                Verdict::Hang
            },
            false,
        ));
    };
    let last = |s: &str| {
        s.lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with("note:"))
            .take(3)
            .collect::<Vec<_>>()
            .join(" | ")
    };
    if err.contains("panicked at") || status.code() == Some(101) {
        return Ok((Verdict::Panic(last(&err)), false));
    }
    match status.code() {
        Some(0) => Ok((Verdict::Clean, false)),
        Some(1) => Ok((Verdict::Clean, true)),
        Some(c) => Ok((
            Verdict::Crash(format!("exit status {c}: {}", last(&err))),
            false,
        )),
        None => Ok((Verdict::Crash(format!("{status}: {}", last(&err))), false)),
    }
}

/// Runs every mutant of `config` through every command; failing mutants are kept in
/// `config.work` as `fail-<seed>-<index>.h5`.
pub fn run(config: &Config) -> std::io::Result<Report> {
    let corpus = Corpus::load(&config.corpus)?;
    if corpus.seeds.is_empty() {
        return Err(std::io::Error::other("no HDF5 file in the corpus"));
    }
    std::fs::create_dir_all(&config.work)?;
    let next = AtomicUsize::new(0);
    let report = Mutex::new(Report::default());
    let start = Instant::now();
    let first_error: Mutex<Option<std::io::Error>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for job in 0..config.jobs.max(1) {
            let (corpus, next, report, first_error) = (&corpus, &next, &report, &first_error);
            scope.spawn(move || {
                let file = config
                    .work
                    .join(format!("mutant-{}-{job}.h5", std::process::id()));
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed) as u64;
                    if i >= config.mutants {
                        break;
                    }
                    let index = config.first + i;
                    if let Err(e) = run_mutant(config, corpus, index, &file, report) {
                        *first_error.lock().unwrap() = Some(e);
                        break;
                    }
                    let done = i + 1;
                    if config.progress > 0 && done.is_multiple_of(config.progress) {
                        let r = report.lock().unwrap();
                        eprintln!(
                            "mutate: {done} mutants, {} runs, {} failures, {:.0?}",
                            r.executions,
                            r.failures.len(),
                            start.elapsed()
                        );
                    }
                }
                let _ = std::fs::remove_file(&file);
            });
        }
    });
    if let Some(e) = first_error.into_inner().unwrap() {
        return Err(e);
    }
    let mut r = report.into_inner().unwrap();
    r.elapsed = start.elapsed();
    r.failures.sort_by_key(|f| f.index);
    Ok(r)
}

fn run_mutant(
    config: &Config,
    corpus: &Corpus,
    index: u64,
    file: &Path,
    report: &Mutex<Report>,
) -> std::io::Result<()> {
    let (seed_file, bytes, mutation) = corpus.mutant(config.seed, index);
    std::fs::write(file, &bytes)?;
    let mut failures = Vec::new();
    let mut errors = 0;
    let mut still_writing = 0;
    for args in &config.commands {
        let (verdict, error) = run_one(config, args, file)?;
        errors += u64::from(error);
        still_writing += u64::from(matches!(verdict, Verdict::StillWriting(_)));
        if verdict.is_failure() {
            let saved = config.work.join(format!("fail-{}-{index}.h5", config.seed));
            std::fs::write(&saved, &bytes)?;
            failures.push(Failure {
                index,
                seed_file: seed_file.path.clone(),
                mutation: mutation.clone(),
                command: args.clone(),
                verdict,
                saved,
            });
        }
    }
    let mut r = report.lock().unwrap();
    r.mutants += 1;
    r.executions += config.commands.len() as u64;
    r.errors += errors;
    r.still_writing += still_writing;
    r.failures.extend(failures);
    Ok(())
}

impl Report {
    /// A readable summary: counts, then one line per failure.
    pub fn summary(&self, config: &Config) -> String {
        let mut s = format!(
            "mutate: seed {}, mutants {}..{}: {} mutants, {} runs of h5 ({} ended with a typed \
             error, {} stopped at the time limit while still writing output), {} failures, \
             {:.1?}\n",
            config.seed,
            config.first,
            config.first + config.mutants,
            self.mutants,
            self.executions,
            self.errors,
            self.still_writing,
            self.failures.len(),
            self.elapsed
        );
        for f in &self.failures {
            s.push_str(&format!(
                "  mutant {} of {} ({:?}): h5 {} -> {:?}; saved as {}\n",
                f.index,
                f.seed_file.display(),
                f.mutation,
                f.command.join(" "),
                f.verdict,
                f.saved.display()
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mutants_are_reproducible_and_of_every_kind() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
        let corpus = Corpus::load(&[dir]).unwrap();
        assert!(corpus.seeds.len() > 50, "{} seeds", corpus.seeds.len());
        let mut kinds = std::collections::HashSet::new();
        for i in 0..200 {
            let (s, a, m) = corpus.mutant(7, i);
            let (_, b, m2) = corpus.mutant(7, i);
            assert_eq!(a, b);
            assert_eq!(m, m2);
            kinds.insert(std::mem::discriminant(&m));
            if let Mutation::Truncate { len } = m {
                assert_eq!(a.len(), len);
            } else {
                assert_eq!(a.len(), s.bytes.len());
            }
        }
        assert_eq!(kinds.len(), 4, "every kind of mutation is drawn");
    }
}
