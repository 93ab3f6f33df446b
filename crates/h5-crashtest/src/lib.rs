//! Crash-safety tests of h5 writers (issue 14), dev-only.
//!
//! * [`Writer`]: a deterministic workload that appends to extensible datasets (unfiltered,
//!   deflated, two-dimensional deflated) and creates groups with attributes, flushing every
//!   `n` operations. Every value is a function of its position, so any state of the file can
//!   be checked without a log: [`verify`] reads everything and compares.
//! * The `h5-crashtest` binary runs the writer until it is killed (`write`), or opens a file and
//!   holds it (`hold`) for the two-process lock tests.
//! * `tests/kill.rs` kills the writer with SIGKILL at seeded random moments and checks the
//!   file with h5 and h5py after each kill; `tests/crash_points.rs` replays a recorded run up to
//!   every storage operation in turn; `tests/locks.rs` runs h5 and h5py against each other.
//! * `py/` holds the same workload written by h5py (for comparison), the h5py checker and the
//!   h5py holder.

use std::path::{Path, PathBuf};

use h5::{Dataset, File, FileAccess, Group};
use ndarray::SliceInfoElem as S;

/// The unfiltered 1-D dataset.
pub const RAW: &str = "raw";
/// The deflated 1-D dataset.
pub const ZIP: &str = "zip";
/// The deflated 2-D dataset (rows of [`GRID_COLS`]).
pub const GRID: &str = "grid";
/// The group holding the created groups.
pub const GROUPS: &str = "g";
/// Columns of [`GRID`].
pub const GRID_COLS: usize = 3;

/// Element `i` of [`RAW`].
pub fn raw_value(i: u64) -> i64 {
    (i as i64).wrapping_mul(7) + 1
}

/// Element `i` of [`ZIP`].
pub fn zip_value(i: u64) -> i64 {
    (i.wrapping_mul(i) % 1_000_003) as i64
}

/// Element `(i, j)` of [`GRID`].
pub fn grid_value(i: u64, j: u64) -> f64 {
    i as f64 + j as f64 * 0.25
}

/// The name of the `k`-th created group.
pub fn group_name(k: u64) -> String {
    format!("g{k:06}")
}

/// What a file holds: rows of each dataset and groups created.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// Rows of [`RAW`].
    pub raw: u64,
    /// Rows of [`ZIP`].
    pub zip: u64,
    /// Rows of [`GRID`].
    pub grid: u64,
    /// Groups in [`GROUPS`].
    pub groups: u64,
}

impl Checkpoint {
    /// One line: the four counts.
    pub fn to_line(&self) -> String {
        format!("{} {} {} {}", self.raw, self.zip, self.grid, self.groups)
    }

    /// Parses [`to_line`](Self::to_line)'s output.
    pub fn parse(line: &str) -> Option<Checkpoint> {
        let v: Vec<u64> = line
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .ok()?;
        match v[..] {
            [raw, zip, grid, groups] => Some(Checkpoint {
                raw,
                zip,
                grid,
                groups,
            }),
            _ => None,
        }
    }

    /// Whether every count is at least `other`'s.
    pub fn covers(&self, other: &Checkpoint) -> bool {
        self.raw >= other.raw
            && self.zip >= other.zip
            && self.grid >= other.grid
            && self.groups >= other.groups
    }
}

/// The last checkpoint a writer reported in its progress file (`None`: none yet).
pub fn last_progress(progress: &Path) -> Option<Checkpoint> {
    let text = std::fs::read_to_string(progress).ok()?;
    // A line cut short by the kill has no newline yet: only complete lines count.
    let complete = &text[..text.rfind('\n')? + 1];
    complete.lines().rev().find_map(Checkpoint::parse)
}

/// The progress file of a writer of `file`: one [`Checkpoint`] line per completed flush.
pub fn progress_path(file: &Path) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(".progress");
    file.with_file_name(name)
}

/// A small deterministic generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

fn rows(start: usize, end: usize) -> S {
    S::Slice {
        start: start as isize,
        end: Some(end as isize),
        step: 1,
    }
}

