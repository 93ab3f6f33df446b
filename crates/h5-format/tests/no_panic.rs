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
