//! Blosc2 (id 32026), as PyTables' `blosc2:*` complibs and hdf5plugin's `Blosc2` write it.
//! Client data: [filter revision, Blosc2 version, type size, chunk bytes, level, shuffle (0
//! none, 1 byte, 2 bit), compressor (blosc's API codes: 0 blosclz, 1 lz4, 2 lz4hc, 4 zlib, 5
//! zstd), then for datasets of more than one dimension the rank and the chunk shape].
//!
//! The stored chunk is a Blosc2 *contiguous frame* (c-blosc2's `README_CFRAME_FORMAT.rst`, read
//! for facts): a msgpack header (magic `b2frame`, header and frame sizes, sizes of the data, the
//! metalayers — `b2nd` for n-dimensional arrays: shape, chunk shape and block shape), the data
//! chunks, an index chunk of 64-bit offsets (from the end of the header; the top bit marks a
//! chunk of special values: zeros, NaNs or uninitialised) and a msgpack trailer. A bare Blosc2
//! chunk (no frame) is accepted too.
//!
//! Each chunk (`README_CHUNK_FORMAT.rst`) has blosc1's 16-byte header, extended to 32 bytes when
//! the byte- and bit-shuffle flags are both set: six filter slots (1 byte shuffle, 2 bit shuffle,
//! 3 delta, 4 truncation) with their metadata and the Blosc2 flags (bits 4–6: the whole chunk is
//! zeros, NaNs, one repeated value or uninitialised). Then one 32-bit start per block, and per
//! block one stream (or `type size` streams when split), each a 32-bit size (0: zeros; negative:
//! a token byte follows, bit 0 meaning a run of the byte `-size`) and the data, raw when the size
//! equals the stream's. A `b2nd` chunk holds its blocks one after the other, each a C-order box of
//! the block shape: they are put back into the chunk's C order.
//!
//! There is no maintained pure-Rust Blosc2 crate (`blosc2-rs`/`blosc2-sys` build c-blosc2 with
//! CMake; `blosc2-pure-rs` is a young 55k-line reimplementation with much `unsafe`), so the
//! format is decoded here, reusing the blosc1 codecs: blosclz, lz4/lz4hc, zlib and zstd, with
//! byte and bit shuffle; dictionaries, the delta filter and user-defined codecs are refused with
//! a typed error. Encoding writes a frame holding one chunk of one block, with the shuffle asked
//! for and lz4 (lz4hc and blosclz too), zlib or zstd, and the `b2nd` metalayer for datasets of
//! more than one dimension (block shape = chunk shape), which hdf5plugin's filter reads back.
//! Data that does not shrink is stored uncompressed in the frame (never an encoding failure, as
//! with c-blosc2).

use crate::error::FilterError;
use crate::pipeline::Ctx;

const F: &str = "blosc2";
const MAGIC: &[u8] = b"b2frame\0";
/// Bytes of an extended chunk header.
const EXT_HEADER: usize = 32;
/// Highest chunk format version known (c-blosc2 2.x writes 5).
const MAX_CHUNK_VERSION: u8 = 5;

fn corrupt(reason: impl Into<String>) -> FilterError {
    FilterError::corrupt(F, reason)
}

fn get(buf: &[u8], at: usize, n: usize) -> Result<&[u8], FilterError> {
    at.checked_add(n)
        .and_then(|end| buf.get(at..end))
        .ok_or_else(|| corrupt("truncated"))
}

fn le32(buf: &[u8], at: usize) -> Result<i32, FilterError> {
    let b: [u8; 4] = get(buf, at, 4)?
        .try_into()
        .map_err(|_| corrupt("truncated"))?;
    Ok(i32::from_le_bytes(b))
}

fn size32(buf: &[u8], at: usize) -> Result<usize, FilterError> {
    usize::try_from(le32(buf, at)?).map_err(|_| corrupt("negative size"))
}

/// Decodes a stored Blosc2 chunk: a frame, or a bare chunk.
pub(crate) fn decode(buf: &[u8], ctx: &Ctx) -> Result<Vec<u8>, FilterError> {
    if buf
        .get(1..10)
        .is_some_and(|b| b.split_first() == Some((&0xa8, MAGIC)))
    {
        decode_frame(buf, ctx.limit)
    } else {
        decode_chunk(buf, ctx.limit)
    }
}

