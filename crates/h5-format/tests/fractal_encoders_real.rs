//! Fractal heap encoders against every fractal heap libhdf5 wrote into the test files (those of
//! `tests/data`, written by HDF5 1.14.4 through h5py 3.12.1, and the workspace fixtures in
//! `fixtures/files`): the header, every indirect block and every direct block re-encode to
//! libhdf5's bytes, `encode(decode(bytes)) == bytes`. Headers are found by their `FRHP`
//! signature (the checksum rules out false hits); blocks by walking the doubling table from
//! the root.

use h5_format::Sizes;
use h5_format::heap::fractal::{
    FractalDirectBlock, FractalHeapHeader, FractalIndirectBlock, RootBlock,
};
use h5_format::superblock::{self, Superblock};

fn superblock_of(file: &[u8]) -> Superblock {
    let at = superblock::locate(file.len() as u64, |at| {
        Ok::<_, ()>(file[at as usize..].iter().take(8).copied().collect())
    })
    .unwrap()
    .expect("signature");
    let at = at as usize;
    let prefix = &file[at..at + superblock::MIN_PREFIX];
    let len = superblock::needed_len(prefix, at as u64).unwrap();
    Superblock::decode(&file[at..at + len], at as u64).unwrap()
}

/// Every `.h5` file of the crate's test data and of the workspace fixtures.
fn files() -> Vec<(String, Vec<u8>)> {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut out = Vec::new();
    for dir in [
        format!("{root}/tests/data"),
        format!("{root}/../../fixtures/files"),
    ] {
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "h5"))
            .collect();
        paths.sort();
        for p in paths {
            out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
        }
    }
    out
}

#[derive(Default, Debug)]
struct Counts {
    headers: usize,
    indirect: usize,
    direct: usize,
}

/// A file and its base address (structure addresses are relative to it).
struct File<'a> {
    bytes: &'a [u8],
    base: u64,
}

impl File<'_> {
    fn at(&self, addr: u64, len: usize) -> &[u8] {
        let s = (self.base + addr) as usize;
        &self.bytes[s..s + len]
    }
}

fn check_direct(f: &File<'_>, h: &FractalHeapHeader, addr: u64, size: u64, n: &mut Counts) {
    let stored = f.at(addr, size as usize);
    let d = FractalDirectBlock::decode(stored, h, addr, size).unwrap();
    assert_eq!(d.encode(h).unwrap(), stored, "direct block at {addr:#x}");
    n.direct += 1;
}

fn check_indirect(f: &File<'_>, h: &FractalHeapHeader, addr: u64, rows: u16, n: &mut Counts) {
    let stored = f.at(addr, h.indirect_block_len(rows));
    let ib = FractalIndirectBlock::decode(stored, h, addr, rows).unwrap();
    assert_eq!(ib.encode(h).unwrap(), stored, "indirect block at {addr:#x}");
    n.indirect += 1;
    let width = usize::from(h.table.width);
    for (entry, child) in ib.direct.iter().enumerate() {
        if child.address != h5_format::UNDEFINED_ADDRESS && !h.is_filtered() {
            let size = h.table.row_block_size((entry / width) as u32).unwrap();
            check_direct(f, h, child.address, size, n);
        }
    }
    let first_indirect_row = ib.direct.len() / width;
    for (k, &child) in ib.indirect.iter().enumerate() {
        if child != h5_format::UNDEFINED_ADDRESS {
            let rows = h.table.child_rows((first_indirect_row + k / width) as u32);
            check_indirect(f, h, child, rows.unwrap(), n);
        }
    }
}

fn check_file(name: &str, bytes: &[u8], n: &mut Counts) {
    let sb = superblock_of(bytes);
    let sizes: Sizes = sb.sizes;
    let f = File {
        bytes,
        base: sb.base_address,
    };
    for at in bytes
        .windows(4)
        .enumerate()
        .filter(|(_, w)| w == b"FRHP")
        .map(|(i, _)| i)
    {
        let addr = at as u64 - f.base;
        let Ok(total) = FractalHeapHeader::total_len(&bytes[at..], sizes, addr) else {
            continue;
        };
        let Some(stored) = bytes.get(at..at + total) else {
            continue;
        };
        let Ok(h) = FractalHeapHeader::decode(stored, sizes, addr) else {
            continue;
        };
        assert_eq!(h.encode().unwrap(), stored, "{name}: header at {addr:#x}");
        assert_eq!(h.encoded_len(), total);
        n.headers += 1;
        match h.root() {
            RootBlock::Empty => {}
            RootBlock::Direct { address, size, .. } => {
                if !h.is_filtered() {
                    check_direct(&f, &h, address, size, n);
                }
            }
            RootBlock::Indirect { address, rows } => check_indirect(&f, &h, address, rows, n),
        }
    }
}

#[test]
fn every_fractal_heap_structure_re_encodes_byte_exact() {
    let mut n = Counts::default();
    for (name, bytes) in files() {
        check_file(&name, &bytes, &mut n);
    }
    eprintln!("{n:?}");
    assert!(n.headers >= 10, "{n:?}");
    assert!(n.indirect >= 1 && n.direct >= 10, "{n:?}");
}
