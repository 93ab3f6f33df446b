//! Members added to a group one by one (h5-bench's W5): the new link's name is checked once,
//! with one read of the group's header, before anything changes; a small contiguous dataset's
//! first write covering it goes from the caller's buffer straight to storage through the
//! chunk cache's bypass flow, leaving no cache entry. Checked in every group storage form
//! (compact, dense, old-style) and read back by h5py.

use crate::metered;

use h5::FormatBounds;
use h5_testkit::verify::{DatasetExpect, Expectations, check_with_h5py, digest_le};

/// The file's bytes as they are on storage after a flush.
fn image(storage: &h5_io::Metrics<h5_io::MemoryStorage>, file: &h5::File) -> Vec<u8> {
    use h5_io::Storage;
    file.flush().unwrap();
    let len = storage.len().unwrap();
    let mut out = vec![0u8; len as usize];
    storage.read_at(0, &mut out).unwrap();
    out
}

/// Tries to add `name` to `g` in every way; each must fail with `Exists` (or `Invalid` for a
/// malformed name) before changing anything.
fn refused(g: &h5::Group, name: &str, other: &h5::Dataset, invalid: bool) {
    let is_refusal = |e: &h5::Error| {
        if invalid {
            matches!(e, h5::Error::Invalid(_))
        } else {
            matches!(e, h5::Error::Exists(_))
        }
    };
    let e = g
        .new_dataset::<i64>()
        .create_with_data(name, &[1i64])
        .unwrap_err();
    assert!(is_refusal(&e), "dataset {name:?}: {e:?}");
    let e = g
        .new_dataset::<f32>()
        .shape([4, 4])
        .chunk([2, 2])
        .create(name)
        .unwrap_err();
    assert!(is_refusal(&e), "chunked dataset {name:?}: {e:?}");
    let e = g.create_group(name).unwrap_err();
    assert!(is_refusal(&e), "group {name:?}: {e:?}");
    let e = g.link_hard(name, other).unwrap_err();
    assert!(is_refusal(&e), "hard link {name:?}: {e:?}");
    let e = g.link_soft(name, "/elsewhere").unwrap_err();
    assert!(is_refusal(&e), "soft link {name:?}: {e:?}");
}

fn members(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("d{i:05}")).collect()
}

/// A duplicate or malformed name fails with the same typed error as before and leaves the file
/// byte for byte as it was (nothing allocated, no object header left without a link), in a
/// compact group (3 links), a dense one (40) and an old-style one (earliest format).
#[test]
fn a_refused_member_leaves_the_file_unchanged() {
    for (bounds, n) in [
        (FormatBounds::default(), 3usize),
        (FormatBounds::default(), 40),
        (FormatBounds::Earliest, 40),
    ] {
        let (storage, file) = metered::in_memory(bounds);
        let g = file.create_group("g").unwrap();
        let names = members(n);
        for (i, name) in names.iter().enumerate() {
            g.new_dataset::<i64>()
                .create_with_data(name.as_str(), &[i as i64])
                .unwrap();
        }
        let first = g.dataset(&names[0]).unwrap();
        let before = image(&storage, &file);
        let written = metered::bytes_of(&storage, &file, || {
            for name in [&names[0], &names[n / 2], &names[n - 1]] {
                refused(&g, name, &first, false);
            }
            refused(&g, "bad\0name", &first, true);
            refused(&g, ".", &first, true);
        });
        assert_eq!(written, 0, "{bounds:?}, {n} members: the refusals wrote");
        let after = image(&storage, &file);
        assert_eq!(
            before.len(),
            after.len(),
            "{bounds:?}, {n} members: file grew"
        );
        assert!(before == after, "{bounds:?}, {n} members: file changed");
        let listed = g.member_names().unwrap();
        assert_eq!(listed, names, "{bounds:?}");
        for (i, name) in names.iter().enumerate() {
            assert_eq!(
                g.dataset(name).unwrap().read_vec::<i64>().unwrap(),
                [i as i64],
                "{bounds:?} {name}"
            );
        }
    }
}

