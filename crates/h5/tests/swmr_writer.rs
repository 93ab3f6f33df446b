//! The VFD SWMR writer through the public API, checked from the metadata file it publishes and
//! from snapshot readers over it, and finally by libhdf5 (h5py) on the closed file.

use crate::swmr_common;

use swmr_common::*;

use h5_testkit::verify::run_python;

#[test]
fn writer_publishes_ticks_that_readers_can_follow() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.h5");
    let f = h5::File::create_with(&path, &access(writer_cfg(0), 16), &paged()).unwrap();
    assert!(f.is_vfd_swmr());
    assert!(md_of(&path).exists());
    assert_eq!(
        std::fs::metadata(md_of(&path)).unwrap().len(),
        0,
        "empty until the first tick"
    );
    let g = f.create_group("g").unwrap();
    let ds = g
        .new_dataset::<i32>()
        .shape([0])
        .max_shape([None])
        .chunk([16])
        .create("d")
        .unwrap();
    f.end_tick().unwrap();
    let (h, ix) = published(&path);
    assert_eq!(h.tick, 1);
    assert!(!ix.entries.is_empty());
    let r = snapshot(&path);
    assert_eq!(r.dataset("g/d").unwrap().shape(), vec![0]);
    for round in 0..5usize {
        ds.resize([16 * (round + 1)]).unwrap();
        let v: Vec<i32> = (0..16).map(|i| (round * 16 + i) as i32).collect();
        ds.write_slice(
            &v,
            [ndarray::SliceInfoElem::Slice {
                start: (16 * round) as isize,
                end: Some((16 * round + 16) as isize),
                step: 1,
            }],
        )
        .unwrap();
        f.end_tick().unwrap();
        let (h, _) = published(&path);
        assert_eq!(h.tick, 2 + round as u64);
        let r = snapshot(&path);
        let d = r.dataset("g/d").unwrap();
        assert_eq!(d.shape(), vec![16 * (round + 1)]);
        let got: Vec<i32> = d.read_1d().unwrap().to_vec();
        assert_eq!(got, (0..(16 * (round + 1)) as i32).collect::<Vec<_>>());
    }
    f.close().unwrap();
    assert!(
        !md_of(&path).exists(),
        "the metadata file is removed at close"
    );
    let out = run_python(
        "import sys, h5py\nf = h5py.File(sys.argv[1], 'r')\nprint(list(f['g/d'][:]) == list(range(80)), f['g/d'].shape)",
        &[path.to_str().unwrap()],
    );
    assert_eq!(out.trim(), "True (80,)");
}

fn tick_of(path: &std::path::Path) -> u64 {
    published(path).0.tick
}

/// A small new dataset of `n` elements under the root.
fn small(f: &h5::File, name: &str, n: usize) {
    f.root()
        .unwrap()
        .new_dataset::<i32>()
        .shape([n])
        .create(name)
        .unwrap()
        .write(&vec![7i32; n])
        .unwrap();
}

// SWMR-001 (the file keeps its record), SWMR-004 (manual ticks), SWMR-020 (end_tick publishes),
// SWMR-050 (the page buffer's tick follows), SWMR-028 (ticks from 1, +1 each), SWMR-041 (the
// HDF5 file's metadata stays in the page buffer while the metadata file gains pages), SWMR-099.
#[test]
fn swmr_001_004_020_050_028_041_099_manual_ticks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.h5");
    let cfg = h5::SwmrConfig {
        tick_len: 0,
        md_pages_reserved: 2,
        max_lag: 5,
        pb_expansion_threshold: 7,
        ..h5::SwmrConfig::writer()
    };
    let f = h5::File::create_with(&path, &access(cfg.clone(), 64), &paged()).unwrap();
    assert_eq!(f.vfd_swmr_config(), Some(&cfg));
    for i in 0..20 {
        f.create_group(&format!("g{i}")).unwrap();
        let _ = f.member_names().unwrap();
    }
    assert_eq!(
        std::fs::metadata(md_of(&path)).unwrap().len(),
        0,
        "no tick yet"
    );
    for n in 1..=5u64 {
        f.create_group(&format!("t{n}")).unwrap();
        f.end_tick().unwrap();
        assert_eq!(tick_of(&path), n);
        assert_eq!(f.vfd_swmr_status().unwrap().tick, n + 1);
    }
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        0,
        "no metadata reached the HDF5 file"
    );
    assert!(std::fs::metadata(md_of(&path)).unwrap().len() > 4096);
    let r = snapshot(&path);
    assert_eq!(r.member_names().unwrap().len(), 25);
    f.close().unwrap();
}

