//! `h5-bench read`: read workloads on h5 and on libhdf5 through h5py, side by side.
//!
//! The input files are written once by the Python helper (`py/h5py_side.py`, fixed seeds) into a
//! data directory and reused by later runs. The h5py side runs in one long-lived Python process
//! that takes JSON commands on stdin and reports `time.perf_counter()` timings of the h5py work
//! only, so interpreter start-up is never measured. Each workload runs once per system as a
//! warm-up (the files are then in the OS page cache: these are warm reads for both systems), then
//! `reps` times alternating the systems (h5 first on even repetitions, h5py first on odd ones).
//! Medians and the ratio `h5/h5py` (below 1: h5 is faster) are reported. Every run's values are
//! checked outside the timed region: a position-weighted checksum of the element bit patterns,
//! compared with the generator's and with h5py's.

use std::fs;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Instant;

use h5::{ChunkCacheConfig, FileAccess, H5Num};
use h5_metacache::MetadataKind;
use ndarray::SliceInfoElem;
use serde_json::{Value, json};

use crate::common::{
    BenchResult, Bits, PySide, THP_TUNABLE, checksum, default_python, err, format_rate,
    format_ratio, format_secs, h5e, markdown_table, median, permutation, selected, slab_starts,
};

/// The Python helper, written into the data directory at every run.
const HELPER: &str = include_str!("../py/h5py_side.py");

/// Seed of the random hyperslab positions.
const SLAB_SEED: u64 = 0x5EED_0003;
/// Seed of the random order of the group members.
const ORDER_SEED: u64 = 0x5EED_0004;
/// Side of the random hyperslabs.
const SLAB: usize = 64;

/// Options of `h5-bench read`.
pub(crate) type ReadOptions = crate::common::SideBySide;

/// One line of the results table.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Row {
    /// Workload name.
    pub(crate) workload: String,
    /// Size description.
    pub(crate) size: String,
    /// Median seconds of h5.
    pub(crate) h5: f64,
    /// Median seconds of h5py.
    pub(crate) py: f64,
    /// Units of work per run (MB, reads, members).
    pub(crate) amount: f64,
    /// Rate unit (`MB/s`, …).
    pub(crate) unit: String,
    /// Whether every value check passed.
    pub(crate) ok: bool,
}

/// The rows as a Markdown table with aligned columns.
pub(crate) fn format_table(rows: &[Row]) -> String {
    let header = [
        "workload",
        "size",
        "h5",
        "h5py",
        "h5 rate",
        "h5py rate",
        "h5/h5py",
        "check",
    ];
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.workload.clone(),
                r.size.clone(),
                format_secs(r.h5),
                format_secs(r.py),
                format_rate(r.amount, &r.unit, r.h5),
                format_rate(r.amount, &r.unit, r.py),
                format_ratio(r.h5, r.py),
                if r.ok { "ok" } else { "MISMATCH" }.to_owned(),
            ]
        })
        .collect();
    markdown_table(&header, &cells, 2)
}

/// Sizes of the generated inputs, from the helper's manifest.
struct Sizes {
    side: usize,
    chunk: usize,
    slabs: usize,
    members: usize,
    contig_elems: usize,
}

fn manifest_usize(m: &Value, key: &str) -> BenchResult<usize> {
    m["sizes"][key]
        .as_u64()
        .map(|v| v as usize)
        .ok_or_else(|| format!("manifest without sizes.{key}"))
}

/// Opens, reads the whole dataset as `T`, closes: (seconds, checksum).
fn h5_full<T: H5Num + Bits>(path: &Path, dset: &str) -> BenchResult<(f64, u64)> {
    let t0 = Instant::now();
    let file = h5::File::open(path).map_err(h5e)?;
    let a = file
        .dataset(dset)
        .and_then(|d| d.read::<T>())
        .map_err(h5e)?;
    drop(file);
    let t = t0.elapsed().as_secs_f64();
    Ok((t, checksum(a.iter().map(|x| x.bits()))))
}

