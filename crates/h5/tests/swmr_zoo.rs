//! The VFD SWMR "zoo" (SWMR-147): a writer walks through changes that use every metadata
//! structure h5 writes — groups created, grown from compact to dense link storage and shrunk
//! back, links deleted; datasets of every chunk index (single chunk, implicit, fixed array,
//! extensible array, version 2 and version 1 B-tree) created, extended, shrunk, rewritten and
//! deleted; fixed-length strings in datasets and attributes, variable-length strings refused
//! (SWMR-137) without a trace in the file; compound, enumeration, array, boolean and
//! floating-point datatypes; a committed datatype linked twice; attributes grown
//! into dense storage — one step per tick, while reader processes check, at every view, that
//! the whole file is exactly the state after some step (never a mix of two steps), that the
//! steps they see never go back, and that they are at most 3 ticks behind the writer.
//!
//! h5 writes no shared object header message (SOHM) tables, so the zoo has none; reading them
//! is covered by `sohm.rs`. Child processes are this test binary run again with only
//! `child_process_role` selected and the role in `H5_SWMR_ZOO_ROLE`.

mod swmr_common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use h5::{ChunkIndexKind, FixedAscii, H5Type};
use serde_json::{Value, json};
use swmr_common::*;

const ROLE: &str = "H5_SWMR_ZOO_ROLE";
const ARG: &str = "H5_SWMR_ZOO_ARG";

/// The writer's steps: the file after step `k` is [`check`]'s state `k`.
const STEPS: u64 = 13;

#[derive(H5Type, Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Phase {
    Solid = 1,
    Liquid = 2,
    Gas = 7,
}

#[derive(H5Type, Clone, Debug, PartialEq)]
#[repr(C)]
struct Sample {
    id: u32,
    temp: f64,
    phase: Phase,
    tag: FixedAscii<4>,
    grid: [i16; 3],
}

fn sample(i: u32) -> Sample {
    Sample {
        id: i,
        temp: f64::from(i) * 1.5 - 3.0,
        phase: [Phase::Solid, Phase::Liquid, Phase::Gas][i as usize % 3],
        tag: FixedAscii::new(&format!("t{i}")).unwrap(),
        grid: [i as i16, -(i as i16), 7],
    }
}

fn words(n: usize) -> Vec<FixedAscii<8>> {
    (0..n)
        .map(|i| FixedAscii::new(&format!("w{i}-{}", "z".repeat(i))).unwrap())
        .collect()
}