// SWMR-006, SWMR-007, SWMR-008, SWMR-136, SWMR-021, E-6 … E-10, E-14.
#[test]
fn swmr_006_007_008_136_021_open_rules() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r.h5");
    let err = |r: h5::Result<h5::File>| r.map(|_| ()).unwrap_err().to_string();
    let reader = reader_cfg(1);
    assert!(
        err(h5::File::create_with(
            &p,
            &access(reader.clone(), 8),
            &paged()
        ))
        .contains("writer flag does not match open mode")
    );
    let e = err(h5::File::create_with(
        &p,
        &access(writer_cfg(1), 8),
        &h5::CreateOptions::default(),
    ));
    assert!(e.contains("requires paged file-space allocation"), "{e}");
    let e = err(h5::File::create_with(
        &p,
        &h5::FileAccess::default().vfd_swmr(writer_cfg(1)),
        &paged(),
    ));
    assert!(e.contains("requires the page buffer"), "{e}");
    let old = h5::CreateOptions {
        bounds: h5::FormatBounds::V18,
        ..paged()
    };
    assert!(err(h5::File::create_with(&p, &access(writer_cfg(1), 8), &old)).contains("1.10"));
    // A plain paged file and a plain non-paged file.
    h5::File::create_with(&p, &h5::FileAccess::default(), &paged())
        .unwrap()
        .close()
        .unwrap();
    assert!(err(h5::File::open_rw_with(&p, &access(reader.clone(), 8))).contains("writer flag"));
    assert!(err(h5::File::open_with(&p, &access(writer_cfg(1), 8))).contains("writer flag"));
    assert!(
        err(h5::File::open_with(
            &p,
            &h5::FileAccess::default().vfd_swmr(reader.clone())
        ))
        .contains("page buffer")
    );
    let plain = dir.path().join("plain.h5");
    h5::File::create(&plain).unwrap().close().unwrap();
    let e = err(h5::File::open_rw_with(&plain, &access(writer_cfg(1), 8)));
    assert!(e.contains("requires paged file-space allocation"), "{e}");
    assert!(!md_of(&plain).exists() || std::fs::metadata(md_of(&plain)).is_ok());
    // The end-of-tick calls on a file without VFD SWMR.
    let f = h5::File::open_rw(&p).unwrap();
    for e in [
        f.end_tick(),
        f.disable_end_of_tick(),
        f.enable_end_of_tick(),
    ] {
        assert!(
            e.unwrap_err()
                .to_string()
                .contains("file not opened with VFD SWMR")
        );
    }
}

// SWMR-022, SWMR-025, SWMR-111, E-15 … E-17.
#[test]
fn swmr_022_025_111_enable_disable_rules() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.h5");
    let f = h5::File::create_with(&path, &access(writer_cfg(0), 16), &paged()).unwrap();
    let id = f.vfd_swmr_status().unwrap().queue_id;
    f.disable_end_of_tick().unwrap();
    assert!(
        f.disable_end_of_tick()
            .unwrap_err()
            .to_string()
            .contains("already disabled")
    );
    assert!(f.end_tick().unwrap_err().to_string().contains("disabled"));
    assert!(
        !h5_swmr::queue::snapshot().iter().any(|e| e.0 == id),
        "off the queue while disabled"
    );
    f.enable_end_of_tick().unwrap();
    assert!(
        f.enable_end_of_tick()
            .unwrap_err()
            .to_string()
            .contains("already enabled")
    );
    f.end_tick().unwrap();
    f.disable_end_of_tick().unwrap();
    f.close().unwrap();
    assert!(!h5_swmr::queue::snapshot().iter().any(|e| e.0 == id));
}

// SWMR-024, SWMR-026, SWMR-036: two timed writers; one disabled stops ticking while the other
// goes on; enabling after the deadline ticks during the enable call.
#[test]
fn swmr_024_026_disable_one_of_two() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.h5");
    let b = dir.path().join("b.h5");
    let fa = h5::File::create_with(&a, &access(writer_cfg(1), 16), &paged()).unwrap();
    let fb = h5::File::create_with(&b, &access(writer_cfg(1), 16), &paged()).unwrap();
    fa.end_tick().unwrap();
    fb.end_tick().unwrap();
    fa.disable_end_of_tick().unwrap();
    let (ta, tb) = (tick_of(&a), tick_of(&b));
    let stop = std::time::Instant::now() + std::time::Duration::from_millis(1200);
    let mut i = 0;
    while std::time::Instant::now() < stop {
        let _ = fa.member_names().unwrap();
        let _ = fb.member_names().unwrap();
        i += 1;
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(i > 10);
    assert_eq!(tick_of(&a), ta, "disabled: no tick");
    assert!(
        tick_of(&b) >= tb + 3,
        "the other file ticks on ({} → {})",
        tb,
        tick_of(&b)
    );
    let before = tick_of(&a);
    std::thread::sleep(std::time::Duration::from_millis(250));
    fa.enable_end_of_tick().unwrap();
    assert_eq!(
        tick_of(&a),
        before + 1,
        "the enable call ran the expired tick"
    );
    fa.close().unwrap();
    fb.close().unwrap();
}