/// The `SLAB`×`SLAB` block at (`r`, `c`) (what `s![r..r + SLAB, c..c + SLAB]` means; the macro
/// expands to unsafe code, forbidden in this workspace).
fn block(r: usize, c: usize) -> [SliceInfoElem; 2] {
    let range = |a: usize| SliceInfoElem::Slice {
        start: a as isize,
        end: Some((a + SLAB) as isize),
        step: 1,
    };
    [range(r), range(c)]
}

/// Opens, reads every `SLAB`² block at `starts`, closes: (seconds, checksum of the blocks
/// concatenated in order).
fn h5_slabs(
    path: &Path,
    dset: &str,
    starts: &[(usize, usize)],
    access: &FileAccess,
) -> BenchResult<(f64, u64)> {
    let t0 = Instant::now();
    let file = h5::File::open_with(path, access).map_err(h5e)?;
    let ds = file.dataset(dset).map_err(h5e)?;
    let mut out = Vec::with_capacity(starts.len());
    for &(r, c) in starts {
        out.push(ds.read_slice::<f32>(block(r, c)).map_err(h5e)?);
    }
    drop(ds);
    drop(file);
    let t = t0.elapsed().as_secs_f64();
    Ok((
        t,
        checksum(out.iter().flat_map(|a| a.iter().map(|x| x.bits()))),
    ))
}

/// Opens the group, lists it, opens every member by name in `order` and reads its element.
fn h5_group_walk(g: &h5::Group, order: &[usize]) -> BenchResult<Vec<i64>> {
    let names = g.member_names().map_err(h5e)?;
    let mut vals = Vec::with_capacity(order.len());
    for &i in order {
        let name = names
            .get(i)
            .ok_or_else(|| format!("the group lists {} members, fewer than {}", names.len(), i))?;
        vals.push(
            g.dataset(name)
                .and_then(|d| d.read_scalar::<i64>())
                .map_err(h5e)?,
        );
    }
    Ok(vals)
}

fn h5_group(path: &Path, group: &str, order: &[usize]) -> BenchResult<(f64, u64)> {
    let t0 = Instant::now();
    let file = h5::File::open(path).map_err(h5e)?;
    let g = file.group(group).map_err(h5e)?;
    let vals = h5_group_walk(&g, order)?;
    drop(g);
    drop(file);
    let t = t0.elapsed().as_secs_f64();
    Ok((t, checksum(vals.iter().map(|x| x.bits()))))
}

/// One workload: the h5 closure and the h5py command doing the same work.
struct Workload<'a> {
    id: &'static str,
    name: String,
    size: String,
    amount: f64,
    unit: &'static str,
    /// The generator's checksum when known (else h5py's warm-up run is the reference).
    expected: Option<u64>,
    h5: Box<dyn FnMut() -> BenchResult<(f64, u64)> + 'a>,
    py: Value,
}

fn measure(w: &mut Workload<'_>, py: &mut PySide, reps: usize) -> BenchResult<Row> {
    print!("  {} ({}): warm-up", w.name, w.size);
    let _ = std::io::stdout().flush();
    let (_, h5_cs) = (w.h5)()?;
    let (_, py_cs) = py.timed(&w.py)?;
    let reference = w.expected.unwrap_or(py_cs);
    let mut ok = h5_cs == reference && py_cs == reference;
    if !ok {
        print!(" [checksums: h5 {h5_cs}, h5py {py_cs}, expected {reference}]");
    }
    let mut h5_t = Vec::with_capacity(reps);
    let mut py_t = Vec::with_capacity(reps);
    for rep in 0..reps {
        let mut run_h5 = |ok: &mut bool| -> BenchResult<()> {
            let (t, cs) = (w.h5)()?;
            *ok &= cs == reference;
            h5_t.push(t);
            Ok(())
        };
        let mut run_py = |ok: &mut bool| -> BenchResult<()> {
            let (t, cs) = py.timed(&w.py)?;
            *ok &= cs == reference;
            py_t.push(t);
            Ok(())
        };
        if rep % 2 == 0 {
            run_h5(&mut ok)?;
            run_py(&mut ok)?;
        } else {
            run_py(&mut ok)?;
            run_h5(&mut ok)?;
        }
        print!(".");
        let _ = std::io::stdout().flush();
    }
    let row = Row {
        workload: w.name.clone(),
        size: w.size.clone(),
        h5: median(h5_t),
        py: median(py_t),
        amount: w.amount,
        unit: w.unit.to_owned(),
        ok,
    };
    println!(
        " h5 {} | h5py {} | {}{}",
        format_secs(row.h5),
        format_secs(row.py),
        format_ratio(row.h5, row.py),
        if ok { "" } else { " VALUE MISMATCH" }
    );
    Ok(row)
}