/// A minimal msgpack reader for the frame header (big-endian integers, as msgpack stores them).
struct Msgpack<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Msgpack<'a> {
    fn byte(&mut self) -> Result<u8, FilterError> {
        let b = *self
            .buf
            .get(self.at)
            .ok_or_else(|| corrupt("truncated frame header"))?;
        self.at = self.at.saturating_add(1);
        Ok(b)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], FilterError> {
        let b = get(self.buf, self.at, n)?;
        self.at = self.at.saturating_add(n);
        Ok(b)
    }

    fn be(&mut self, n: usize) -> Result<u64, FilterError> {
        Ok(self
            .take(n)?
            .iter()
            .fold(0u64, |a, &b| a << 8 | u64::from(b)))
    }

    /// Expects the marker byte `m`.
    fn marker(&mut self, m: u8, what: &str) -> Result<(), FilterError> {
        match self.byte()? {
            b if b == m => Ok(()),
            b => Err(corrupt(format!(
                "{what}: msgpack marker {b:#04x}, expected {m:#04x}"
            ))),
        }
    }

    /// Any msgpack integer, as i64.
    fn int(&mut self) -> Result<i64, FilterError> {
        let m = self.byte()?;
        Ok(match m {
            0x00..=0x7f => i64::from(m),
            0xe0..=0xff => i64::from(m as i8),
            0xcc => self.be(1)? as i64,
            0xcd => self.be(2)? as i64,
            0xce => self.be(4)? as i64,
            0xcf => i64::try_from(self.be(8)?).map_err(|_| corrupt("integer too large"))?,
            0xd0 => i64::from(self.be(1)? as u8 as i8),
            0xd1 => i64::from(self.be(2)? as u16 as i16),
            0xd2 => i64::from(self.be(4)? as u32 as i32),
            0xd3 => self.be(8)? as i64,
            _ => {
                return Err(corrupt(format!(
                    "msgpack marker {m:#04x} is not an integer"
                )));
            }
        })
    }

    /// A non-negative integer that fits a `usize`.
    fn size(&mut self) -> Result<usize, FilterError> {
        usize::try_from(self.int()?).map_err(|_| corrupt("negative or huge size in the frame"))
    }

    /// The length of an array (fixarray, array16 or array32).
    fn array(&mut self) -> Result<usize, FilterError> {
        let m = self.byte()?;
        let n = match m {
            0x90..=0x9f => u64::from(m & 0x0f),
            0xdc => self.be(2)?,
            0xdd => self.be(4)?,
            _ => return Err(corrupt(format!("msgpack marker {m:#04x} is not an array"))),
        };
        usize::try_from(n).map_err(|_| corrupt("huge array"))
    }

    /// A string (fixstr, str8/16/32) or binary (bin8/16/32) value.
    fn bytes(&mut self) -> Result<&'a [u8], FilterError> {
        let m = self.byte()?;
        let n = match m {
            0xa0..=0xbf => u64::from(m & 0x1f),
            0xd9 | 0xc4 => self.be(1)?,
            0xda | 0xc5 => self.be(2)?,
            0xdb | 0xc6 => self.be(4)?,
            _ => return Err(corrupt(format!("msgpack marker {m:#04x} is not a string"))),
        };
        self.take(usize::try_from(n).map_err(|_| corrupt("huge string"))?)
    }

    /// An array of non-negative integers (at most 8: Blosc2's maximum rank).
    fn sizes(&mut self) -> Result<Vec<usize>, FilterError> {
        let n = self.array()?;
        if n > 8 {
            return Err(corrupt(format!("rank {n}")));
        }
        (0..n).map(|_| self.size()).collect()
    }
}

/// The b2nd metalayer: the array's shape, its chunk shape and block shape.
#[derive(Debug, PartialEq)]
struct B2nd {
    shape: Vec<usize>,
    chunk: Vec<usize>,
    block: Vec<usize>,
}

/// The header fields decoding needs.
struct FrameHeader {
    header_size: usize,
    uncompressed: usize,
    compressed: usize,
    typesize: usize,
    chunk_size: usize,
    b2nd: Option<B2nd>,
}

