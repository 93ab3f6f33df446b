//! The seed corpus of every target, cut from real files (the fixture corpus): whole files for
//! `file`, and for the others each structure of the kind the target decodes, found by walking the
//! file (object headers and their messages, the structures they point to) and by signature,
//! framed as the target reads its input (see `format.rs` and `filters.rs`).

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use h5::{File, FileAccess, Group, LinkKind, ObjectKind};
use h5_format::btree1::BtreeV1Node;
use h5_format::btree2::{Btree2Header, Btree2Node, RecordContext};
use h5_format::extensible_array::{
    ExtensibleArrayDataBlock, ExtensibleArrayHeader, ExtensibleArrayIndexBlock,
};
use h5_format::fixed_array::FixedArrayHeader;
use h5_format::free_space::{FreeSpaceClient, FreeSpaceHeader, FreeSpaceSections, SectionFormat};
use h5_format::heap::fractal::{FractalHeapHeader, FractalIndirectBlock, RootBlock};
use h5_format::heap::global::GlobalHeapCollection;
use h5_format::heap::local::LocalHeapHeader;
use h5_format::message::{Message, decode_message};
use h5_format::object_header::{decode_continuation_block, decode_first_chunk};
use h5_format::sohm::SohmTable;
use h5_format::superblock::{self, Superblock};
use h5_format::vds::VirtualMappings;
use h5_format::{Sizes, UNDEFINED_ADDRESS};
use h5_io::MemoryStorage;

use crate::input::{push_slice16, sizes_byte};

/// Whole files bigger than this are not `file` seeds (AFL is slow on big inputs).
const MAX_FILE_SEED: usize = 1 << 20;

/// The most bytes a structure slice takes.
const MAX_SLICE: usize = 1 << 16;

/// Seeds by target name.
#[derive(Debug, Default)]
pub struct Seeds(pub BTreeMap<&'static str, Vec<Vec<u8>>>);

impl Seeds {
    fn add(&mut self, target: &'static str, seed: Vec<u8>) {
        let v = self.0.entry(target).or_default();
        if v.len() < 400 && !v.contains(&seed) {
            v.push(seed);
        }
    }

    /// Writes the seeds as `dir/<target>/<n>`; returns how many were written.
    pub fn write(&self, dir: &Path) -> std::io::Result<usize> {
        let mut n = 0;
        for (target, seeds) in &self.0 {
            let d = dir.join(target);
            std::fs::create_dir_all(&d)?;
            for (i, s) in seeds.iter().enumerate() {
                std::fs::write(d.join(format!("seed-{i:04}")), s)?;
                n += 1;
            }
        }
        Ok(n)
    }
}

/// Seeds of every target from every HDF5 file under `dirs` (recursively).
pub fn from_dirs(dirs: &[&Path]) -> std::io::Result<Seeds> {
    let mut files = Vec::new();
    for d in dirs {
        collect(d, &mut files)?;
    }
    files.sort();
    let mut seeds = Seeds::default();
    for f in files {
        let bytes = std::fs::read(&f)?;
        from_file(&bytes, &mut seeds);
    }
    Ok(seeds)
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            collect(&p, out)?;
        } else {
            out.push(p);
        }
    }
    Ok(())
}

/// A slice of `len` bytes at `at`, clipped to the file and to [`MAX_SLICE`].
fn slice(bytes: &[u8], at: u64, len: u64) -> &[u8] {
    let Ok(at) = usize::try_from(at) else {
        return &[];
    };
    let len = usize::try_from(len).unwrap_or(usize::MAX).min(MAX_SLICE);
    let end = at.saturating_add(len).min(bytes.len());
    bytes.get(at..end).unwrap_or(&[])
}

