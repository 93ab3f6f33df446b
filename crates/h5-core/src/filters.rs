//! Filters chosen for a new dataset, and the filter pipeline entries they become.
//!
//! What the pipeline message stores is not what a user asks for: when libhdf5 creates a dataset it
//! runs each filter's "set local" step, which fills in client data from the datatype, the chunk
//! shape and the fill value. [`FilterRequest::resolve`] computes those same values, so that a
//! dataset created here records the pipeline libhdf5 (for the built-in filters) or the
//! registered plugin as distributed by hdf5plugin (for lzf, blosc, bzip2, lz4, bitshuffle and
//! zstd) would record for the same request. The values were established from the plugins'
//! documented parameters and by writing the same datasets with h5py 3.12 (libhdf5 1.14.4) and
//! hdf5plugin 5.0 (`crates/h5/tests/write_filters.rs` compares the two pipelines).
//!
//! | filter | id | flags | client data recorded |
//! |---|---|---|---|
//! | deflate | 1 | optional | level |
//! | shuffle | 2 | optional | element size |
//! | fletcher32 | 3 | mandatory | none |
//! | szip | 4 | optional | options mask, pixels per block, bits per pixel, pixels per scanline |
//! | nbit | 5 | optional | count, "no packing needed", chunk elements, datatype description |
//! | scale-offset | 6 | optional | 20 values: scale type and factor, chunk elements, class, size, sign, byte order, fill value |
//! | bzip2 | 307 | optional | block size (1–9, ×100 kB) |
//! | lzf | 32000 | optional | filter version 4, LZF version 0x105, chunk bytes |
//! | blosc | 32001 | optional | 2, 2, type size, chunk bytes, level, shuffle, compressor |
//! | blosc2 | 32026 | optional | 1, 0, type size, chunk bytes, level, shuffle, compressor \[, rank, chunk dimensions when rank > 1\] |
//! | lz4 | 32004 | optional | block bytes (0 = default) |
//! | bitshuffle | 32008 | optional | 0, 4, element size, block elements, compression \[, zstd level\] |
//! | zstd | 32015 | optional | level |
//!
//! Every entry carries the filter's name, as libhdf5 stores it in version 1 pipeline messages.

use h5_format::datatype::{ByteOrder, Datatype};
use h5_format::message::filter_pipeline::Filter;

/// Why a filter failed on a chunk (re-exported from `h5-filters`).
pub use h5_filters::FilterError;

/// Flag bit 0 of a pipeline entry: the filter may be skipped when it fails on a chunk.
pub const FLAG_OPTIONAL: u16 = 1;

/// How szip preprocesses samples (`H5_SZIP_NN_OPTION_MASK` / `H5_SZIP_EC_OPTION_MASK`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SzipCoding {
    /// Nearest-neighbour prediction, then entropy coding (best for smooth data).
    NearestNeighbor,
    /// Entropy coding of the raw samples.
    Entropy,
}

/// Scale-offset parameters, as `H5Pset_scaleoffset` takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleOffset {
    /// Integers (lossless): values are stored as offsets from each chunk's minimum in `min_bits`
    /// bits; 0 lets the filter compute the bits each chunk needs.
    Integer {
        /// Bits per stored value, 0 = computed per chunk; at most the type's width.
        min_bits: u32,
    },
    /// Floating point (lossy, "D-scaling"): values are kept to `decimal_digits` digits after the
    /// decimal point, so each read value is within `0.5 × 10^-decimal_digits` of the written one
    /// (plus the rounding of the type).
    FloatDecimal {
        /// Digits kept after the decimal point.
        decimal_digits: u32,
    },
}

/// The compressor inside a Blosc container (the plugin's `compcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BloscCompressor {
    /// BloscLZ (code 0).
    BloscLz,
    /// LZ4 (code 1).
    Lz4,
    /// LZ4 high compression (code 2).
    Lz4Hc,
    /// Snappy (code 3).
    Snappy,
    /// zlib (code 4).
    Zlib,
    /// Zstandard (code 5).
    Zstd,
}

impl BloscCompressor {
    fn code(self) -> u32 {
        match self {
            Self::BloscLz => 0,
            Self::Lz4 => 1,
            Self::Lz4Hc => 2,
            Self::Snappy => 3,
            Self::Zlib => 4,
            Self::Zstd => 5,
        }
    }
}

