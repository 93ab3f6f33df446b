//! Targets of the `h5-format` decoders, one per on-disk structure. Each reads its input as
//! described on the function (parameters first, then the structure's bytes) and runs every
//! decoder that applies; a returned error is fine, a panic, an abort or a hang is a finding.
//!
//! The input layouts are what `seeds.rs` writes from the fixture files: keep them in step.

use h5_format::btree1::BtreeV1Node;
use h5_format::btree2::{Btree2Header, Btree2Node, RecordContext};
use h5_format::datatype::Datatype;
use h5_format::extensible_array::{
    ExtensibleArrayDataBlock, ExtensibleArrayHeader, ExtensibleArrayIndexBlock,
    ExtensibleArraySuperBlock,
};
use h5_format::fixed_array::{FixedArrayDataBlock, FixedArrayHeader};
use h5_format::free_space::{FreeSpaceClient, FreeSpaceHeader, FreeSpaceSections, SectionFormat};
use h5_format::heap::fractal::{
    FractalDirectBlock, FractalHeapHeader, FractalIndirectBlock, HeapId,
};
use h5_format::heap::global::GlobalHeapCollection;
use h5_format::heap::local::{LocalHeapHeader, free_blocks, name_at};
use h5_format::message::{Message, decode_message};
use h5_format::object_header::{decode_continuation_block, decode_first_chunk, needed_len};
use h5_format::sohm::SohmTable;
use h5_format::superblock::{self, DriverInfoBlock, Superblock};
use h5_format::symbol_node::SymbolTableNode;
use h5_format::vds::VirtualMappings;
use h5_format::{Reader, Sizes};

use crate::input::Input;

/// The file address structures are decoded at (any value: it only names them in errors).
const AT: u64 = 0x800;

/// `superblock`: the bytes of a superblock (any version), or of a driver info block.
pub fn superblock(data: &[u8]) {
    let _ = superblock::needed_len(data, AT);
    if let Ok(sb) = Superblock::decode(data, AT) {
        let _ = sb.root_object_header_address();
        let _ = sb.encode();
    }
    let _ = DriverInfoBlock::needed_len(data, AT);
    if let Ok(d) = DriverInfoBlock::decode(data, AT) {
        let _ = d.family_member_size();
        let _ = d.is_multi();
    }
}

/// `object_header`: a sizes byte, a mode byte, then the bytes of an object header (version 1
/// prefix or `OHDR`) from its first byte. Mode bit 0 set: a `u16`-length first chunk followed
/// by a continuation block (`OCHK` for version 2) decoded with its prefix. Every message found
/// is decoded too.
pub fn object_header(data: &[u8]) {
    let mut input = Input::new(data);
    let sizes = input.sizes();
    let mode = input.u8();
    let (first, block) = if mode & 1 == 1 {
        let first = input.slice16();
        (first, Some(input.rest()))
    } else {
        (input.rest(), None)
    };
    let _ = needed_len(first, AT);
    let Ok(chunk) = decode_first_chunk(first, AT) else {
        return;
    };
    let _ = chunk.prefix.first_chunk_len();
    for m in &chunk.messages {
        message_of(m.kind, m.flags, m.body, sizes);
    }
    if let Some(block) = block
        && let Ok(messages) = decode_continuation_block(block, &chunk.prefix, AT)
    {
        for m in &messages {
            message_of(m.kind, m.flags, m.body, sizes);
        }
    }
}

/// `message`: a sizes byte, the message type (`u16`), its flags byte, then its body.
pub fn message(data: &[u8]) {
    let mut input = Input::new(data);
    let sizes = input.sizes();
    let kind = input.u16();
    let flags = input.u8();
    message_of(kind, flags, input.rest(), sizes);
}

/// Decodes one message and what its value offers on top (descriptions, encodings).
fn message_of(kind: u16, flags: u8, body: &[u8], sizes: Sizes) {
    let Ok(m) = decode_message(kind, flags, body, sizes, AT) else {
        return;
    };
    let _ = h5_format::message::encode_message(&m, sizes);
    match &m {
        Message::Datatype(t) => datatype_of(t),
        Message::Attribute(a) => {
            if let h5_format::message::attribute::MaybeShared::Inline(t) = &a.datatype {
                datatype_of(t);
            }
        }
        _ => {}
    }
}

/// Everything a caller asks of a decoded datatype.
fn datatype_of(t: &Datatype) {
    let _ = t.describe();
    let _ = t.size();
    let _ = t.has_indirection();
}

