//! The model (filter ids, specs, pipelines) and the dispatch to each filter.

use crate::error::FilterError;
use crate::{
    bitshuffle, blosc, blosc2, deflate, fletcher32, lz4, lzf, nbit, other, scaleoffset, shuffle,
    szip,
};

/// A filter identification number as stored in the filter pipeline message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FilterId(pub u16);

impl FilterId {
    /// gzip / deflate (zlib format).
    pub const DEFLATE: Self = Self(1);
    /// Byte shuffle.
    pub const SHUFFLE: Self = Self(2);
    /// Fletcher-32 checksum.
    pub const FLETCHER32: Self = Self(3);
    /// SZIP (CCSDS 121.0 Rice coding).
    pub const SZIP: Self = Self(4);
    /// N-bit packing.
    pub const NBIT: Self = Self(5);
    /// Scale-offset.
    pub const SCALEOFFSET: Self = Self(6);
    /// bzip2 (registered plugin).
    pub const BZIP2: Self = Self(307);
    /// LZF (registered plugin, built into h5py).
    pub const LZF: Self = Self(32000);
    /// Blosc 1 (registered plugin).
    pub const BLOSC: Self = Self(32001);
    /// LZ4 (registered plugin).
    pub const LZ4: Self = Self(32004);
    /// Bitshuffle, optionally with LZ4 or Zstandard (registered plugin).
    pub const BITSHUFFLE: Self = Self(32008);
    /// Zstandard (registered plugin).
    pub const ZSTD: Self = Self(32015);
    /// Blosc2 (registered plugin; PyTables' and hdf5plugin's).
    pub const BLOSC2: Self = Self(32026);

    /// The conventional name of a known filter, `None` for an unknown id.
    pub fn known_name(self) -> Option<&'static str> {
        Some(match self {
            Self::DEFLATE => "deflate",
            Self::SHUFFLE => "shuffle",
            Self::FLETCHER32 => "fletcher32",
            Self::SZIP => "szip",
            Self::NBIT => "nbit",
            Self::SCALEOFFSET => "scaleoffset",
            Self::BZIP2 => "bzip2",
            Self::LZF => "lzf",
            Self::BLOSC => "blosc",
            Self::LZ4 => "lz4",
            Self::BITSHUFFLE => "bitshuffle",
            Self::ZSTD => "zstd",
            Self::BLOSC2 => "blosc2",
            _ => return None,
        })
    }
}

/// One filter of a pipeline, as the engine builds it from the filter pipeline message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterSpec {
    /// Which filter.
    pub id: FilterId,
    /// Whether the filter is optional (its failure on write is not an error: the chunk is
    /// stored without it and its bit set in the chunk's filter mask).
    pub optional: bool,
    /// The name stored in the message, if any (used in error messages).
    pub name: Option<String>,
    /// The client data values.
    pub client_data: Vec<u32>,
}

impl FilterSpec {
    /// A spec with no name.
    pub fn new(id: FilterId, optional: bool, client_data: Vec<u32>) -> Self {
        Self {
            id,
            optional,
            name: None,
            client_data,
        }
    }
}

/// An ordered filter pipeline (order of application on write).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pipeline {
    /// The filters, first applied first on write.
    pub filters: Vec<FilterSpec>,
}

/// Extra bytes allowed past the chunk's size for intermediate buffers (checksum trailers,
/// scale-offset headers, compressors that do not shrink).
const SLACK: usize = 4096;

/// What every filter may know of the chunk.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx {
    /// Size in bytes of one element of the dataset's datatype.
    pub elem_size: usize,
    /// Number of elements in a (full) chunk.
    #[allow(dead_code)]
    pub chunk_elems: usize,
    /// Upper bound on the size of any buffer a decoder produces.
    pub limit: usize,
}

impl Pipeline {
    /// A pipeline of `filters`.
    pub fn new(filters: Vec<FilterSpec>) -> Self {
        Self { filters }
    }

    fn ctx(elem_size: usize, chunk_elems: usize) -> Ctx {
        let bytes = elem_size.saturating_mul(chunk_elems);
        Ctx {
            elem_size,
            chunk_elems,
            limit: bytes.saturating_add(SLACK),
        }
    }