// SWMR-029, E-13: the same file as writer and reader in one process is refused; another file
// as reader is fine (here: a closed file opened by a posix reader).
#[test]
fn swmr_029_writer_and_reader_of_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let f_path = dir.path().join("f.h5");
    let g_path = dir.path().join("g.h5");
    h5::File::create_with(&g_path, &h5::FileAccess::default(), &paged())
        .unwrap()
        .close()
        .unwrap();
    let w = h5::File::create_with(&f_path, &access(writer_cfg(0), 16), &paged()).unwrap();
    w.end_tick().unwrap();
    let e = h5::File::open_with(&f_path, &access(reader_cfg(0), 16)).unwrap_err();
    assert!(
        e.to_string()
            .contains("already open with VFD SWMR in this process as writer"),
        "{e}"
    );
    let r = h5::File::open_with(&g_path, &access(reader_cfg(0), 16)).unwrap();
    assert_eq!(
        r.vfd_swmr_status().unwrap().tick,
        0,
        "SWMR-105: make-believe tick 0"
    );
    w.close().unwrap();
}

// SWMR-099, SWMR-101, SWMR-109, SWMR-113, SWMR-051, E-12.
#[test]
fn swmr_099_101_109_113_051_md_file_lifecycle() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("l.h5");
    std::fs::write(md_of(&path), b"stale").unwrap();
    let e = h5::File::create_with(&path, &access(writer_cfg(0), 16), &paged()).unwrap_err();
    assert!(
        e.to_string()
            .contains("metadata file already exists (another writer?"),
        "{e}"
    );
    std::fs::remove_file(md_of(&path)).unwrap();
    // A file with many objects, written without VFD SWMR.
    let f = h5::File::create_with(&path, &h5::FileAccess::default(), &paged()).unwrap();
    for i in 0..40 {
        small(&f, &format!("d{i}"), 100);
    }
    f.close().unwrap();
    let keep = h5::SwmrConfig {
        keep_md_file: true,
        ..writer_cfg(0)
    };
    let w = h5::File::open_rw_with(&path, &access(keep, 64)).unwrap();
    let (h, ix) = published(&path);
    assert_eq!(
        (h.tick, ix.entries.len()),
        (1, 0),
        "header and empty index at once"
    );
    w.dataset("d7").unwrap().write(&vec![1i32; 100]).unwrap();
    w.end_tick().unwrap();
    let (_, ix) = published(&path);
    let total_pages = std::fs::metadata(&path).unwrap().len() / PAGE;
    assert!(!ix.entries.is_empty());
    assert!(
        (ix.entries.len() as u64) < total_pages / 2,
        "only the touched pages: {} of {total_pages}",
        ix.entries.len()
    );
    let r = snapshot(&path);
    assert_eq!(r.member_names().unwrap().len(), 40);
    assert_eq!(r.dataset("d3").unwrap().read_1d::<i32>().unwrap()[0], 7);
    w.close().unwrap();
    let (h, ix) = published(&path);
    assert!(ix.entries.is_empty(), "the final index is empty");
    assert!(h.tick > 2);
    let r = h5::File::open(&path).unwrap();
    assert_eq!(r.dataset("d7").unwrap().read_1d::<i32>().unwrap()[99], 1);
}

// SWMR-108, SWMR-066 (integration): an existing file's pages wait max_lag ticks before they
// reach it; a flush waits them out and leaves no delayed write.
#[test]
fn swmr_108_066_flush_waits_out_delayed_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fl.h5");
    let f = h5::File::create_with(&path, &h5::FileAccess::default(), &paged()).unwrap();
    small(&f, "d", 50);
    f.close().unwrap();
    let w = h5::File::open_rw_with(&path, &access(writer_cfg(1), 64)).unwrap();
    // The open marked the superblock straight away; nothing else reaches the file yet.
    let before = std::fs::read(&path).unwrap();
    w.create_group("new").unwrap();
    w.end_tick().unwrap();
    let t0 = tick_of(&path);
    assert!(
        std::fs::read(&path).unwrap() == before,
        "changed pages of an existing file wait"
    );
    w.flush().unwrap();
    let t1 = tick_of(&path);
    assert!(t1 >= t0 + 3, "the flush ran max_lag ticks ({t0} → {t1})");
    assert!(std::fs::read(&path).unwrap() != before);
    // The file is complete after the flush; the writer's marks stay until close.
    let r = h5::File::open_with(
        &path,
        &h5::FileAccess::default().ignore_open_for_writing(true),
    )
    .unwrap();
    assert!(r.member_names().unwrap().contains(&"new".to_string()));
    w.close().unwrap();
}

// SWMR-137, E-31: variable-length data is refused under VFD SWMR.
#[test]
fn swmr_137_vlen_data_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.h5");
    let f = h5::File::create_with(&path, &access(writer_cfg(0), 16), &paged()).unwrap();
    let e2 = f
        .root()
        .unwrap()
        .new_dataset::<h5::VarLenUnicode>()
        .shape([1])
        .create("vl")
        .and_then(|d| d.write(&[h5::VarLenUnicode::from("x")]))
        .unwrap_err();
    assert!(
        e2.to_string()
            .contains("variable-length data unsupported under VFD SWMR"),
        "{e2}"
    );
    // `create_with_data` is all or nothing: its refused write leaves no dataset behind.
    let e3 = f
        .root()
        .unwrap()
        .new_dataset::<String>()
        .create_with_data("vl_with_data", &["y".to_string()])
        .unwrap_err();
    assert!(
        e3.to_string().contains("unsupported under VFD SWMR"),
        "{e3}"
    );
    assert_eq!(f.member_names().unwrap(), ["vl"]);
    f.close().unwrap();
}