/// Adds the seeds of one file (nothing if it is not HDF5).
pub fn from_file(bytes: &[u8], seeds: &mut Seeds) {
    let Some(base) = superblock::signature_offsets(bytes.len() as u64)
        .find(|&at| superblock::is_signature(bytes.get(at as usize..).unwrap_or(&[])))
    else {
        return;
    };
    let sb_bytes = slice(bytes, base, 256);
    let Ok(sb) = Superblock::decode(sb_bytes, base) else {
        return;
    };
    if bytes.len() <= MAX_FILE_SEED {
        seeds.add("file", bytes.to_vec());
    }
    seeds.add("superblock", sb_bytes.to_vec());
    let sizes = sb.sizes;
    let s = sizes_byte(sizes);
    let abs = |rel: u64| base.saturating_add(rel);

    // Object headers (every object reachable from the root, and the superblock extension).
    let mut headers = objects(bytes);
    if sb.extension_address != UNDEFINED_ADDRESS {
        headers.push(sb.extension_address);
    }
    for rel in headers {
        let first = slice(bytes, abs(rel), 4096);
        let Ok(chunk) = decode_first_chunk(first, rel) else {
            continue;
        };
        let Ok(chunk_len) = chunk.prefix.first_chunk_len() else {
            continue;
        };
        let first = &first[..chunk_len.min(first.len())];
        seeds.add("object_header", [&[s, 0][..], first].concat());
        let mut messages: Vec<(u16, u8, Vec<u8>)> = chunk
            .messages
            .iter()
            .map(|m| (m.kind, m.flags, m.body.to_vec()))
            .collect();
        let mut i = 0;
        while i < messages.len() {
            let (k, flags, body) = messages[i].clone();
            i += 1;
            let mut seed = vec![s];
            seed.extend_from_slice(&k.to_le_bytes());
            seed.push(flags);
            seed.extend_from_slice(&body);
            seeds.add("message", seed);
            let Ok(m) = decode_message(k, flags, &body, sizes, rel) else {
                continue;
            };
            match m {
                Message::Datatype(_) => seeds.add("datatype", body.clone()),
                Message::Continuation(c) => {
                    let block = slice(bytes, abs(c.address), c.length);
                    let mut seed = vec![s, 1];
                    push_slice16(&mut seed, first);
                    seed.extend_from_slice(block);
                    seeds.add("object_header", seed);
                    if let Ok(more) = decode_continuation_block(block, &chunk.prefix, c.address) {
                        messages.extend(more.iter().map(|m| (m.kind, m.flags, m.body.to_vec())));
                    }
                }
                Message::SharedMessageTable(t) => {
                    let n = usize::from(t.index_count);
                    let len = SohmTable::encoded_len(sizes, n) as u64;
                    let mut seed = vec![s, t.index_count];
                    seed.extend_from_slice(slice(bytes, abs(t.table_address), len));
                    seeds.add("sohm_table", seed);
                }
                _ => {}
            }
        }
    }

    // Everything found by signature.
    for at in 0..bytes.len().saturating_sub(4) {
        let sig = &bytes[at..at + 4];
        let rel = (at as u64).wrapping_sub(base);
        let here = slice(bytes, at as u64, MAX_SLICE as u64);
        match sig {
            b"TREE" => {
                let rank = (0..=33u8)
                    .find(|&r| {
                        let rank = (r != 0).then_some(usize::from(r));
                        BtreeV1Node::decode(here, sizes, rel, rank).is_ok()
                    })
                    .unwrap_or(0);
                seeds.add("btree1", [&[s, rank][..], slice(here, 0, 4096)].concat());
            }
            b"SNOD" => seeds.add("symbol_node", [&[s][..], slice(here, 0, 4096)].concat()),
            b"HEAP" => {
                let len = LocalHeapHeader::encoded_len(sizes);
                if let Ok(h) = LocalHeapHeader::decode(here, sizes, rel) {
                    let mut seed = vec![s];
                    push_slice16(&mut seed, slice(here, 0, len as u64));
                    seed.extend_from_slice(slice(
                        bytes,
                        abs(h.data_segment_address),
                        h.data_segment_size,
                    ));
                    seeds.add("local_heap", seed);
                }
            }
            b"GCOL" => {
                if let Ok(n) = GlobalHeapCollection::needed_len(here, sizes, rel) {
                    let c = slice(here, 0, n as u64);
                    seeds.add("global_heap", [&[s][..], c].concat());
                    if let Ok(col) = GlobalHeapCollection::decode(c, sizes, rel) {
                        for o in &col.objects {
                            if VirtualMappings::decode(&o.data, sizes, rel).is_ok() {
                                seeds.add("virtual_mappings", [&[s][..], &o.data].concat());
                            }
                        }
                    }
                }
            }
            b"BTHD" => btree2_seed(bytes, here, rel, base, sizes, seeds),
            b"FRHP" => fractal_seed(bytes, here, rel, base, sizes, seeds),
            b"FAHD" => {
                let len = FixedArrayHeader::encoded_len(sizes);
                if let Ok(h) = FixedArrayHeader::decode(here, sizes, rel) {
                    let mut seed = header_seed(s, rel, slice(here, 0, len as u64));
                    seed.extend_from_slice(&0u32.to_le_bytes());
                    seed.extend_from_slice(slice(
                        bytes,
                        abs(h.data_block_address),
                        h.data_block_len(sizes),
                    ));
                    seeds.add("fixed_array", seed);
                }
            }
            b"EAHD" => extensible_seed(bytes, here, rel, base, sizes, seeds),
            b"FSHD" => {
                let len = FreeSpaceHeader::encoded_len(sizes);
                if let Ok(h) = FreeSpaceHeader::decode(here, sizes, rel) {
                    let sections = slice(bytes, abs(h.sections_address), h.sections_alloc_len);
                    let width = (1..=8u8)
                        .find(|&w| {
                            let format = match h.client {
                                FreeSpaceClient::File => SectionFormat::File,
                                FreeSpaceClient::FractalHeap => {
                                    SectionFormat::FractalHeap { heap_offset_len: w }
                                }
                            };
                            FreeSpaceSections::decode(
                                sections,
                                &h,
                                sizes,
                                h.sections_address,
                                format,
                            )
                            .is_ok()
                        })
                        .unwrap_or(4);
                    let mut seed = header_seed(s, rel, slice(here, 0, len as u64));
                    seed.push(width);
                    seed.extend_from_slice(sections);
                    seeds.add("free_space", seed);
                }
            }
            _ => {}
        }
    }
    filter_seeds(bytes, seeds);
}