/// Chunked datasets of every index kind: name, kind, shape, maximum shape, chunk.
type IndexCase = (&'static str, ChunkIndexKind, usize, Option<usize>, usize);

const INDEXES: [IndexCase; 5] = [
    ("single", ChunkIndexKind::SingleChunk, 8, Some(8), 8),
    ("implicit", ChunkIndexKind::Implicit, 16, Some(16), 4),
    ("fixed", ChunkIndexKind::FixedArray, 16, Some(16), 4),
    ("earray", ChunkIndexKind::ExtensibleArray, 0, None, 4),
    ("btree1", ChunkIndexKind::BtreeV1, 6, Some(64), 4),
];

/// The values of a 1-d index-case dataset of `n` elements at a step (`base` 100 once step 12
/// rewrote them).
fn ramp(n: usize, base: i64) -> Vec<i64> {
    (0..n as i64).map(|i| base + i * 3).collect()
}

/// Applies step `k` (1-based) to the writer's file (`swmr`: a VFD SWMR writer's).
fn apply(f: &h5::File, k: u64, swmr: bool) {
    let root = f.root().unwrap();
    match k {
        1 => {
            let g = f.create_group("grp").unwrap();
            for i in 0..3 {
                g.create_group(&format!("s{i:02}")).unwrap();
            }
        }
        2 => {
            let g = f.group("grp").unwrap();
            for i in 3..12 {
                g.create_group(&format!("s{i:02}")).unwrap();
            }
        }
        3 => {
            for i in 0..9 {
                f.unlink(&format!("grp/s{i:02}")).unwrap();
            }
        }
        4 => {
            let g = f.create_group("idx").unwrap();
            for (name, kind, n, max, chunk) in INDEXES {
                let mut b = g
                    .new_dataset::<i64>()
                    .shape([n])
                    .max_shape([max])
                    .chunk([chunk])
                    .chunk_index(kind);
                if kind == ChunkIndexKind::Implicit {
                    b = b.alloc_time(h5::AllocTime::Early);
                }
                b.create(name).unwrap().write(&ramp(n, 0)).unwrap();
            }
            g.new_dataset::<i64>()
                .shape([0, 0])
                .max_shape([None, None])
                .chunk([2, 2])
                .create("btree2")
                .unwrap();
        }
        5 => {
            let e = f.dataset("idx/earray").unwrap();
            e.resize([10]).unwrap();
            e.write(&ramp(10, 0)).unwrap();
            let b = f.dataset("idx/btree2").unwrap();
            b.resize([3, 3]).unwrap();
            b.write(&ramp(9, 0)).unwrap();
            let v1 = f.dataset("idx/btree1").unwrap();
            v1.resize([20]).unwrap();
            v1.write(&ramp(20, 0)).unwrap();
        }
        6 => {
            f.dataset("idx/btree2").unwrap().resize([2, 2]).unwrap();
            let e = f.dataset("idx/earray").unwrap();
            e.resize([21]).unwrap();
            e.write(&ramp(21, 0)).unwrap();
        }
        7 => {
            let g = f.create_group("types").unwrap();
            if swmr {
                // SWMR-137: refused, and nothing of it is left in the file (checked by the
                // exact member lists).
                let e = g
                    .new_dataset::<String>()
                    .create_with_data("vstr", &["a".to_string()])
                    .unwrap_err();
                assert!(e.to_string().contains("unsupported under VFD SWMR"), "{e}");
                let e = g.write_attr_vlen_str("vnote", "x").unwrap_err();
                assert!(e.to_string().contains("unsupported under VFD SWMR"), "{e}");
            }
            g.new_dataset::<FixedAscii<8>>()
                .create_with_data("fstr", &words(5))
                .unwrap();
            g.new_dataset::<FixedAscii<8>>()
                .shape([4])
                .chunk([2])
                .create("fstr_chunked")
                .unwrap()
                .write(&words(4))
                .unwrap();
            g.write_attr_str("note", "zoo ok").unwrap();
        }
        8 => {
            let g = f.group("types").unwrap();
            let s: Vec<Sample> = (0..5).map(sample).collect();
            g.new_dataset::<Sample>()
                .create_with_data("compound", &s)
                .unwrap();
            g.new_dataset::<f32>()
                .create_with_data("f32", &[0.5f32, -1.25, 3e8])
                .unwrap();
            g.new_dataset::<bool>()
                .create_with_data("flags", &[true, false, true])
                .unwrap();
            g.new_dataset::<[u8; 3]>()
                .create_with_data("arrays", &[[1u8, 2, 3], [4, 5, 6]])
                .unwrap();
        }
        9 => {
            let t = f.group("types").unwrap();
            let dt = Sample::h5_type();
            let named = t.commit_datatype("sample_t", &dt).unwrap();
            f.group("grp")
                .unwrap()
                .link_hard_datatype("sample_alias", &named)
                .unwrap();
        }
        10 => {
            let g = f.group("grp").unwrap();
            for i in 0..12 {
                g.write_attr_scalar(&format!("a{i:02}"), i as i64 * 11)
                    .unwrap();
            }
        }
        11 => {
            f.unlink("idx/fixed").unwrap();
            f.group("types")
                .unwrap()
                .write_attr_str("note", "zoo ok!")
                .unwrap();
        }
        12 => {
            f.dataset("idx/single")
                .unwrap()
                .write(&ramp(8, 100))
                .unwrap();
        }
        13 => {
            let g = f.group("grp").unwrap();
            for i in 0..10 {
                g.delete_attr(&format!("a{i:02}")).unwrap();
            }
            f.create_group("done").unwrap();
        }
        _ => unreachable!("no step {k}"),
    }
    root.write_attr_scalar("step", k as i64).unwrap();
}

fn err(what: &str) -> impl Fn(h5::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

fn expect<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> Result<(), String> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what}: {got:?}, expected {want:?}"))
    }
}

