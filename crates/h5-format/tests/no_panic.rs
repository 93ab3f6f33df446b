//! Arbitrary bytes fed to every decoder of this part of the crate: errors are fine, panics are
//! not.

use h5_format::message::decode_message;
use h5_format::object_header::{
    ObjectHeaderPrefix, decode_continuation_block, decode_first_chunk, needed_len,
};
use h5_format::superblock::{self, DriverInfoBlock, Superblock};
use h5_format::{Sizes, checksum};
use proptest::prelude::*;

proptest! {
    #[test]
    fn superblock_never_panics(mut b in proptest::collection::vec(any::<u8>(), 0..128), v in 0u8..5) {
        if b.len() > 9 {
            b[..8].copy_from_slice(&superblock::SIGNATURE);
            b[8] = v;
        }
        let _ = superblock::needed_len(&b, 0);
        let _ = Superblock::decode(&b, 0);
        let _ = DriverInfoBlock::decode(&b, 0);
    }

    #[test]
    fn object_header_never_panics(mut b in proptest::collection::vec(any::<u8>(), 0..256), v2 in any::<bool>()) {
        if v2 && b.len() > 5 {
            b[..4].copy_from_slice(b"OHDR");
            b[4] = 2;
        } else if let Some(x) = b.first_mut() {
            *x = 1;
        }
        let _ = needed_len(&b, 0);
        let _ = decode_first_chunk(&b, 0);
        if let Ok(p) = ObjectHeaderPrefix::decode(&b, 0) {
            let _ = decode_continuation_block(&b, &p, 0);
            let _ = decode_continuation_block(b.get(p.prefix_len..).unwrap_or_default(), &p, 0);
        }
        let _ = checksum::lookup3(&b, 0);
        let _ = checksum::fletcher32(&b);
    }

    #[test]
    fn messages_never_panic(
        kind in 0u16..0x20,
        flags in any::<u8>(),
        b in proptest::collection::vec(any::<u8>(), 0..128),
        small in any::<bool>(),
    ) {
        let sizes = if small { Sizes { offset: 4, length: 4 } } else { Sizes::EIGHT };
        let _ = decode_message(kind, flags, &b, sizes, 0);
    }
}

proptest! {
    /// Headers built from arbitrary fields (so the checksum holds) and arbitrary section lists
    /// under them: the list decoder walks the sets whatever the widths and counts say.
    #[test]
    fn free_space_never_panics(
        fields in proptest::collection::vec(any::<u64>(), 8),
        bits in 0u16..80,
        heap in any::<bool>(),
        mut list in proptest::collection::vec(any::<u8>(), 0..160),
        small in any::<bool>(),
    ) {
        use h5_format::free_space::{
            FreeSpaceClient, FreeSpaceHeader, FreeSpaceSections, SectionFormat,
        };
        let sizes = if small { Sizes { offset: 4, length: 4 } } else { Sizes::EIGHT };
        let mut h = FreeSpaceHeader::file_manager(0x40, fields[0]);
        h.client = if heap { FreeSpaceClient::FractalHeap } else { FreeSpaceClient::File };
        h.address_bits = bits;
        h.serial_sections = fields[1] % 64;
        h.ghost_sections = fields[2] % 4;
        h.total_sections = h.serial_sections + h.ghost_sections;
        h.sections_address = fields[3];
        h.sections_len = fields[4] % 200;
        h.sections_alloc_len = h.sections_len + fields[5] % 8;
        let image = h.encode(sizes);
        let _ = FreeSpaceHeader::decode(&image, sizes, 0x40);
        let _ = FreeSpaceHeader::decode(&list, sizes, 0x40);
        if list.len() > 13 {
            list[..4].copy_from_slice(b"FSSE");
            list[4] = 0;
            list[5..9].copy_from_slice(&0x40u32.to_le_bytes());
            if !small {
                list[9..13].copy_from_slice(&[0; 4]);
            }
        }
        let format = if heap {
            SectionFormat::FractalHeap { heap_offset_len: (fields[6] % 9) as u8 }
        } else {
            SectionFormat::File
        };
        let _ = FreeSpaceSections::decode(&list, &h, sizes, 0x80, format);
    }
}