fn frame_header(buf: &[u8]) -> Result<FrameHeader, FilterError> {
    let mut m = Msgpack { buf, at: 0 };
    if m.array()? < 14 {
        return Err(corrupt("frame header has too few fields"));
    }
    if m.bytes()? != MAGIC {
        return Err(corrupt("not a b2frame"));
    }
    let header_size = m.size()?;
    let frame_size = m.size()?;
    if frame_size > buf.len() || header_size > frame_size {
        return Err(corrupt(format!(
            "frame of {frame_size} bytes (header {header_size}) in {} bytes",
            buf.len()
        )));
    }
    let flags = m.bytes()?;
    let general = *flags.first().ok_or_else(|| corrupt("no frame flags"))?;
    if (general >> 4) & 3 != 1 {
        return Err(FilterError::unsupported(
            F,
            "chunk offsets other than 64-bit",
        ));
    }
    if flags.get(1).is_some_and(|t| t & 0x0f != 0) {
        return Err(FilterError::unsupported(F, "sparse frames"));
    }
    let uncompressed = m.size()?;
    let compressed = m.size()?;
    let typesize = m.size()?;
    let _block_size = m.int()?;
    let chunk_size = m.size()?;
    let _threads = (m.int()?, m.int()?);
    match m.byte()? {
        0xc2 | 0xc3 => {}
        b => return Err(corrupt(format!("has_vlmetalayers marker {b:#04x}"))),
    }
    m.marker(0xd8, "filter pipeline")?;
    m.take(17)?; // type byte and 16 bytes: the frame-wide defaults, each chunk has its own
    let mut b2nd = None;
    if m.at < header_size {
        if m.array()? != 3 {
            return Err(corrupt("metalayers section"));
        }
        let _idx = m.int()?;
        let names = match m.byte()? {
            0xde => m.be(2)?,
            b @ 0x80..=0x8f => u64::from(b & 0x0f),
            b => return Err(corrupt(format!("metalayer map marker {b:#04x}"))),
        };
        let mut keys = Vec::new();
        for _ in 0..names.min(64) {
            keys.push(m.bytes()?.to_vec());
            let _offset = m.int()?;
        }
        let n = m.array()?;
        for key in keys.iter().take(n) {
            let content = m.bytes()?;
            if key == b"b2nd" {
                b2nd = Some(b2nd_meta(content)?);
            }
        }
    }
    Ok(FrameHeader {
        header_size,
        uncompressed,
        compressed,
        typesize,
        chunk_size,
        b2nd,
    })
}

/// The b2nd metalayer: [version, rank, shape, chunk shape, block shape, dtype format, dtype].
fn b2nd_meta(content: &[u8]) -> Result<B2nd, FilterError> {
    let mut m = Msgpack {
        buf: content,
        at: 0,
    };
    if m.array()? < 5 {
        return Err(corrupt("b2nd metalayer"));
    }
    let _version = m.int()?;
    let rank = m.size()?;
    let meta = B2nd {
        shape: m.sizes()?,
        chunk: m.sizes()?,
        block: m.sizes()?,
    };
    if [&meta.shape, &meta.chunk, &meta.block]
        .iter()
        .any(|v| v.len() != rank)
        || meta.chunk.contains(&0)
        || meta.block.contains(&0)
    {
        return Err(corrupt(format!("b2nd metalayer {meta:?} of rank {rank}")));
    }
    Ok(meta)
}

fn decode_frame(buf: &[u8], limit: usize) -> Result<Vec<u8>, FilterError> {
    let h = frame_header(buf)?;
    if h.uncompressed > limit {
        return Err(corrupt(format!(
            "{} bytes exceed the chunk size",
            h.uncompressed
        )));
    }
    let index_at = h
        .header_size
        .checked_add(h.compressed)
        .ok_or_else(|| corrupt("frame sizes overflow"))?;
    let index = decode_chunk(
        buf.get(index_at..)
            .ok_or_else(|| corrupt("no chunk index"))?,
        limit,
    )?;
    let mut out = crate::output(F, h.uncompressed)?;
    for (i, off) in index.chunks_exact(8).enumerate() {
        let want = h.chunk_size.min(h.uncompressed.saturating_sub(out.len()));
        let off = u64::from_le_bytes(off.try_into().unwrap_or([0; 8]));
        let flag = off.to_le_bytes()[7];
        if flag & 0x80 != 0 {
            // Never past what the frame says it holds (the check after the loop reports it).
            special(flag & 0x07, want, h.typesize, &mut out)?;
            continue;
        }
        let off = usize::try_from(off).map_err(|_| corrupt("chunk offset"))?;
        let at = h
            .header_size
            .checked_add(off)
            .filter(|&a| a < index_at)
            .ok_or_else(|| corrupt(format!("chunk {i} outside the frame")))?;
        let chunk = decode_chunk(
            buf.get(at..index_at).unwrap_or_default(),
            limit.saturating_sub(out.len()),
        )?;
        out.extend_from_slice(&chunk);
    }
    if out.len() != h.uncompressed {
        return Err(corrupt(format!(
            "chunks decode to {} bytes, the frame says {}",
            out.len(),
            h.uncompressed
        )));
    }
    match h.b2nd {
        Some(meta) => from_blocks(&out, &meta, h.typesize),
        None => Ok(out),
    }
}

/// Appends `n` bytes of the special value `kind` (1 zeros, 2 NaNs, 4 uninitialised).
fn special(kind: u8, n: usize, typesize: usize, out: &mut Vec<u8>) -> Result<(), FilterError> {
    match kind {
        1 | 4 => out.resize(out.len().saturating_add(n), 0),
        2 => {
            let nan: &[u8] = match typesize {
                4 => &[0x00, 0x00, 0xc0, 0x7f],
                8 => &[0, 0, 0, 0, 0, 0, 0xf8, 0x7f],
                t => return Err(corrupt(format!("NaN chunk of type size {t}"))),
            };
            out.extend(nan.iter().cycle().take(n));
        }
        k => {
            return Err(FilterError::unsupported(
                F,
                format!("special value kind {k}"),
            ));
        }
    }
    Ok(())
}

