//! hdf5-metno's README example, ported: a compound type with an enumeration member, a 2-D
//! dataset of it written from an ndarray array with Blosc compression, an attribute created with
//! a shape and written afterwards, then read back (a slice and the attribute).
//!
//! What changed from hdf5-metno: `new_dataset_builder().with_data(&a).create(name)` is
//! `new_dataset::<T>().create_with_data(name, &a)`; a tuple member becomes an array member
//! (`[i64; 2]`: h5 maps no tuples); `read_slice` takes the element type only.
//!
//! Run with `cargo run --example metno_readme`.

use h5::H5Type;
use h5::ndarray::{arr2, s};

/// A colour: an enumeration type in the file.
#[derive(H5Type, Clone, Copy, PartialEq, Debug)]
#[repr(u8)]
enum Color {
    R = 1,
    G = 2,
    B = 3,
}

/// A pixel: a compound type in the file.
#[derive(H5Type, Clone, Copy, PartialEq, Debug)]
#[repr(C)]
struct Pixel {
    xy: [i64; 2],
    color: Color,
}

impl Pixel {
    fn new(x: i64, y: i64, color: Color) -> Self {
        Self { xy: [x, y], color }
    }
}

fn write_hdf5(path: &std::path::Path) -> h5::Result<()> {
    use Color::*;
    let file = h5::File::create(path)?; // open for writing
    let group = file.create_group("dir")?; // create a group
    let ds = group
        .new_dataset::<Pixel>()
        .chunk([3, 2])
        // zstd blocks, byte shuffle
        .blosc(h5::BloscCompressor::Zstd, 9, h5::BloscShuffle::Byte)
        // write a 2-D array of data
        .create_with_data(
            "pixels",
            &arr2(&[
                [Pixel::new(1, 2, R), Pixel::new(2, 3, B)],
                [Pixel::new(3, 4, G), Pixel::new(4, 5, R)],
                [Pixel::new(5, 6, B), Pixel::new(6, 7, G)],
            ]),
        )?;
    // create an attr with fixed shape but don't write the data
    let attr = ds.new_attr::<Color>().shape([3]).create("colors")?;
    // write the attr data
    attr.write(&[R, G, B])?;
    file.close()
}

fn read_hdf5(path: &std::path::Path) -> h5::Result<()> {
    use Color::*;
    let file = h5::File::open(path)?; // open for reading
    let ds = file.dataset("dir/pixels")?; // open the dataset
    assert_eq!(
        // read a slice of the 2-D dataset and verify it
        ds.read_slice::<Pixel>(s![1.., ..])?,
        arr2(&[
            [Pixel::new(3, 4, G), Pixel::new(4, 5, R)],
            [Pixel::new(5, 6, B), Pixel::new(6, 7, G)],
        ])
        .into_dyn()
    );
    let attr = ds.attr("colors")?; // open the attribute
    assert_eq!(attr.read_1d::<Color>()?.as_slice().unwrap(), &[R, G, B]);
    Ok(())
}

fn main() -> h5::Result<()> {
    let dir = tempfile::tempdir().map_err(|e| h5::Error::Invalid(e.to_string()))?;
    let path = dir.path().join("pixels.h5");
    write_hdf5(&path)?;
    read_hdf5(&path)?;
    println!("wrote and read back {}", path.display());
    Ok(())
}