/// Checks that the reader's view is exactly the state after step `k`.
fn check(f: &h5::File, k: u64) -> Result<(), String> {
    let mut top: Vec<&str> = Vec::new();
    if k >= 1 {
        top.push("grp");
    }
    if k >= 4 {
        top.push("idx");
    }
    if k >= 7 {
        top.push("types");
    }
    if k >= 13 {
        top.push("done");
    }
    top.sort_unstable();
    expect(
        "/ members",
        f.member_names().map_err(err("/"))?,
        to_strings(&top),
    )?;
    if k >= 1 {
        let g = f.group("grp").map_err(err("grp"))?;
        let first = match k {
            1 => 0..3,
            2 => 0..12,
            _ => 9..12,
        };
        let mut want: Vec<String> = first.map(|i| format!("s{i:02}")).collect();
        if k >= 9 {
            want.push("sample_alias".into());
        }
        want.sort();
        expect("grp members", g.member_names().map_err(err("grp"))?, want)?;
        let attrs = match k {
            ..=9 => 0..0,
            10..=12 => 0..12,
            _ => 10..12,
        };
        let names: Vec<String> = attrs.clone().map(|i| format!("a{i:02}")).collect();
        expect("grp attributes", g.attr_names().map_err(err("grp"))?, names)?;
        for i in attrs {
            let v = g
                .attr(&format!("a{i:02}"))
                .and_then(|a| a.read_scalar::<i64>())
                .map_err(err("grp attribute"))?;
            expect("grp attribute value", v, i as i64 * 11)?;
        }
    }
    if k >= 4 {
        check_indexes(f, k)?;
    }
    if k >= 7 {
        check_types(f, k)?;
    }
    Ok(())
}

fn to_strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn check_indexes(f: &h5::File, k: u64) -> Result<(), String> {
    let g = f.group("idx").map_err(err("idx"))?;
    let mut want = vec!["btree1", "btree2", "earray", "implicit", "single"];
    if k < 11 {
        want.push("fixed");
    }
    want.sort_unstable();
    expect(
        "idx members",
        g.member_names().map_err(err("idx"))?,
        to_strings(&want),
    )?;
    for name in want {
        let d = g.dataset(name).map_err(err(name))?;
        if name == "btree2" {
            let side = match k {
                4 => 0,
                5 => 3,
                _ => 2,
            };
            expect("btree2 shape", d.shape(), vec![side, side])?;
            let v: Vec<i64> = d
                .read::<i64>()
                .map_err(err(name))?
                .iter()
                .copied()
                .collect();
            // Shrinking keeps the elements still inside the extent.
            let want: Vec<i64> = match side {
                0 => vec![],
                3 => ramp(9, 0),
                _ => vec![0, 3, 9, 12],
            };
            expect("btree2 values", v, want)?;
            continue;
        }
        let n = match (name, k) {
            ("earray", 4) => 0,
            ("earray", 5) => 10,
            ("earray", _) => 21,
            ("btree1", 4) => 6,
            ("btree1", _) => 20,
            ("single", _) => 8,
            _ => 16,
        };
        let base = if name == "single" && k >= 12 { 100 } else { 0 };
        let v: Vec<i64> = d.read_vec::<i64>().map_err(err(name))?;
        expect(name, v, ramp(n, base))?;
    }
    Ok(())
}

