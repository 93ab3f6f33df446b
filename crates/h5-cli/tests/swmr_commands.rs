//! `h5 swmr aux`, `h5 swmr watch` and `h5 recover`, run as the binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use h5::{FileAccess, FileSpaceOptions, FormatBounds, PageBufferConfig, SpaceStrategy, SwmrConfig};
use h5_format::checksum::lookup3;
use h5_swmr::format::{IndexEntry, MdHeader, MdIndex};
use h5_swmr::updater;
use h5_swmr::writer::{ImageWrite, TickOutput};

fn h5() -> Command {
    Command::new(env!("CARGO_BIN_EXE_h5"))
}

const PS: u64 = 512;

/// A publication of `tick` with one image per page in `pages`, filled with the tick.
fn tick_output(tick: u64, pages: &[u64]) -> TickOutput {
    let images: Vec<ImageWrite> = pages
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let bytes = vec![tick as u8; PS as usize];
            ImageWrite {
                md_offset: (1 + tick * 10 + i as u64) * PS,
                hdf5_page: p,
                checksum: lookup3(&bytes, 0),
                bytes,
            }
        })
        .collect();
    let index = MdIndex {
        tick,
        entries: images
            .iter()
            .map(|i| IndexEntry {
                hdf5_page: i.hdf5_page,
                md_page: i.md_offset / PS,
                length: PS as u32,
                checksum: i.checksum,
            })
            .collect(),
    }
    .encode()
    .unwrap();
    let header = MdHeader {
        page_size: PS as u32,
        tick,
        index_offset: 36,
        index_length: index.len() as u64,
    }
    .encode();
    TickOutput {
        tick,
        entries: images.len(),
        images,
        index_offset: 36,
        index,
        header,
    }
}

fn md_tick(md: &Path) -> Option<u64> {
    let b = std::fs::read(md).ok()?;
    MdHeader::decode(&b).ok().map(|h| h.tick)
}

