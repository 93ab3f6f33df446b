//! The target of the filter pipeline: every filter's decoder, alone or chained as a dataset's
//! pipeline message chains them.

use h5_filters::{FilterId, FilterSpec, Pipeline};

use crate::input::Input;

/// The most filters of one pipeline read from an input.
const MAX_FILTERS: u8 = 4;

/// The most client data values of one filter read from an input.
const MAX_CLIENT_DATA: u8 = 20;

/// The largest decoded chunk an input may ask for (elements × element size): a chunk of the
/// format can be 4 GiB, which a fuzzer's memory limit would turn into false findings; the
/// decoders' logic is the same at this size.
pub const MAX_CHUNK_BYTES: u64 = 1 << 26;

/// Filters the target can pick by index (the rest by their raw ID).
const KNOWN: [FilterId; 13] = [
    FilterId::DEFLATE,
    FilterId::SHUFFLE,
    FilterId::FLETCHER32,
    FilterId::SZIP,
    FilterId::NBIT,
    FilterId::SCALEOFFSET,
    FilterId::BZIP2,
    FilterId::LZF,
    FilterId::BLOSC,
    FilterId::LZ4,
    FilterId::BITSHUFFLE,
    FilterId::ZSTD,
    FilterId::BLOSC2,
];

/// `filters`: the number of filters (a byte, at most 4), each as its ID (`u16`; values below 13
/// pick the known filters in [`KNOWN`] order, others are taken as they are), a flags byte (bit 0:
/// optional), the number of client data values (a byte, at most 20) and the values (`u32`
/// each); then the element size (`u16`), the chunk's element count (`u32`), the filter mask
/// (`u32`), and the stored chunk.
pub fn filters(data: &[u8]) {
    let mut input = Input::new(data);
    let n = input.u8() % (MAX_FILTERS + 1);
    let mut specs = Vec::new();
    for _ in 0..n {
        let raw = input.u16();
        let id = KNOWN
            .get(usize::from(raw))
            .copied()
            .unwrap_or(FilterId(raw));
        let optional = input.u8() & 1 == 1;
        let ncd = input.u8() % (MAX_CLIENT_DATA + 1);
        let client_data = (0..ncd).map(|_| input.u32()).collect();
        specs.push(FilterSpec::new(id, optional, client_data));
    }
    let elem_size = usize::from(input.u16());
    let chunk_elems = input.u32() as usize;
    let mask = input.u32();
    if (elem_size as u64).saturating_mul(chunk_elems as u64) > MAX_CHUNK_BYTES {
        return;
    }
    let pipeline = Pipeline::new(specs);
    let _ = pipeline.decode(input.rest().to_vec(), mask, elem_size, chunk_elems);
}

/// The index of `id` in the target's list of known filters, or the ID itself.
pub fn encode_id(id: u16) -> u16 {
    KNOWN
        .iter()
        .position(|k| k.0 == id)
        .map_or(id, |i| i as u16)
}