// SWMR-013, SWMR-130: the log is truncated at open, starts with FILE_OPEN, and has an
// END_OF_TICK, EOT_PROCESSING_TIME and INDEX_SIZE line per tick whose sizes match the index.
#[test]
fn swmr_013_130_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("log.h5");
    let log = dir.path().join("w.log");
    std::fs::write(&log, "junk\n").unwrap();
    let cfg = h5::SwmrConfig {
        log_file_path: log.clone(),
        ..writer_cfg(0)
    };
    let f = h5::File::create_with(&path, &access(cfg, 16), &paged()).unwrap();
    for i in 0..10 {
        f.create_group(&format!("g{i}")).unwrap();
        f.end_tick().unwrap();
    }
    let (_, ix) = published(&path);
    let text = std::fs::read_to_string(&log).unwrap();
    let first = text.lines().next().unwrap();
    assert!(first.contains("FILE_OPEN"), "{first}");
    assert!(!text.contains("junk"));
    assert!(text.matches(" END_OF_TICK ").count() >= 10);
    assert!(text.matches(" EOT_PROCESSING_TIME ").count() >= 10);
    let last = text.lines().rfind(|l| l.contains(" INDEX_SIZE ")).unwrap();
    assert!(
        last.contains(&format!("entries {} ", ix.entries.len())),
        "{last}"
    );
    let no_log = dir.path().join("n.h5");
    let f2 = h5::File::create_with(&no_log, &access(writer_cfg(0), 16), &paged()).unwrap();
    f2.close().unwrap();
    f.close().unwrap();
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("FILE_CLOSE")
    );
}

// SWMR-072, SWMR-131 (early EOT logged): with a 10 s tick and threshold 1, heavy metadata
// churn ends ticks early, at API boundaries.
#[test]
fn swmr_072_early_end_of_tick() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.h5");
    let log = dir.path().join("x.log");
    let cfg = h5::SwmrConfig {
        tick_len: 100,
        pb_expansion_threshold: 1,
        log_file_path: log.clone(),
        ..writer_cfg(100)
    };
    let f = h5::File::create_with(&path, &access(cfg, 4), &paged()).unwrap();
    for i in 0..300 {
        small(&f, &format!("d{i}"), 10);
    }
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("EARLY_EOT"), "{text}");
    assert!(tick_of(&path) >= 1);
    f.close().unwrap();
    // Threshold 0: no early end of tick.
    let p2 = dir.path().join("y.h5");
    let log2 = dir.path().join("y.log");
    let cfg = h5::SwmrConfig {
        tick_len: 100,
        log_file_path: log2.clone(),
        ..writer_cfg(100)
    };
    let f = h5::File::create_with(&p2, &access(cfg, 4), &paged()).unwrap();
    for i in 0..300 {
        small(&f, &format!("d{i}"), 10);
    }
    assert!(
        !std::fs::read_to_string(&log2)
            .unwrap()
            .contains("EARLY_EOT")
    );
    f.close().unwrap();
}

// SWMR-140: after the session the file is an ordinary paged file: libhdf5 (h5py) and h5dump
// read it, and it holds what a session without VFD SWMR writes.
#[test]
fn swmr_140_closed_file_is_ordinary() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.h5");
    let b = dir.path().join("b.h5");
    let work = |f: &h5::File| {
        for i in 0..5 {
            small(f, &format!("d{i}"), 1000 * (i + 1));
            f.create_group(&format!("g{i}")).unwrap();
        }
    };
    let f = h5::File::create_with(&a, &access(writer_cfg(0), 16), &paged()).unwrap();
    work(&f);
    f.end_tick().unwrap();
    f.close().unwrap();
    let f = h5::File::create_with(&b, &h5::FileAccess::default(), &paged()).unwrap();
    work(&f);
    f.close().unwrap();
    let script = "import sys, h5py\nfor p in sys.argv[1:]:\n    f = h5py.File(p, 'r')\n    print(sorted(f.keys()), [int(f[f'd{i}'][()].sum()) for i in range(5)])";
    let out = run_python(script, &[a.to_str().unwrap(), b.to_str().unwrap()]);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], lines[1]);
    let dump = std::process::Command::new("h5dump")
        .arg("-H")
        .arg(&a)
        .output()
        .unwrap();
    assert!(
        dump.status.success(),
        "{}",
        String::from_utf8_lossy(&dump.stderr)
    );
}