/// Small contiguous datasets written whole at their first write leave no chunk-cache entry
/// (one bypassed transfer each), with or without a conversion, and read back; a later write
/// of the same dataset goes through the cache as before.
#[test]
fn a_small_first_whole_write_is_not_cached() {
    let (_storage, file) = metered::in_memory(FormatBounds::default());
    let g = file.create_group("g").unwrap();
    let before = file.chunk_cache_stats().unwrap();
    for i in 0..50i64 {
        g.new_dataset::<i64>()
            .create_with_data(format!("d{i:02}").as_str(), &[i * 3])
            .unwrap();
    }
    let block = ndarray::Array2::from_shape_fn((3, 5), |(r, c)| (r * 5 + c) as f32);
    g.new_dataset::<f32>()
        .create_with_data("block", block.view())
        .unwrap();
    // Converted on the way: i32 elements into an i64 dataset.
    let conv = g.new_dataset::<i64>().shape([4]).create("conv").unwrap();
    conv.write(&[-1i32, 2, -3, 4]).unwrap();
    let st = file.chunk_cache_stats().unwrap();
    assert_eq!((st.entries, st.dirty_entries), (0, 0), "{st:?}");
    assert_eq!(st.bypassed - before.bypassed, 52, "{st:?}");
    for i in 0..50i64 {
        let ds = g.dataset(&format!("d{i:02}")).unwrap();
        assert_eq!(ds.read_vec::<i64>().unwrap(), [i * 3]);
    }
    assert_eq!(g.dataset("block").unwrap().read_2d::<f32>().unwrap(), block);
    assert_eq!(conv.read_vec::<i64>().unwrap(), [-1, 2, -3, 4]);
    // The second write of a dataset is cached (dirty until the flush), then reads back.
    let d = g.dataset("d07").unwrap();
    d.write(&[700i64]).unwrap();
    assert!(file.chunk_cache_stats().unwrap().dirty_entries >= 1);
    file.flush().unwrap();
    assert_eq!(d.read_vec::<i64>().unwrap(), [700]);
    // A partial first write fills the rest through the cache, as before.
    let part = g.new_dataset::<i32>().shape([4]).create("part").unwrap();
    part.write_slice(&[9i32], ndarray::s![1..2]).unwrap();
    assert_eq!(part.read_vec::<i32>().unwrap(), [0, 9, 0, 0]);
}

/// A dense group of small datasets written straight to storage, one rewritten afterwards,
/// reads back in h5 after reopening and in h5py (libhdf5 1.14).
#[test]
fn small_datasets_written_straight_read_back_in_h5py() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("members.h5");
    let names = members(30);
    let value = |i: usize| i as i64 * 7 + 3;
    {
        let file = h5::File::create(&path).unwrap();
        let g = file.create_group("g").unwrap();
        for (i, name) in names.iter().enumerate() {
            g.new_dataset::<i64>()
                .create_with_data(name.as_str(), &[value(i)])
                .unwrap();
        }
        g.dataset(&names[4]).unwrap().write(&[-4i64]).unwrap();
        file.close().unwrap();
    }
    let expected = |i: usize| if i == 4 { -4 } else { value(i) };
    let file = h5::File::open(&path).unwrap();
    let g = file.group("g").unwrap();
    assert_eq!(g.member_names().unwrap(), names);
    for (i, name) in names.iter().enumerate() {
        assert_eq!(
            g.dataset(name).unwrap().read_vec::<i64>().unwrap(),
            [expected(i)]
        );
    }
    drop(g);
    drop(file);
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut exp = Expectations::new()
        .group("/", &["g"])
        .group("/g", &refs)
        .group_storage("/g", "dense");
    for (i, name) in names.iter().enumerate() {
        exp = exp.dataset(
            &format!("/g/{name}"),
            DatasetExpect::new("<i8", &[1])
                .contiguous()
                .digest(digest_le(&[expected(i)])),
        );
    }
    check_with_h5py(&path, &exp).unwrap();
}