fn check_types(f: &h5::File, k: u64) -> Result<(), String> {
    let g = f.group("types").map_err(err("types"))?;
    let mut want = vec!["fstr", "fstr_chunked"];
    if k >= 8 {
        want.extend(["arrays", "compound", "f32", "flags"]);
    }
    if k >= 9 {
        want.push("sample_t");
    }
    want.sort_unstable();
    expect(
        "types members",
        g.member_names().map_err(err("types"))?,
        to_strings(&want),
    )?;
    let strs = |name: &str| -> Result<Vec<FixedAscii<8>>, String> {
        g.dataset(name)
            .and_then(|d| d.read_vec::<FixedAscii<8>>())
            .map_err(err(name))
    };
    expect("fstr", strs("fstr")?, words(5))?;
    expect("fstr_chunked", strs("fstr_chunked")?, words(4))?;
    let note = g
        .attr("note")
        .and_then(|a| a.read_strings())
        .map_err(err("note"))?;
    expect(
        "note",
        note,
        vec![if k >= 11 { "zoo ok!" } else { "zoo ok" }.to_string()],
    )?;
    if k >= 8 {
        let s = g
            .dataset("compound")
            .and_then(|d| d.read_vec::<Sample>())
            .map_err(err("compound"))?;
        expect("compound", s, (0..5).map(sample).collect())?;
        let x = g
            .dataset("f32")
            .and_then(|d| d.read_vec::<f32>())
            .map_err(err("f32"))?;
        expect("f32", x, vec![0.5f32, -1.25, 3e8])?;
        let b = g
            .dataset("flags")
            .and_then(|d| d.read_vec::<bool>())
            .map_err(err("flags"))?;
        expect("flags", b, vec![true, false, true])?;
        let a = g
            .dataset("arrays")
            .and_then(|d| d.read_vec::<[u8; 3]>())
            .map_err(err("arrays"))?;
        expect("arrays", a, vec![[1u8, 2, 3], [4, 5, 6]])?;
    }
    if k >= 9 {
        let t = g.named_datatype("sample_t").map_err(err("sample_t"))?;
        let alias = f
            .group("grp")
            .and_then(|g| g.named_datatype("sample_alias"))
            .map_err(err("sample_alias"))?;
        expect("committed datatype shared", alias.address(), t.address())?;
        // As stored: the same type as the compound dataset's, read back the same way.
        let stored = g
            .dataset("compound")
            .map_err(err("compound"))?
            .dtype()
            .clone();
        expect(
            "committed datatype",
            t.dtype().map_err(err("sample_t"))?,
            stored,
        )?;
    }
    Ok(())
}

/// The step the view holds (0: nothing published yet) and whether it is exactly that state.
fn view(f: &h5::File) -> (u64, Result<(), String>) {
    let step = f
        .root()
        .and_then(|r| r.attr("step"))
        .and_then(|a| a.read_scalar::<i64>())
        .map_or(0, |s| s as u64);
    if step == 0 {
        return (0, Ok(()));
    }
    (step, check(f, step))
}

// ---------------------------------------------------------------------------------------------
// Processes.
// ---------------------------------------------------------------------------------------------

fn spawn(role: &str, arg: &Value) -> Child {
    spawn_role(ROLE, ARG, role, arg)
}

fn result_of(child: Child) -> Value {
    child_result(child)
}

#[test]
fn child_process_role() {
    let Ok(role) = std::env::var(ROLE) else {
        return;
    };
    let arg: Value = serde_json::from_str(&std::env::var(ARG).unwrap()).unwrap();
    match role.as_str() {
        "reader" => reader(&arg),
        other => panic!("unknown role {other}"),
    }
}

