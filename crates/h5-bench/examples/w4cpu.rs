//! Scratch: thread CPU time of W4's append phase (appends + close), best of N.
use h5::{CreateOptions, FileAccess, FormatBounds};
use ndarray::SliceInfoElem;

fn cpu_ns() -> u64 {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
    s.split_whitespace().next().unwrap().parse().unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bounds = if args[1] == "latest" {
        FormatBounds::LATEST
    } else {
        FormatBounds::default()
    };
    let reps: usize = args[2].parse().unwrap();
    let path = std::path::PathBuf::from(format!("/tmp/w4a/cpu-{}.h5", std::process::id()));
    let mut best = u64::MAX;
    let mut all = Vec::new();
    for _ in 0..reps {
        let _ = std::fs::remove_file(&path);
        let file = h5::File::create_with(
            &path,
            &FileAccess::new(),
            &CreateOptions {
                bounds,
                ..Default::default()
            },
        )
        .unwrap();
        let root = file.root().unwrap();
        let dsets: Vec<h5::Dataset> = (0..1000)
            .map(|j| {
                root.new_dataset::<i32>()
                    .shape([0])
                    .max_shape([None])
                    .chunk([1024])
                    .create(&format!("d{j:04}"))
                    .unwrap()
            })
            .collect();
        let t0 = cpu_ns();
        let mut buf = vec![0i32; 100];
        for k in 0..100usize {
            let (lo, hi) = (k * 100, (k + 1) * 100);
            for (j, d) in dsets.iter().enumerate() {
                d.resize([hi]).unwrap();
                for (e, v) in buf.iter_mut().enumerate() {
                    *v = (j * 1_000_000 + lo + e) as i32;
                }
                d.write_slice(
                    &buf,
                    [SliceInfoElem::Slice {
                        start: lo as isize,
                        end: Some(hi as isize),
                        step: 1,
                    }],
                )
                .unwrap();
            }
        }
        drop(dsets);
        drop(root);
        file.close().unwrap();
        let t = cpu_ns() - t0;
        all.push(t / 1_000_000);
        best = best.min(t);
    }
    let _ = std::fs::remove_file(&path);
    println!("best {:.1} ms  all {:?}", best as f64 / 1e6, all);
}