/// `datatype`: the body of a datatype message.
pub fn datatype(data: &[u8]) {
    let mut r = Reader::new(data, "datatype message", AT);
    if let Ok(t) = Datatype::decode(&mut r) {
        datatype_of(&t);
    }
}

/// `btree1`: a sizes byte, a rank byte (0: a group node, `n`: a chunk node of rank `n - 1`),
/// then the node (`TREE`).
pub fn btree1(data: &[u8]) {
    let mut input = Input::new(data);
    let sizes = input.sizes();
    let rank = input.u8();
    let rank = (rank != 0).then_some(usize::from(rank));
    let _ = BtreeV1Node::decode(input.rest(), sizes, AT, rank);
}

/// `btree2`: a sizes byte, the header (`BTHD`, `u16` length first), the node's depth (`u16`),
/// its record count (`u16`), the chunk rank and chunk size width bytes of its record context,
/// then the node (`BTIN` or `BTLF`).
pub fn btree2(data: &[u8]) {
    let mut input = Input::new(data);
    let sizes = input.sizes();
    let header = input.slice16();
    let depth = input.u16();
    let records = input.u16();
    let rank = input.u8();
    let chunk_size_len = input.u8();
    let Ok(h) = Btree2Header::decode(header, sizes, AT) else {
        return;
    };
    let ctx = RecordContext {
        rank: usize::from(rank % 34),
        chunk_size_len: usize::from(chunk_size_len % 9),
        ..RecordContext::new(sizes)
    };
    let _ = Btree2Node::decode(input.rest(), &h, depth, u64::from(records), &ctx, AT);
}

/// `local_heap`: a sizes byte, the header (`HEAP`, `u16` length first), then its data segment;
/// names are looked up at the offsets of the data segment's first bytes too.
pub fn local_heap(data: &[u8]) {
    let mut input = Input::new(data);
    let sizes = input.sizes();
    let header = input.slice16();
    let segment = input.rest();
    if let Ok(h) = LocalHeapHeader::decode(header, sizes, AT) {
        let _ = h.contiguous_segment(sizes, AT);
        let _ = h.name_at(segment, 0);
        let _ = free_blocks(segment, sizes, h.free_list_head);
    }
    for &offset in segment.iter().take(8) {
        let _ = name_at(segment, u64::from(offset));
    }
}

/// `global_heap`: a sizes byte, then a global heap collection (`GCOL`); its objects are decoded
/// as virtual dataset mappings too.
pub fn global_heap(data: &[u8]) {
    let mut input = Input::new(data);
    let sizes = input.sizes();
    let bytes = input.rest();
    let _ = GlobalHeapCollection::needed_len(bytes, sizes, AT);
    if let Ok(c) = GlobalHeapCollection::decode(bytes, sizes, AT) {
        for o in c.objects.iter().take(4) {
            let _ = c.get(u32::from(o.index));
            let _ = VirtualMappings::decode(&o.data, sizes, AT);
        }
    }
}

/// `virtual_mappings`: a sizes byte, then the global heap object of a virtual dataset's
/// mappings.
pub fn virtual_mappings(data: &[u8]) {
    let mut input = Input::new(data);
    let sizes = input.sizes();
    if let Ok(m) = VirtualMappings::decode(input.rest(), sizes, AT) {
        for e in &m.entries {
            let _ = e.source_selection.rank();
            let _ = e.source_selection.boxes();
            let _ = e.virtual_selection.is_unlimited();
        }
    }
}

/// `fractal_heap`: a sizes byte, the header's address (`u64`: blocks name it), the header (`FRHP`, `u16` length first), a block kind byte
/// (even: a direct block the size of the rest; odd: an indirect block), the indirect block's
/// rows (`u16`), a heap ID (`u16` length first), then the block.
pub fn fractal_heap(data: &[u8]) {
    let mut input = Input::new(data);
    let sizes = input.sizes();
    let at = input.u64();
    let header = input.slice16();
    let kind = input.u8();
    let rows = input.u16();
    let id = input.slice16();
    let block = input.rest();
    let _ = FractalHeapHeader::total_len(header, sizes, at);
    let Ok(h) = FractalHeapHeader::decode(header, sizes, at) else {
        return;
    };
    let _ = h.root();
    let _ = h.indirect_block_len(rows);
    let _ = h.table.locate(0, h.root_rows, u64::from(rows) << 8);
    if let Ok(id) = HeapId::decode(id, &h) {
        let _ = format!("{id:?}");
    }
    if kind & 1 == 0 {
        let _ = FractalDirectBlock::decode(block, &h, AT, block.len() as u64);
    } else {
        let _ = FractalIndirectBlock::decode(block, &h, AT, rows);
    }
}