/// Adds `n` members to a new group `g`: one-element integers, a 2-D block, one with a fill
/// value, and variable-length strings (whose first write is not whole: their storage is filled
/// before the strings' heap objects are made); with the data given at creation
/// (`create_with_data`: contiguous storage allocated with the header) or written after it.
fn add_members(file: &h5::File, n: usize, at_create: bool) {
    fn one<T: h5::H5Type + std::fmt::Debug + PartialEq>(
        g: &h5::Group,
        b: h5::DatasetBuilder<T>,
        name: &str,
        data: &[T],
        at_create: bool,
    ) {
        if at_create {
            b.create_with_data(name, data).unwrap();
        } else {
            b.shape([data.len()])
                .create(name)
                .unwrap()
                .write(data)
                .unwrap();
        }
        assert_eq!(g.dataset(name).unwrap().read_vec::<T>().unwrap(), data);
    }
    let g = file.create_group("g").unwrap();
    for i in 0..n {
        one(
            &g,
            g.new_dataset::<i64>(),
            &format!("d{i:03}"),
            &[i as i64 * 5 - 2],
            at_create,
        );
    }
    one(
        &g,
        g.new_dataset::<i32>().fill_value(-7),
        "filled",
        &[1, 2, 3],
        at_create,
    );
    let words: Vec<String> = ["alpha", "", "gamma"].map(String::from).to_vec();
    one(&g, g.new_dataset::<String>(), "words", &words, at_create);
    let block = ndarray::Array2::from_shape_fn((3, 4), |(r, c)| (r * 4 + c) as f32);
    if at_create {
        g.new_dataset::<f32>()
            .create_with_data("block", block.view())
            .unwrap();
    } else {
        let ds = g
            .new_dataset::<f32>()
            .shape([3, 4])
            .create("block")
            .unwrap();
        ds.write(block.view()).unwrap();
    }
    assert_eq!(g.dataset("block").unwrap().read_2d::<f32>().unwrap(), block);
}

/// A dataset created with its data has its storage allocated with its header and its layout
/// message written once; the file is byte for byte the one a creation followed by a write
/// makes (same addresses, the fill value message still saying "late"), in a compact group, a
/// dense one (300 members: the small-data aggregator is renewed at the end of the file while
/// the links' metadata grows, so the order of the two allocations shows) and an old-style one,
/// and reads back in h5py.
#[test]
fn data_given_at_creation_lays_out_the_file_as_a_later_write() {
    for (bounds, n) in [
        (FormatBounds::default(), 3usize),
        (FormatBounds::default(), 300),
        (FormatBounds::Earliest, 40),
    ] {
        let (sa, a) = metered::in_memory(bounds);
        add_members(&a, n, true);
        let (sb, b) = metered::in_memory(bounds);
        add_members(&b, n, false);
        let (ia, ib) = (image(&sa, &a), image(&sb, &b));
        assert_eq!(ia.len(), ib.len(), "{bounds:?}, {n} members");
        let differ = ia.iter().zip(&ib).position(|(x, y)| x != y);
        assert_eq!(differ, None, "{bounds:?}, {n} members: first difference");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("at_create.h5");
    {
        let file = h5::File::create(&path).unwrap();
        add_members(&file, 5, true);
        file.close().unwrap();
    }
    let mut exp = Expectations::new().group("/", &["g"]);
    for i in 0..5i64 {
        exp = exp.dataset(
            &format!("/g/d{i:03}"),
            DatasetExpect::new("<i8", &[1])
                .contiguous()
                .digest(digest_le(&[i * 5 - 2])),
        );
    }
    exp = exp.dataset(
        "/g/filled",
        DatasetExpect::new("<i4", &[3])
            .contiguous()
            .digest(digest_le(&[1i32, 2, 3])),
    );
    check_with_h5py(&path, &exp).unwrap();
}