// SWMR-027, SWMR-098: the state a writer keeps right after create and after opening an existing
// file, and its queue entry (writer, tick 1, deadline a tick ahead).
#[test]
fn swmr_027_098_writer_state() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.h5");
    let before = std::time::Instant::now();
    let f = h5::File::create_with(&path, &access(writer_cfg(5), 16), &paged()).unwrap();
    let s = f.vfd_swmr_status().unwrap();
    assert!(s.writer);
    assert_eq!(s.tick, 1);
    assert_eq!(s.md_path, md_of(&path));
    assert_eq!((s.index_len, s.next_updater_seq, s.disabled), (0, 0, false));
    assert!(s.deadline >= before + std::time::Duration::from_millis(500));
    let q = h5_swmr::queue::snapshot();
    let e = q.iter().find(|e| e.0 == s.queue_id).expect("on the queue");
    assert_eq!((e.1, e.2, e.3), (true, 1, s.deadline));
    f.close().unwrap();
    assert!(!h5_swmr::queue::snapshot().iter().any(|e| e.0 == s.queue_id));
    let f = h5::File::open_rw_with(&path, &access(writer_cfg(0), 16)).unwrap();
    let s = f.vfd_swmr_status().unwrap();
    assert_eq!(s.tick, 2, "the open published tick 1");
    assert_eq!(f.vfd_swmr_index().unwrap().len(), 0);
    f.close().unwrap();
}

// SWMR-078: VFD SWMR only on POSIX files opened by path; other storages are refused.
#[test]
fn swmr_078_posix_files_only() {
    let mem: std::sync::Arc<dyn h5_io::Storage> = std::sync::Arc::new(h5_io::MemoryStorage::new());
    let e =
        h5::File::create_in(mem.clone(), &access(writer_cfg(0), 16), &paged(), None).unwrap_err();
    assert!(
        e.to_string()
            .contains("VFD SWMR needs a POSIX file opened by path"),
        "{e}"
    );
    let e = h5::File::from_storage(mem, &access(reader_cfg(0), 16), None).unwrap_err();
    assert!(e.to_string().contains("VFD SWMR needs a POSIX file"), "{e}");
}

// SWMR-107, E-27: a metadata file whose page size is not the HDF5 file's is refused.
#[test]
fn swmr_107_page_size_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.h5");
    h5::File::create_with(&path, &h5::FileAccess::default(), &paged())
        .unwrap()
        .close()
        .unwrap();
    let ix = h5_swmr::format::MdIndex {
        tick: 3,
        entries: vec![],
    }
    .encode()
    .unwrap();
    let h = h5_swmr::format::MdHeader {
        page_size: 8192,
        tick: 3,
        index_offset: 36,
        index_length: ix.len() as u64,
    };
    let mut b = h.encode().to_vec();
    b.extend_from_slice(&ix);
    std::fs::write(md_of(&path), b).unwrap();
    let e = h5::File::open_with(&path, &access(reader_cfg(0), 16)).unwrap_err();
    assert!(e.to_string().contains("page size mismatch"), "{e}");
}

/// Decodes every updater file `<base>.0`, `<base>.1`, … that exists.
fn updater_files(base: &std::path::Path) -> Vec<h5_swmr::updater::UpdaterFile> {
    (0..)
        .map(|i| h5_swmr::updater::file_name(base, i))
        .take_while(|p| p.exists())
        .map(|p| h5_swmr::updater::decode(&std::fs::read(p).unwrap()).unwrap())
        .collect()
}

// SWMR-114, SWMR-110, SWMR-118, SWMR-121: one updater file per end of tick after the
// create-only one, the last one final with an empty index; each change list holds exactly the
// images of its tick; with updater files no entry leaves the index before close.
#[test]
fn swmr_114_110_118_121_updater_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("u.h5");
    let base = dir.path().join("ud");
    let cfg = h5::SwmrConfig {
        generate_updater_files: true,
        updater_file_path: base.clone(),
        keep_md_file: true,
        ..writer_cfg(0)
    };
    let f = h5::File::create_with(&path, &access(cfg, 16), &paged()).unwrap();
    let mut indexes = Vec::new();
    for i in 0..12 {
        f.create_group(&format!("g{i}")).unwrap();
        if i % 3 == 0 {
            f.flush().unwrap();
        }
        f.end_tick().unwrap();
        indexes.push(published(&path).1);
    }
    f.close().unwrap();
    let final_tick = published(&path).0.tick;
    let files = updater_files(&base);
    assert_eq!(
        files[0].header.flags,
        h5_swmr::updater::CREATE_METADATA_FILE_ONLY
    );
    // Ticks 1 … final - 1 are ends of tick; the final tick is the close's empty index.
    assert_eq!(
        files.len() as u64,
        1 + (final_tick - 1) + 1,
        "create-only, one per tick, the final one"
    );
    assert_eq!(files.last().unwrap().header.tick, final_tick);
    let last = files.last().unwrap();
    assert_eq!(last.header.flags, h5_swmr::updater::FINAL_UPDATE);
    assert_eq!(last.entries.len(), 0);
    assert!(
        files[1..files.len() - 1]
            .iter()
            .all(|u| u.header.flags == 0)
    );
    for u in &files[1..files.len() - 1] {
        let tick = u.header.tick;
        if let Some(ix) = indexes.iter().find(|ix| ix.tick == tick) {
            for c in &u.entries {
                let e = ix
                    .entries
                    .iter()
                    .find(|e| e.hdf5_page == u64::from(c.hdf5_page))
                    .unwrap();
                assert_eq!(
                    (e.md_page, e.length, e.checksum),
                    (u64::from(c.md_page), c.length, c.checksum)
                );
            }
        }
    }
    // No entry leaves the index before close (removal is off with updater files).
    for w in indexes.windows(2) {
        for e in &w[0].entries {
            assert!(
                w[1].entries.iter().any(|x| x.hdf5_page == e.hdf5_page),
                "page {} left",
                e.hdf5_page
            );
        }
    }
}

