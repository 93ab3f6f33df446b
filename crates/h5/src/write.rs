//! Creating files, groups and datasets, in the formats of the chosen
//! [`crate::FormatBounds`] (`(V18, LATEST)` by default). Writing data is in `write_data.rs`.

use std::marker::PhantomData;
use std::path::Path;
use std::sync::Arc;

use h5_core::filters::{
    BitshuffleCompression, BloscCompressor, BloscShuffle, FilterRequest, ScaleOffset, SzipCoding,
};
use h5_core::write::CreateOptions;
use h5_core::write::chunk_index::ChunkIndexKind;
use h5_core::write::dataset::{NewDataset, NewLayout};
use h5_format::datatype::Datatype;
use h5_format::message::dataspace::UNLIMITED;
use h5_format::message::fill_value::{AllocTime, FillTime};
use h5_format::message::filter_pipeline::Filter;
use ndarray::{ArrayView, Dimension};

use crate::open::{Mode, explain, open_path};
use crate::types::{EncodeCtx, H5Type};
use crate::{Dataset, Error, File, FileAccess, FilterInfo, Group, GroupOptions, Result};

impl File {
    /// Creates (or truncates) the file at `path` for writing, with the default cache settings
    /// and HDF5 2.0's default format bounds, `(V18, LATEST)` (see [`crate::FormatBounds`]):
    /// superblock 2, version 2 object headers, link-message groups, version 1 B-tree chunk
    /// indexes, so HDF5 1.8 and every newer library (h5py included) read the file. Pass
    /// [`CreateOptions::with_bounds`] to [`File::create_with`] for other bounds, for example
    /// `(Earliest, LATEST)` (what HDF5 1.x and h5py write by default) for files HDF5 1.6 reads.
    pub fn create(path: impl AsRef<Path>) -> Result<File> {
        crate::swmr::api(|| {
            Self::create_with(path, &FileAccess::default(), &CreateOptions::default())
        })
    }

    /// Creates (or truncates) the file at `path` with the given cache settings and options.
    pub fn create_with(
        path: impl AsRef<Path>,
        access: &FileAccess,
        options: &CreateOptions,
    ) -> Result<File> {
        crate::swmr::api(|| {
            let path = path.as_ref();
            crate::swmr_write::refuse_at_create(access)?;
            if access.settings().swmr.is_some() {
                let shared = crate::swmr::create(path, access, options)
                    .map_err(|e| e.in_object(|| path.display().to_string(), "/"))?;
                return Ok(File::from_shared(shared, Some(path.to_path_buf())));
            }
            let opened = open_path(path, Mode::Create, access)?;
            let dir = path.parent().map(Path::to_path_buf);
            let shared = h5_core::file::FileShared::create(
                Arc::clone(&opened.storage),
                access.settings(),
                options,
                dir,
            )
            .map_err(|e| e.in_object(|| path.display().to_string(), "/"))?;
            opened.attach(&shared);
            Ok(File::from_shared(shared, Some(path.to_path_buf())))
        })
    }

    /// Opens the existing file at `path` for reading and writing (default cache settings).
    /// Files written by libhdf5 in the earliest format (h5py's default) can be changed: groups,
    /// datasets and attributes added, deleted or renamed, contiguous and version 1 B-tree chunked
    /// datasets written and resized. A userblock is kept as it is.
    pub fn open_rw(path: impl AsRef<Path>) -> Result<File> {
        crate::swmr::api(|| Self::open_rw_with(path, &FileAccess::default()))
    }

    /// [`File::open_rw`] with the given cache settings.
    pub fn open_rw_with(path: impl AsRef<Path>, access: &FileAccess) -> Result<File> {
        crate::swmr::api(|| {
            let path = path.as_ref();
            if access.settings().swmr.is_some() {
                if access.is_swmr_write() {
                    return Err(crate::SwmrWriteError::VfdSwmr.into());
                }
                let shared = crate::swmr::open(path, access, true)
                    .map_err(|e| e.in_object(|| path.display().to_string(), "/"))?;
                return Ok(File::from_shared(shared, Some(path.to_path_buf())));
            }
            let opened = open_path(path, Mode::ReadWrite, access)?;
            let dir = path.parent().map(Path::to_path_buf);
            let storage = Arc::clone(&opened.storage);
            let shared = h5_core::file::FileShared::open_rw(storage, access.settings(), dir)
                .map_err(|e| explain(path, e).in_object(|| path.display().to_string(), "/"))?;
            opened.attach(&shared);
            let file = File::from_shared(shared, Some(path.to_path_buf()));
            if access.is_swmr_write() {
                crate::swmr_write::enter_at_open(&file)?;
            }
            Ok(file)
        })
    }

