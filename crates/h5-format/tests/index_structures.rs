//! Chunk indexes (v2 B-tree types 10/11, fixed arrays, extensible arrays) and dense link
//! indexes (v2 B-tree types 5/6) decoded from real files made by libhdf5 1.14.4 through h5py
//! (tests/data/gen_index_fixtures.py), compared with the chunk addresses, sizes and filter
//! masks libhdf5 reports (`get_chunk_info`, in the .txt manifests) and with the link names.
//!
//! The structures are found by scanning for their signatures (the engine would follow the
//! layout message instead) and walked through the public decoders only.

use std::collections::BTreeSet;

use h5_format::btree2::{Btree2Header, Btree2Node, Btree2Type, Record, RecordContext};
use h5_format::extensible_array::{
    DataBlockParent, ExtensibleArrayDataBlock, ExtensibleArrayHeader, ExtensibleArrayIndexBlock,
    ExtensibleArraySlot, ExtensibleArraySuperBlock,
};
use h5_format::fixed_array::{
    ChunkEntry, FixedArrayDataBlock, FixedArrayHeader, FixedArraySlot, decode_page,
};
use h5_format::{Sizes, UNDEFINED_ADDRESS};

const S: Sizes = Sizes::EIGHT;

/// Reference Jenkins lookup3 (hashlittle), a local copy for the tests.
fn lookup3_ref(data: &[u8], initval: u32) -> u32 {
    fn word(s: &[u8]) -> u32 {
        let mut b = [0u8; 4];
        b[..s.len().min(4)].copy_from_slice(&s[..s.len().min(4)]);
        u32::from_le_bytes(b)
    }
    let mut a = 0xdead_beefu32
        .wrapping_add(data.len() as u32)
        .wrapping_add(initval);
    let (mut b, mut c) = (a, a);
    let mut k = data;
    while k.len() > 12 {
        a = a.wrapping_add(word(&k[0..4]));
        b = b.wrapping_add(word(&k[4..8]));
        c = c.wrapping_add(word(&k[8..12]));
        for (x, y, z, n) in [
            (0, 2, 1, 4),
            (1, 0, 2, 6),
            (2, 1, 0, 8),
            (0, 2, 1, 16),
            (1, 0, 2, 19),
            (2, 1, 0, 4),
        ] {
            let mut v = [a, b, c];
            v[x] = v[x].wrapping_sub(v[y]);
            v[x] ^= v[y].rotate_left(n);
            v[y] = v[y].wrapping_add(v[z]);
            [a, b, c] = v;
        }
        k = &k[12..];
    }
    if k.is_empty() {
        return c;
    }
    let mut pad = [0u8; 12];
    pad[..k.len()].copy_from_slice(k);
    a = a.wrapping_add(word(&pad[0..4]));
    b = b.wrapping_add(word(&pad[4..8]));
    c = c.wrapping_add(word(&pad[8..12]));
    for (x, y, n) in [
        (2, 1, 14),
        (0, 2, 11),
        (1, 0, 25),
        (2, 1, 16),
        (0, 2, 4),
        (1, 0, 14),
        (2, 1, 24),
    ] {
        let mut v = [a, b, c];
        v[x] ^= v[y];
        v[x] = v[x].wrapping_sub(v[y].rotate_left(n));
        [a, b, c] = v;
    }
    c
}

#[test]
fn reference_lookup3_matches_published_vectors() {
    assert_eq!(lookup3_ref(b"", 0), 0xdead_beef);
    assert_eq!(
        lookup3_ref(b"Four score and seven years ago", 0),
        0x1777_0551
    );
    assert_eq!(
        lookup3_ref(b"Four score and seven years ago", 1),
        0xcd62_8161
    );
    // And the crate's implementation agrees.
    for len in 0..40 {
        let d: Vec<u8> = (0..len as u8).map(|x| x.wrapping_mul(37)).collect();
        assert_eq!(h5_format::checksum::lookup3(&d, 7), lookup3_ref(&d, 7));
    }
}