/// The workload's writer over one open file.
pub struct Writer {
    file: File,
    raw: Dataset,
    zip: Dataset,
    grid: Dataset,
    groups: Group,
    state: Checkpoint,
    rng: Rng,
}

impl Writer {
    /// Creates the file at `path` with the workload's empty datasets.
    pub fn create(
        path: &Path,
        access: &FileAccess,
        bounds: h5::FormatBounds,
    ) -> h5::Result<Writer> {
        let options = h5::CreateOptions {
            bounds,
            ..Default::default()
        };
        Self::start(File::create_with(path, access, &options)?, 0)
    }

    /// Creates the workload's file in `storage` (for in-process crash tests).
    pub fn create_in(
        storage: std::sync::Arc<dyn h5_io::Storage>,
        bounds: h5::FormatBounds,
        seed: u64,
    ) -> h5::Result<Writer> {
        let options = h5::CreateOptions {
            bounds,
            ..Default::default()
        };
        Self::start(
            File::create_in(storage, &FileAccess::default(), &options, None)?,
            seed,
        )
    }

    fn start(file: File, seed: u64) -> h5::Result<Writer> {
        let root = file.root()?;
        root.new_dataset::<i64>()
            .shape([0])
            .max_shape([None])
            .chunk([64])
            .create(RAW)?;
        root.new_dataset::<i64>()
            .shape([0])
            .max_shape([None])
            .chunk([64])
            .deflate(4)
            .create(ZIP)?;
        root.new_dataset::<f64>()
            .shape([0, GRID_COLS])
            .max_shape([None, Some(GRID_COLS)])
            .chunk([16, GRID_COLS])
            .deflate(1)
            .create(GRID)?;
        root.create_group(GROUPS)?;
        Self::attach(file, seed)
    }

    /// Opens the workload's file at `path` for writing and continues from what it holds.
    pub fn open(path: &Path, access: &FileAccess, seed: u64) -> h5::Result<Writer> {
        Self::attach(File::open_rw_with(path, access)?, seed)
    }

    fn attach(file: File, seed: u64) -> h5::Result<Writer> {
        let raw = file.dataset(RAW)?;
        let zip = file.dataset(ZIP)?;
        let grid = file.dataset(GRID)?;
        let groups = file.group(GROUPS)?;
        let state = Checkpoint {
            raw: raw.shape()[0] as u64,
            zip: zip.shape()[0] as u64,
            grid: grid.shape()[0] as u64,
            groups: groups.member_names()?.len() as u64,
        };
        Ok(Writer {
            file,
            raw,
            zip,
            grid,
            groups,
            state,
            rng: Rng::new(seed),
        })
    }

    /// What the writer has written so far (flushed or not).
    pub fn state(&self) -> Checkpoint {
        self.state
    }

    /// The file.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// One operation: append 1 to 60 rows to one dataset, or create a group with an attribute.
    pub fn step(&mut self) -> h5::Result<()> {
        let choice = self.rng.below(100);
        let m = 1 + self.rng.below(60);
        match choice {
            0..35 => {
                let n = self.state.raw;
                let v: Vec<i64> = (n..n + m).map(raw_value).collect();
                append_1d(&mut self.raw, n, &v)?;
                self.state.raw += m;
            }
            35..70 => {
                let n = self.state.zip;
                let v: Vec<i64> = (n..n + m).map(zip_value).collect();
                append_1d(&mut self.zip, n, &v)?;
                self.state.zip += m;
            }
            70..94 => {
                let n = self.state.grid;
                let v: Vec<f64> = (n..n + m)
                    .flat_map(|i| (0..GRID_COLS as u64).map(move |j| grid_value(i, j)))
                    .collect();
                let (n, m) = (n as usize, m as usize);
                self.grid.resize([n + m, GRID_COLS])?;
                self.grid
                    .write_slice(&v, [rows(n, n + m), rows(0, GRID_COLS)])?;
                self.state.grid += m as u64;
            }
            _ => {
                let k = self.state.groups;
                let g = self.groups.create_group(&group_name(k))?;
                g.write_attr_scalar("i", k)?;
                self.state.groups += 1;
            }
        }
        Ok(())
    }