/// Puts the blocks of a single b2nd chunk (each a C-order box of the block shape, the boxes in
/// C order over the chunk's block grid, edge blocks padded) into the array's C order.
fn from_blocks(data: &[u8], meta: &B2nd, typesize: usize) -> Result<Vec<u8>, FilterError> {
    if meta.block == meta.chunk && meta.chunk == meta.shape {
        return Ok(data.to_vec());
    }
    if meta.chunk != meta.shape {
        return Err(FilterError::unsupported(F, "b2nd arrays of several chunks"));
    }
    let rank = meta.shape.len();
    let bad = || corrupt("b2nd shapes do not describe the chunk");
    if rank == 0
        || meta.block.len() != rank
        || meta.chunk.len() != rank
        || meta.block.contains(&0)
        || meta.chunk.contains(&0)
    {
        return Err(bad());
    }
    let product = |v: &[usize]| v.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let grid: Vec<usize> = meta
        .chunk
        .iter()
        .zip(&meta.block)
        .map(|(c, b)| c.div_ceil(*b))
        .collect();
    let block_items = product(&meta.block).ok_or_else(bad)?;
    let nblocks = product(&grid).ok_or_else(bad)?;
    if block_items
        .checked_mul(nblocks)
        .and_then(|n| n.checked_mul(typesize))
        != Some(data.len())
    {
        return Err(corrupt("b2nd chunk size does not match its blocks"));
    }
    // The array is no bigger than its padded blocks: bounded by the data decoded.
    let out_len = product(&meta.shape)
        .and_then(|n| n.checked_mul(typesize))
        .filter(|&n| n <= data.len())
        .ok_or_else(bad)?;
    let mut out = vec![0u8; out_len];
    let (&row, outer_block) = meta.block.split_last().ok_or_else(bad)?;
    let &last_dim = meta.shape.last().ok_or_else(bad)?;
    let rows = block_items.checked_div(row).unwrap_or(0);
    let mut bcoord = vec![0usize; rank];
    for b in 0..nblocks {
        // Every row of the block (all but the last dimension), clipped to the array.
        let mut rcoord = vec![0usize; rank];
        for r in 0..rows {
            // Every product below is bounded by the checked sizes above (the coordinates are
            // inside the grid and the blocks), so saturation never happens.
            let start: Vec<usize> = bcoord
                .iter()
                .zip(&meta.block)
                .zip(&rcoord)
                .map(|((&bc, &bs), &rc)| bc.saturating_mul(bs).saturating_add(rc))
                .collect();
            if start.iter().zip(&meta.shape).all(|(s, n)| s < n) {
                let first = start.last().copied().unwrap_or(0);
                let len = row
                    .min(last_dim.saturating_sub(first))
                    .saturating_mul(typesize);
                let dst = start
                    .iter()
                    .zip(&meta.shape)
                    .fold(0usize, |a, (s, n)| a.saturating_mul(*n).saturating_add(*s))
                    .saturating_mul(typesize);
                let src = b
                    .saturating_mul(block_items)
                    .saturating_add(r.saturating_mul(row))
                    .saturating_mul(typesize);
                let from = data.get(src..src.saturating_add(len)).ok_or_else(bad)?;
                out.get_mut(dst..dst.saturating_add(len))
                    .ok_or_else(bad)?
                    .copy_from_slice(from);
            }
            let outer = rcoord.len().saturating_sub(1);
            step(rcoord.get_mut(..outer).unwrap_or_default(), outer_block);
        }
        step(&mut bcoord, &grid);
    }
    Ok(out)
}

/// Advances a row-major coordinate within `counts`.
fn step(coord: &mut [usize], counts: &[usize]) {
    for (c, &n) in coord.iter_mut().zip(counts).rev() {
        *c = c.saturating_add(1);
        if *c < n {
            return;
        }
        *c = 0;
    }
}