/// The shuffle Blosc applies before compressing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BloscShuffle {
    /// No shuffle (0).
    None,
    /// Byte shuffle (1).
    Byte,
    /// Bit shuffle (2).
    Bit,
}

/// The compression the bitshuffle filter applies after shuffling bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitshuffleCompression {
    /// Bits shuffled only (code 0).
    None,
    /// LZ4 per block (code 2).
    Lz4,
    /// Zstandard per block at this level (code 3).
    Zstd(u32),
}

/// One filter asked for when creating a dataset, before its client data are known.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FilterRequest {
    /// gzip at a level 0–9.
    Deflate(u32),
    /// Byte shuffle.
    Shuffle,
    /// Fletcher-32 checksum (mandatory: never skipped).
    Fletcher32,
    /// szip with a coding and pixels per block (even, 2–32).
    Szip {
        /// Preprocessing.
        coding: SzipCoding,
        /// Pixels per block (even, 2–32).
        pixels_per_block: u32,
    },
    /// Scale-offset.
    ScaleOffset(ScaleOffset),
    /// N-bit packing of the datatype's significant bits.
    Nbit,
    /// LZF (h5py's filter).
    Lzf,
    /// LZ4 with a block size in bytes (0: the plugin's default).
    Lz4 {
        /// Block size in bytes; 0 = default.
        block_bytes: u32,
    },
    /// Zstandard at a level.
    Zstd {
        /// Compression level (the plugin's default is 3).
        level: i32,
    },
    /// bzip2 with a block size of 1–9 (×100 kB).
    Bzip2 {
        /// Block size, 1–9.
        block_size: u32,
    },
    /// Blosc 1.
    Blosc {
        /// Compressor.
        compressor: BloscCompressor,
        /// Level 0–9.
        level: u32,
        /// Shuffle.
        shuffle: BloscShuffle,
    },
    /// Blosc2 (hdf5plugin's and PyTables' filter 32026).
    Blosc2 {
        /// Compressor (Snappy is not a Blosc2 codec: refused).
        compressor: BloscCompressor,
        /// Level 0–9.
        level: u32,
        /// Shuffle.
        shuffle: BloscShuffle,
    },
    /// Bitshuffle.
    Bitshuffle {
        /// Elements per block (0: the filter's default).
        block_elems: u32,
        /// Compression after shuffling.
        compression: BitshuffleCompression,
    },
    /// An entry stored as given (no set-local step).
    Raw(Filter),
}

/// Why a filter cannot be set up for a dataset (libhdf5 refuses to create such datasets too).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FilterSetupError {
    /// The filter cannot process elements of this datatype.
    #[error("filter {filter} cannot be applied to {datatype}: {reason}")]
    Datatype {
        /// The filter.
        filter: &'static str,
        /// The datatype, described.
        datatype: String,
        /// Why.
        reason: &'static str,
    },
    /// A parameter is out of the filter's range.
    #[error("filter {filter}: {reason}")]
    Parameter {
        /// The filter.
        filter: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The chunk holds too few elements for the filter.
    #[error("filter {filter}: a chunk of {elements} elements is too small ({reason})")]
    ChunkTooSmall {
        /// The filter.
        filter: &'static str,
        /// Elements per chunk.
        elements: u64,
        /// What it needs.
        reason: &'static str,
    },
}

/// What a filter's set-local step may know of the dataset.
struct Dataset<'a> {
    datatype: &'a Datatype,
    chunk: &'a [u64],
    /// One element (the dataset's fill value, zeros when none was given).
    fill: &'a [u8],
}

impl Dataset<'_> {
    fn elem_size(&self) -> u32 {
        self.datatype.size()
    }

    /// Elements per chunk (saturating: an absurd chunk fails the conversions that follow).
    fn chunk_elems(&self) -> u64 {
        self.chunk
            .iter()
            .try_fold(1u64, |a, d| a.checked_mul(*d))
            .unwrap_or(u64::MAX)
    }

    fn chunk_bytes(&self, filter: &'static str) -> Result<u32, FilterSetupError> {
        self.chunk_elems()
            .checked_mul(u64::from(self.elem_size()))
            .and_then(|b| u32::try_from(b).ok())
            .ok_or_else(|| param(filter, "a chunk of 4 GiB or more"))
    }

    fn chunk_elems_u32(&self, filter: &'static str) -> Result<u32, FilterSetupError> {
        u32::try_from(self.chunk_elems()).map_err(|_| param(filter, "over 2^32 elements per chunk"))
    }

    fn bad_type(&self, filter: &'static str, reason: &'static str) -> FilterSetupError {
        FilterSetupError::Datatype {
            filter,
            datatype: self.datatype.describe(),
            reason,
        }
    }
}