/// `fixed_array`: a sizes byte, the header's address (`u64`), the header (`FAHD`, `u16` length first), a page number
/// (`u32`), then the data block (`FADB`), also decoded as that page.
pub fn fixed_array(data: &[u8]) {
    let mut input = Input::new(data);
    let sizes = input.sizes();
    let at = input.u64();
    let header = input.slice16();
    let page = input.u32();
    let block = input.rest();
    let Ok(h) = FixedArrayHeader::decode(header, sizes, at) else {
        return;
    };
    let _ = h.page_count();
    let _ = h.bitmap_len();
    let _ = h.data_block_len(sizes);
    let _ = h.page_len_elements(u64::from(page));
    let _ = h.locate(sizes, u64::from(page));
    if let Ok(b) = FixedArrayDataBlock::decode(block, &h, sizes, AT) {
        let _ = b.page_initialized(u64::from(page));
    }
    let _ = h5_format::fixed_array::decode_page(
        block,
        &h.format,
        sizes,
        h.page_len_elements(u64::from(page)),
        AT,
    );
}

/// `extensible_array`: a sizes byte, the header's address (`u64`), the header (`EAHD`, `u16` length first), a block kind byte
/// (0: index block, 1: super block, 2: data block, 3: page), an index or element count
/// (`u32`), then the block.
pub fn extensible_array(data: &[u8]) {
    let mut input = Input::new(data);
    let sizes = input.sizes();
    let at = input.u64();
    let header = input.slice16();
    let kind = input.u8();
    let n = input.u32();
    let block = input.rest();
    let Ok(h) = ExtensibleArrayHeader::decode(header, sizes, at) else {
        return;
    };
    let _ = h.params();
    let _ = h.index_block_len(sizes);
    let _ = h.locate(u64::from(n));
    let _ = h.super_block_of(u64::from(n));
    let _ = h.data_block_len(sizes, u64::from(n));
    let _ = h.pages_per_data_block(u64::from(n));
    match kind % 4 {
        0 => {
            let _ = ExtensibleArrayIndexBlock::decode(block, &h, sizes, AT);
        }
        1 => {
            let index = n as usize;
            let _ = h.super_block_len(sizes, index);
            let _ = ExtensibleArraySuperBlock::decode(block, &h, sizes, index, AT);
        }
        2 => {
            let _ = ExtensibleArrayDataBlock::decode(block, &h, sizes, u64::from(n), AT);
        }
        _ => {
            let _ = h5_format::extensible_array::decode_page(block, &h, sizes, AT);
        }
    }
}

/// `free_space`: a sizes byte, the header's address (`u64`), the header (`FSHD`, `u16` length first), the heap offset width of
/// fractal heap sections (a byte), then the section list (`FSSE`).
pub fn free_space(data: &[u8]) {
    let mut input = Input::new(data);
    let sizes = input.sizes();
    let at = input.u64();
    let header = input.slice16();
    let heap_offset_len = input.u8();
    let sections = input.rest();
    let Ok(h) = FreeSpaceHeader::decode(header, sizes, at) else {
        return;
    };
    let format = match h.client {
        FreeSpaceClient::File => SectionFormat::File,
        FreeSpaceClient::FractalHeap => SectionFormat::FractalHeap {
            heap_offset_len: heap_offset_len % 9,
        },
    };
    if let Ok(s) = FreeSpaceSections::decode(sections, &h, sizes, AT, format) {
        let _ = s.iter().count();
    }
}

/// `symbol_node`: a sizes byte, then a symbol table node (`SNOD`).
pub fn symbol_node(data: &[u8]) {
    let mut input = Input::new(data);
    let sizes = input.sizes();
    let _ = SymbolTableNode::decode(input.rest(), sizes, AT);
}

/// `sohm_table`: a sizes byte, the number of indexes (a byte), then the shared message table
/// (`SMTB`).
pub fn sohm_table(data: &[u8]) {
    let mut input = Input::new(data);
    let sizes = input.sizes();
    let n = input.u8();
    let _ = SohmTable::decode(input.rest(), sizes, AT, usize::from(n));
}