    /// Writes everything to the file (raw data, then metadata, the superblock last). When it
    /// returns, the operating system holds a complete, consistent file (other processes can
    /// open it; a writer killed at any later instant leaves at least this state, docs/design.md
    /// §6). It is on stable storage only if the file was opened with
    /// [`FileAccess::sync`]`(true)`, which adds an `fsync`; by default, as libhdf5's `H5Fflush`,
    /// it does not sync.
    pub fn flush(&self) -> Result<()> {
        crate::swmr::api(|| self.ctx(self.shared().flush()))
    }

    /// Flushes and closes the file, reporting any error (dropping the last handle flushes and
    /// closes too, but cannot report). Every other handle of the file — clones of this `File`,
    /// groups, datasets, attributes — refuses later calls with [`Error::Closed`], and the
    /// file's lock is released (libhdf5's strong close degree). A file in the failed state is
    /// closed as well, and the failure returned. The same durability as
    /// [`File::flush`] (libhdf5's `H5Fclose` does not sync either).
    ///
    /// A VFD SWMR file ends its session here: the writer waits out its delayed writes,
    /// publishes an empty index at a new tick and removes the metadata file; a reader stops
    /// taking part in ticks.
    pub fn close(self) -> Result<()> {
        crate::swmr::api(|| self.ctx(self.shared().close()))
    }
}

impl Group {
    /// Creates the group `path` below this one (intermediate groups are created when missing).
    pub fn create_group(&self, path: &str) -> Result<Group> {
        crate::swmr::api(|| self.create_group_with(path, &GroupOptions::default()))
    }

    /// Creates the group `path` below this one with creation `options` (link creation order
    /// tracking, phase change; used by new-style groups, format bounds V18 and newer);
    /// intermediate groups are created with the defaults when missing.
    pub fn create_group_with(&self, path: &str, options: &GroupOptions) -> Result<Group> {
        crate::swmr::api(|| {
            let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
            let Some((last, parents)) = parts.split_last() else {
                return Err(Error::Invalid(format!("group path {path:?}")));
            };
            let mut g = self.clone();
            for p in parents {
                g = match g.group(p) {
                    Ok(sub) => sub,
                    Err(Error::NotFound(_)) => g.create_child_group(p)?,
                    Err(e) => return Err(e),
                };
            }
            g.create_child_group_with(last, options)
        })
    }

    /// The group at `path` below this one (or absolute), created with any missing
    /// intermediate groups when it does not exist (h5py's `require_group`).
    pub fn require_group(&self, path: &str) -> Result<Group> {
        crate::swmr::api(|| {
            let mut g = if path.starts_with('/') {
                Group::root(self.file_shared())
            } else {
                self.clone()
            };
            for p in path.split('/').filter(|p| !p.is_empty() && *p != ".") {
                g = match g.group(p) {
                    Ok(sub) => sub,
                    Err(Error::NotFound(_)) => g.create_child_group(p)?,
                    Err(e) => return Err(e),
                };
            }
            Ok(g)
        })
    }

    fn create_child_group(&self, name: &str) -> Result<Group> {
        self.create_child_group_with(name, &GroupOptions::default())
    }

    fn create_child_group_with(&self, name: &str, options: &GroupOptions) -> Result<Group> {
        let r = self
            .file_shared()
            .create_group_with(self.address(), name, options);
        self.ctx(r)?;
        self.group(name)
    }