/// Runs `h5-bench read`; returns whether every check passed.
pub(crate) fn run(opts: &ReadOptions) -> BenchResult<bool> {
    let scale: u64 = if opts.quick { 16 } else { 1 };
    let reps = opts.reps.max(1);
    let dir = opts.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir()
            .join("h5-bench-read")
            .join(if opts.quick { "quick" } else { "full" })
    });
    fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let script = dir.join("h5py_side.py");
    fs::write(&script, HELPER).map_err(|e| format!("cannot write {}: {e}", script.display()))?;
    let python = match &opts.python {
        Some(p) => p.clone(),
        None => default_python(&std::env::current_dir().map_err(err)?),
    };
    let mut py = PySide::start(&python, &script)?;
    let v = py.call(&json!({"op": "versions"}))?;
    println!(
        "h5-bench read{}: {} timed repetitions per system, alternating, medians",
        if opts.quick {
            " --quick (sizes / 16)"
        } else {
            ""
        },
        reps
    );
    println!(
        "  h5py {} (HDF5 {}), numpy {}, Python {} at {}",
        v["h5py"].as_str().unwrap_or("?"),
        v["hdf5"].as_str().unwrap_or("?"),
        v["numpy"].as_str().unwrap_or("?"),
        v["python"].as_str().unwrap_or("?"),
        python.display()
    );
    let thp = std::env::var(THP_TUNABLE.0).unwrap_or_default();
    println!(
        "  h5 allocations: {}",
        if thp.contains("hugetlb=1") {
            "glibc malloc with glibc.malloc.hugetlb=1 (transparent huge pages for large buffers, \
             as numpy asks for its arrays)"
        } else {
            "glibc malloc without huge pages (--no-thp or GLIBC_TUNABLES set otherwise); with \
             --no-thp neither h5's arrays nor numpy's ask for them"
        }
    );
    println!(
        "  page cache: not dropped (needs root); one warm-up run per system, so all reads are \
         warm reads from the page cache"
    );
    println!("  data directory: {}", dir.display());
    let t0 = Instant::now();
    let m = py.call(&json!({"op": "gen", "dir": dir, "scale": scale}))?;
    if m["generated"].as_bool() == Some(true) {
        println!(
            "  generated the inputs in {:.1} s",
            t0.elapsed().as_secs_f64()
        );
    }
    let sizes = Sizes {
        side: manifest_usize(&m, "side")?,
        chunk: manifest_usize(&m, "chunk")?,
        slabs: manifest_usize(&m, "slabs")?,
        members: manifest_usize(&m, "members")?,
        contig_elems: manifest_usize(&m, "contig_elems")?,
    };
    let file = |k: &str| -> BenchResult<PathBuf> {
        m["files"][k]
            .as_str()
            .map(PathBuf::from)
            .ok_or_else(|| format!("manifest without files.{k}"))
    };
    let chunked = file("chunked")?;
    let contig = file("contig")?;
    let group = file("group")?;
    let field_cs = m["checksums"]["field"].as_u64();
    let contig_cs = m["checksums"]["contig"].as_u64();
    let bytes = |k: &str| m["bytes"][k].as_u64().unwrap_or(0);
    println!(
        "  files: chunked.h5 {:.1} MiB, contig.h5 {:.1} MiB, group.h5 {:.1} MiB",
        bytes("chunked") as f64 / 1048576.0,
        bytes("contig") as f64 / 1048576.0,
        bytes("group") as f64 / 1048576.0
    );

    let n = sizes.side;
    let field_mb = (n * n * 4) as f64 / 1e6;
    let grid = format!("{n}x{n} f32, {c}x{c} chunks", c = sizes.chunk);
    let starts = slab_starts(sizes.slabs, n, SLAB, SLAB_SEED);
    let starts_json: Vec<[usize; 2]> = starts.iter().map(|&(r, c)| [r, c]).collect();
    let order = permutation(sizes.members, ORDER_SEED);
    let default_access = FileAccess::new();
    let small_access = FileAccess::new().chunk_cache(ChunkCacheConfig {
        limit: 1 << 20,
        ..ChunkCacheConfig::default()
    });

    let mut workloads = vec![
        Workload {
            id: "1",
            name: "1 full read, shuffle+deflate(4)".to_owned(),
            size: grid.clone(),
            amount: field_mb,
            unit: "MB/s",
            expected: field_cs,
            h5: Box::new(|| h5_full::<f32>(&chunked, "deflate")),
            py: json!({"op": "full", "file": chunked, "dset": "deflate"}),
        },
        Workload {
            id: "2",
            name: "2 full read, no filter".to_owned(),
            size: grid.clone(),
            amount: field_mb,
            unit: "MB/s",
            expected: field_cs,
            h5: Box::new(|| h5_full::<f32>(&chunked, "plain")),
            py: json!({"op": "full", "file": chunked, "dset": "plain"}),
        },
        Workload {
            id: "3",
            name: "3 random 64x64 reads of (1)".to_owned(),
            size: format!("{} reads, default caches", sizes.slabs),
            amount: sizes.slabs as f64,
            unit: "reads/s",
            expected: None,
            h5: Box::new(|| h5_slabs(&chunked, "deflate", &starts, &default_access)),
            py: json!({"op": "slabs", "file": chunked, "dset": "deflate", "size": SLAB, "starts": starts_json}),
        },
        Workload {
            id: "3b",
            name: "3b same, h5 chunk cache 1 MiB".to_owned(),
            size: format!("{} reads", sizes.slabs),
            amount: sizes.slabs as f64,
            unit: "reads/s",
            expected: None,
            h5: Box::new(|| h5_slabs(&chunked, "deflate", &starts, &small_access)),
            py: json!({"op": "slabs", "file": chunked, "dset": "deflate", "size": SLAB, "starts": starts_json}),
        },
        Workload {
            id: "4",
            name: "4 group: list, open each, read".to_owned(),
            size: format!("{} members", sizes.members),
            amount: sizes.members as f64,
            unit: "members/s",
            expected: None,
            h5: Box::new(|| h5_group(&group, "g", &order)),
            py: json!({"op": "group", "file": group, "group": "g", "order": order}),
        },
        Workload {
            id: "5",
            name: "5 full read, contiguous".to_owned(),
            size: format!("{} MiB f64", (sizes.contig_elems * 8) as f64 / 1048576.0),
            amount: (sizes.contig_elems * 8) as f64 / 1e6,
            unit: "MB/s",
            expected: contig_cs,
            h5: Box::new(|| h5_full::<f64>(&contig, "data")),
            py: json!({"op": "full", "file": contig, "dset": "data"}),
        },
    ];
    println!();
    let mut rows = Vec::new();
    for w in workloads.iter_mut().filter(|w| selected(&opts.only, w.id)) {
        rows.push(measure(w, &mut py, reps)?);
    }
    drop(workloads);
    drop(py);

    if selected(&opts.only, "4") {
        println!(
            "\nh5 cache statistics, workload 4 (one file, {} members):",
            sizes.members
        );
        group_stats(&group, &order)?;
    }
    println!("\nh5 phases (one run each, same warm files):");
    phases(
        &opts.only,
        &chunked,
        &contig,
        &group,
        &starts,
        &order,
        &small_access,
    )?;

    println!("\nResults (median seconds; h5/h5py below 1 = h5 faster):\n");
    print!("{}", format_table(&rows));
    Ok(rows.iter().all(|r| r.ok))
}