/// Decodes one Blosc2 (or blosc1-style) chunk to at most `limit` bytes.
fn decode_chunk(buf: &[u8], limit: usize) -> Result<Vec<u8>, FilterError> {
    let head = get(buf, 0, 16)?;
    let byte = |i: usize| head.get(i).copied().unwrap_or(0);
    let (version, flags, typesize) = (byte(0), byte(2), usize::from(byte(3)).max(1));
    if version == 0 || version > MAX_CHUNK_VERSION {
        return Err(FilterError::unsupported(
            F,
            format!("chunk format version {version}"),
        ));
    }
    let nbytes = size32(buf, 4)?;
    let blocksize = size32(buf, 8)?;
    let cbytes = size32(buf, 12)?;
    if nbytes > limit {
        return Err(corrupt(format!("{nbytes} bytes exceed the chunk size")));
    }
    let buf = buf
        .get(..cbytes)
        .ok_or_else(|| corrupt("truncated chunk"))?;
    let extended = flags & 0x05 == 0x05;
    let (hlen, filters, b2flags) = if extended {
        let ext = get(buf, 0, EXT_HEADER)?;
        let mut filters = [0u8; 6];
        filters.copy_from_slice(get(ext, 16, 6)?);
        (EXT_HEADER, filters, ext.last().copied().unwrap_or(0))
    } else {
        let f = [
            0,
            0,
            0,
            0,
            0,
            if flags & 0x01 != 0 {
                1
            } else if flags & 0x04 != 0 {
                2
            } else {
                0
            },
        ];
        (16, f, 0)
    };
    match (b2flags >> 4) & 0x07 {
        0 => {}
        3 => {
            let value = get(buf, hlen, typesize)?;
            return Ok(value.iter().cycle().take(nbytes).copied().collect());
        }
        k => {
            let mut out = Vec::with_capacity(nbytes);
            special(k, nbytes, typesize, &mut out)?;
            return Ok(out);
        }
    }
    if flags & 0x02 != 0 {
        return Ok(get(buf, hlen, nbytes)?.to_vec());
    }
    if nbytes == 0 {
        return Ok(Vec::new());
    }
    if b2flags & 0x01 != 0 {
        return Err(FilterError::unsupported(F, "dictionaries"));
    }
    if blocksize == 0 {
        return Err(corrupt("block size 0"));
    }
    if let Some(f) = filters.iter().find(|&&f| f > 2 && f != 4) {
        return Err(FilterError::unsupported(F, format!("filter {f}")));
    }
    let codec = flags >> 5;
    let nblocks = nbytes.div_ceil(blocksize);
    let mut out = crate::output(F, nbytes)?;
    // The block size is the chunk's word: bounded by the chunk's own size, not trusted.
    let mut tmp = Vec::with_capacity(blocksize.min(nbytes));
    for b in 0..nblocks {
        // Block b starts at b * blocksize < nbytes.
        let bsize = blocksize.min(nbytes.saturating_sub(b.saturating_mul(blocksize)));
        let leftover = bsize < blocksize;
        let mut at = size32(buf, b.saturating_mul(4).saturating_add(hlen))?;
        let split =
            flags & 0x10 == 0 && !leftover && typesize > 1 && bsize.is_multiple_of(typesize);
        let nstreams = if split { typesize } else { 1 };
        let ssize = bsize.checked_div(nstreams).unwrap_or(0);
        tmp.clear();
        for _ in 0..nstreams {
            let csize = le32(buf, at)?;
            at = at.saturating_add(4);
            if csize == 0 {
                tmp.resize(tmp.len().saturating_add(ssize), 0);
                continue;
            }
            if csize < 0 {
                let token = *buf
                    .get(at)
                    .ok_or_else(|| corrupt("truncated stream token"))?;
                at = at.saturating_add(1);
                if token & 0x01 == 0 {
                    return Err(FilterError::unsupported(
                        F,
                        format!("stream token {token:#04x}"),
                    ));
                }
                let value = csize.unsigned_abs() as u8;
                tmp.resize(tmp.len().saturating_add(ssize), value);
                continue;
            }
            let csize = csize as usize;
            let src = get(buf, at, csize)?;
            at = at.saturating_add(csize);
            if csize == ssize {
                tmp.extend_from_slice(src);
            } else {
                crate::blosc::decompress_into(codec, src, ssize, &mut tmp, F)?;
            }
        }
        unfilter(&tmp, &filters, typesize, &mut out);
    }
    Ok(out)
}

/// Undoes a block's filters (applied in slot order, so undone in reverse): byte shuffle (1) and
/// bit shuffle (2, over the largest multiple of 8 elements; the rest is stored as it is);
/// truncation (4) needs no undoing.
fn unfilter(block: &[u8], filters: &[u8; 6], typesize: usize, out: &mut Vec<u8>) {
    let mut data = block.to_vec();
    for &f in filters.iter().rev() {
        data = match f {
            1 if typesize > 1 => crate::shuffle::unshuffle(&data, typesize),
            2 => {
                // The largest multiple of 8 elements: at most the block's length.
                let n8 = data.len().checked_div(typesize).unwrap_or(0) & !7;
                let (shuffled, rest) = data.split_at(n8.saturating_mul(typesize).min(data.len()));
                let mut v = Vec::with_capacity(data.len());
                crate::bitshuffle::untrans_block(shuffled, typesize, &mut v);
                v.extend_from_slice(rest);
                v
            }
            _ => data,
        };
    }
    out.extend_from_slice(&data);
}