fn param(filter: &'static str, reason: impl Into<String>) -> FilterSetupError {
    FilterSetupError::Parameter {
        filter,
        reason: reason.into(),
    }
}

fn entry(id: u16, name: &str, optional: bool, client_data: Vec<u32>) -> Filter {
    Filter {
        id,
        name: Some(name.as_bytes().to_vec()),
        flags: if optional { FLAG_OPTIONAL } else { 0 },
        client_data,
    }
}

/// Blosc's and Blosc2's client data: the plugin's two version values, the type size Blosc
/// shuffles by (an array's base element; 1 for elements larger than Blosc handles), the chunk
/// bytes, the level, the shuffle and the compressor.
fn blosc_client_data(
    ds: &Dataset<'_>,
    name: &'static str,
    versions: [u32; 2],
    compressor: BloscCompressor,
    level: u32,
    shuffle: BloscShuffle,
) -> Result<Vec<u32>, FilterSetupError> {
    if level > 9 {
        return Err(param(name, format!("level {level} (0-9)")));
    }
    let base = match ds.datatype {
        Datatype::Array(a) => a.base.size(),
        t => t.size(),
    };
    let typesize = if base > 255 { 1 } else { base };
    let shuffle = match shuffle {
        BloscShuffle::None => 0,
        BloscShuffle::Byte => 1,
        BloscShuffle::Bit => 2,
    };
    Ok(vec![
        versions[0],
        versions[1],
        typesize,
        ds.chunk_bytes(name)?,
        level,
        shuffle,
        compressor.code(),
    ])
}

/// Names the filters record (libhdf5's names for its own filters, the plugins' registered names).
mod names {
    pub(super) const DEFLATE: &str = "deflate";
    pub(super) const SHUFFLE: &str = "shuffle";
    pub(super) const FLETCHER32: &str = "fletcher32";
    pub(super) const SZIP: &str = "szip";
    pub(super) const NBIT: &str = "nbit";
    pub(super) const SCALEOFFSET: &str = "scaleoffset";
    pub(super) const BZIP2: &str = "bzip2";
    pub(super) const LZF: &str = "lzf";
    pub(super) const BLOSC: &str = "blosc";
    pub(super) const BLOSC2: &str = "blosc2";
    pub(super) const LZ4: &str =
        "HDF5 lz4 filter; see http://www.hdfgroup.org/services/contributions.html";
    pub(super) const BITSHUFFLE: &str = "bitshuffle; see https://github.com/kiyo-masui/bitshuffle";
    pub(super) const ZSTD: &str = "Zstandard compression: http://www.zstd.net";
}

