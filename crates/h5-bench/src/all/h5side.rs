//! The h5 side of the standard workloads, through h5's public API only. Each function does one
//! run of a workload, measures every phase with a [`Probe`] and checks what it read afterwards
//! (outside the timed phases). The h5py helper (`py/h5py_all.py`) does the same work.

use std::fs;
use std::path::Path;

use h5::{CreateOptions, Dataset, FileAccess, FormatBounds};
use ndarray::SliceInfoElem;

use super::RunOut;
use crate::common::{BenchResult, Bits, checksum, h5e};
use crate::probe::Probe;

/// How the W1/W2 field is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FieldKind {
    /// W1: one contiguous 1-D dataset.
    Contiguous,
    /// W2(a): 2-D, square chunks, no filter.
    Chunked,
    /// W2(b): 2-D, square chunks, shuffle + deflate level 1.
    Deflate,
}

impl FieldKind {
    /// The helper's name of the kind.
    pub(crate) fn py_name(self) -> &'static str {
        match self {
            FieldKind::Contiguous => "contig",
            FieldKind::Chunked => "chunked",
            FieldKind::Deflate => "deflate",
        }
    }
}

/// The field (the test data of W1/W2) with its checksum.
pub(crate) struct Field {
    /// Row-major values.
    pub(crate) values: Vec<f32>,
    /// Side of the square.
    pub(crate) side: usize,
    /// [`checksum`] of `values`.
    pub(crate) checksum: u64,
}

impl Field {
    /// The checksum of `a`, computed cheaply when `a` equals the field.
    pub(crate) fn check(&self, a: &[f32]) -> u64 {
        if a == self.values.as_slice() {
            self.checksum
        } else {
            checksum(a.iter().map(|x| x.bits()))
        }
    }
}

/// `h5::File::create_with` at `bounds` with `access`; `Ok(None)` when h5 refuses the bounds as
/// unsupported (the cell then reads `n/a`).
fn create(path: &Path, bounds: FormatBounds, access: &FileAccess) -> BenchResult<Option<h5::File>> {
    match h5::File::create_with(
        path,
        access,
        &CreateOptions {
            bounds,
            ..Default::default()
        },
    ) {
        Ok(f) => Ok(Some(f)),
        Err(h5::Error::Unsupported(_)) => Ok(None),
        Err(e) => Err(h5e(e)),
    }
}

fn not_available(bounds: FormatBounds) -> RunOut {
    RunOut::NotAvailable(format!("h5 does not write {bounds:?} bounds yet"))
}

fn file_size(path: &Path) -> Option<u64> {
    fs::metadata(path).ok().map(|m| m.len())
}

/// The whole `data` dataset of `path` as f32, C order.
fn read_data(path: &Path) -> BenchResult<Vec<f32>> {
    let file = h5::File::open(path).map_err(h5e)?;
    let a = file
        .dataset("data")
        .and_then(|d| d.read::<f32>())
        .map_err(h5e)?;
    Ok(a.into_iter().collect())
}

/// W1 / W2: create with `access`, write the field, close; then open, read it all, close.
pub(crate) fn field_write_read(
    path: &Path,
    kind: FieldKind,
    field: &Field,
    chunk: usize,
    bounds: FormatBounds,
    access: &FileAccess,
) -> BenchResult<RunOut> {
    let n = field.side;
    let p = Probe::start();
    let Some(file) = create(path, bounds, access)? else {
        return Ok(not_available(bounds));
    };
    let root = file.root().map_err(h5e)?;
    let b = root.new_dataset::<f32>();
    let ds = match kind {
        FieldKind::Contiguous => b.shape([n * n]),
        FieldKind::Chunked => b.shape([n, n]).chunk([chunk, chunk]),
        FieldKind::Deflate => b.shape([n, n]).chunk([chunk, chunk]).shuffle().deflate(1),
    }
    .create("data")
    .map_err(h5e)?;
    ds.write(&field.values).map_err(h5e)?;
    drop(ds);
    drop(root);
    file.close().map_err(h5e)?;
    let write = p.stop();

    let p = Probe::start();
    let file = h5::File::open(path).map_err(h5e)?;
    let a = file
        .dataset("data")
        .and_then(|d| d.read::<f32>())
        .map_err(h5e)?;
    drop(file);
    let read = p.stop();
    let cs = match a.as_slice() {
        Some(s) => field.check(s),
        None => checksum(a.iter().map(|x| x.bits())),
    };
    drop(a);
    Ok(RunOut::done(vec![write, read], cs, file_size(path)))
}