// SWMR-120: with pruning, old updater files are deleted: at most max_lag + 2 remain.
#[test]
fn swmr_120_updater_pruning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pr.h5");
    let base = dir.path().join("ud");
    let cfg = h5::SwmrConfig {
        generate_updater_files: true,
        updater_file_path: base.clone(),
        prune_updater_files: true,
        ..writer_cfg(0)
    };
    let f = h5::File::create_with(&path, &access(cfg, 16), &paged()).unwrap();
    for i in 0..20 {
        f.create_group(&format!("g{i}")).unwrap();
        f.end_tick().unwrap();
        let present = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("ud.")
            })
            .count();
        assert!(present <= 3 + 2, "{present} updater files");
    }
    f.close().unwrap();
}

// SWMR-041, SWMR-052: whole unfiltered chunks a write covers go straight to the HDF5 file on a
// VFD SWMR writer too (no copy through the chunk cache); each tick's snapshot sees every plane
// written so far, a plane rewritten in place included, and libhdf5 reads the closed file.
#[test]
fn whole_chunk_writes_are_published_at_the_next_tick() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("planes.h5");
    let f = h5::File::create_with(&path, &access(writer_cfg(0), 16), &paged()).unwrap();
    let (rows, cols) = (64usize, 256usize); // 64 KiB chunks: large enough to go straight
    let ds = f
        .root()
        .unwrap()
        .new_dataset::<i32>()
        .shape([0, rows, cols])
        .max_shape([None, Some(rows), Some(cols)])
        .chunk([1, rows, cols])
        .create("p")
        .unwrap();
    f.end_tick().unwrap();
    let plane = |v: i32| vec![v; rows * cols];
    let all = ndarray::SliceInfoElem::Slice {
        start: 0,
        end: None,
        step: 1,
    };
    let at = |r: usize| ndarray::SliceInfoElem::Slice {
        start: r as isize,
        end: Some(r as isize + 1),
        step: 1,
    };
    let mut want: Vec<i32> = Vec::new();
    for r in 0..4usize {
        ds.resize([r + 1, rows, cols]).unwrap();
        ds.write_slice(&plane(r as i32 + 1), [at(r), all, all])
            .unwrap();
        want.push(r as i32 + 1);
        if r == 2 {
            // A whole chunk written again: in place, published like the first write.
            ds.write_slice(&plane(-7), [at(0), all, all]).unwrap();
            want[0] = -7;
        }
        f.end_tick().unwrap();
        let snap = snapshot(&path);
        let d = snap.dataset("p").unwrap();
        assert_eq!(d.shape(), vec![r + 1, rows, cols]);
        let got: Vec<i32> = d.read::<i32>().unwrap().iter().copied().collect();
        let expect: Vec<i32> = want.iter().flat_map(|&v| plane(v)).collect();
        assert!(got == expect, "tick after plane {r}: values differ");
    }
    let st = f.chunk_cache_stats().unwrap();
    assert_eq!(
        st.whole_chunk_writes, 5,
        "every plane went straight to the file"
    );
    assert_eq!(st.entries, 0, "none was admitted into the chunk cache");
    f.close().unwrap();
    let out = run_python(
        "import sys, h5py\nd = h5py.File(sys.argv[1], 'r')['p']\nprint(d.shape, [int(d[i].min()) for i in range(4)], [int(d[i].max()) for i in range(4)])",
        &[path.to_str().unwrap()],
    );
    assert_eq!(out.trim(), "(4, 64, 256) [-7, 2, 3, 4] [-7, 2, 3, 4]");
}

/// A reader that finds the HDF5 file locked exclusively waits: a writer holds its new file so
/// until it has published its metadata file. Once the lock goes the reader opens; a lock that
/// stays (a plain writer) is reported as the lock error after a short grace, well before the
/// open timeout.
#[test]
fn reader_waits_out_a_writer_setting_up_then_reports_a_lock_that_stays() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locked.h5");
    let f = h5::File::create_with(&path, &access(writer_cfg(0), 16), &paged()).unwrap();
    small(&f, "d", 100);
    f.close().unwrap();
    // Another open file description's `flock`, as another process's writer would hold it.
    let holder = std::fs::File::open(&path).unwrap();
    holder.try_lock().unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(400));
        drop(holder);
    });
    let start = std::time::Instant::now();
    let r = h5::File::open_with(&path, &access(reader_cfg(0), 16)).unwrap();
    assert!(
        start.elapsed() >= std::time::Duration::from_millis(350),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(r.member_names().unwrap(), ["d"]);
    release.join().unwrap();
    r.close().unwrap();

    let holder = std::fs::File::open(&path).unwrap();
    holder.try_lock().unwrap();
    let start = std::time::Instant::now();
    let e = h5::File::open_with(&path, &access(reader_cfg(0), 16)).unwrap_err();
    let waited = start.elapsed();
    assert!(e.to_string().contains("locked"), "{e}");
    assert!(
        waited >= std::time::Duration::from_millis(1500)
            && waited < std::time::Duration::from_secs(15),
        "{waited:?}"
    );
    drop(holder);
}