impl FilterRequest {
    /// The pipeline entry this request becomes for a dataset of `datatype` stored in chunks of
    /// `chunk` elements whose fill value is `fill` (one element; zeros when none was set).
    pub fn resolve(
        &self,
        datatype: &Datatype,
        chunk: &[u64],
        fill: &[u8],
    ) -> Result<Filter, FilterSetupError> {
        let ds = Dataset {
            datatype,
            chunk,
            fill,
        };
        Ok(match self {
            Self::Deflate(level) => {
                if *level > 9 {
                    return Err(param(names::DEFLATE, format!("level {level} (0-9)")));
                }
                entry(1, names::DEFLATE, true, vec![*level])
            }
            Self::Shuffle => entry(2, names::SHUFFLE, true, vec![ds.elem_size()]),
            Self::Fletcher32 => entry(3, names::FLETCHER32, false, Vec::new()),
            Self::Szip {
                coding,
                pixels_per_block,
            } => entry(4, names::SZIP, true, szip(&ds, *coding, *pixels_per_block)?),
            Self::Nbit => entry(5, names::NBIT, true, nbit(&ds)?),
            Self::ScaleOffset(so) => entry(6, names::SCALEOFFSET, true, scale_offset(&ds, *so)?),
            Self::Bzip2 { block_size } => {
                if !(1..=9).contains(block_size) {
                    return Err(param(
                        names::BZIP2,
                        format!("block size {block_size} (1-9)"),
                    ));
                }
                entry(307, names::BZIP2, true, vec![*block_size])
            }
            Self::Lzf => entry(
                32000,
                names::LZF,
                true,
                vec![4, 0x0105, ds.chunk_bytes(names::LZF)?],
            ),
            Self::Blosc {
                compressor,
                level,
                shuffle,
            } => entry(
                32001,
                names::BLOSC,
                true,
                blosc_client_data(&ds, names::BLOSC, [2, 2], *compressor, *level, *shuffle)?,
            ),
            Self::Blosc2 {
                compressor,
                level,
                shuffle,
            } => {
                if *compressor == BloscCompressor::Snappy {
                    return Err(param(
                        names::BLOSC2,
                        "the Snappy compressor (not in Blosc2)",
                    ));
                }
                let mut cd =
                    blosc_client_data(&ds, names::BLOSC2, [1, 0], *compressor, *level, *shuffle)?;
                // The plugin's set-local step records the chunk shape of datasets of rank > 1.
                if chunk.len() > 1 {
                    cd.push(chunk.len() as u32);
                    for &c in chunk {
                        cd.push(
                            u32::try_from(c).map_err(|_| {
                                param(names::BLOSC2, format!("chunk dimension {c}"))
                            })?,
                        );
                    }
                }
                entry(32026, names::BLOSC2, true, cd)
            }
            Self::Lz4 { block_bytes } => entry(32004, names::LZ4, true, vec![*block_bytes]),
            Self::Bitshuffle {
                block_elems,
                compression,
            } => {
                if !block_elems.is_multiple_of(8) {
                    return Err(param(
                        names::BITSHUFFLE,
                        format!("block of {block_elems} elements (a multiple of 8)"),
                    ));
                }
                let mut cd = vec![0, 4, ds.elem_size(), *block_elems];
                match compression {
                    BitshuffleCompression::None => cd.push(0),
                    BitshuffleCompression::Lz4 => cd.push(2),
                    BitshuffleCompression::Zstd(level) => cd.extend([3, *level]),
                }
                entry(32008, names::BITSHUFFLE, true, cd)
            }
            // The plugin stores the level as the C `unsigned` cast of an `int` (two's complement).
            Self::Zstd { level } => entry(32015, names::ZSTD, true, vec![*level as u32]),
            Self::Raw(f) => f.clone(),
        })
    }
}

/// Options mask bits of szip (szlib's `SZ_*_OPTION_MASK`).
mod szip_mask {
    pub(super) const ALLOW_K13: u32 = 1;
    pub(super) const EC: u32 = 4;
    pub(super) const LSB: u32 = 8;
    pub(super) const MSB: u32 = 16;
    pub(super) const NN: u32 = 32;
    pub(super) const RAW: u32 = 128;
}

/// Most blocks per scanline szlib codes.
const SZIP_MAX_BLOCKS_PER_SCANLINE: u64 = 128;
/// Most pixels per scanline szlib codes.
const SZIP_MAX_PIXELS_PER_SCANLINE: u64 = 4096;