/// One allocated chunk as libhdf5 reports it.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Debug)]
struct Chunk {
    scaled: Vec<u64>,
    address: u64,
    size: u64,
    mask: u32,
}

struct DatasetManifest {
    name: String,
    shape: Vec<u64>,
    chunk: Vec<u64>,
    item: u64,
    chunks: BTreeSet<Chunk>,
}

impl DatasetManifest {
    fn chunk_bytes(&self) -> u64 {
        self.chunk.iter().product::<u64>() * self.item
    }
    /// Number of chunks along each dimension.
    fn grid(&self) -> Vec<u64> {
        self.shape
            .iter()
            .zip(&self.chunk)
            .map(|(s, c)| s.div_ceil(*c))
            .collect()
    }
    /// Row-major linear chunk index of `scaled` (fixed arrays; 1-D extensible arrays).
    fn linear(&self, scaled: &[u64]) -> u64 {
        scaled
            .iter()
            .zip(self.grid())
            .fold(0, |acc, (s, g)| acc * g + s)
    }
}

fn nums(s: &str) -> Vec<u64> {
    s.split(',').map(|x| x.parse().unwrap()).collect()
}

fn manifest(text: &str) -> (Vec<DatasetManifest>, Vec<(String, Vec<String>)>) {
    let mut lines = text.lines();
    let (mut ds, mut gs) = (Vec::new(), Vec::new());
    while let Some(head) = lines.next() {
        let f: Vec<&str> = head.split(' ').collect();
        match f[0] {
            "dataset" => {
                let n: usize = f[2].parse().unwrap();
                let chunks = (0..n)
                    .map(|_| {
                        let c: Vec<&str> = lines.next().unwrap().split(' ').collect();
                        Chunk {
                            scaled: nums(c[0]),
                            address: c[1].parse().unwrap(),
                            size: c[2].parse().unwrap(),
                            mask: c[3].parse().unwrap(),
                        }
                    })
                    .collect();
                ds.push(DatasetManifest {
                    name: f[1].to_string(),
                    shape: nums(f[3]),
                    chunk: nums(f[4]),
                    item: f[5].parse().unwrap(),
                    chunks,
                });
            }
            "group" | "attrs" => {
                let n: usize = f[2].parse().unwrap();
                let names = (0..n).map(|_| lines.next().unwrap().to_string()).collect();
                gs.push((format!("{} {}", f[0], f[1]), names));
            }
            other => panic!("bad manifest line {other}"),
        }
    }
    (ds, gs)
}

fn signatures(file: &[u8], sig: &[u8; 4]) -> Vec<u64> {
    file.windows(4)
        .enumerate()
        .filter(|(_, w)| w == sig)
        .map(|(i, _)| i as u64)
        .collect()
}

fn at(file: &[u8], addr: u64, len: u64) -> &[u8] {
    let start = addr as usize;
    &file[start..(start + len as usize).min(file.len())]
}

fn entry_chunk(scaled: Vec<u64>, e: &ChunkEntry, full: u64) -> Chunk {
    Chunk {
        scaled,
        address: e.address,
        size: e.size.unwrap_or(full),
        mask: e.filter_mask,
    }
}

// ---------------------------------------------------------------- v2 B-trees

/// Walks a tree in key order, checking child record counts against the nodes found.
fn walk(file: &[u8], h: &Btree2Header, ctx: &RecordContext) -> Vec<Record> {
    #[allow(clippy::too_many_arguments)]
    fn go(
        file: &[u8],
        h: &Btree2Header,
        ctx: &RecordContext,
        addr: u64,
        depth: u16,
        n: u64,
        total: u64,
        out: &mut Vec<Record>,
    ) {
        let node = Btree2Node::decode(at(file, addr, h.node_len() as u64), h, depth, n, ctx, addr)
            .unwrap();
        assert_eq!(node.records.len() as u64, n);
        let before = out.len();
        if node.is_leaf() {
            out.extend(node.records);
        } else {
            assert_eq!(node.children.len(), node.records.len() + 1);
            for (i, c) in node.children.iter().enumerate() {
                go(
                    file,
                    h,
                    ctx,
                    c.address,
                    depth - 1,
                    c.records,
                    c.total_records,
                    out,
                );
                if let Some(r) = node.records.get(i) {
                    out.push(r.clone());
                }
            }
        }
        assert_eq!(
            (out.len() - before) as u64,
            total,
            "subtree total at {addr:#x}"
        );
    }
    let mut out = Vec::new();
    if h.root.address != UNDEFINED_ADDRESS {
        go(
            file,
            h,
            ctx,
            h.root.address,
            h.depth,
            h.root.records,
            h.root.total_records,
            &mut out,
        );
    }
    out
}