    /// Undoes the pipeline on a stored chunk: filters in reverse order, skipping those whose
    /// bit is set in `filter_mask`. `elem_size` is the dataset datatype's size and
    /// `chunk_elems` the number of elements of a full chunk; no decoder produces more than
    /// their product (plus a small slack).
    pub fn decode(
        &self,
        chunk: Vec<u8>,
        filter_mask: u32,
        elem_size: usize,
        chunk_elems: usize,
    ) -> Result<Vec<u8>, FilterError> {
        let ctx = Self::ctx(elem_size, chunk_elems);
        let mut buf = chunk;
        for (i, spec) in self.filters.iter().enumerate().rev() {
            if skipped(filter_mask, i) {
                continue;
            }
            buf = decode_one(spec, buf, &ctx)?;
        }
        Ok(buf)
    }

    /// [`decode`](Self::decode), with `spare`'s allocation (if any) reused for the decoded
    /// bytes where the last stage to undo allows it (shuffle, deflate), so that a reader
    /// recycling the buffers of chunks it is done with takes no new pages per chunk. Returns
    /// the decoded bytes and a buffer no longer needed (the stored image, or the unused
    /// spare), to recycle in turn.
    pub fn decode_reusing(
        &self,
        chunk: Vec<u8>,
        filter_mask: u32,
        elem_size: usize,
        chunk_elems: usize,
        mut spare: Vec<u8>,
    ) -> Result<(Vec<u8>, Vec<u8>), FilterError> {
        let stages: Vec<&FilterSpec> = self
            .filters
            .iter()
            .enumerate()
            .rev()
            .filter(|(i, _)| !skipped(filter_mask, *i))
            .map(|(_, spec)| spec)
            .collect();
        let reusable = |s: &&FilterSpec| matches!(s.id, FilterId::DEFLATE | FilterId::SHUFFLE);
        if spare.capacity() == 0 || stages.is_empty() || !stages.iter().all(reusable) {
            return Ok((
                self.decode(chunk, filter_mask, elem_size, chunk_elems)?,
                spare,
            ));
        }
        let ctx = Self::ctx(elem_size, chunk_elems);
        let full = elem_size.saturating_mul(chunk_elems);
        // `current`: the output of the stages undone so far (`None`: still the image).
        let mut current: Option<Vec<u8>> = None;
        let last_stage = stages.len().saturating_sub(1);
        for (k, spec) in stages.iter().enumerate() {
            let input = current.as_deref().unwrap_or(&chunk);
            let last = k == last_stage;
            let out = match spec.id {
                FilterId::SHUFFLE => {
                    let es = shuffle::elem_size(spec.client_data.as_slice(), &ctx);
                    if last {
                        let mut out = std::mem::take(&mut spare);
                        shuffle::unshuffle_into(input, es, &mut out);
                        out
                    } else {
                        shuffle::unshuffle(input, es)
                    }
                }
                _ if last && spare.capacity() >= full => {
                    // A whole chunk's bytes: the stream must decode to exactly that.
                    let mut out = std::mem::take(&mut spare);
                    out.resize(full, 0);
                    if deflate::decode_into(input, &mut out)? {
                        out
                    } else {
                        spare = out;
                        deflate::decode(input, &ctx)?
                    }
                }
                _ => deflate::decode(input, &ctx)?,
            };
            current = Some(out);
        }
        let decoded = current.ok_or_else(|| FilterError::corrupt("pipeline", "no stage ran"))?;
        // The image is free now; a spare left unused is given back instead when larger.
        let leftover = if spare.capacity() > chunk.capacity() {
            spare
        } else {
            chunk
        };
        Ok((decoded, leftover))
    }