fn print_meta_stats(label: &str, st: &h5::MetadataCacheStats) {
    let total = st.total_hits + st.total_misses;
    let rate = if total == 0 {
        0.0
    } else {
        st.total_hits as f64 / total as f64
    };
    println!(
        "  {label}: metadata cache hits {} misses {} (hit rate {:.3}); {} storage reads, {:.2} MiB; \
         {} evictions",
        st.total_hits,
        st.total_misses,
        rate,
        st.reads,
        st.bytes_read as f64 / 1048576.0,
        st.total_evictions
    );
    for k in MetadataKind::ALL {
        if let Some(c) = st.per_class.get(usize::from(k.id()))
            && c.hits + c.misses > 0
        {
            println!(
                "    {:<24} hits {:>7} misses {:>6}",
                k.name(),
                c.hits,
                c.misses
            );
        }
    }
}

/// Walks the group twice in one open file and prints both caches' statistics after each pass.
fn group_stats(path: &Path, order: &[usize]) -> BenchResult<()> {
    let file = h5::File::open(path).map_err(h5e)?;
    let g = file.group("g").map_err(h5e)?;
    for pass in 1..=2 {
        let t0 = Instant::now();
        h5_group_walk(&g, order)?;
        let t = t0.elapsed().as_secs_f64();
        let label = format!("after pass {pass} ({})", format_secs(t));
        print_meta_stats(&label, &file.metadata_cache_stats().map_err(h5e)?);
        let cs = file.chunk_cache_stats().map_err(h5e)?;
        for line in cs.to_string().lines() {
            println!("    {line}");
        }
    }
    Ok(())
}