/// Values that deflate poorly, different for each `seed`.
fn noisy(seed: u64, n: usize) -> Vec<i64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as i64
        })
        .collect()
}

/// Raw data space a writer frees is not reused for max_lag ticks either, as its metadata space
/// (the "delayed release of freed space after max_lag ticks"). A deflated
/// chunk rewritten with another size moves, and its old place must keep the old bytes while a
/// reader may still use the index that points there: a reader max_lag − 1 ticks behind reads
/// the chunk's old or new values, never another chunk's bytes.
#[test]
fn a_moved_filtered_chunk_keeps_its_old_place_for_lagging_readers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("moved.h5");
    let f = h5::File::create_with(&path, &access(writer_cfg(0), 64), &paged()).unwrap();
    let chunk = 1024usize;
    let d = f
        .root()
        .unwrap()
        .new_dataset::<i64>()
        .shape([8 * chunk])
        .chunk([chunk])
        .deflate(1)
        .create("z")
        .unwrap();
    let old = noisy(1, chunk);
    d.write_slice(&old, [ndarray::SliceInfoElem::from(0..chunk)])
        .unwrap();
    f.end_tick().unwrap();
    // A reader at this tick: it has the index (chunk 0 at its first place), not the data.
    let snap = snapshot(&path);
    let z = snap.dataset("z").unwrap();
    // Chunk 0 shrinks (zeros deflate to almost nothing): it moves and its place is freed.
    d.write_slice(&vec![0i64; chunk], [ndarray::SliceInfoElem::from(0..chunk)])
        .unwrap();
    f.end_tick().unwrap();
    // New chunks of the old one's size: space freed a tick ago must not be among their places.
    for c in 1..8 {
        d.write_slice(
            &noisy(100 + c as u64, chunk),
            [ndarray::SliceInfoElem::from(c * chunk..(c + 1) * chunk)],
        )
        .unwrap();
    }
    f.end_tick().unwrap();
    let seen: Vec<i64> = z
        .read_slice::<i64>([ndarray::SliceInfoElem::from(0..chunk)])
        .unwrap()
        .iter()
        .copied()
        .collect();
    assert!(
        seen == old || seen.iter().all(|v| *v == 0),
        "a reader two ticks behind read other bytes at chunk 0's old place: {:?}…",
        &seen[..4]
    );
    drop((z, snap));
    f.close().unwrap();
}

// The writer's marks (docs/design.md §8.2): the superblock carries the write and SWMR-write
// status flags from set-up to close. A plain open, h5's and libhdf5's (h5py), is refused while
// a VFD SWMR writer has a file that already existed, at once; what the writer publishes carries
// the marks (a reader over it sees them); close clears them and the file opens everywhere.
#[test]
fn a_vfd_swmr_writer_marks_the_superblock_until_close() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("marked.h5");
    let f = h5::File::create_with(&path, &h5::FileAccess::default(), &paged()).unwrap();
    small(&f, "d0", 10);
    f.close().unwrap();
    let w = h5::File::open_rw_with(&path, &access(writer_cfg(0), 16)).unwrap();
    let e = h5::File::open(&path).expect_err("a plain open is refused");
    assert!(
        matches!(e, h5::Error::OpenForWriting { flags: 0x05 }),
        "{e}"
    );
    let probe = "import sys, h5py\ntry:\n    f = h5py.File(sys.argv[1], 'r')\n    print('opened', sorted(f.keys()))\nexcept OSError as e:\n    print('refused', e)";
    let out = run_python(probe, &[path.to_str().unwrap()]);
    assert!(out.starts_with("refused"), "{out}");
    small(&w, "d1", 20);
    w.end_tick().unwrap();
    let r = snapshot(&path);
    assert!(
        r.marked_open_for_writing(),
        "the published superblock is marked"
    );
    assert_eq!(r.member_names().unwrap(), ["d0", "d1"]);
    drop(r);
    w.close().unwrap();
    assert_eq!(
        h5::clear_status_flags(&path).unwrap(),
        0,
        "close cleared them"
    );
    let f = h5::File::open(&path).unwrap();
    assert!(!f.marked_open_for_writing());
    assert_eq!(
        f.dataset("d1").unwrap().read_1d::<i32>().unwrap().to_vec(),
        vec![7; 20]
    );
    drop(f);
    let out = run_python(probe, &[path.to_str().unwrap()]);
    assert_eq!(out.trim(), "opened ['d0', 'd1']");
    // A new file: marked in what it publishes, clear after close.
    let path = dir.path().join("new.h5");
    let w = h5::File::create_with(&path, &access(writer_cfg(0), 16), &paged()).unwrap();
    small(&w, "d", 5);
    w.end_tick().unwrap();
    assert!(snapshot(&path).marked_open_for_writing());
    w.close().unwrap();
    assert!(!h5::File::open(&path).unwrap().marked_open_for_writing());
}