    /// The group holding the last component of `path` (relative to this group) and that
    /// component.
    fn parent_of<'p>(&self, path: &'p str) -> Result<(Group, &'p str)> {
        let path = path.trim_end_matches('/');
        match path.rsplit_once('/') {
            Some((dir, name)) if !dir.is_empty() => Ok((self.group(dir)?, name)),
            Some((_, name)) => Ok((self.clone(), name)),
            None => Ok((self.clone(), path)),
        }
    }

    /// Removes the link at `path` (relative to this group). A hard link's object loses a
    /// reference; the last one deletes it and returns its space (a group's members are then
    /// unlinked in turn).
    pub fn unlink(&self, path: &str) -> Result<()> {
        crate::swmr::api(|| {
            let (g, name) = self.parent_of(path)?;
            self.ctx(self.file_shared().unlink(g.address(), name))
        })
    }

    /// Moves (or renames) the link at `from` to `to`, both relative to this group; the object
    /// itself is unchanged.
    pub fn move_link(&self, from: &str, to: &str) -> Result<()> {
        crate::swmr::api(|| {
            let (src, name) = self.parent_of(from)?;
            let (dst, new_name) = self.parent_of(to)?;
            let r = self
                .file_shared()
                .move_link(src.address(), name, dst.address(), new_name);
            self.ctx(r)
        })
    }

    /// Adds an external link `name` → the object at `path` in the file `file` (a name
    /// resolved against this file's directory when read). Needs a new-style group (format
    /// bounds V18 and newer).
    pub fn link_external(&self, name: &str, file: &str, path: &str) -> Result<()> {
        crate::swmr::api(|| {
            let r = self
                .file_shared()
                .link_external(self.address(), name, file, path);
            self.ctx(r)
        })
    }

    /// Whether this group, created by this handle's file, stores its links densely (fractal
    /// heap and v2 B-tree) as of the next flush; `None` for an old-style group or one read
    /// from the file.
    pub fn is_dense(&self) -> Option<bool> {
        self.file_shared().group_is_dense(self.address())
    }

    /// Adds a soft link `name` → `target` (a path).
    pub fn link_soft(&self, name: &str, target: &str) -> Result<()> {
        crate::swmr::api(|| self.ctx(self.file_shared().link_soft(self.address(), name, target)))
    }

    /// Adds a hard link `name` to an existing object of this file (for example a dataset).
    pub fn link_hard(&self, name: &str, target: &Dataset) -> Result<()> {
        crate::swmr::api(|| {
            let r = self
                .file_shared()
                .link_hard(self.address(), name, target.address());
            self.ctx(r)
        })
    }

    /// Starts describing a new dataset of `T` elements (numbers, strings, derived compounds
    /// and enumerations, arrays, sequences, references: see [`H5Type`]).
    pub fn new_dataset<T: H5Type>(&self) -> DatasetBuilder<T> {
        DatasetBuilder {
            group: self.clone(),
            datatype: T::h5_type(),
            shape: Vec::new(),
            max_shape: None,
            chunk: None,
            filters: Vec::new(),
            fill: None,
            chunk_index: None,
            unfiltered_edges: false,
            compact: false,
            alloc_time: None,
            fill_time: None,
            data_follows: false,
            _t: PhantomData,
        }
    }
}

/// A new dataset's description (hdf5-metno style):
/// `group.new_dataset::<f32>().shape([100, 100]).chunk([10, 10]).deflate(4).create("x")`.
#[derive(Debug)]
#[must_use]
pub struct DatasetBuilder<T> {
    group: Group,
    datatype: Datatype,
    shape: Vec<u64>,
    max_shape: Option<Vec<u64>>,
    chunk: Option<Vec<u64>>,
    filters: Vec<FilterRequest>,
    fill: Option<Result<Vec<u8>>>,
    chunk_index: Option<ChunkIndexKind>,
    unfiltered_edges: bool,
    compact: bool,
    alloc_time: Option<AllocTime>,
    fill_time: Option<FillTime>,
    /// Set by [`DatasetBuilder::create_with_data`]: every element is written right after
    /// the dataset is made.
    data_follows: bool,
    _t: PhantomData<T>,
}

impl<T: H5Type> DatasetBuilder<T> {
    /// The dimensions (empty: a scalar).
    pub fn shape(mut self, dims: impl AsRef<[usize]>) -> Self {
        self.shape = dims.as_ref().iter().map(|d| *d as u64).collect();
        self
    }

