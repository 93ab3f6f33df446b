//! Structured inputs: a fuzzer's bytes read as parameters and slices. Reads past the end give
//! zeros and empty slices, so every input is valid and the fuzzer never wastes executions on
//! framing errors.

use h5_format::Sizes;

/// A cursor over a fuzzer's input.
#[derive(Clone, Debug)]
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Input<'a> {
        Input { data }
    }

    /// Up to `n` bytes (fewer at the end).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let (head, tail) = self.data.split_at(n.min(self.data.len()));
        self.data = tail;
        head
    }

    /// One byte (0 at the end).
    pub fn u8(&mut self) -> u8 {
        self.bytes(1).first().copied().unwrap_or(0)
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self) -> u16 {
        let b = self.bytes(2);
        b.iter()
            .rev()
            .fold(0u16, |acc, &x| (acc << 8) | u16::from(x))
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self) -> u32 {
        let b = self.bytes(4);
        b.iter()
            .rev()
            .fold(0u32, |acc, &x| (acc << 8) | u32::from(x))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> u64 {
        let b = self.bytes(8);
        b.iter()
            .rev()
            .fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
    }

    /// A slice whose length is a little-endian `u16` before it.
    pub fn slice16(&mut self) -> &'a [u8] {
        let n = self.u16();
        self.bytes(usize::from(n))
    }

    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        self.bytes(self.data.len())
    }

    /// The sizes of offsets and lengths, from one byte (see [`sizes_byte`]).
    pub fn sizes(&mut self) -> Sizes {
        let b = self.u8();
        let pick = |i: u8| [8u8, 4, 2, 8][usize::from(i & 3)];
        Sizes {
            offset: pick(b),
            length: pick(b >> 2),
        }
    }
}

/// The byte [`Input::sizes`] reads as `sizes` (for the seed extractor).
pub fn sizes_byte(sizes: Sizes) -> u8 {
    let code = |n: u8| match n {
        4 => 1,
        2 => 2,
        _ => 0,
    };
    code(sizes.offset) | (code(sizes.length) << 2)
}

/// Appends a slice with its `u16` length (at most 65535 bytes of it).
pub fn push_slice16(out: &mut Vec<u8>, s: &[u8]) {
    let s = &s[..s.len().min(usize::from(u16::MAX))];
    out.extend_from_slice(&(s.len() as u16).to_le_bytes());
    out.extend_from_slice(s);
}