/// Time of a closure in seconds, with its value.
fn time<T>(f: impl FnOnce() -> BenchResult<T>) -> BenchResult<(f64, T)> {
    let t0 = Instant::now();
    let v = f()?;
    Ok((t0.elapsed().as_secs_f64(), v))
}

/// Splits h5's runs into phases: open, raw read (decode + copy into a byte buffer), typed read
/// (raw read + conversion into a fresh array), and the page-cache copy of the file as a floor.
fn phases(
    only: &[String],
    chunked: &Path,
    contig: &Path,
    group: &Path,
    starts: &[(usize, usize)],
    order: &[usize],
    small: &FileAccess,
) -> BenchResult<()> {
    let floor = |path: &Path| -> BenchResult<f64> {
        let len = fs::metadata(path).map_err(err)?.len() as usize;
        let mut buf = vec![0u8; len];
        let mut best = f64::INFINITY;
        for _ in 0..3 {
            let (t, ()) = time(|| {
                fs::File::open(path)
                    .and_then(|mut f| f.read_exact(&mut buf))
                    .map_err(err)
            })?;
            best = best.min(t);
        }
        Ok(best)
    };
    for (label, path, dset, elem) in [
        ("1 deflate", chunked, "deflate", 4usize),
        ("2 no filter", chunked, "plain", 4),
        ("5 contiguous", contig, "data", 8),
    ] {
        if !selected(only, &label[..1]) {
            continue;
        }
        let (t_open, file) = time(|| h5::File::open(path).map_err(h5e))?;
        let (t_ds, ds) = time(|| file.dataset(dset).map_err(h5e))?;
        let (t_raw, raw) = time(|| ds.read_raw().map_err(h5e))?;
        let cs = file.chunk_cache_stats().map_err(h5e)?;
        let (t_raw2, _) = time(|| ds.read_raw().map_err(h5e))?;
        drop(ds);
        drop(file);
        let file = h5::File::open(path).map_err(h5e)?;
        let ds = file.dataset(dset).map_err(h5e)?;
        let (t_typed, n) = if elem == 4 {
            time(|| ds.read::<f32>().map(|a| a.len()).map_err(h5e))?
        } else {
            time(|| ds.read::<f64>().map(|a| a.len()).map_err(h5e))?
        };
        drop(ds);
        drop(file);
        let mb = (n * elem) as f64 / 1e6;
        println!(
            "  {label}: open file {} + dataset {}; read_raw {} ({}; decode {:.1} ms summed over \
             threads, {} chunk misses, {:.1} MiB read); read_raw again in the same file {}; \
             typed read {} (conversion + second buffer ~ {})",
            format_secs(t_open),
            format_secs(t_ds),
            format_secs(t_raw),
            format_rate(mb, "MB/s", t_raw),
            cs.decode_time.as_secs_f64() * 1e3,
            cs.misses,
            cs.bytes_read as f64 / 1048576.0,
            format_secs(t_raw2),
            format_secs(t_typed),
            format_secs(t_typed - t_raw),
        );
        drop(raw);
    }
    for (label, path, ids) in [
        ("chunked.h5", chunked, ["1", "2"]),
        ("contig.h5", contig, ["5", "5"]),
    ] {
        if !ids.iter().any(|id| selected(only, id)) {
            continue;
        }
        let t = floor(path)?;
        let len = fs::metadata(path).map_err(err)?.len() as f64;
        println!(
            "  floor: read() of all of {label} into a reused buffer {} ({})",
            format_secs(t),
            format_rate(len / 1e6, "MB/s", t)
        );
    }
    for (label, access) in [
        ("default chunk cache", &FileAccess::new()),
        ("1 MiB", small),
    ] {
        if !selected(only, "3") && !selected(only, "3b") {
            continue;
        }
        let file = h5::File::open_with(chunked, access).map_err(h5e)?;
        let ds = file.dataset("deflate").map_err(h5e)?;
        let (t, ()) = time(|| {
            for &(r, c) in starts {
                ds.read_slice::<f32>(block(r, c)).map_err(h5e)?;
            }
            Ok(())
        })?;
        let cs = file.chunk_cache_stats().map_err(h5e)?;
        println!(
            "  3 random reads, {label}: {} per read; chunk hits {} misses {} evictions {}; \
             decode {:.1} ms",
            format_secs(t / starts.len().max(1) as f64),
            cs.hits,
            cs.misses,
            cs.evictions,
            cs.decode_time.as_secs_f64() * 1e3
        );
    }
    if !selected(only, "4") {
        return Ok(());
    }
    let file = h5::File::open(group).map_err(h5e)?;
    let g = file.group("g").map_err(h5e)?;
    let (t_list, names) = time(|| g.member_names().map_err(h5e))?;
    let (t_open, dsets) = time(|| {
        order
            .iter()
            .filter_map(|&i| names.get(i))
            .map(|n| g.dataset(n).map_err(h5e))
            .collect::<BenchResult<Vec<_>>>()
    })?;
    let (t_read, _) = time(|| {
        dsets
            .iter()
            .map(|d| d.read_scalar::<i64>().map_err(h5e))
            .collect::<BenchResult<Vec<_>>>()
    })?;
    println!(
        "  4 group: list {} names {}; open each by name {} ({:.1} us each); read each {} ({:.1} \
         us each)",
        names.len(),
        format_secs(t_list),
        format_secs(t_open),
        t_open * 1e6 / dsets.len().max(1) as f64,
        format_secs(t_read),
        t_read * 1e6 / dsets.len().max(1) as f64
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_aligned_markdown() {
        let rows = vec![
            Row {
                workload: "a".to_owned(),
                size: "1x1".to_owned(),
                h5: 0.5,
                py: 1.0,
                amount: 100.0,
                unit: "MB/s".to_owned(),
                ok: true,
            },
            Row {
                workload: "longer name".to_owned(),
                size: "2".to_owned(),
                h5: 0.002,
                py: 0.001,
                amount: 10.0,
                unit: "reads/s".to_owned(),
                ok: false,
            },
        ];
        let t = format_table(&rows);
        // Every line has the same width: the columns are aligned.
        let lines = crate::common::table_cells(&t);
        assert_eq!(lines.len(), 4);
        assert_eq!(
            lines[0],
            [
                "workload",
                "size",
                "h5",
                "h5py",
                "h5 rate",
                "h5py rate",
                "h5/h5py",
                "check"
            ]
        );
        assert!(lines[1][0].chars().all(|c| c == '-'));
        assert!(lines[1][2].ends_with(':'));
        assert_eq!(
            lines[2],
            [
                "a", "1x1", "500.0 ms", "1.00 s", "200 MB/s", "100 MB/s", "0.50x", "ok"
            ]
        );
        assert_eq!(
            lines[3],
            [
                "longer name",
                "2",
                "2.0 ms",
                "1.0 ms",
                "5000 reads/s",
                "10000 reads/s",
                "2.00x",
                "MISMATCH"
            ]
        );
        assert!(
            t.lines()
                .nth(2)
                .is_some_and(|l| l.starts_with("| a           | 1x1  |"))
        );
    }
}