/// The blosc compressor code of client data 6 as the chunk's internal codec and the frame's.
fn codec_of(code: u32) -> (u8, u32) {
    match code {
        4 => (3, 4),
        5 => (4, 5),
        _ => (1, 1),
    }
}

/// Encodes a chunk as a Blosc2 frame of one chunk of one block (see the module documentation).
#[allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    reason = "encodes in-memory data: sizes are lengths of buffers in memory plus constants, the patched header fields (11..15, 16..24) were written above, and typesize ≥ 1"
)]
pub(crate) fn encode(buf: &[u8], cd: &[u32], ctx: &Ctx) -> Result<Vec<u8>, FilterError> {
    let typesize = cd
        .get(2)
        .and_then(|&v| usize::try_from(v).ok())
        .filter(|&v| v > 0)
        .unwrap_or(ctx.elem_size)
        .clamp(1, 255);
    let nbytes =
        i32::try_from(buf.len()).map_err(|_| FilterError::encode(F, "chunk over 2 GiB"))?;
    if buf.is_empty() {
        return Err(FilterError::encode(F, "empty chunk"));
    }
    let level = cd.get(4).copied().unwrap_or(5).min(9);
    let shuffle = cd.get(5).copied().unwrap_or(1);
    let (codec, api_codec) = codec_of(cd.get(6).copied().unwrap_or(1));
    let mut filters = [0u8; 6];
    let filtered = match shuffle {
        1 if typesize > 1 => {
            filters[5] = 1;
            crate::shuffle::shuffle(buf, typesize)
        }
        2 => {
            filters[5] = 2;
            let n8 = (buf.len() / typesize) & !7;
            let mut v = Vec::with_capacity(buf.len());
            crate::bitshuffle::trans_block(&buf[..n8 * typesize], typesize, &mut v);
            v.extend_from_slice(&buf[n8 * typesize..]);
            v
        }
        _ => buf.to_vec(),
    };
    let compressed = crate::blosc::compress_stream(codec, &filtered, level)?;
    // The data chunk: extended header, don't split, one block starting after its offset; data
    // that does not shrink is stored as it is (a "memcpyed" chunk), as c-blosc2 stores it.
    let chunk = if compressed.len() < buf.len() {
        chunk_bytes(
            codec << 5 | 0x10 | 0x05,
            typesize as u8,
            nbytes,
            &filters,
            &compressed,
        )?
    } else {
        chunk_bytes(
            codec << 5 | 0x10 | 0x07,
            typesize as u8,
            nbytes,
            &[0; 6],
            buf,
        )?
    };
    // The index chunk: one 64-bit offset (0: the data chunk starts right after the header),
    // stored raw.
    let index = chunk_bytes(0x07, 8, 8, &[0, 0, 0, 0, 0, 1], &[])?;
    let meta = b2nd_for(cd);
    let mut header = Vec::with_capacity(160);
    header.extend_from_slice(&[0x9e, 0xa8]);
    header.extend_from_slice(MAGIC);
    header.push(0xd2);
    header.extend_from_slice(&[0; 4]); // header size, patched below
    header.push(0xcf);
    header.extend_from_slice(&[0; 8]); // frame size, patched below
    header.extend_from_slice(&[
        0xa4,
        0x12,
        0x00,
        (api_codec as u8) | (level as u8) << 4,
        0x03,
    ]);
    header.push(0xd3);
    push_be(&mut header, nbytes as u64, 8);
    header.push(0xd3);
    push_be(&mut header, chunk.len() as u64, 8);
    for v in [typesize as i32, nbytes, nbytes] {
        header.push(0xd2);
        push_be(&mut header, v as u64, 4);
    }
    header.extend_from_slice(&[0xd1, 0, 0, 0xd1, 0, 1, 0xc2, 0xd8, 0x06]);
    header.extend_from_slice(&filters);
    header.extend_from_slice(&[0; 10]);
    match &meta {
        None => {
            header.extend_from_slice(&[0x93, 0xcd, 0x00, 0x07, 0xde, 0x00, 0x00, 0xdc, 0x00, 0x00])
        }
        Some(content) => {
            // [size of the map and array headers + 1, {"b2nd": offset of its content}, [content]]
            header.extend_from_slice(&[0x93, 0xcd, 0x00, 0x11, 0xde, 0x00, 0x01, 0xa4]);
            header.extend_from_slice(b"b2nd");
            let offset = header.len() + 5 + 3;
            header.push(0xd2);
            push_be(&mut header, offset as u64, 4);
            header.extend_from_slice(&[0xdc, 0x00, 0x01, 0xc6]);
            push_be(&mut header, content.len() as u64, 4);
            header.extend_from_slice(content);
        }
    }
    let header_size = header.len();
    let trailer: &[u8] = &[
        0x94, 0x01, 0x93, 0xcd, 0x00, 0x06, 0xde, 0x00, 0x00, 0xdc, 0x00, 0x00, 0xce, 0x00, 0x00,
        0x00, 0x23, 0xd8, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let frame_size = header_size + chunk.len() + index.len() + trailer.len();
    let mut sizes = Vec::with_capacity(12);
    push_be(&mut sizes, header_size as u64, 4);
    push_be(&mut sizes, frame_size as u64, 8);
    header[11..15].copy_from_slice(&sizes[..4]);
    header[16..24].copy_from_slice(&sizes[4..]);
    let mut out = header;
    out.extend_from_slice(&chunk);
    out.extend_from_slice(&index);
    out.extend_from_slice(trailer);
    Ok(out)
}

/// Appends the low `n` bytes of `v`, most significant first (msgpack's byte order).
#[allow(
    clippy::arithmetic_side_effects,
    reason = "n ≤ 8 at every call: shifts below 64"
)]
fn push_be(out: &mut Vec<u8>, v: u64, n: usize) {
    out.extend((0..n).rev().map(|i| (v >> (8 * i)) as u8));
}

