//! The external data files message (type 0x0007): version(1) = 1, reserved(3), allocated
//! slots(2), used slots(2), local heap address(O), then for each used slot: name offset in the
//! heap(L), offset in the file(L), size(L).

use crate::error::Result;
use crate::reader::{Reader, Sizes};

/// One external file holding part of a contiguous dataset's data.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ExternalFileSlot {
    /// Offset of the file name in the local heap.
    pub name_offset: u64,
    /// Byte offset of the data in that file.
    pub file_offset: u64,
    /// Bytes of data in that file.
    pub size: u64,
}

/// The external files of a dataset, in data order.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ExternalFiles {
    /// Address of the local heap holding the file names.
    pub heap_address: u64,
    /// Slots allocated in the message (>= the used slots).
    pub allocated_slots: u16,
    /// The used slots.
    pub slots: Vec<ExternalFileSlot>,
}

impl ExternalFiles {
    /// Decodes the message body.
    pub fn decode(r: &mut Reader<'_>, sizes: Sizes) -> Result<ExternalFiles> {
        super::version(r, &[1])?;
        r.skip(3)?;
        let allocated_slots = r.u16()?;
        let used = r.u16()?;
        if used > allocated_slots {
            return Err(r.corrupted(format!("{used} used slots of {allocated_slots} allocated")));
        }
        let heap_address = r.offset(sizes)?;
        // Check the slots fit before allocating for them.
        let slot_len = u64::from(sizes.length).saturating_mul(3);
        r.check_len(u64::from(used).saturating_mul(slot_len))?;
        let mut slots = Vec::with_capacity(usize::from(used));
        for _ in 0..used {
            slots.push(ExternalFileSlot {
                name_offset: r.length(sizes)?,
                file_offset: r.length(sizes)?,
                size: r.length(sizes)?,
            });
        }
        Ok(ExternalFiles {
            heap_address,
            allocated_slots,
            slots,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes() {
        let s = Sizes::EIGHT;
        let mut b = vec![1, 0, 0, 0, 2, 0, 1, 0];
        b.extend_from_slice(&0x500u64.to_le_bytes());
        for v in [8u64, 0, 400] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let e = ExternalFiles::decode(&mut Reader::new(&b, "t", 0), s).unwrap();
        assert_eq!(e.heap_address, 0x500);
        assert_eq!(e.allocated_slots, 2);
        assert_eq!(
            e.slots,
            [ExternalFileSlot {
                name_offset: 8,
                file_offset: 0,
                size: 400
            }]
        );
        for n in 0..b.len() {
            assert!(ExternalFiles::decode(&mut Reader::new(&b[..n], "t", 0), s).is_err());
        }
        // More used than allocated; a huge used count with few bytes.
        b[6] = 3;
        assert!(ExternalFiles::decode(&mut Reader::new(&b, "t", 0), s).is_err());
        b[4..8].copy_from_slice(&[0xff, 0xff, 0xff, 0xff]);
        assert!(ExternalFiles::decode(&mut Reader::new(&b, "t", 0), s).is_err());
    }
}