/// A reader checking every view until the writer's last step (or the deadline).
fn reader(arg: &Value) {
    let path = PathBuf::from(arg["path"].as_str().unwrap());
    let f = h5::File::open_with(&path, &access(reader_cfg(1), 64)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut errors, mut seen, mut max_stale) = (Vec::<String>::new(), Vec::<u64>::new(), 0u64);
    loop {
        // One view is one snapshot: no end of tick between its calls.
        f.disable_end_of_tick().unwrap();
        let (step, ok) = view(&f);
        f.enable_end_of_tick().unwrap();
        if let Err(e) = ok {
            errors.push(format!("step {step}: {e}"));
        }
        if seen.last().is_some_and(|&l| step < l) {
            errors.push(format!("went back from step {:?} to {step}", seen.last()));
        }
        if seen.last() != Some(&step) {
            seen.push(step);
        }
        let mine = f.vfd_swmr_status().unwrap().tick;
        if let Ok(b) = std::fs::read(md_of(&path))
            && let Ok(h) = h5_swmr::format::MdHeader::decode(&b)
        {
            max_stale = max_stale.max(h.tick.saturating_sub(mine));
        }
        if step == STEPS || Instant::now() > deadline || errors.len() > 5 {
            break;
        }
        std::thread::sleep(Duration::from_millis(3));
    }
    let mut o = std::io::stdout().lock();
    writeln!(
        o,
        "RESULT {}",
        json!({"errors": errors, "seen": seen, "max_stale": max_stale})
    )
    .unwrap();
    o.flush().unwrap();
}

/// The writer: each step made atomic (no end of tick inside it), then published by an
/// explicit end of tick, with a pause so that readers look at every step several times.
fn writer(path: &Path) {
    let f = h5::File::create_with(path, &access(writer_cfg(1), 64), &paged()).unwrap();
    f.end_tick().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    for k in 1..=STEPS {
        f.disable_end_of_tick().unwrap();
        apply(&f, k, true);
        f.enable_end_of_tick().unwrap();
        f.end_tick().unwrap();
        // Exactly state k, in the writer's own view too.
        check(&f, k).unwrap_or_else(|e| panic!("writer after step {k}: {e}"));
        std::thread::sleep(Duration::from_millis(250));
    }
    // Readers see the last step before the writer closes (close removes the metadata file).
    std::thread::sleep(Duration::from_millis(600));
    f.close().unwrap();
}

/// SWMR-147: every metadata structure the writer changes is seen consistent by readers in other
/// processes, step by step, within 3 ticks; the final file is the last state for plain opens.
#[test]
fn swmr_147_zoo_of_metadata_clients_followed_by_reader_processes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zoo.h5");
    let arg = json!({"path": path.to_str().unwrap()});
    let writer = {
        let path = path.clone();
        std::thread::spawn(move || writer(&path))
    };
    std::thread::sleep(Duration::from_millis(150));
    let readers: Vec<Child> = (0..3).map(|_| spawn("reader", &arg)).collect();
    writer.join().unwrap();
    for r in readers {
        let res = result_of(r);
        eprintln!("reader: {res}");
        assert_eq!(res["errors"], json!([]), "{res}");
        let seen: Vec<u64> = res["seen"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(seen.last(), Some(&STEPS), "{res}");
        // Steps are 250 ms apart and ticks 100 ms: a reader following within 3 ticks sees
        // most of them.
        assert!(seen.len() as u64 >= STEPS / 2, "{res}");
        assert!(res["max_stale"].as_u64().unwrap() <= 3, "{res}");
    }
    let f = h5::File::open(&path).unwrap();
    check(&f, STEPS).unwrap();
}

/// The zoo's steps and checks agree without processes: each state `k` is exactly what the
/// writer made, and differs from state `k - 1` (a check that cannot tell two steps apart would
/// let a torn view through).
#[test]
fn swmr_147_zoo_states_are_distinct() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zoo_plain.h5");
    let f = h5::File::create_with(&path, &h5::FileAccess::default(), &paged()).unwrap();
    for k in 1..=STEPS {
        apply(&f, k, false);
        check(&f, k).unwrap_or_else(|e| panic!("step {k}: {e}"));
        if k > 1 {
            assert!(
                check(&f, k - 1).is_err(),
                "state {k} passes as state {}",
                k - 1
            );
        }
    }
    f.close().unwrap();
}