/// A chunk with an extended header: `data` compressed as one block, or (flags with 0x02)
/// stored as it is (`data` empty: 8 zero bytes, the index chunk's one offset).
#[allow(
    clippy::arithmetic_side_effects,
    clippy::indexing_slicing,
    reason = "the patched cbytes field (12..16) was written above; the header is 32 bytes"
)]
fn chunk_bytes(
    flags: u8,
    typesize: u8,
    nbytes: i32,
    filters: &[u8; 6],
    data: &[u8],
) -> Result<Vec<u8>, FilterError> {
    let mut c = vec![MAX_CHUNK_VERSION, 1, flags, typesize];
    c.extend_from_slice(&nbytes.to_le_bytes());
    c.extend_from_slice(&nbytes.to_le_bytes()); // one block
    c.extend_from_slice(&[0; 4]); // cbytes, patched below
    c.extend_from_slice(filters);
    c.extend_from_slice(&[0; 10]);
    if flags & 0x02 != 0 && data.is_empty() {
        c.extend_from_slice(&[0; 8]);
    } else if flags & 0x02 != 0 {
        c.extend_from_slice(data);
    } else {
        c.extend_from_slice(&((EXT_HEADER + 4) as i32).to_le_bytes());
        let len =
            i32::try_from(data.len()).map_err(|_| FilterError::encode(F, "stream too large"))?;
        c.extend_from_slice(&len.to_le_bytes());
        c.extend_from_slice(data);
    }
    let cbytes = i32::try_from(c.len()).map_err(|_| FilterError::encode(F, "chunk too large"))?;
    c[12..16].copy_from_slice(&cbytes.to_le_bytes());
    Ok(c)
}

