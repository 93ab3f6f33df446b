//! A contiguous dataset whose first write covers every element gets no fill (libhdf5's "full
//! overwrite"): its bytes are written once, by the write. A partial first write still fills
//! the rest, and a variable-length dataset is filled first (its old elements are read back to
//! free their heap objects). Counted with the `Metrics` storage decorator.

use crate::metered;

use h5::FormatBounds;
use metered::bytes_of as written;
use ndarray::SliceInfoElem as S;

const N: usize = 256 * 1024; // 1 MiB of f32

fn in_memory() -> (
    std::sync::Arc<h5_io::Metrics<h5_io::MemoryStorage>>,
    h5::File,
) {
    metered::in_memory(FormatBounds::default())
}

#[test]
fn a_whole_first_write_writes_the_data_once() {
    let (storage, file) = in_memory();
    let data: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let n = written(&storage, &file, || {
        let ds = file.new_dataset::<f32>().shape([N]).create("x").unwrap();
        ds.write(&data).unwrap();
    });
    let raw = (N * 4) as u64;
    assert!(n >= raw, "{n} bytes written for {raw} bytes of data");
    assert!(
        n < raw + 64 * 1024,
        "{n} bytes written: the data was filled first"
    );
    assert_eq!(file.dataset("x").unwrap().read_vec::<f32>().unwrap(), data);
}

#[test]
fn a_whole_first_write_over_a_user_fill_value_keeps_the_data() {
    let (storage, file) = in_memory();
    let data: Vec<i32> = (0..N as i32).collect();
    let n = written(&storage, &file, || {
        let ds = file
            .new_dataset::<i32>()
            .shape([N])
            .fill_value(-7)
            .create("x")
            .unwrap();
        ds.write(&data).unwrap();
    });
    assert!(n < (N * 4 + 64 * 1024) as u64, "{n} bytes written");
    assert_eq!(file.dataset("x").unwrap().read_vec::<i32>().unwrap(), data);
}

#[test]
fn a_partial_first_write_fills_the_rest() {
    let (_storage, file) = in_memory();
    let ds = file
        .new_dataset::<i32>()
        .shape([1000])
        .fill_value(-7)
        .create("x")
        .unwrap();
    ds.write_slice(
        &[1, 2, 3],
        [S::Slice {
            start: 10,
            end: Some(13),
            step: 1,
        }],
    )
    .unwrap();
    let back = ds.read_vec::<i32>().unwrap();
    assert_eq!(&back[10..13], &[1, 2, 3]);
    assert!(back[..10].iter().chain(&back[13..]).all(|v| *v == -7));
    file.flush().unwrap();
    let back = file.dataset("x").unwrap().read_vec::<i32>().unwrap();
    assert!(back[..10].iter().chain(&back[13..]).all(|v| *v == -7));
}

#[test]
fn a_whole_first_write_of_strings_reads_back() {
    let (_storage, file) = in_memory();
    let ds = file
        .new_dataset::<h5::VarLenUnicode>()
        .shape([3])
        .create("s")
        .unwrap();
    ds.write_strs(&["a", "bc", "def"]).unwrap();
    ds.write_strs(&["x", "yz", ""]).unwrap();
    file.flush().unwrap();
    assert_eq!(
        file.dataset("s").unwrap().read_strings().unwrap(),
        ["x", "yz", ""]
    );
}