    /// Maximum dimensions; `None` in a dimension makes it unlimited (needs chunks).
    pub fn max_shape(mut self, dims: impl AsRef<[Option<usize>]>) -> Self {
        self.max_shape = Some(
            dims.as_ref()
                .iter()
                .map(|d| d.map_or(UNLIMITED, |d| d as u64))
                .collect(),
        );
        self
    }

    /// Chunk dimensions (chunked layout).
    pub fn chunk(mut self, dims: impl AsRef<[usize]>) -> Self {
        self.chunk = Some(dims.as_ref().iter().map(|d| *d as u64).collect());
        self
    }

    fn filter(mut self, request: FilterRequest) -> Self {
        self.filters.push(request);
        self
    }

    // Filters apply in the order they are added (the first one first when writing), as with
    // libhdf5's `H5Pset_*` calls. Their client data are what libhdf5 (or the filter's plugin)
    // records for the dataset's datatype, chunk shape and fill value, computed at `create`.

    /// Adds the shuffle filter (put it before a compressor). Optional.
    pub fn shuffle(self) -> Self {
        self.filter(FilterRequest::Shuffle)
    }

    /// Adds deflate (gzip) compression at `level` (0–9; larger levels are an error at
    /// [`create`](Self::create)). Optional.
    pub fn deflate(self, level: u8) -> Self {
        self.filter(FilterRequest::Deflate(u32::from(level)))
    }

    /// Adds the Fletcher-32 checksum filter (mandatory, as in libhdf5).
    pub fn fletcher32(self) -> Self {
        self.filter(FilterRequest::Fletcher32)
    }

    /// Adds szip compression (`H5Pset_szip`): `coding` and `pixels_per_block` (even, 2–32; a
    /// chunk needs at least that many elements). Integer and floating-point types of 1, 2, 4 or
    /// 8 bytes only. Optional: a chunk that does not shrink is stored unfiltered.
    pub fn szip(self, coding: SzipCoding, pixels_per_block: u8) -> Self {
        self.filter(FilterRequest::Szip {
            coding,
            pixels_per_block: u32::from(pixels_per_block),
        })
    }

    /// Adds the scale-offset filter (`H5Pset_scaleoffset`): lossless for integers
    /// ([`ScaleOffset::Integer`]), lossy to a number of decimal digits for floats
    /// ([`ScaleOffset::FloatDecimal`]). Optional.
    pub fn scale_offset(self, scaling: ScaleOffset) -> Self {
        self.filter(FilterRequest::ScaleOffset(scaling))
    }

    /// Adds the n-bit filter (`H5Pset_nbit`): packs the significant bits of each number (a
    /// pass-through for full-precision types). Optional.
    pub fn nbit(self) -> Self {
        self.filter(FilterRequest::Nbit)
    }

    /// Adds LZF compression (h5py's filter 32000). Optional: a chunk that does not shrink is
    /// stored unfiltered.
    pub fn lzf(self) -> Self {
        self.filter(FilterRequest::Lzf)
    }

    /// Adds LZ4 compression (registered filter 32004) in blocks of `block_bytes` (0: the
    /// plugin's default of 1 GiB, i.e. one block per chunk). Optional.
    pub fn lz4(self, block_bytes: u32) -> Self {
        self.filter(FilterRequest::Lz4 { block_bytes })
    }

    /// Adds Zstandard compression (registered filter 32015). `level` is recorded as given (the
    /// plugin's default is 3); this library's encoder always uses its fastest level, which any
    /// reader decodes. Optional.
    pub fn zstd(self, level: i32) -> Self {
        self.filter(FilterRequest::Zstd { level })
    }

    /// Adds bzip2 compression (registered filter 307) with a block size of 1–9 (×100 kB; the
    /// plugin's default is 9). Optional.
    pub fn bzip2(self, block_size: u8) -> Self {
        self.filter(FilterRequest::Bzip2 {
            block_size: u32::from(block_size),
        })
    }