/// The start of a header-and-block seed: sizes byte, header address, header.
fn header_seed(s: u8, rel: u64, header: &[u8]) -> Vec<u8> {
    let mut seed = vec![s];
    seed.extend_from_slice(&rel.to_le_bytes());
    push_slice16(&mut seed, header);
    seed
}

fn btree2_seed(bytes: &[u8], here: &[u8], rel: u64, base: u64, sizes: Sizes, seeds: &mut Seeds) {
    let len = Btree2Header::encoded_len(sizes);
    let Ok(h) = Btree2Header::decode(here, sizes, rel) else {
        return;
    };
    if h.root.address == UNDEFINED_ADDRESS {
        return;
    }
    let node = slice(
        bytes,
        base.saturating_add(h.root.address),
        u64::from(h.node_size),
    );
    // The record context of chunk records is not in the header: the first that decodes.
    let mut ctx = (0u8, 0u8);
    'find: for rank in 0..=33u8 {
        for width in 0..=8u8 {
            let c = RecordContext {
                rank: usize::from(rank),
                chunk_size_len: usize::from(width),
                ..RecordContext::new(sizes)
            };
            if Btree2Node::decode(node, &h, h.depth, h.root.records, &c, h.root.address).is_ok() {
                ctx = (rank, width);
                break 'find;
            }
        }
    }
    let mut seed = vec![sizes_byte(sizes)];
    push_slice16(&mut seed, slice(here, 0, len as u64));
    seed.extend_from_slice(&h.depth.to_le_bytes());
    seed.extend_from_slice(&(h.root.records.min(u64::from(u16::MAX)) as u16).to_le_bytes());
    seed.extend_from_slice(&[ctx.0, ctx.1]);
    seed.extend_from_slice(node);
    seeds.add("btree2", seed);
}

fn fractal_seed(bytes: &[u8], here: &[u8], rel: u64, base: u64, sizes: Sizes, seeds: &mut Seeds) {
    let Ok(len) = FractalHeapHeader::total_len(here, sizes, rel) else {
        return;
    };
    let header = slice(here, 0, len as u64);
    let Ok(h) = FractalHeapHeader::decode(header, sizes, rel) else {
        return;
    };
    let id = vec![0u8; usize::from(h.heap_id_len)];
    let mut add = |kind: u8, rows: u16, block: &[u8]| {
        let mut seed = header_seed(sizes_byte(sizes), rel, header);
        seed.push(kind);
        seed.extend_from_slice(&rows.to_le_bytes());
        push_slice16(&mut seed, &id);
        seed.extend_from_slice(block);
        seeds.add("fractal_heap", seed);
    };
    match h.root() {
        RootBlock::Direct {
            address, disk_size, ..
        } => add(0, 0, slice(bytes, base.saturating_add(address), disk_size)),
        RootBlock::Indirect { address, rows } => {
            let block = slice(
                bytes,
                base.saturating_add(address),
                h.indirect_block_len(rows) as u64,
            );
            add(1, rows, block);
            if let Ok(ib) = FractalIndirectBlock::decode(block, &h, address, rows) {
                let width = usize::from(h.table.width.max(1));
                for (i, child) in ib.direct.iter().enumerate().take(3) {
                    let row = (i / width) as u32;
                    if child.address == UNDEFINED_ADDRESS {
                        continue;
                    }
                    if let Some(size) = h.table.row_block_size(row) {
                        let size = child.filtered_size.unwrap_or(size);
                        add(0, 0, slice(bytes, base.saturating_add(child.address), size));
                    }
                }
            }
        }
        RootBlock::Empty => {}
    }
}