fn btree_headers(file: &[u8]) -> Vec<Btree2Header> {
    signatures(file, b"BTHD")
        .into_iter()
        .map(|a| {
            Btree2Header::decode(at(file, a, Btree2Header::encoded_len(S) as u64), S, a).unwrap()
        })
        .collect()
}

#[test]
fn btree2_chunk_indexes_match_libhdf5() {
    let file: &[u8] = include_bytes!("data/btree2.h5");
    let (datasets, _) = manifest(include_str!("data/btree2.txt"));
    let headers = btree_headers(file);
    assert_eq!(headers.len(), 2);
    let mut depth1 = false;
    for ds in &datasets {
        let ctx = RecordContext::for_chunks(S, ds.shape.len(), ds.chunk_bytes());
        let want_type = if ds.name == "filtered" {
            Btree2Type::FilteredChunks
        } else {
            Btree2Type::Chunks
        };
        let h = headers.iter().find(|h| h.tree_type == want_type).unwrap();
        assert_eq!(h.root.total_records, ds.chunks.len() as u64);
        depth1 |= h.depth == 1;
        let records = walk(file, h, &ctx);
        let mut got = BTreeSet::new();
        let mut prev: Option<Vec<u64>> = None;
        for r in records {
            let c = match r {
                Record::Chunk { address, scaled } => Chunk {
                    scaled,
                    address,
                    size: ds.chunk_bytes(),
                    mask: 0,
                },
                Record::FilteredChunk {
                    address,
                    size,
                    filter_mask,
                    scaled,
                } => Chunk {
                    scaled,
                    address,
                    size,
                    mask: filter_mask,
                },
                other => panic!("unexpected record {other:?}"),
            };
            // Records come out in key order (scaled offsets, lexicographic).
            assert!(prev.as_ref().is_none_or(|p| *p < c.scaled));
            prev = Some(c.scaled.clone());
            got.insert(c);
        }
        assert_eq!(got, ds.chunks, "dataset {}", ds.name);
    }
    assert!(depth1, "the 144-chunk tree has an internal root");
}

#[test]
fn btree2_link_indexes_match_the_group_links() {
    let file: &[u8] = include_bytes!("data/groups.h5");
    let (_, groups) = manifest(include_str!("data/groups.txt"));
    let headers = btree_headers(file);
    assert_eq!(headers.len(), 7);
    let ctx = RecordContext::new(S);
    let mut depth2 = 0;
    for (name, links) in groups
        .iter()
        .filter(|(n, l)| n.starts_with("group") && !l.is_empty())
    {
        let n = links.len() as u64;
        for t in [Btree2Type::LinkName, Btree2Type::LinkCreationOrder] {
            let h = headers
                .iter()
                .find(|h| h.tree_type == t && h.root.total_records == n)
                .unwrap_or_else(|| panic!("no type {t:?} tree for group {name}"));
            if h.depth == 2 {
                depth2 += 1;
                // The pointer widths that make this work: leaf max 45 records, "records in
                // child" 1 byte; depth-1 max (512-10-9)/(rec+9); totals 2 bytes at depth 2.
                assert_eq!(
                    h.limits[0].max_records,
                    (512 - 10) / u64::from(h.record_size)
                );
                assert_eq!(h.max_records_size, 1);
                assert_eq!(h.limits[1].cumulative_size, 2);
            }
            let records = walk(file, h, &ctx);
            assert_eq!(records.len(), links.len());
            match t {
                Btree2Type::LinkName => {
                    let mut want: Vec<u32> =
                        links.iter().map(|l| lookup3_ref(l.as_bytes(), 0)).collect();
                    want.sort_unstable();
                    let got: Vec<u32> = records
                        .iter()
                        .map(|r| match r {
                            Record::LinkName { hash, heap_id } => {
                                assert_eq!(heap_id.len(), 7);
                                *hash
                            }
                            other => panic!("{other:?}"),
                        })
                        .collect();
                    assert_eq!(got, want, "group {name}: name hashes in key order");
                }
                _ => {
                    let got: Vec<u64> = records
                        .iter()
                        .map(|r| match r {
                            Record::LinkCreationOrder { creation_order, .. } => *creation_order,
                            other => panic!("{other:?}"),
                        })
                        .collect();
                    assert_eq!(got, (0..n).collect::<Vec<_>>(), "group {name}");
                }
            }
        }
    }
    assert_eq!(
        depth2, 2,
        "both indexes of the big group are two levels deep"
    );
}