fn szip(ds: &Dataset<'_>, coding: SzipCoding, ppb: u32) -> Result<Vec<u32>, FilterSetupError> {
    let f = names::SZIP;
    if ppb == 0 || !ppb.is_multiple_of(2) || ppb > 32 {
        return Err(param(f, format!("{ppb} pixels per block (even, 2-32)")));
    }
    let (order, precision) = match ds.datatype {
        Datatype::FixedPoint(t) => (t.order, u32::from(t.precision)),
        Datatype::Float(t) => (t.order, u32::from(t.precision)),
        Datatype::Bitfield(t) => (t.order, u32::from(t.precision)),
        Datatype::Enum(e) => match e.base.as_ref() {
            Datatype::FixedPoint(t) => (t.order, u32::from(t.precision)),
            _ => return Err(ds.bad_type(f, "not a number")),
        },
        _ => return Err(ds.bad_type(f, "not an atomic number type")),
    };
    let bits = ds.elem_size().saturating_mul(8);
    if bits > 32 && bits != 64 {
        return Err(ds.bad_type(f, "invalid datatype size"));
    }
    let order_bit = match order {
        ByteOrder::LittleEndian => szip_mask::LSB,
        ByteOrder::BigEndian => szip_mask::MSB,
        ByteOrder::Vax => return Err(ds.bad_type(f, "VAX byte order")),
    };
    let bpp = match precision {
        p if p > 32 => 64,
        p if p > 24 => 32,
        p => p,
    };
    let ppb64 = u64::from(ppb);
    let fastest = ds.chunk.last().copied().unwrap_or(1);
    let scanline = if fastest < ppb64 {
        let n = ds.chunk_elems();
        if n < ppb64 {
            return Err(FilterSetupError::ChunkTooSmall {
                filter: f,
                elements: n,
                reason: "fewer elements than pixels per block",
            });
        }
        n.min(ppb64 * SZIP_MAX_BLOCKS_PER_SCANLINE)
    } else if fastest <= SZIP_MAX_PIXELS_PER_SCANLINE {
        fastest.min(ppb64 * SZIP_MAX_BLOCKS_PER_SCANLINE)
    } else {
        ppb64 * SZIP_MAX_BLOCKS_PER_SCANLINE
    };
    let mode = match coding {
        SzipCoding::NearestNeighbor => szip_mask::NN,
        SzipCoding::Entropy => szip_mask::EC,
    };
    let mask = mode | szip_mask::ALLOW_K13 | szip_mask::RAW | order_bit;
    // `scanline` is at most 4096 here.
    Ok(vec![mask, ppb, bpp, scanline as u32])
}

/// The most client data values the n-bit filter records.
const NBIT_MAX_PARAMS: usize = 4096;

fn nbit(ds: &Dataset<'_>) -> Result<Vec<u32>, FilterSetupError> {
    let f = names::NBIT;
    let mut cd = vec![0, 1, ds.chunk_elems_u32(f)?];
    let mut full = true;
    match ds.datatype {
        Datatype::FixedPoint(_)
        | Datatype::Float(_)
        | Datatype::Array(_)
        | Datatype::Compound(_) => {
            nbit_describe(ds, ds.datatype, &mut cd, &mut full)?;
        }
        Datatype::VarLen(_) => return Err(ds.bad_type(f, "variable-length data")),
        t => {
            cd.extend([4, t.size()]);
        }
    }
    if cd.len() > NBIT_MAX_PARAMS {
        return Err(ds.bad_type(f, "the type description needs too many parameters"));
    }
    let count = cd.len() as u32;
    if let [n, all_bits, ..] = cd.as_mut_slice() {
        *n = count;
        *all_bits = u32::from(full);
    }
    Ok(cd)
}

/// Appends the n-bit description of `t` (class first) to `cd`; clears `full` when an atomic part
/// has fewer significant bits than its size.
fn nbit_describe(
    ds: &Dataset<'_>,
    t: &Datatype,
    cd: &mut Vec<u32>,
    full: &mut bool,
) -> Result<(), FilterSetupError> {
    let f = names::NBIT;
    if cd.len() > NBIT_MAX_PARAMS {
        return Err(ds.bad_type(f, "the type description needs too many parameters"));
    }
    let mut atomic = |size: u32, order: ByteOrder, precision: u16, offset: u16| {
        let order = match order {
            ByteOrder::LittleEndian => 0,
            ByteOrder::BigEndian => 1,
            ByteOrder::Vax => return Err(ds.bad_type(f, "VAX byte order")),
        };
        let (p, o) = (u32::from(precision), u32::from(offset));
        if p == 0 || p.saturating_add(o) > size.saturating_mul(8) {
            return Err(ds.bad_type(f, "precision and offset exceed the size"));
        }
        if p != size.saturating_mul(8) {
            *full = false;
        }
        cd.extend([1, size, order, p, o]);
        Ok(())
    };
    match t {
        Datatype::FixedPoint(x) => atomic(x.size, x.order, x.precision, x.bit_offset),
        Datatype::Float(x) => atomic(x.size, x.order, x.precision, x.bit_offset),
        Datatype::Array(a) => {
            cd.extend([2, a.size]);
            nbit_describe(ds, &a.base, cd, full)
        }
        Datatype::Compound(c) => {
            cd.extend([3, c.size, c.members.len() as u32]);
            for m in &c.members {
                cd.push(m.offset);
                nbit_describe(ds, &m.datatype, cd, full)?;
            }
            Ok(())
        }
        Datatype::VarLen(_) => Err(ds.bad_type(f, "variable-length data")),
        other => {
            cd.extend([4, other.size()]);
            Ok(())
        }
    }
}