// An encoded chunk rewritten at its old size moves too while readers follow the file: a reader
// decoding it at its old place must never meet new bytes there (a torn deflate stream). Noisy
// values do not compress, so both versions of chunk 0 deflate to the same size; a reader one
// tick behind still reads the old version, whole, at the old place. Without SWMR the chunk is
// rewritten in place (libhdf5 moves a chunk only when its size changes).
#[test]
fn an_encoded_chunk_rewritten_at_its_old_size_moves_while_readers_follow() {
    let dir = tempfile::tempdir().unwrap();
    let chunk = 1024usize;
    let make = |f: &h5::File| {
        f.root()
            .unwrap()
            .new_dataset::<i64>()
            .shape([chunk])
            .chunk([chunk])
            .deflate(1)
            .create("z")
            .unwrap()
    };
    let (old, new) = (noisy(7, chunk), noisy(8, chunk));
    let path = dir.path().join("same_size.h5");
    let f = h5::File::create_with(&path, &access(writer_cfg(0), 64), &paged()).unwrap();
    let d = make(&f);
    d.write(&old).unwrap();
    f.end_tick().unwrap();
    let snap = snapshot(&path);
    let z = snap.dataset("z").unwrap();
    d.write(&new).unwrap();
    f.end_tick().unwrap();
    assert!(
        z.read_1d::<i64>().unwrap().to_vec() == old,
        "the reader's index points at bytes that changed"
    );
    drop((z, snap));
    assert!(
        snapshot(&path)
            .dataset("z")
            .unwrap()
            .read_1d::<i64>()
            .unwrap()
            .to_vec()
            == new
    );
    f.close().unwrap();
    // The same sizes really are equal: without SWMR the rewrite stays in place (the file does
    // not grow by another chunk).
    let plain = dir.path().join("plain.h5");
    let f = h5::File::create_with(&plain, &h5::FileAccess::default(), &paged()).unwrap();
    let d = make(&f);
    d.write(&old).unwrap();
    f.flush().unwrap();
    let len = std::fs::metadata(&plain).unwrap().len();
    d.write(&new).unwrap();
    f.flush().unwrap();
    assert_eq!(std::fs::metadata(&plain).unwrap().len(), len);
    f.close().unwrap();
}

/// Value `k` of round `round` of dataset `j` in
/// [`round_robin_appends_are_exact_at_every_tick_and_for_libhdf5`].
fn rr_value(j: usize, round: usize, k: usize) -> i32 {
    (j * 100_000 + round * 10 + k) as i32
}

/// Perf test 1's shape, smaller: datasets appended to round-robin, several new chunks of each
/// per tick. Each tick's flush allocates the new chunks from small raw sections, inserts them
/// into the extensible arrays (index block elements, then data blocks) in one batch per
/// dataset and writes them through the page buffer; every published tick reads back exactly,
/// and so does the closed file in libhdf5.
#[test]
fn round_robin_appends_are_exact_at_every_tick_and_for_libhdf5() {
    const DATASETS: usize = 12;
    const ROUNDS: usize = 40;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rr.h5");
    let f = h5::File::create_with(&path, &access(writer_cfg(0), 16), &paged()).unwrap();
    let ds: Vec<_> = (0..DATASETS)
        .map(|j| {
            f.root()
                .unwrap()
                .new_dataset::<i32>()
                .shape([0])
                .max_shape([None])
                .chunk([64])
                .create(&format!("d{j}"))
                .unwrap()
        })
        .collect();
    let expect = |j: usize, rounds: usize| -> Vec<i32> {
        (0..rounds)
            .flat_map(|r| (0..10).map(move |k| rr_value(j, r, k)))
            .collect()
    };
    for round in 0..ROUNDS {
        for (j, d) in ds.iter().enumerate() {
            d.resize([(round + 1) * 10]).unwrap();
            let v: Vec<i32> = (0..10).map(|k| rr_value(j, round, k)).collect();
            d.write_slice(
                &v,
                [ndarray::SliceInfoElem::Slice {
                    start: (round * 10) as isize,
                    end: Some((round * 10 + 10) as isize),
                    step: 1,
                }],
            )
            .unwrap();
        }
        if (round + 1) % 3 == 0 {
            f.end_tick().unwrap();
            let r = snapshot(&path);
            for j in 0..DATASETS {
                let got: Vec<i32> = r
                    .dataset(&format!("d{j}"))
                    .unwrap()
                    .read_1d()
                    .unwrap()
                    .to_vec();
                assert_eq!(got, expect(j, round + 1), "d{j} at round {round}");
            }
        }
    }
    f.close().unwrap();
    let out = run_python(
        "import sys, h5py\n\
         f = h5py.File(sys.argv[1], 'r')\n\
         ok = all(list(f['d%d' % j][:]) == [j * 100000 + r * 10 + k for r in range(40) for k in range(10)] for j in range(12))\n\
         print(ok, f['d11'].shape)",
        &[path.to_str().unwrap()],
    );
    assert_eq!(out.trim(), "True (400,)");
}