    /// Adds Blosc compression (registered filter 32001): a compressor, a level 0–9 and the
    /// shuffle Blosc applies. This library's encoder writes LZ4 blocks for the BloscLZ, LZ4,
    /// LZ4HC and Snappy choices (the block header names the codec, so every Blosc reader decodes
    /// them) and zlib or Zstandard blocks for those. Optional.
    pub fn blosc(self, compressor: BloscCompressor, level: u8, shuffle: BloscShuffle) -> Self {
        self.filter(FilterRequest::Blosc {
            compressor,
            level: u32::from(level),
            shuffle,
        })
    }

    /// Adds Blosc2 compression (registered filter 32026, as hdf5plugin's `Blosc2` and PyTables'
    /// `blosc2:*` write it): a compressor (BloscLZ, LZ4, LZ4HC, zlib or Zstandard), a level 0–9
    /// and the shuffle applied first. This library's encoder writes one Blosc2 frame per chunk
    /// holding LZ4 blocks for the BloscLZ, LZ4 and LZ4HC choices (each chunk names its codec, so
    /// every Blosc2 reader decodes them) and zlib or Zstandard blocks for those. Optional.
    pub fn blosc2(self, compressor: BloscCompressor, level: u8, shuffle: BloscShuffle) -> Self {
        self.filter(FilterRequest::Blosc2 {
            compressor,
            level: u32::from(level),
            shuffle,
        })
    }

    /// Adds the bitshuffle filter (registered filter 32008), alone or followed by LZ4 or
    /// Zstandard per block, with the filter's default block size. Optional.
    pub fn bitshuffle(self, compression: BitshuffleCompression) -> Self {
        self.filter(FilterRequest::Bitshuffle {
            block_elems: 0,
            compression,
        })
    }

    /// [`bitshuffle`](Self::bitshuffle) with blocks of `block_elems` elements (a multiple of 8;
    /// 0 = the filter's default).
    pub fn bitshuffle_blocks(self, block_elems: u32, compression: BitshuffleCompression) -> Self {
        self.filter(FilterRequest::Bitshuffle {
            block_elems,
            compression,
        })
    }

    /// Adds a filter by its registered id with its client data, stored exactly as given and
    /// mandatory (as `H5Pset_filter` with no flags): a chunk it cannot encode fails the write.
    /// For example 32015 for zstd.
    pub fn filter_raw(self, id: u16, client_data: Vec<u32>) -> Self {
        self.filter(FilterRequest::Raw(Filter {
            id,
            name: None,
            flags: 0,
            client_data,
        }))
    }

    /// Adds a filter exactly as another dataset's pipeline records it ([`Dataset::filters`]):
    /// id, name, optional flag and client data, with no recomputation. Copies a pipeline
    /// when the datatype and chunk shape are the same.
    pub fn filter_like(self, filter: &FilterInfo) -> Self {
        self.filter(FilterRequest::Raw(Filter {
            id: filter.id,
            name: filter.name.as_ref().map(|n| n.as_bytes().to_vec()),
            flags: u16::from(filter.optional),
            client_data: filter.params.clone(),
        }))
    }

    /// The fill value of unwritten elements (without variable-length data).
    pub fn fill_value(mut self, v: T) -> Self {
        let mut ctx = EncodeCtx::detached();
        self.fill =
            Some(T::h5_encode_slice(std::slice::from_ref(&v), &mut ctx).map(|b| b.into_owned()));
        self
    }

    /// Stores partial edge chunks (those reaching past the dataset's extent) without the
    /// filters, as libhdf5 does after `H5Pset_chunk_opts(dcpl,
    /// H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS)`: writing a growing edge costs no encoding, and
    /// a chunk re-encodes when a resize makes it full. The layout message is then of version 4
    /// or later (read by HDF5 1.10 and later), with one of HDF5 1.10's chunk indexes whatever
    /// the format bounds, as libhdf5 chooses it; a version 1 B-tree index is refused.
    pub fn unfiltered_edge_chunks(mut self) -> Self {
        self.unfiltered_edges = true;
        self
    }

    /// The chunk index (overriding libhdf5's choice for the file's format bounds; layout
    /// version 4 indexes are read by HDF5 1.10 and later).
    pub fn chunk_index(mut self, kind: ChunkIndexKind) -> Self {
        self.chunk_index = Some(kind);
        self
    }

