//! Thread safety as the crate documentation states it: handles move to and are shared between
//! threads; reads of one file run from several threads at once; writes from several threads
//! (to different datasets, to disjoint parts of one dataset, new groups and attributes) are
//! each applied whole. Values are checked in process and by h5py.

use std::sync::{Arc, Barrier};
use std::thread;

use h5::ndarray::{Array2, s};
use h5_testkit::verify::run_python;

const THREADS: usize = 4;
const SIDE: usize = 96;

fn value(i: usize, j: usize) -> f64 {
    (i * 1000 + j) as f64
}

fn tmp(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let p = dir.path().join(name);
    (dir, p)
}

#[test]
fn reads_from_several_threads_see_the_same_values() {
    let (_d, path) = tmp("reads.h5");
    {
        let f = h5::File::create(&path).unwrap();
        let data = Array2::from_shape_fn((SIDE, SIDE), |(i, j)| value(i, j));
        f.new_dataset::<f64>()
            .shape([SIDE, SIDE])
            .chunk([16, 16])
            .shuffle()
            .deflate(3)
            .create("field")
            .unwrap()
            .write(&data)
            .unwrap();
        f.write_attr_str("units", "K").unwrap();
        f.close().unwrap();
    }
    let file = h5::File::open(&path).unwrap();
    let ds = file.dataset("field").unwrap();
    let start = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            // Each thread gets its own clone of the handles (moved in).
            let ds = ds.clone();
            let file = file.clone();
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                for round in 0..6 {
                    let r0 = (t * 7 + round * 13) % (SIDE - 10);
                    let block = ds.read_slice::<f64>(s![r0..r0 + 10, 5..50]).unwrap();
                    for ((i, j), v) in block.indexed_iter().map(|(ix, v)| ((ix[0], ix[1]), *v)) {
                        assert_eq!(v, value(r0 + i, 5 + j));
                    }
                    // Another handle to the same dataset, opened in this thread.
                    let again = file.dataset("field").unwrap();
                    assert_eq!(again.read_scalar_at(r0, 3), value(r0, 3));
                }
                let all = ds.read_2d::<f64>().unwrap();
                assert_eq!(all[[SIDE - 1, SIDE - 1]], value(SIDE - 1, SIDE - 1));
                file.attr("units").unwrap().read_strings().unwrap()
            })
        })
        .collect();
    for w in workers {
        assert_eq!(w.join().unwrap(), ["K"]);
    }
}

/// One element through a point selection (a small read on a shared handle).
trait ReadAt {
    fn read_scalar_at(&self, i: usize, j: usize) -> f64;
}

impl ReadAt for h5::Dataset {
    fn read_scalar_at(&self, i: usize, j: usize) -> f64 {
        self.read_points::<f64>(&[vec![i as u64, j as u64]])
            .unwrap()[0]
    }
}

#[test]
fn writes_from_several_threads_are_each_applied_whole() {
    let (_d, path) = tmp("writes.h5");
    let file = h5::File::create(&path).unwrap();
    // One dataset written by every thread: row bands that share chunks (8 rows per chunk, 6
    // rows per thread), so threads change the same chunks at once.
    let shared = file
        .new_dataset::<f64>()
        .shape([THREADS * 6, SIDE])
        .chunk([8, 32])
        .deflate(1)
        .create("shared")
        .unwrap();
    let start = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let file = file.clone();
            let shared = shared.clone();
            let start = Arc::clone(&start);
            thread::spawn(move || {
                start.wait();
                let rows = t * 6..(t + 1) * 6;
                let band = Array2::from_shape_fn((6, SIDE), |(i, j)| value(rows.start + i, j));
                shared
                    .write_slice(&band, s![rows.start..rows.end, ..])
                    .unwrap();
                // Each thread also makes its own group, dataset and attribute.
                let g = file.create_group(&format!("t{t}")).unwrap();
                g.new_dataset::<u64>()
                    .shape([3])
                    .create("mine")
                    .unwrap()
                    .write(&[t as u64; 3])
                    .unwrap();
                g.new_attr::<u32>()
                    .create("id")
                    .unwrap()
                    .write_scalar(&(t as u32))
                    .unwrap();
                // Reads of the other threads' work while they write.
                shared.read_2d::<f64>().unwrap().dim()
            })
        })
        .collect();
    for w in workers {
        assert_eq!(w.join().unwrap(), (THREADS * 6, SIDE));
    }
    let want = Array2::from_shape_fn((THREADS * 6, SIDE), |(i, j)| value(i, j));
    assert_eq!(shared.read_2d::<f64>().unwrap(), want);
    // The file can be closed from another thread too.
    thread::spawn(move || file.close().unwrap()).join().unwrap();
    drop(shared);
    let out = run_python(
        "import sys, json, h5py, numpy as np\n\
         with h5py.File(sys.argv[1], 'r') as f:\n\
         \x20   d = f['shared'][()]\n\
         \x20   ok = bool((d == np.fromfunction(lambda i, j: i * 1000 + j, d.shape)).all())\n\
         \x20   print(json.dumps([ok, sorted(k for k in f if k.startswith('t')),\n\
         \x20       [int(f[f't{t}'].attrs['id']) for t in range(4)],\n\
         \x20       [f[f't{t}/mine'][()].tolist() for t in range(4)]]))\n",
        &[&path],
    );
    let got: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        got,
        serde_json::json!([
            true,
            ["t0", "t1", "t2", "t3"],
            [0, 1, 2, 3],
            [[0, 0, 0], [1, 1, 1], [2, 2, 2], [3, 3, 3]]
        ])
    );
}