// SWMR-122: the auxiliary program's usage.
#[test]
fn swmr_122_aux_usage() {
    let out = h5().args(["swmr", "aux", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for opt in [
        "--log_file",
        "--polls_per_tick",
        "--stats",
        "--tick_len",
        "--verbose",
        "--vfd_config",
    ] {
        assert!(help.contains(opt), "{opt} missing from:\n{help}");
    }
    let out = h5().args(["swmr", "aux", "only.md"]).output().unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("UD_PATH"),
        "usage error"
    );
}

// SWMR-123, SWMR-125, SWMR-127: file 0 creates an empty metadata file; files arriving 2 then
// 1 are applied 1 then 2; the final file removes the metadata file and ends the process.
#[test]
fn swmr_123_125_127_aux_applies_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("local.md");
    let base = dir.path().join("ud");
    updater::publish(&base, 0, &updater::create_only(PS as u32)).unwrap();
    let aux = h5()
        .args(["swmr", "aux", "--tick_len", "1", "--stats"])
        .arg(&md)
        .arg(&base)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let wait_for = |cond: &dyn Fn() -> bool| {
        let stop = Instant::now() + Duration::from_secs(30);
        while !cond() {
            assert!(Instant::now() < stop, "timed out");
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    wait_for(&|| md.exists());
    assert_eq!(std::fs::metadata(&md).unwrap().len(), 0, "created empty");
    let one = updater::build(&tick_output(1, &[3]), 1, PS, false).unwrap();
    let two = updater::build(&tick_output(2, &[3, 4]), 2, PS, false).unwrap();
    updater::publish(&base, 2, &two).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        std::fs::metadata(&md).unwrap().len(),
        0,
        "file 2 waits for file 1"
    );
    updater::publish(&base, 1, &one).unwrap();
    wait_for(&|| md_tick(&md) == Some(2));
    let b = std::fs::read(&md).unwrap();
    let ix = MdIndex::decode(&b[36..36 + 20 + 32], PS).unwrap();
    assert_eq!(ix.entries.len(), 2);
    let img = &b[(ix.entries[1].md_page * PS) as usize..][..PS as usize];
    assert_eq!(img, vec![2u8; PS as usize].as_slice());
    let fin = updater::build(&tick_output(3, &[]), 3, PS, true).unwrap();
    updater::publish(&base, 3, &fin).unwrap();
    let out = aux.wait_with_output().unwrap();
    assert!(out.status.success());
    assert!(!md.exists(), "removed at the final update");
    assert!(String::from_utf8_lossy(&out.stdout).contains("applied 4 updater files"));
}

fn paged() -> h5::CreateOptions {
    h5::CreateOptions {
        bounds: FormatBounds::V110,
        file_space: FileSpaceOptions::default()
            .with_strategy(SpaceStrategy::Page, false, 1)
            .with_page_size(4096),
        ..h5::CreateOptions::default()
    }
}

fn writer_access() -> FileAccess {
    FileAccess::default()
        .page_buffer(PageBufferConfig::new(64 * 4096, 0, 0).unwrap())
        .vfd_swmr(SwmrConfig {
            tick_len: 0,
            flush_raw_data: true,
            ..SwmrConfig::writer()
        })
}

fn range(a: usize, b: usize) -> [ndarray::SliceInfoElem; 1] {
    [ndarray::SliceInfoElem::Slice {
        start: a as isize,
        end: Some(b as isize),
        step: 1,
    }]
}

#[test]
fn watch_follows_a_live_file_and_refuses_others() {
    let dir = tempfile::tempdir().unwrap();
    let plain: PathBuf = dir.path().join("plain.h5");
    h5::File::create(&plain).unwrap().close().unwrap();
    let out = h5().args(["swmr", "watch"]).arg(&plain).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not being written with VFD SWMR"));

    let path = dir.path().join("live.h5");
    let f = h5::File::create_with(&path, &writer_access(), &paged()).unwrap();
    let d = f
        .root()
        .unwrap()
        .new_dataset::<f64>()
        .shape([0, 3])
        .max_shape([None, Some(3)])
        .chunk([8, 3])
        .create("series")
        .unwrap();
    f.end_tick().unwrap();
    let watcher = h5()
        .args(["swmr", "watch", "--tick-len", "1", "--seconds", "4"])
        .arg(&path)
        .arg("series")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(600));
    for r in 0..5usize {
        d.resize([r + 1, 3]).unwrap();
        let row = [r as f64, r as f64 + 0.5, -(r as f64)];
        d.write_slice(&row, [range(r, r + 1)[0], range(0, 3)[0]])
            .unwrap();
        if r == 2 {
            f.create_group("late").unwrap();
        }
        f.end_tick().unwrap();
        std::thread::sleep(Duration::from_millis(250));
    }
    let out = watcher.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("new dataset /series"), "{text}");
    assert!(text.contains("new group /late"), "{text}");
    assert!(text.contains("/series[4] = [4, 4.5, -4]"), "{text}");
    assert!(text.contains("after publication"), "{text}");
    f.close().unwrap();
}

// `h5 recover` on a file whose writer stopped without closing: the file as of the last tick.
#[test]
fn recover_rebuilds_from_the_last_tick() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crashed.h5");
    let f = h5::File::create_with(&path, &writer_access(), &paged()).unwrap();
    let d = f
        .root()
        .unwrap()
        .new_dataset::<i32>()
        .shape([100])
        .chunk([10])
        .create("d")
        .unwrap();
    d.write(&(0..100).collect::<Vec<i32>>()).unwrap();
    f.end_tick().unwrap();
    f.create_group("never_published").unwrap();
    // The writer stops here without closing (as if killed): no final flush, no cleanup.
    std::mem::forget(d);
    std::mem::forget(f);
    let md = PathBuf::from(format!("{}.md", path.display()));
    assert!(md.exists());
    let out = h5().arg("recover").arg(&path).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("as of tick 1"));
    assert!(!md.exists());
    // The superblock the writer published carried its marks: recovery cleared them, so a
    // plain open accepts the file.
    let r = h5::File::open(&path).unwrap();
    assert!(!r.marked_open_for_writing());
    assert_eq!(r.member_names().unwrap(), vec!["d".to_string()]);
    let v: Vec<i32> = r.dataset("d").unwrap().read_1d().unwrap().to_vec();
    assert_eq!(v, (0..100).collect::<Vec<i32>>());
    let out = h5().arg("recover").arg(&path).output().unwrap();
    assert!(!out.status.success(), "nothing left to recover");
}