/// Reads another system's W1/W2 file and returns its checksum (untimed cross-check).
pub(crate) fn check_field(path: &Path, field: &Field) -> BenchResult<u64> {
    Ok(field.check(&read_data(path)?))
}

/// The `k`×`k` block at (`r`, `c`) (`s![r..r + k, c..c + k]`; the macro expands to unsafe
/// code, forbidden in this workspace).
fn block(r: usize, c: usize, k: usize) -> [SliceInfoElem; 2] {
    let range = |a: usize| SliceInfoElem::Slice {
        start: a as isize,
        end: Some((a + k) as isize),
        step: 1,
    };
    [range(r), range(c)]
}

/// W3 / W6: open with `access`, open the datasets `names`, read every `k`×`k` block
/// (dataset index, row, column), close. The checksum covers the blocks in order.
pub(crate) fn slabs(
    path: &Path,
    names: &[String],
    reads: &[(usize, usize, usize)],
    k: usize,
    access: &FileAccess,
) -> BenchResult<RunOut> {
    let mut out = Vec::with_capacity(reads.len());
    let p = Probe::start();
    let file = h5::File::open_with(path, access).map_err(h5e)?;
    let dsets = names
        .iter()
        .map(|n| file.dataset(n).map_err(h5e))
        .collect::<BenchResult<Vec<Dataset>>>()?;
    for &(j, r, c) in reads {
        let ds = dsets.get(j).ok_or("dataset index out of range")?;
        out.push(ds.read_slice::<f32>(block(r, c, k)).map_err(h5e)?);
    }
    drop(dsets);
    drop(file);
    let s = p.stop();
    let cs = checksum(out.iter().flat_map(|a| a.iter().map(|x| x.bits())));
    Ok(RunOut::done(vec![s], cs, None))
}

/// The expected checksum of [`slabs`] over arrays given by `value(dataset, row, col)`.
pub(crate) fn slabs_expected(
    reads: &[(usize, usize, usize)],
    k: usize,
    value: impl Fn(usize, usize, usize) -> f32,
) -> u64 {
    checksum(reads.iter().flat_map(|&(j, r, c)| {
        let value = &value;
        (r..r + k).flat_map(move |y| (c..c + k).map(move |x| value(j, y, x).bits()))
    }))
}

/// W4's sizes: `n` datasets, `rounds` rounds of `per` elements appended to each.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AppendSizes {
    /// Datasets.
    pub(crate) n: usize,
    /// Rounds.
    pub(crate) rounds: usize,
    /// Elements appended per dataset and round.
    pub(crate) per: usize,
}

/// W4's value of element `i` of dataset `j`: `j * 1000000 + i`.
pub(crate) fn w4_value(j: usize, i: usize) -> i32 {
    (j * 1_000_000 + i) as i32
}

/// W4's expected checksum (all datasets in name order, concatenated).
pub(crate) fn w4_expected(s: AppendSizes) -> u64 {
    let len = s.rounds * s.per;
    checksum(
        (0..s.n).flat_map(|j| (0..len).map(move |i| u64::from(w4_value(j, i).cast_unsigned()))),
    )
}

pub(crate) fn w4_name(j: usize) -> String {
    format!("d{j:04}")
}

/// W4: create `n` extensible int32 datasets (chunk 1024) with `access`; then `rounds` rounds
/// appending `per` elements to each (resize + write), and close. Phases: create, append.
pub(crate) fn w4(
    path: &Path,
    s: AppendSizes,
    bounds: FormatBounds,
    access: &FileAccess,
) -> BenchResult<RunOut> {
    let p = Probe::start();
    let Some(file) = create(path, bounds, access)? else {
        return Ok(not_available(bounds));
    };
    let root = file.root().map_err(h5e)?;
    let mut dsets = (0..s.n)
        .map(|j| {
            root.new_dataset::<i32>()
                .shape([0])
                .max_shape([None])
                .chunk([1024])
                .create(&w4_name(j))
                .map_err(h5e)
        })
        .collect::<BenchResult<Vec<Dataset>>>()?;
    let create = p.stop();

    let p = Probe::start();
    let mut buf = vec![0i32; s.per];
    for k in 0..s.rounds {
        let (lo, hi) = (k * s.per, (k + 1) * s.per);
        for (j, d) in dsets.iter_mut().enumerate() {
            d.resize([hi]).map_err(h5e)?;
            for (e, v) in buf.iter_mut().enumerate() {
                *v = w4_value(j, lo + e);
            }
            let sel = [SliceInfoElem::Slice {
                start: lo as isize,
                end: Some(hi as isize),
                step: 1,
            }];
            d.write_slice(&buf, sel).map_err(h5e)?;
        }
    }
    drop(dsets);
    drop(root);
    file.close().map_err(h5e)?;
    let append = p.stop();
    let cs = check_w4(path, s)?;
    Ok(RunOut::done(vec![create, append], cs, file_size(path)))
}