/// Threads that first touch the same existing dataset at once build its layout once: a
/// late-allocated contiguous dataset gets one place in the file (not one per thread, with the
/// layout message naming the last), and a chunked one one writable index, whose later growth
/// the chunk cache sees. Every thread's band is in the file after it is closed and reopened.
#[test]
fn first_writes_from_several_threads_to_one_existing_dataset_all_land() {
    const DATASETS: usize = 48;
    const BAND: usize = 8;
    let (_d, path) = tmp("first_touch.h5");
    {
        let f = h5::File::create(&path).unwrap();
        for k in 0..DATASETS {
            f.new_dataset::<u64>()
                .shape([THREADS * BAND])
                .alloc_time(h5::AllocTime::Late)
                .create(&format!("c{k}"))
                .unwrap();
            f.new_dataset::<u64>()
                .shape([THREADS * BAND])
                .max_shape([None])
                .chunk([BAND])
                .create(&format!("x{k}"))
                .unwrap();
        }
        f.close().unwrap();
    }
    let want = |k: usize, i: usize| (k * 10_000 + i) as u64;
    let file = h5::File::open_rw(&path).unwrap();
    let start = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let file = file.clone();
            let start = Arc::clone(&start);
            thread::spawn(move || {
                for k in 0..DATASETS {
                    for name in [format!("c{k}"), format!("x{k}")] {
                        let ds = file.dataset(&name).unwrap();
                        let band: Vec<u64> =
                            (t * BAND..(t + 1) * BAND).map(|i| want(k, i)).collect();
                        // Every thread's first write to this dataset starts together.
                        start.wait();
                        ds.write_slice(band.as_slice(), s![t * BAND..(t + 1) * BAND])
                            .unwrap();
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    // The chunked datasets grow by a band after the threads' writes: the layout the chunk
    // cache holds is the one the resize changes.
    for k in 0..DATASETS {
        let ds = file.dataset(&format!("x{k}")).unwrap();
        ds.resize([(THREADS + 1) * BAND]).unwrap();
        let band: Vec<u64> = (THREADS * BAND..(THREADS + 1) * BAND)
            .map(|i| want(k, i))
            .collect();
        ds.write_slice(band.as_slice(), s![THREADS * BAND..])
            .unwrap();
    }
    file.close().unwrap();
    let file = h5::File::open(&path).unwrap();
    for k in 0..DATASETS {
        let c = file
            .dataset(&format!("c{k}"))
            .unwrap()
            .read_vec::<u64>()
            .unwrap();
        assert_eq!(
            c,
            (0..THREADS * BAND).map(|i| want(k, i)).collect::<Vec<_>>(),
            "c{k}"
        );
        let x = file
            .dataset(&format!("x{k}"))
            .unwrap()
            .read_vec::<u64>()
            .unwrap();
        assert_eq!(
            x,
            (0..(THREADS + 1) * BAND)
                .map(|i| want(k, i))
                .collect::<Vec<_>>(),
            "x{k}"
        );
    }
    drop(file);
    let out = run_python(
        "import sys, h5py, numpy as np\n\
         with h5py.File(sys.argv[1], 'r') as f:\n\
         \x20   bad = [n for n in f if not (f[n][()] == int(n[1:]) * 10000 + np.arange(f[n].shape[0])).all()]\n\
         \x20   print(len(f), bad)\n",
        &[&path],
    );
    assert_eq!(out.trim(), format!("{} []", 2 * DATASETS));
}