    /// Stores the data inside the object header (layout class compact; at most about 64 KiB,
    /// fixed dimensions, no filters).
    pub fn compact(mut self) -> Self {
        self.compact = true;
        self
    }

    /// When storage is allocated (libhdf5's `H5Pset_alloc_time`; default: contiguous late,
    /// chunked incremental, compact early).
    pub fn alloc_time(mut self, t: AllocTime) -> Self {
        self.alloc_time = Some(t);
        self
    }

    /// When fill values are written into allocated storage (libhdf5's `H5Pset_fill_time`;
    /// default "if set").
    pub fn fill_time(mut self, t: FillTime) -> Self {
        self.fill_time = Some(t);
        self
    }

    /// Creates the dataset `name` in the group; a path (`a/b/name`) creates the missing
    /// groups on the way, as h5py does.
    pub fn create(mut self, name: &str) -> Result<Dataset> {
        crate::swmr::api(|| {
            let name = match name.rsplit_once('/') {
                Some((dir, leaf)) => {
                    self.group =
                        self.group
                            .require_group(if dir.is_empty() { "/" } else { dir })?;
                    leaf
                }
                None => name,
            };
            let file = self.group.file_shared();
            crate::bounds::check_datatype(file, &self.datatype)?;
            if let Some(kind) = self.chunk_index {
                crate::bounds::check_chunk_index(file, kind)?;
            }
            let fill = self.fill.transpose()?;
            let layout = match self.chunk {
                _ if self.compact => {
                    if self.chunk.is_some() || !self.filters.is_empty() {
                        return Err(Error::Invalid(
                            "a compact dataset has no chunks and no filters".into(),
                        ));
                    }
                    NewLayout::Compact
                }
                Some(chunk) => {
                    let zeros = vec![0; self.datatype.size() as usize];
                    let one = fill.as_deref().unwrap_or(&zeros);
                    let filters = self
                        .filters
                        .iter()
                        .map(|r| r.resolve(&self.datatype, &chunk, one))
                        .collect::<std::result::Result<Vec<_>, _>>()?;
                    NewLayout::Chunked {
                        chunk,
                        filters,
                        unfiltered_edges: self.unfiltered_edges,
                    }
                }
                None if self.filters.is_empty() && self.max_shape.is_none() => {
                    NewLayout::Contiguous
                }
                None => {
                    return Err(Error::Invalid(
                        "filters and unlimited dimensions need a chunk shape".into(),
                    ));
                }
            };
            let spec = NewDataset {
                datatype: self.datatype,
                dims: self.shape,
                max_dims: self.max_shape,
                layout,
                fill,
                chunk_index: self.chunk_index,
                alloc_time: self.alloc_time,
                fill_time: self.fill_time,
                data_follows: self.data_follows,
            };
            let r = file.create_dataset(self.group.address(), name, &spec);
            let created = self.group.ctx(r)?;
            // The creator's header is the one a load would decode: not read back.
            Dataset::from_resolved(h5_core::nav::Resolved {
                file: Arc::clone(file),
                header: created.header,
                path: h5_core::nav::join(self.group.path(), name),
            })
        })
    }

    /// Creates the dataset `name` with the shape of `data` (an array of any dimensions and
    /// memory layout, or a slice) and writes it (hdf5-metno's `with_data(..).create(..)`).
    ///
    /// All or nothing: when the write fails (variable-length data under VFD SWMR, a filter
    /// refusing the data, a storage error), the new dataset is unlinked again and the write's
    /// error returned.
    pub fn create_with_data<'a, D: Dimension>(
        self,
        name: &str,
        data: impl Into<ArrayView<'a, T, D>>,
    ) -> Result<Dataset>
    where
        T: 'a,
    {
        crate::swmr::api(|| {
            let data = data.into();
            let group = self.group.clone();
            let mut builder = self.shape(data.shape());
            builder.data_follows = true;
            let ds = builder.create(name)?;
            if let Err(e) = ds.write(data) {
                drop(ds);
                // Best effort: a file that can no longer change keeps the link, and the
                // write's error is the one that says why.
                let _ = group.unlink(name);
                return Err(e);
            }
            Ok(ds)
        })
    }
}