fn extensible_seed(
    bytes: &[u8],
    here: &[u8],
    rel: u64,
    base: u64,
    sizes: Sizes,
    seeds: &mut Seeds,
) {
    let len = ExtensibleArrayHeader::encoded_len(sizes);
    let Ok(h) = ExtensibleArrayHeader::decode(here, sizes, rel) else {
        return;
    };
    if h.index_block_address == UNDEFINED_ADDRESS {
        return;
    }
    let header = slice(here, 0, len as u64);
    let add = |seeds: &mut Seeds, kind: u8, n: u32, block: &[u8]| {
        let mut seed = header_seed(sizes_byte(sizes), rel, header);
        seed.push(kind);
        seed.extend_from_slice(&n.to_le_bytes());
        seed.extend_from_slice(block);
        seeds.add("extensible_array", seed);
    };
    let index = slice(
        bytes,
        base.saturating_add(h.index_block_address),
        h.index_block_len(sizes),
    );
    add(seeds, 0, 0, index);
    let Ok(ib) = ExtensibleArrayIndexBlock::decode(index, &h, sizes, h.index_block_address) else {
        return;
    };
    for &a in ib.data_block_addresses.iter().take(2) {
        if a == UNDEFINED_ADDRESS {
            continue;
        }
        let min = u32::from(h.data_block_min_elements);
        for n in [min, 2 * min, 4 * min] {
            let block = slice(
                bytes,
                base.saturating_add(a),
                h.data_block_len(sizes, n.into()),
            );
            if ExtensibleArrayDataBlock::decode(block, &h, sizes, n.into(), a).is_ok() {
                add(seeds, 2, n, block);
                break;
            }
        }
    }
    for (i, &a) in ib.super_block_addresses.iter().enumerate().take(2) {
        if a == UNDEFINED_ADDRESS {
            continue;
        }
        let index = h.index_block_super_blocks + i;
        let block = slice(
            bytes,
            base.saturating_add(a),
            h.super_block_len(sizes, index),
        );
        add(seeds, 1, index as u32, block);
    }
}

/// Relative addresses of every object reachable from the root group.
fn objects(bytes: &[u8]) -> Vec<u64> {
    let storage = Arc::new(MemoryStorage::with_data(bytes.to_vec()));
    let access = FileAccess::default().ignore_open_for_writing(true);
    let Ok(file) = File::from_storage(storage, &access, None) else {
        return Vec::new();
    };
    let mut seen = HashSet::new();
    if let Ok(root) = file.root() {
        objects_in(&root, &mut seen);
    }
    let mut v: Vec<u64> = seen.into_iter().collect();
    v.sort_unstable();
    v
}

fn objects_in(g: &Group, seen: &mut HashSet<u64>) {
    if !seen.insert(g.address()) {
        return;
    }
    for link in g.links().unwrap_or_default() {
        if link.kind != LinkKind::Hard {
            continue;
        }
        match g.kind_of(&link.name) {
            Ok(ObjectKind::Group) => {
                if let Ok(sub) = g.group(&link.name) {
                    objects_in(&sub, seen);
                }
            }
            Ok(ObjectKind::Dataset) => {
                if let Ok(d) = g.dataset(&link.name) {
                    seen.insert(d.address());
                }
            }
            Ok(ObjectKind::Datatype) => {
                if let Ok(t) = g.named_datatype(&link.name) {
                    seen.insert(t.address());
                }
            }
            _ => {}
        }
    }
}

/// The stored chunks of every filtered dataset, with their pipelines.
fn filter_seeds(bytes: &[u8], seeds: &mut Seeds) {
    let storage = Arc::new(MemoryStorage::with_data(bytes.to_vec()));
    let access = FileAccess::default().ignore_open_for_writing(true);
    let Ok(file) = File::from_storage(storage, &access, None) else {
        return;
    };
    let Ok(root) = file.root() else {
        return;
    };
    let Ok(entries) = root.walk() else {
        return;
    };
    for e in entries {
        let Ok(d) = file.dataset(&e.path) else {
            continue;
        };
        let filters = d.filters();
        let Some(chunk) = d.chunk() else {
            continue;
        };
        if filters.is_empty() {
            continue;
        }
        let chunk_elems = chunk.iter().product::<usize>() as u32;
        let Ok(chunks) = d.iter_chunks() else {
            continue;
        };
        for c in chunks.take(2) {
            let mut seed = vec![filters.len().min(4) as u8];
            for f in filters.iter().take(4) {
                seed.extend_from_slice(&crate::filters::encode_id(f.id).to_le_bytes());
                seed.push(u8::from(f.optional));
                let cd = &f.params[..f.params.len().min(20)];
                seed.push(cd.len() as u8);
                for v in cd {
                    seed.extend_from_slice(&v.to_le_bytes());
                }
            }
            seed.extend_from_slice(&(d.element_size().min(65535) as u16).to_le_bytes());
            seed.extend_from_slice(&chunk_elems.to_le_bytes());
            seed.extend_from_slice(&c.filter_mask.to_le_bytes());
            seed.extend_from_slice(slice(bytes, c.address, c.size));
            seeds.add("filters", seed);
        }
    }
}