    /// Applies the pipeline to a chunk of `elem_size * chunk_elems` bytes. Returns the
    /// stored bytes and the filter mask to store with them: an optional filter that fails
    /// is skipped and its bit set; a required one that fails is an error.
    pub fn encode(
        &self,
        chunk: Vec<u8>,
        elem_size: usize,
        chunk_elems: usize,
    ) -> Result<(Vec<u8>, u32), FilterError> {
        let ctx = Self::ctx(elem_size, chunk_elems);
        let mut buf = chunk;
        let mut mask = 0u32;
        for (i, spec) in self.filters.iter().enumerate() {
            match encode_one(spec, &buf, &ctx) {
                Ok(out) => buf = out,
                Err(e) if spec.optional => {
                    let _ = e;
                    if let Some(bit) = 1u32.checked_shl(u32::try_from(i).unwrap_or(u32::MAX)) {
                        mask |= bit;
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok((buf, mask))
    }
}

/// Whether filter `i` is marked as not applied in `mask` (filters past bit 31 never are).
fn skipped(mask: u32, i: usize) -> bool {
    u32::try_from(i)
        .ok()
        .and_then(|i| mask.checked_shr(i))
        .is_some_and(|m| m & 1 == 1)
}

fn unknown(spec: &FilterSpec) -> FilterError {
    FilterError::Unknown {
        id: spec.id.0,
        name: spec.name.clone(),
    }
}

fn decode_one(spec: &FilterSpec, buf: Vec<u8>, ctx: &Ctx) -> Result<Vec<u8>, FilterError> {
    let cd = spec.client_data.as_slice();
    match spec.id {
        FilterId::DEFLATE => deflate::decode(&buf, ctx),
        FilterId::SHUFFLE => Ok(shuffle::unshuffle(&buf, shuffle::elem_size(cd, ctx))),
        FilterId::FLETCHER32 => fletcher32::decode(buf),
        FilterId::SZIP => szip::decode(&buf, cd, ctx),
        FilterId::NBIT => nbit::decode(&buf, cd, ctx),
        FilterId::SCALEOFFSET => scaleoffset::decode(&buf, cd, ctx),
        FilterId::BZIP2 => other::bzip2_decode(&buf, ctx),
        FilterId::LZF => lzf::decode_filter(&buf, ctx),
        FilterId::BLOSC => blosc::decode(&buf, ctx),
        FilterId::LZ4 => lz4::decode(&buf, ctx),
        FilterId::BITSHUFFLE => bitshuffle::decode(&buf, cd, ctx),
        FilterId::ZSTD => other::zstd_decode(&buf, ctx),
        FilterId::BLOSC2 => blosc2::decode(&buf, ctx),
        _ => Err(unknown(spec)),
    }
}

fn encode_one(spec: &FilterSpec, buf: &[u8], ctx: &Ctx) -> Result<Vec<u8>, FilterError> {
    let cd = spec.client_data.as_slice();
    match spec.id {
        FilterId::DEFLATE => deflate::encode(buf, cd),
        FilterId::SHUFFLE => Ok(shuffle::shuffle(buf, shuffle::elem_size(cd, ctx))),
        FilterId::FLETCHER32 => Ok(fletcher32::encode(buf)),
        FilterId::SZIP => szip::encode(buf, cd),
        FilterId::NBIT => nbit::encode(buf, cd),
        FilterId::SCALEOFFSET => scaleoffset::encode(buf, cd),
        FilterId::BZIP2 => other::bzip2_encode(buf, cd),
        FilterId::LZF => lzf::encode_filter(buf),
        FilterId::BLOSC => blosc::encode(buf, cd, ctx),
        FilterId::LZ4 => lz4::encode(buf, cd),
        FilterId::BITSHUFFLE => bitshuffle::encode(buf, cd, ctx),
        FilterId::ZSTD => Ok(other::zstd_encode(buf)),
        FilterId::BLOSC2 => blosc2::encode(buf, cd, ctx),
        _ => Err(unknown(spec)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_bits() {
        assert!(skipped(0b10, 1));
        assert!(!skipped(0b10, 0));
        assert!(!skipped(u32::MAX, 40));
    }

    #[test]
    fn unknown_filter_is_named() {
        let p = Pipeline::new(vec![FilterSpec {
            id: FilterId(40000),
            optional: false,
            name: Some("mystery".into()),
            client_data: vec![],
        }]);
        let e = p.decode(vec![1, 2, 3], 0, 1, 3).unwrap_err();
        assert_eq!(
            e,
            FilterError::Unknown {
                id: 40000,
                name: Some("mystery".into())
            }
        );
        assert!(e.to_string().contains("mystery"));
        // Skipped by the mask: no error.
        assert_eq!(p.decode(vec![1, 2, 3], 1, 1, 3).unwrap(), vec![1, 2, 3]);
    }

    #[test]
    fn optional_failure_sets_mask_bit() {
        let p = Pipeline::new(vec![
            FilterSpec::new(FilterId::SHUFFLE, false, vec![4]),
            FilterSpec::new(FilterId::BLOSC, true, vec![]),
            FilterSpec::new(FilterId::FLETCHER32, false, vec![]),
        ]);
        let data: Vec<u8> = (0..64u8).collect();
        let (enc, mask) = p.encode(data.clone(), 4, 16).unwrap();
        assert_eq!(mask, 0b010);
        assert_eq!(p.decode(enc, mask, 4, 16).unwrap(), data);
        let req = Pipeline::new(vec![FilterSpec::new(FilterId::BLOSC, false, vec![])]);
        assert!(req.encode(data, 4, 16).is_err());
    }

    /// `decode_reusing` gives `decode`'s bytes whatever the pipeline (stages it can reuse a
    /// spare for or not, skipped by the mask), the spare (none, too small, large, of another
    /// length, full of garbage) and the chunk (a short stream falls back to a new buffer).
    #[test]
    fn decode_reusing_matches_decode() {
        let shuffle4 = FilterSpec::new(FilterId::SHUFFLE, false, vec![4]);
        let deflate = FilterSpec::new(FilterId::DEFLATE, false, vec![1]);
        let fletcher = FilterSpec::new(FilterId::FLETCHER32, false, vec![]);
        let pipelines = [
            vec![shuffle4.clone(), deflate.clone()],
            vec![deflate.clone()],
            vec![shuffle4.clone()],
            vec![shuffle4.clone(), deflate.clone(), fletcher.clone()],
            vec![deflate.clone(), shuffle4.clone()],
        ];
        let full: Vec<u8> = (0..4096u32)
            .flat_map(|i| ((i as f32).sin() * 1000.0).to_le_bytes())
            .collect();
        let short = full[..1000].to_vec();
        for filters in pipelines {
            let p = Pipeline::new(filters.clone());
            for data in [&full, &short] {
                for mask in [0u32, 0b1, 0b10] {
                    // Skipping a stage the chunk was written without (the mask is the
                    // writer's): encode with the same stages.
                    let kept: Vec<FilterSpec> = filters
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| !skipped(mask, *i))
                        .map(|(_, f)| f.clone())
                        .collect();
                    let (image, m) = Pipeline::new(kept).encode(data.clone(), 4, 4096).unwrap();
                    assert_eq!(m, 0);
                    let want = p.decode(image.clone(), mask, 4, 4096).unwrap();
                    assert_eq!(&want, data);
                    for spare in [
                        Vec::new(),
                        vec![7u8; 10],
                        vec![9u8; full.len()],
                        Vec::with_capacity(full.len() * 2),
                    ] {
                        let cap = spare.capacity();
                        let (got, leftover) = p
                            .decode_reusing(image.clone(), mask, 4, 4096, spare)
                            .unwrap();
                        assert_eq!(&got, data, "{filters:?} mask {mask} spare {cap}");
                        assert!(leftover.capacity() > 0 || cap == 0 || image.is_empty());
                    }
                }
            }
        }
        // Corrupt streams are errors either way.
        let p = Pipeline::new(vec![shuffle4, deflate]);
        let bad = vec![0x78, 0x9c, 0xff, 0xff, 0xff];
        assert!(p.decode(bad.clone(), 0, 4, 4096).is_err());
        assert!(p.decode_reusing(bad, 0, 4, 4096, vec![0; 16384]).is_err());
    }

    #[test]
    fn pipeline_is_send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Pipeline>();
        check::<FilterError>();
    }
}
