//! The driver info message (type 0x0014, in the superblock extension): version(1) = 0, driver
//! identification(8), driver information size(2), driver information (kept raw).

use crate::error::Result;
use crate::reader::Reader;

/// File driver information.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct DriverInfo {
    /// The 8-byte driver identification (e.g. `NCSAmult`, `NCSAfami`).
    pub driver_id: [u8; 8],
    /// The driver-specific information, undecoded.
    pub info: Vec<u8>,
}

impl DriverInfo {
    /// Decodes the message body.
    pub fn decode(r: &mut Reader<'_>) -> Result<DriverInfo> {
        super::version(r, &[0])?;
        let mut driver_id = [0u8; 8];
        driver_id.copy_from_slice(r.bytes(8)?);
        let size = usize::from(r.u16()?);
        Ok(DriverInfo {
            driver_id,
            info: r.bytes(size)?.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes() {
        let mut b = vec![0];
        b.extend_from_slice(b"NCSAfami");
        b.extend_from_slice(&8u16.to_le_bytes());
        b.extend_from_slice(&(1u64 << 20).to_le_bytes());
        let d = DriverInfo::decode(&mut Reader::new(&b, "t", 0)).unwrap();
        assert_eq!(&d.driver_id, b"NCSAfami");
        assert_eq!(d.info, (1u64 << 20).to_le_bytes());
        for n in 0..b.len() {
            assert!(DriverInfo::decode(&mut Reader::new(&b[..n], "t", 0)).is_err());
        }
    }
}