/// The b2nd metalayer content for client data naming a rank above 1 and the chunk shape
/// (block shape = chunk shape = array shape), as hdf5plugin's filter writes it.
#[allow(clippy::arithmetic_side_effects, reason = "rank ≤ 8")]
fn b2nd_for(cd: &[u32]) -> Option<Vec<u8>> {
    let rank = usize::try_from(*cd.get(7)?)
        .ok()
        .filter(|&r| (2..=8).contains(&r))?;
    let dims = cd.get(8..8 + rank)?;
    let mut m = vec![0x97, 0x00, rank as u8, 0x90 | rank as u8];
    for &d in dims {
        m.push(0xd3);
        push_be(&mut m, u64::from(d), 8);
    }
    for _ in 0..2 {
        m.push(0x90 | rank as u8);
        for &d in dims {
            m.push(0xd2);
            push_be(&mut m, u64::from(d), 4);
        }
    }
    // dtype format 0 (NumPy) and the dtype as a str 32 (0xdb), as hdf5plugin's filter writes
    // them ("|V" and the element size): c-blosc2 reads the dtype only in that encoding.
    let dtype = format!("|V{}", cd.get(2).copied().unwrap_or(1));
    m.extend_from_slice(&[0x00, 0xdb]);
    push_be(&mut m, dtype.len() as u64, 4);
    m.extend_from_slice(dtype.as_bytes());
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(elem_size: usize, n: usize) -> Ctx {
        Ctx {
            elem_size,
            chunk_elems: n,
            limit: elem_size * n,
        }
    }

    #[test]
    fn encode_round_trips_every_codec_and_shuffle() {
        let data: Vec<u8> = (0..3000u32).flat_map(|i| (i / 7).to_le_bytes()).collect();
        for codec in [0u32, 1, 2, 4, 5] {
            for shuffle in [0u32, 1, 2] {
                let cd = [1, 0, 4, 12000, 5, shuffle, codec];
                let e = encode(&data, &cd, &ctx(4, 3000)).unwrap();
                assert_eq!(
                    decode(&e, &ctx(4, 3000)).unwrap(),
                    data,
                    "{codec} {shuffle}"
                );
                for n in (0..e.len()).step_by(7) {
                    assert!(
                        decode(&e[..n], &ctx(4, 3000)).is_err(),
                        "{codec} {shuffle} cut at {n}"
                    );
                }
            }
        }
    }

    #[test]
    fn incompressible_data_is_stored_as_it_is() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let noise: Vec<u8> = (0..1000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect();
        let e = encode(&noise, &[1, 0, 1, 1000, 5, 1, 1], &ctx(1, 1000)).unwrap();
        assert!(e.len() > noise.len());
        assert_eq!(decode(&e, &ctx(1, 1000)).unwrap(), noise);
    }

    #[test]
    fn b2nd_blocks_go_back_to_c_order() {
        // A 3 x 5 array of u8 in blocks of 2 x 2: the block grid is 2 x 3, each block padded.
        let meta = B2nd {
            shape: vec![3, 5],
            chunk: vec![3, 5],
            block: vec![2, 2],
        };
        let mut blocks = Vec::new();
        for bi in 0..2 {
            for bj in 0..3 {
                for i in 0..2 {
                    for j in 0..2 {
                        let (r, c) = (bi * 2 + i, bj * 2 + j);
                        blocks.push(if r < 3 && c < 5 {
                            (r * 5 + c) as u8
                        } else {
                            0xee
                        });
                    }
                }
            }
        }
        let out = from_blocks(&blocks, &meta, 1).unwrap();
        assert_eq!(out, (0..15).collect::<Vec<u8>>());
        assert!(from_blocks(&blocks[1..], &meta, 1).is_err());
    }

    #[test]
    fn b2nd_metalayer_is_encoded_as_hdf5plugin_encodes_it() {
        // Client data of a 16 x 8 chunk of 8-byte elements; the expected bytes are those
        // hdf5plugin 5.0 (c-blosc2) wrote into fixtures/files/blosc2_earliest.h5
        // (lz4hc_i8_2d): the dtype is a str 32 ("|V8"), which c-blosc2 requires.
        let cd = [1, 0, 8, 1024, 4, 1, 2, 2, 16, 8];
        let meta = b2nd_for(&cd).unwrap();
        let expected = "97000292d30000000000000010d3000000000000000892d200000010d20000000892\
                        d200000010d20000000800db000000037c5638";
        let hex: String = meta.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, expected.replace(' ', ""));
        let parsed = b2nd_meta(&meta).unwrap();
        assert_eq!(parsed.shape, vec![16, 8]);
        assert_eq!(parsed.block, vec![16, 8]);
    }

    #[test]
    fn special_and_damaged_chunks() {
        // A chunk of zeros (Blosc2 flags 0x10) and one repeated value (0x30).
        let mut c = chunk_bytes(0x05, 4, 16, &[0; 6], &[]).unwrap();
        c.truncate(EXT_HEADER);
        c[31] = 0x10;
        c[12..16].copy_from_slice(&32i32.to_le_bytes());
        assert_eq!(decode_chunk(&c, 16).unwrap(), vec![0; 16]);
        c[31] = 0x30;
        c.extend_from_slice(&[1, 2, 3, 4]);
        c[12..16].copy_from_slice(&36i32.to_le_bytes());
        assert_eq!(decode_chunk(&c, 16).unwrap(), [1, 2, 3, 4].repeat(4));
        // More bytes than the chunk can hold, an unknown version, a dictionary.
        assert!(decode_chunk(&c, 15).is_err());
        let mut v = c.clone();
        v[0] = 9;
        assert!(matches!(
            decode_chunk(&v, 16),
            Err(FilterError::Unsupported { .. })
        ));
        let data: Vec<u8> = (0..400u32).flat_map(|i| (i % 5).to_le_bytes()).collect();
        let e = encode(&data, &[1, 0, 4, 1600, 5, 1, 1], &ctx(4, 400)).unwrap();
        let h = frame_header(&e).unwrap();
        let mut d = e.clone();
        d[h.header_size + 31] |= 0x01;
        assert!(matches!(
            decode(&d, &ctx(4, 400)),
            Err(FilterError::Unsupported { .. })
        ));
        // A frame claiming more data than the chunk holds.
        assert!(decode(&e, &ctx(4, 399)).is_err());
    }
}
