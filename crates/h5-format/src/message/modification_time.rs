//! The modification time messages.
//!
//! * New (type 0x0012): version(1) = 1, reserved(3), seconds since the Unix epoch(4).
//! * Old (type 0x000E): ASCII digits, year(4) month(2) day(2) hour(2) minute(2) second(2),
//!   reserved(2), in UTC.

use crate::error::FormatError;
use crate::error::Result;
use crate::reader::{Reader, UNDEFINED_ADDRESS};
use crate::writer::Writer;

/// The modification time (type 0x0012).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ModificationTime {
    /// Seconds since 1970-01-01T00:00:00Z.
    pub seconds: u32,
}

impl ModificationTime {
    /// Decodes the message body.
    pub fn decode(r: &mut Reader<'_>) -> Result<ModificationTime> {
        super::version(r, &[1])?;
        r.skip(3)?;
        Ok(ModificationTime { seconds: r.u32()? })
    }

    /// Bytes of the encoded body.
    pub const ENCODED_LEN: usize = 8;

    /// Encodes the message body: version 1, 3 zero bytes, the seconds.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(Self::ENCODED_LEN);
        w.u8(1);
        w.zeros(3);
        w.u32(self.seconds);
        w.into_bytes()
    }
}

/// The old modification time (type 0x000E), a UTC calendar time.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ModificationTimeOld {
    /// Year (e.g. 1998).
    pub year: u16,
    /// Month 1..=12.
    pub month: u8,
    /// Day of the month 1..=31.
    pub day: u8,
    /// Hour 0..=23.
    pub hour: u8,
    /// Minute 0..=59.
    pub minute: u8,
    /// Second 0..=59 (60 for a leap second).
    pub second: u8,
}

/// Parses `n` ASCII decimal digits.
fn digits(r: &mut Reader<'_>, n: usize) -> Result<u16> {
    let b = r.bytes(n)?;
    b.iter().try_fold(0u16, |acc, &c| {
        if c.is_ascii_digit() {
            // At most 4 digits: below 10000.
            Ok(acc
                .saturating_mul(10)
                .saturating_add(u16::from(c.saturating_sub(b'0'))))
        } else {
            Err(r.corrupted("non-digit in the old modification time"))
        }
    })
}

impl ModificationTimeOld {
    /// Decodes the message body.
    pub fn decode(r: &mut Reader<'_>) -> Result<ModificationTimeOld> {
        let year = digits(r, 4)?;
        // Two digits never exceed 99, so the narrowing casts are exact.
        let mut two = || digits(r, 2).map(|v| v as u8);
        let t = ModificationTimeOld {
            year,
            month: two()?,
            day: two()?,
            hour: two()?,
            minute: two()?,
            second: two()?,
        };
        r.skip(2)?;
        if !(1..=12).contains(&t.month)
            || !(1..=31).contains(&t.day)
            || t.hour > 23
            || t.minute > 59
            || t.second > 60
        {
            return Err(r.corrupted("old modification time out of range"));
        }
        Ok(t)
    }

    /// Bytes of the encoded body.
    pub const ENCODED_LEN: usize = 16;

    /// Encodes the message body: the fields as zero-padded ASCII digits and 2 zero bytes.
    /// Errors (`Unsupported`) on a year above 9999 or a field the decoder rejects.
    pub fn encode(&self) -> Result<Vec<u8>> {
        if self.year > 9999
            || !(1..=12).contains(&self.month)
            || !(1..=31).contains(&self.day)
            || self.hour > 23
            || self.minute > 59
            || self.second > 60
        {
            return Err(FormatError::Unsupported {
                structure: "old modification time message",
                address: UNDEFINED_ADDRESS,
                what: format!("time {self:?} out of range"),
            });
        }
        let text = format!(
            "{:04}{:02}{:02}{:02}{:02}{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        );
        let mut w = Writer::with_capacity(Self::ENCODED_LEN);
        w.bytes(text.as_bytes());
        w.zeros(2);
        Ok(w.into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_time() {
        let b = [1, 0, 0, 0, 0x10, 0x20, 0x30, 0x40];
        let t = ModificationTime::decode(&mut Reader::new(&b, "t", 0)).unwrap();
        assert_eq!(t.seconds, 0x4030_2010);
        for n in 0..b.len() {
            assert!(ModificationTime::decode(&mut Reader::new(&b[..n], "t", 0)).is_err());
        }
        assert!(ModificationTime::decode(&mut Reader::new(&[0; 8], "t", 0)).is_err());
    }

    #[test]
    fn old_time() {
        let b = b"19980715123059\0\0";
        let t = ModificationTimeOld::decode(&mut Reader::new(b, "t", 0)).unwrap();
        assert_eq!(
            t,
            ModificationTimeOld {
                year: 1998,
                month: 7,
                day: 15,
                hour: 12,
                minute: 30,
                second: 59
            }
        );
        for n in 0..b.len() {
            assert!(ModificationTimeOld::decode(&mut Reader::new(&b[..n], "t", 0)).is_err());
        }
        assert!(
            ModificationTimeOld::decode(&mut Reader::new(b"1998x715123059\0\0", "t", 0)).is_err()
        );
        assert!(
            ModificationTimeOld::decode(&mut Reader::new(b"19981315123059\0\0", "t", 0)).is_err()
        );
    }

    #[test]
    fn encodes_byte_exact_and_round_trips() {
        let b = [1, 0, 0, 0, 0x10, 0x20, 0x30, 0x40];
        let t = ModificationTime::decode(&mut Reader::new(&b, "t", 0)).unwrap();
        assert_eq!(t.encode(), b);
        let b = b"19980715123059\0\0";
        let t = ModificationTimeOld::decode(&mut Reader::new(b, "t", 0)).unwrap();
        assert_eq!(t.encode().unwrap(), b);
        let t = ModificationTimeOld {
            year: 7,
            month: 1,
            day: 2,
            hour: 0,
            minute: 5,
            second: 60,
        };
        let b = t.encode().unwrap();
        assert_eq!(&b, b"00070102000560\0\0");
        assert_eq!(
            ModificationTimeOld::decode(&mut Reader::new(&b, "t", 0)).unwrap(),
            t
        );
        for bad in [
            ModificationTimeOld { year: 10_000, ..t },
            ModificationTimeOld { month: 0, ..t },
            ModificationTimeOld { day: 32, ..t },
            ModificationTimeOld { hour: 24, ..t },
            ModificationTimeOld { minute: 60, ..t },
            ModificationTimeOld { second: 61, ..t },
        ] {
            assert!(bad.encode().is_err());
        }
    }
}