/// Reads a W4 file back and returns its checksum (untimed).
pub(crate) fn check_w4(path: &Path, s: AppendSizes) -> BenchResult<u64> {
    let file = h5::File::open(path).map_err(h5e)?;
    let mut all = Vec::with_capacity(s.n * s.rounds * s.per);
    for j in 0..s.n {
        let a = file
            .dataset(&w4_name(j))
            .and_then(|d| d.read::<i32>())
            .map_err(h5e)?;
        if a.len() != s.rounds * s.per {
            return Err(format!("W4: {} holds {} elements", w4_name(j), a.len()));
        }
        all.extend(a.iter().map(|v| u64::from(v.cast_unsigned())));
    }
    Ok(checksum(all))
}

pub(crate) fn w5_name(i: usize) -> String {
    format!("d{i:05}")
}

/// Checks that `who` listed W5's `members` names in order.
fn check_w5_names(names: &[String], members: usize, who: &str) -> BenchResult<()> {
    if names.len() != members || names.iter().enumerate().any(|(i, n)| *n != w5_name(i)) {
        return Err(format!("W5: {who} listed other names ({})", names.len()));
    }
    Ok(())
}

/// W5's value of member `i`.
pub(crate) fn w5_value(i: usize) -> i64 {
    i as i64 * 7 + 3
}

/// W5's expected checksum: the members' values in `order`.
pub(crate) fn w5_expected(order: &[usize]) -> u64 {
    checksum(order.iter().map(|&i| w5_value(i).bits()))
}

/// W5: one group `g` of `members` one-element int64 datasets, created with `access`: create +
/// close; reopen and open every member by name in `order`; open and list the names. Phases:
/// create, open by name, list.
pub(crate) fn w5(
    path: &Path,
    members: usize,
    order: &[usize],
    bounds: FormatBounds,
    access: &FileAccess,
) -> BenchResult<RunOut> {
    let p = Probe::start();
    let Some(file) = create(path, bounds, access)? else {
        return Ok(not_available(bounds));
    };
    let g = file.create_group("g").map_err(h5e)?;
    for i in 0..members {
        g.new_dataset::<i64>()
            .create_with_data(&w5_name(i), &[w5_value(i)])
            .map_err(h5e)?;
    }
    drop(g);
    file.close().map_err(h5e)?;
    let create = p.stop();

    let p = Probe::start();
    let file = h5::File::open(path).map_err(h5e)?;
    let g = file.group("g").map_err(h5e)?;
    let handles = order
        .iter()
        .map(|&i| g.dataset(&w5_name(i)).map_err(h5e))
        .collect::<BenchResult<Vec<Dataset>>>()?;
    let opened = p.stop();
    let vals = handles
        .iter()
        .map(|d| {
            d.read::<i64>()
                .map(|a| a.iter().next().copied().unwrap_or(0))
        })
        .collect::<Result<Vec<i64>, _>>()
        .map_err(h5e)?;
    drop(handles);
    drop(g);
    drop(file);

    let p = Probe::start();
    let file = h5::File::open(path).map_err(h5e)?;
    let names = file
        .group("g")
        .and_then(|g| g.member_names())
        .map_err(h5e)?;
    drop(file);
    let listed = p.stop();
    w5_out(
        &names,
        members,
        "h5",
        &vals,
        vec![create, opened, listed],
        path,
    )
}

/// W5's result: `who`'s listed `names` checked, the checksum of the values read.
pub(crate) fn w5_out(
    names: &[String],
    members: usize,
    who: &str,
    vals: &[i64],
    phases: Vec<crate::probe::Sample>,
    path: &Path,
) -> BenchResult<RunOut> {
    check_w5_names(names, members, who)?;
    let cs = checksum(vals.iter().map(|v| v.bits()));
    Ok(RunOut::done(phases, cs, file_size(path)))
}

/// Reads a W5 file's members in `order` and returns their checksum (untimed).
pub(crate) fn check_w5(path: &Path, order: &[usize]) -> BenchResult<u64> {
    let file = h5::File::open(path).map_err(h5e)?;
    let g = file.group("g").map_err(h5e)?;
    let mut vals = Vec::with_capacity(order.len());
    for &i in order {
        let a = g
            .dataset(&w5_name(i))
            .and_then(|d| d.read::<i64>())
            .map_err(h5e)?;
        vals.push(a.iter().next().copied().unwrap_or(0));
    }
    Ok(checksum(vals.iter().map(|v| v.bits())))
}