/// Client data values the scale-offset filter records.
const SCALEOFFSET_PARAMS: usize = 20;

fn scale_offset(ds: &Dataset<'_>, so: ScaleOffset) -> Result<Vec<u32>, FilterSetupError> {
    let f = names::SCALEOFFSET;
    let (class, size, signed, order) = match ds.datatype {
        Datatype::FixedPoint(t) => (0, t.size, t.signed, t.order),
        Datatype::Float(t) => (1, t.size, false, t.order),
        _ => {
            return Err(ds.bad_type(f, "only integer and floating-point types"));
        }
    };
    let valid = if class == 0 {
        matches!(size, 1 | 2 | 4 | 8)
    } else {
        matches!(size, 4 | 8)
    };
    if !valid {
        return Err(ds.bad_type(f, "unsupported size"));
    }
    let be = match order {
        ByteOrder::LittleEndian => false,
        ByteOrder::BigEndian => true,
        ByteOrder::Vax => return Err(ds.bad_type(f, "VAX byte order")),
    };
    let (scale_type, factor) = match (so, class) {
        (ScaleOffset::Integer { min_bits }, 0) => {
            if min_bits > size.saturating_mul(8) {
                return Err(param(
                    f,
                    format!("{min_bits} bits for a {size}-byte integer"),
                ));
            }
            (2, min_bits)
        }
        (ScaleOffset::FloatDecimal { decimal_digits }, 1) => (0, decimal_digits),
        (ScaleOffset::Integer { .. }, _) => {
            return Err(ds.bad_type(f, "integer scaling of a floating-point type"));
        }
        (ScaleOffset::FloatDecimal { .. }, _) => {
            return Err(ds.bad_type(f, "decimal scaling of an integer type"));
        }
    };
    // The fill value is always defined here (the default one is zero): flag 1, then its bytes
    // least significant first, four to a value (at most two values: size <= 8).
    let mut cd = vec![
        scale_type,
        factor,
        ds.chunk_elems_u32(f)?,
        class,
        size,
        u32::from(signed),
        u32::from(be),
        1,
    ];
    let mut fill: Vec<u8> = ds.fill.iter().copied().take(size as usize).collect();
    fill.resize(size as usize, 0);
    if be {
        fill.reverse();
    }
    for word in fill.chunks(4) {
        let mut w = [0u8; 4];
        w.iter_mut().zip(word).for_each(|(d, s)| *d = *s);
        cd.push(u32::from_le_bytes(w));
    }
    cd.resize(SCALEOFFSET_PARAMS, 0);
    Ok(cd)
}

#[cfg(test)]
mod tests {
    use super::*;
    use h5_format::datatype::{CompoundMember, CompoundType, FixedPoint, FloatType};

    fn int(size: u32, signed: bool) -> Datatype {
        Datatype::FixedPoint(FixedPoint {
            size,
            order: ByteOrder::LittleEndian,
            signed,
            lo_pad: false,
            hi_pad: false,
            bit_offset: 0,
            precision: (size * 8) as u16,
        })
    }

    fn f64_le() -> Datatype {
        Datatype::Float(FloatType {
            size: 8,
            order: ByteOrder::LittleEndian,
            lo_pad: false,
            hi_pad: false,
            internal_pad: false,
            normalization: h5_format::datatype::Normalization::Implied,
            sign_location: 63,
            bit_offset: 0,
            precision: 64,
            exponent_location: 52,
            exponent_size: 11,
            mantissa_location: 0,
            mantissa_size: 52,
            exponent_bias: 1023,
        })
    }

    fn cd(r: FilterRequest, t: &Datatype, chunk: &[u64]) -> Vec<u32> {
        let fill = vec![0; t.size() as usize];
        r.resolve(t, chunk, &fill).unwrap().client_data
    }