#[test]
fn btree2_attribute_indexes_match_the_attribute_names() {
    let file: &[u8] = include_bytes!("data/groups.h5");
    let (_, groups) = manifest(include_str!("data/groups.txt"));
    let (_, names) = groups.iter().find(|(n, _)| n == "attrs attrs").unwrap();
    let headers = btree_headers(file);
    let ctx = RecordContext::new(S);
    let by_name = headers
        .iter()
        .find(|h| h.tree_type == Btree2Type::AttributeName)
        .unwrap();
    let mut want: Vec<u32> = names.iter().map(|n| lookup3_ref(n.as_bytes(), 0)).collect();
    want.sort_unstable();
    let mut orders = Vec::new();
    let got: Vec<u32> = walk(file, by_name, &ctx)
        .into_iter()
        .map(|r| match r {
            Record::AttributeName {
                hash,
                creation_order,
                flags,
                ..
            } => {
                assert_eq!(flags, 0);
                orders.push(creation_order);
                hash
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(got, want, "name hashes in key order");
    orders.sort_unstable();
    assert_eq!(orders, (0..names.len() as u32).collect::<Vec<_>>());
    let by_order = headers
        .iter()
        .find(|h| h.tree_type == Btree2Type::AttributeCreationOrder)
        .unwrap();
    let got: Vec<u32> = walk(file, by_order, &ctx)
        .into_iter()
        .map(|r| match r {
            Record::AttributeCreationOrder { creation_order, .. } => creation_order,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(got, (0..names.len() as u32).collect::<Vec<_>>());
}

// ------------------------------------------------------------- fixed arrays

#[test]
fn fixed_arrays_match_libhdf5() {
    let file: &[u8] = include_bytes!("data/farray.h5");
    let (datasets, _) = manifest(include_str!("data/farray.txt"));
    let headers: Vec<FixedArrayHeader> = signatures(file, b"FAHD")
        .into_iter()
        .map(|a| {
            FixedArrayHeader::decode(at(file, a, FixedArrayHeader::encoded_len(S) as u64), S, a)
                .unwrap()
        })
        .collect();
    assert_eq!(headers.len(), 3);
    let mut paged = 0;
    for ds in &datasets {
        let n: u64 = ds.grid().iter().product();
        let h = headers
            .iter()
            .find(|h| {
                h.num_elements == n && (h.format.chunk_size_len > 0) == (ds.name == "filtered")
            })
            .unwrap();
        if ds.name == "filtered" {
            assert_eq!(
                h.format.chunk_size_len,
                h5_format::btree2::chunk_size_len(ds.chunk_bytes())
            );
        }
        let db_addr = h.data_block_address;
        let db = FixedArrayDataBlock::decode(at(file, db_addr, h.data_block_len(S)), h, S, db_addr)
            .unwrap();
        paged += usize::from(h.is_paged());
        let mut got = BTreeSet::new();
        for i in 0..n {
            let scaled = if ds.shape.len() == 1 {
                vec![i]
            } else {
                vec![i / ds.grid()[1], i % ds.grid()[1]]
            };
            assert_eq!(ds.linear(&scaled), i);
            let e = match h.locate(S, i).unwrap() {
                FixedArraySlot::DataBlock { element } => db.elements[element],
                FixedArraySlot::Page {
                    page,
                    element,
                    address,
                    len,
                    elements,
                } => {
                    assert!(db.page_initialized(page));
                    let p = decode_page(
                        at(file, address, len as u64),
                        &h.format,
                        S,
                        elements,
                        address,
                    )
                    .unwrap();
                    p[element]
                }
            };
            if e.is_allocated() {
                got.insert(entry_chunk(scaled, &e, ds.chunk_bytes()));
            }
        }
        assert!(h.locate(S, n).is_none());
        assert_eq!(got, ds.chunks, "dataset {}", ds.name);
    }
    assert_eq!(paged, 2, "3000 and 1100 chunks are paged at 1024 a page");
}

// -------------------------------------------------------- extensible arrays

/// Looks element `i` up through the blocks, as the engine would, loading each from `file`.
fn ea_get(file: &[u8], h: &ExtensibleArrayHeader, i: u64) -> Option<ChunkEntry> {
    if i >= h.stats.max_index_set {
        return None;
    }
    let ib_addr = h.index_block_address;
    let ib =
        ExtensibleArrayIndexBlock::decode(at(file, ib_addr, h.index_block_len(S)), h, S, ib_addr)
            .unwrap();
    match h.locate(i).unwrap() {
        ExtensibleArraySlot::IndexBlock { element } => Some(ib.elements[element]),
        ExtensibleArraySlot::DataBlock {
            super_block,
            parent,
            data_block_elements,
            block_offset,
            element,
            page,
        } => {
            let (db_addr, sb) = match parent {
                DataBlockParent::IndexBlock { slot } => (ib.data_block_addresses[slot], None),
                DataBlockParent::SuperBlock { slot, data_block } => {
                    let sb_addr = ib.super_block_addresses[slot];
                    if sb_addr == UNDEFINED_ADDRESS {
                        return None;
                    }
                    let sb = ExtensibleArraySuperBlock::decode(
                        at(file, sb_addr, h.super_block_len(S, super_block)),
                        h,
                        S,
                        super_block,
                        sb_addr,
                    )
                    .unwrap();
                    (sb.data_block_addresses[data_block], Some(sb))
                }
            };
            if db_addr == UNDEFINED_ADDRESS {
                return None;
            }
            let db = ExtensibleArrayDataBlock::decode(
                at(file, db_addr, h.data_block_len(S, data_block_elements)),
                h,
                S,
                data_block_elements,
                db_addr,
            )
            .unwrap();
            assert_eq!(db.block_offset, block_offset);
            match page {
                None => Some(db.elements[element as usize]),
                Some(p) => {
                    if let (Some(bit), Some(sb)) = (p.bitmap_bit, &sb)
                        && !sb.page_initialized(bit)
                    {
                        return None;
                    }
                    let pa = h.page_address(S, db_addr, p.page);
                    let elems = h5_format::extensible_array::decode_page(
                        at(file, pa, h.page_len()),
                        h,
                        S,
                        pa,
                    )
                    .unwrap();
                    Some(elems[p.element])
                }
            }
        }
    }
}

#[test]
fn extensible_arrays_match_libhdf5() {
    let file: &[u8] = include_bytes!("data/earray.h5");
    let (datasets, _) = manifest(include_str!("data/earray.txt"));
    let headers: Vec<ExtensibleArrayHeader> = signatures(file, b"EAHD")
        .into_iter()
        .map(|a| {
            ExtensibleArrayHeader::decode(
                at(file, a, ExtensibleArrayHeader::encoded_len(S) as u64),
                S,
                a,
            )
            .unwrap()
        })
        .collect();
    assert_eq!(headers.len(), 3);
    let mut saw_paged = false;
    for ds in &datasets {
        let n = ds.grid()[0];
        let h = headers
            .iter()
            .find(|h| {
                h.stats.max_index_set == ds.chunks.iter().map(|c| c.scaled[0] + 1).max().unwrap()
                    && (h.format.chunk_size_len > 0) == (ds.name == "filtered")
            })
            .unwrap();
        // The library's dataset parameters.
        assert_eq!(
            (
                h.max_elements_bits,
                h.index_block_elements,
                h.data_block_min_elements
            ),
            (32, 4, 16)
        );
        assert_eq!((h.super_block_min_data_pointers, h.page_bits), (4, 10));
        let mut got = BTreeSet::new();
        let wanted: BTreeSet<u64> = ds.chunks.iter().map(|c| c.scaled[0]).collect();
        // Every written chunk, and the neighbours of each (which must be unallocated unless
        // written), and everything for the small arrays.
        let probe: BTreeSet<u64> = if n <= 1000 {
            (0..n).collect()
        } else {
            wanted
                .iter()
                .flat_map(|&i| [i.saturating_sub(1), i, i + 1])
                .filter(|&i| i < n)
                .collect()
        };
        for i in probe {
            if let Some(ExtensibleArraySlot::DataBlock { page: Some(_), .. }) = h.locate(i) {
                saw_paged = true;
            }
            if let Some(e) = ea_get(file, h, i)
                && e.is_allocated()
            {
                got.insert(entry_chunk(vec![i], &e, ds.chunk_bytes()));
            }
        }
        assert_eq!(got, ds.chunks, "dataset {}", ds.name);
    }
    assert!(saw_paged, "chunks past 131060 sit in paged data blocks");
}

// ------------------------------------------------------------ corruption sweeps

/// Truncations and byte changes of a real structure's used bytes must be errors (every byte is
/// covered by its checksum), never panics. Large structures are sampled every `step` bytes
/// (plus their last 8).
fn sweep<T>(
    image: &[u8],
    used: usize,
    step: usize,
    decode: impl Fn(&[u8]) -> h5_format::Result<T>,
) {
    assert!(decode(image).is_ok());
    let picks: Vec<usize> = (0..used)
        .filter(|i| i % step == 0 || *i + 8 >= used)
        .collect();
    for &len in &picks {
        assert!(decode(&image[..len]).is_err(), "truncated to {len}");
    }
    let mut b = image.to_vec();
    for &i in &picks {
        for flip in [0x01u8, 0x80] {
            b[i] ^= flip;
            assert!(decode(&b).is_err(), "byte {i} ^ {flip:#x}");
            b[i] ^= flip;
        }
    }
}

#[test]
fn real_structures_reject_every_corruption() {
    // v2 B-tree of depth 2: header, both internal levels, a leaf.
    let file: &[u8] = include_bytes!("data/groups.h5");
    let ctx = RecordContext::new(S);
    let h = btree_headers(file)
        .into_iter()
        .find(|h| h.depth == 2 && h.tree_type == Btree2Type::LinkName)
        .unwrap();
    let hl = Btree2Header::encoded_len(S);
    sweep(at(file, h.address, hl as u64), hl, 1, |b| {
        Btree2Header::decode(b, S, h.address)
    });
    let (mut addr, mut n) = (h.root.address, h.root.records);
    for depth in (0..=2u16).rev() {
        let img = at(file, addr, h.node_len() as u64);
        let node = Btree2Node::decode(img, &h, depth, n, &ctx, addr).unwrap();
        let used = if depth == 0 {
            6 + node.records.len() * 11 + 4
        } else {
            6 + node.records.len() * 11 + node.children.len() * h.pointer_len(S, depth) + 4
        };
        sweep(img, used, 3, |b| {
            Btree2Node::decode(b, &h, depth, n, &ctx, addr)
        });
        if let Some(c) = node.children.first() {
            (addr, n) = (c.address, c.records);
        }
    }

    // Paged fixed array: header, data block, a page.
    let file: &[u8] = include_bytes!("data/farray.h5");
    for a in signatures(file, b"FAHD") {
        let hl = FixedArrayHeader::encoded_len(S);
        sweep(at(file, a, hl as u64), hl, 1, |b| {
            FixedArrayHeader::decode(b, S, a)
        });
        let h = FixedArrayHeader::decode(at(file, a, hl as u64), S, a).unwrap();
        let len = h.data_block_len(S);
        let img = at(file, h.data_block_address, len);
        sweep(img, len as usize, 5, |b| {
            FixedArrayDataBlock::decode(b, &h, S, h.data_block_address)
        });
        if let Some(FixedArraySlot::Page {
            address,
            len,
            elements,
            ..
        }) = h.locate(S, 1030)
        {
            let img = at(file, address, len as u64);
            sweep(img, len, 61, |b| {
                decode_page(b, &h.format, S, elements, address)
            });
        }
    }

    // Extensible array with a paged super block: header, index block, super block, data
    // block, page.
    let file: &[u8] = include_bytes!("data/earray.h5");
    let mut paged_arrays = 0;
    for a in signatures(file, b"EAHD") {
        let hl = ExtensibleArrayHeader::encoded_len(S);
        sweep(at(file, a, hl as u64), hl, 1, |b| {
            ExtensibleArrayHeader::decode(b, S, a)
        });
        let h = ExtensibleArrayHeader::decode(at(file, a, hl as u64), S, a).unwrap();
        let ia = h.index_block_address;
        let il = h.index_block_len(S);
        sweep(at(file, ia, il), il as usize, 3, |b| {
            ExtensibleArrayIndexBlock::decode(b, &h, S, ia)
        });
        let ib = ExtensibleArrayIndexBlock::decode(at(file, ia, il), &h, S, ia).unwrap();
        let Some(ExtensibleArraySlot::DataBlock {
            super_block,
            parent: DataBlockParent::SuperBlock { slot, data_block },
            data_block_elements,
            page: Some(p),
            ..
        }) = h.locate(140_000)
        else {
            panic!()
        };
        let sa = ib.super_block_addresses[slot];
        if sa == UNDEFINED_ADDRESS {
            continue; // not the sparse dataset
        }
        let sl = h.super_block_len(S, super_block);
        sweep(at(file, sa, sl), sl as usize, 7, |b| {
            ExtensibleArraySuperBlock::decode(b, &h, S, super_block, sa)
        });
        let sb =
            ExtensibleArraySuperBlock::decode(at(file, sa, sl), &h, S, super_block, sa).unwrap();
        let da = sb.data_block_addresses[data_block];
        let dl = h.data_block_len(S, data_block_elements);
        sweep(at(file, da, dl), dl as usize, 1, |b| {
            ExtensibleArrayDataBlock::decode(b, &h, S, data_block_elements, da)
        });
        let pa = h.page_address(S, da, p.page);
        let pl = h.page_len();
        sweep(at(file, pa, pl), pl as usize, 61, |b| {
            h5_format::extensible_array::decode_page(b, &h, S, pa)
        });
        paged_arrays += 1;
    }
    assert_eq!(paged_arrays, 1);
}

#[test]
fn btree2_huge_object_index_points_at_the_huge_attribute() {
    let file: &[u8] = include_bytes!("data/groups.h5");
    let h = btree_headers(file)
        .into_iter()
        .find(|h| h.tree_type == Btree2Type::HugeIndirect)
        .unwrap();
    let records = walk(file, &h, &RecordContext::new(S));
    let [
        Record::HugeIndirect {
            address,
            length,
            id,
        },
    ] = records.as_slice()
    else {
        panic!("{records:?}")
    };
    // The object is the encoded attribute message (version 3: version, flags, three sizes,
    // encoding, then the name) holding 3000 u32 values.
    assert!(*length > 12_000 && *length < 12_100, "{length}");
    assert_eq!(file[*address as usize], 3);
    assert_eq!(&file[*address as usize + 9..][..5], b"huge\0");
    assert_eq!(*id, 1);
}