    /// Flushes; returns the state now guaranteed to survive a crash.
    pub fn flush(&mut self) -> h5::Result<Checkpoint> {
        self.file.flush()?;
        Ok(self.state)
    }

    /// Closes the file.
    pub fn close(self) -> h5::Result<()> {
        self.file.close()
    }
}

fn append_1d(ds: &mut Dataset, n: u64, v: &[i64]) -> h5::Result<()> {
    let (n, m) = (n as usize, v.len());
    ds.resize([n + m])?;
    ds.write_slice(v, [rows(n, n + m)])
}

/// What [`verify`] found wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wrong {
    /// h5 reported an error reading the file (refused, not wrong).
    Unreadable(String),
    /// A value differs from the workload's, or what the last completed flush wrote is missing.
    Values(String),
}

impl std::fmt::Display for Wrong {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Wrong::Unreadable(m) => write!(f, "unreadable: {m}"),
            Wrong::Values(m) => write!(f, "wrong: {m}"),
        }
    }
}

/// Checks everything `file` holds against the workload's values and that it holds at least
/// `at_least`; returns what it holds, or what is wrong.
pub fn verify(file: &File, at_least: &Checkpoint) -> Result<Checkpoint, Wrong> {
    verify_inner(file, at_least).map_err(|(unreadable, m)| {
        if unreadable {
            Wrong::Unreadable(m)
        } else {
            Wrong::Values(m)
        }
    })
}

fn verify_inner(file: &File, at_least: &Checkpoint) -> Result<Checkpoint, (bool, String)> {
    let e = |what: &str, err: h5::Error| (true, format!("{what}: {err}"));
    let ints = |name: &str, f: fn(u64) -> i64| -> Result<u64, (bool, String)> {
        let ds = file.dataset(name).map_err(|err| e(name, err))?;
        let v = ds.read_1d::<i64>().map_err(|err| e(name, err))?;
        for (i, x) in v.iter().enumerate() {
            if *x != f(i as u64) {
                return Err((false, format!("{name}[{i}] = {x}, not {}", f(i as u64))));
            }
        }
        Ok(v.len() as u64)
    };
    let raw = ints(RAW, raw_value)?;
    let zip = ints(ZIP, zip_value)?;
    let ds = file.dataset(GRID).map_err(|err| e(GRID, err))?;
    let g = ds.read_2d::<f64>().map_err(|err| e(GRID, err))?;
    if g.ncols() != GRID_COLS {
        return Err((false, format!("{GRID} has {} columns", g.ncols())));
    }
    for ((i, j), x) in g.indexed_iter() {
        if *x != grid_value(i as u64, j as u64) {
            return Err((false, format!("{GRID}[{i}, {j}] = {x}")));
        }
    }
    let grid = g.nrows() as u64;
    let group = file.group(GROUPS).map_err(|err| e(GROUPS, err))?;
    let names = group.member_names().map_err(|err| e(GROUPS, err))?;
    for (k, name) in names.iter().enumerate() {
        if *name != group_name(k as u64) {
            return Err((false, format!("group {k} is named {name}")));
        }
        let i: u64 = group
            .group(name)
            .and_then(|g| g.attr("i"))
            .and_then(|a| a.read_scalar())
            .map_err(|err| e(name, err))?;
        if i != k as u64 {
            return Err((false, format!("{name}: attribute i = {i}")));
        }
    }
    let found = Checkpoint {
        raw,
        zip,
        grid,
        groups: names.len() as u64,
    };
    if !found.covers(at_least) {
        return Err((
            false,
            format!(
                "holds {} but the last completed flush wrote {}",
                found.to_line(),
                at_least.to_line()
            ),
        ));
    }
    Ok(found)
}

/// The workspace root (where `.venv` and `crates/` are).
pub fn workspace_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A script of `py/`.
pub fn py_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("py").join(name)
}