    /// Values libhdf5 1.14.4 recorded for the same requests (h5py's `get_filter`).
    #[test]
    fn szip_matches_libhdf5() {
        let nn = |ppb| FilterRequest::Szip {
            coding: SzipCoding::NearestNeighbor,
            pixels_per_block: ppb,
        };
        let ec = |ppb| FilterRequest::Szip {
            coding: SzipCoding::Entropy,
            pixels_per_block: ppb,
        };
        assert_eq!(cd(nn(16), &int(4, true), &[40]), [169, 16, 32, 40]);
        assert_eq!(cd(ec(8), &int(2, true), &[40, 7]), [141, 8, 16, 280]);
        assert_eq!(cd(nn(32), &f64_le(), &[40, 7]), [169, 32, 64, 280]);
        assert_eq!(cd(nn(32), &int(1, false), &[40, 7]), [169, 32, 8, 280]);
        assert_eq!(cd(nn(8), &int(4, true), &[2, 5000]), [169, 8, 32, 1024]);
        assert_eq!(cd(ec(4), &int(4, true), &[2, 300]), [141, 4, 32, 300]);
        let small = nn(8).resolve(&int(4, true), &[5], &[0; 4]);
        assert!(matches!(
            small,
            Err(FilterSetupError::ChunkTooSmall { elements: 5, .. })
        ));
        assert!(matches!(
            nn(7).resolve(&int(4, true), &[50], &[0; 4]),
            Err(FilterSetupError::Parameter { .. })
        ));
    }

    #[test]
    fn nbit_describes_compounds_as_libhdf5() {
        let t = Datatype::Compound(CompoundType {
            size: 13,
            members: vec![
                CompoundMember {
                    name: "a".into(),
                    offset: 0,
                    datatype: int(4, true),
                },
                CompoundMember {
                    name: "b".into(),
                    offset: 4,
                    datatype: f64_le(),
                },
                CompoundMember {
                    name: "c".into(),
                    offset: 12,
                    datatype: int(1, false),
                },
            ],
        });
        assert_eq!(
            cd(FilterRequest::Nbit, &t, &[7]),
            [
                24, 1, 7, 3, 13, 3, 0, 1, 4, 0, 32, 0, 4, 1, 8, 0, 64, 0, 12, 1, 1, 0, 8, 0
            ]
        );
        assert_eq!(
            cd(FilterRequest::Nbit, &int(2, true), &[7]),
            [8, 1, 7, 1, 2, 0, 16, 0]
        );
    }

    #[test]
    fn scale_offset_records_the_fill_value() {
        let r = FilterRequest::ScaleOffset(ScaleOffset::FloatDecimal { decimal_digits: 2 });
        let got = r.resolve(&f64_le(), &[7], &1.5f64.to_le_bytes()).unwrap();
        let mut want = vec![0u32; 20];
        want[..10].copy_from_slice(&[0, 2, 7, 1, 8, 0, 0, 1, 0, 1_073_217_536]);
        assert_eq!(got.client_data, want);
        assert_eq!(got.flags, FLAG_OPTIONAL);
        let r = FilterRequest::ScaleOffset(ScaleOffset::Integer { min_bits: 0 });
        let got = r.resolve(&int(4, true), &[7], &7i32.to_le_bytes()).unwrap();
        assert_eq!(&got.client_data[..9], &[2, 0, 7, 0, 4, 1, 0, 1, 7]);
        assert!(matches!(
            r.resolve(&f64_le(), &[7], &[0; 8]),
            Err(FilterSetupError::Datatype { .. })
        ));
    }

    #[test]
    fn plugins_record_their_versions_and_sizes() {
        let t = int(4, true);
        assert_eq!(cd(FilterRequest::Lzf, &t, &[40]), [4, 261, 160]);
        let blosc = FilterRequest::Blosc {
            compressor: BloscCompressor::Zstd,
            level: 7,
            shuffle: BloscShuffle::Bit,
        };
        assert_eq!(cd(blosc, &f64_le(), &[40, 2]), [2, 2, 8, 640, 7, 2, 5]);
        let bs = FilterRequest::Bitshuffle {
            block_elems: 0,
            compression: BitshuffleCompression::Zstd(5),
        };
        assert_eq!(cd(bs, &f64_le(), &[40, 2]), [0, 4, 8, 0, 3, 5]);
        let f = FilterRequest::Fletcher32
            .resolve(&t, &[4], &[0; 4])
            .unwrap();
        assert_eq!((f.flags, f.name.as_deref()), (0, Some(&b"fletcher32"[..])));
    }
}
