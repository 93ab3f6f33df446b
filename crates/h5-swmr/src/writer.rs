//! The writer's side of the metadata file: at each end of tick, the page buffer's tick list
//! becomes new images in the metadata file and a new index, published in the order images,
//! index, header (SWMR-041 … SWMR-050).
//!
//! The publication of a tick is computed first as a [`TickOutput`] (every offset decided, OQ-32)
//! and then applied to the metadata file; updater files are built from the same output.

use std::sync::Arc;

use h5_format::checksum::lookup3;
use h5_io::{Storage, WriteSegment};
use h5_pagebuf::PageBuffer;

use crate::error::{Result, SwmrError};
use crate::format::{HEADER_LEN, MdHeader, MdIndex};
use crate::index::{WriterEntry, WriterIndex, qualifies_for_removal};
use crate::mdspace::{DelayedFrees, MdSpace};

/// One image to write into the metadata file.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ImageWrite {
    /// Byte offset in the metadata file (page-aligned).
    pub md_offset: u64,
    /// The HDF5 page it belongs to.
    pub hdf5_page: u64,
    /// The bytes.
    pub bytes: Vec<u8>,
    /// Their checksum.
    pub checksum: u32,
}

/// Everything one publication writes, with every offset decided.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct TickOutput {
    /// The tick published.
    pub tick: u64,
    /// Page and multi-page images, in HDF5 page order.
    pub images: Vec<ImageWrite>,
    /// Where the index goes (36: right after the header).
    pub index_offset: u64,
    /// The index image.
    pub index: Vec<u8>,
    /// The header image.
    pub header: [u8; HEADER_LEN],
    /// Entries in the index.
    pub entries: usize,
}

/// What an end of tick did (for the log).
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct EotReport {
    /// The tick published.
    pub tick: u64,
    /// Entries in the new index.
    pub entries: usize,
    /// Entries added.
    pub added: usize,
    /// Entries whose image changed.
    pub changed: usize,
    /// Entries removed (written back to the HDF5 file long enough ago, or overlapped).
    pub removed: usize,
    /// Images written into the metadata file.
    pub images: usize,
    /// Bytes of those images.
    pub image_bytes: u64,
    /// Multi-page images among them.
    pub mpmdes: usize,
    /// Where the index went.
    pub index_offset: u64,
    /// Whether the index lives outside the reserved pages.
    pub relocated: bool,
}

/// Settings the writer needs.
#[derive(Clone, Copy, Debug)]
pub struct WriterParams {
    /// Page size of the HDF5 file.
    pub page_size: u64,
    /// Pages reserved at the head of the metadata file.
    pub md_pages_reserved: u64,
    /// max_lag.
    pub max_lag: u64,
    /// Whether entries written back to the HDF5 file leave the index (SWMR-046, SWMR-121).
    pub index_removal: bool,
}

/// The writer's metadata-file state.
#[derive(Debug)]
pub struct MdWriter {
    /// The metadata file (`None`: only updater files are produced, SWMR-055).
    storage: Option<Arc<dyn Storage>>,
    params: WriterParams,
    tick: u64,
    index: WriterIndex,
    space: MdSpace,
    frees: DelayedFrees,
    /// The index's extent once relocated out of the reserved pages (never moves back).
    relocated: Option<(u64, u64)>,
    last_published: Option<MdIndex>,
}

impl MdWriter {
    /// A writer at tick 1 whose metadata file (if any) is still empty; the reserved pages are
    /// the first allocation.
    pub fn new(storage: Option<Arc<dyn Storage>>, params: WriterParams) -> MdWriter {
        let mut space = MdSpace::new(params.page_size);
        space.allocate(params.page_size * params.md_pages_reserved);
        MdWriter {
            storage,
            params,
            tick: 1,
            index: WriterIndex::default(),
            space,
            frees: DelayedFrees::default(),
            relocated: None,
            last_published: None,
        }
    }

    /// The tick the next publication will carry.
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// The parameters.
    pub fn params(&self) -> &WriterParams {
        &self.params
    }

    /// The index.
    pub fn index(&self) -> &WriterIndex {
        &self.index
    }

    /// The metadata file space manager.
    pub fn space(&self) -> &MdSpace {
        &self.space
    }

    /// The delayed-free list.
    pub fn delayed_frees(&self) -> &DelayedFrees {
        &self.frees
    }

    /// The last index published.
    pub fn last_published(&self) -> Option<&MdIndex> {
        self.last_published.as_ref()
    }

    /// Publishes the header and an empty index at the current tick (opening an existing file,
    /// and closing: SWMR-101, SWMR-109), then moves to the next tick.
    pub fn publish_empty(&mut self) -> Result<TickOutput> {
        let t = self.tick;
        for e in self.index.remove_where(|_| true) {
            self.frees
                .push(t, e.md_page * self.params.page_size, u64::from(e.length));
        }
        let out = self.finish(t, Vec::new())?;
        self.tick = t + 1;
        Ok(out)
    }

    /// One writer end of tick for the metadata file, given the page buffer whose tick list
    /// holds this tick's changes: images and index are built and written, superseded space is
    /// queued for release, the page buffer's lists are released and both move to the next tick.
    pub fn end_of_tick(&mut self, pb: &PageBuffer) -> Result<(TickOutput, EotReport)> {
        let t = self.tick;
        let ps = self.params.page_size;
        for page in pb.take_flushed()? {
            if let Some(e) = self.index.get_mut(page) {
                e.tick_of_last_flush = t;
            }
        }
        let mut report = EotReport {
            tick: t,
            ..EotReport::default()
        };
        // Entries whose space now holds raw data: their images are stale metadata.
        let stale = pb.take_raw_over_index()?;
        if !stale.is_empty() {
            for e in self
                .index
                .remove_where(|e| stale.binary_search(&e.hdf5_page).is_ok())
            {
                self.frees.push(t, e.md_page * ps, u64::from(e.length));
                report.removed += 1;
            }
        }
        let mut images = Vec::new();
        for img in pb.tick_images()? {
            let len = img.image.len() as u64;
            let length = u32::try_from(len).map_err(|_| SwmrError::FormatLimit {
                what: "multi-page metadata entry length",
                value: len,
            })?;
            let md_offset = self.space.allocate(len);
            let checksum = lookup3(&img.image, 0);
            let keep_delay = self.index.get_mut(img.page).map_or(0, |e| {
                if e.delayed_flush >= t {
                    e.delayed_flush
                } else {
                    0
                }
            });
            let entry = WriterEntry {
                hdf5_page: img.page,
                md_page: md_offset / ps,
                length,
                checksum,
                tick_of_last_change: t,
                tick_of_last_flush: 0,
                delayed_flush: img.delay_write_until.max(keep_delay),
                moved_to_hdf5_file: false,
            };
            let (replaced, overlapped) = self.index.upsert(entry, ps);
            if let Some(r) = replaced {
                self.frees.push(t, r.md_page * ps, u64::from(r.length));
                if let Some(e) = self.index.get_mut(img.page) {
                    e.tick_of_last_flush = r.tick_of_last_flush;
                }
                report.changed += 1;
            } else {
                report.added += 1;
            }
            for o in overlapped {
                self.frees.push(t, o.md_page * ps, u64::from(o.length));
                report.removed += 1;
            }
            report.image_bytes += len;
            if len > ps {
                report.mpmdes += 1;
            }
            images.push(ImageWrite {
                md_offset,
                hdf5_page: img.page,
                bytes: img.image,
                checksum,
            });
        }
        report.images = images.len();
        if self.params.index_removal {
            let max_lag = self.params.max_lag;
            let mut gone = Vec::new();
            for e in self.index.remove_where(|e| {
                let clean = e.tick_of_last_change != t && !pb.is_dirty(e.hdf5_page);
                if qualifies_for_removal(e, clean, t, max_lag) {
                    if e.moved_to_hdf5_file {
                        return true;
                    }
                    e.moved_to_hdf5_file = true;
                } else {
                    e.moved_to_hdf5_file = false;
                }
                false
            }) {
                gone.push(e);
            }
            for e in gone {
                self.frees.push(t, e.md_page * ps, u64::from(e.length));
                report.removed += 1;
            }
        }
        debug_assert!(self.index.check(ps).is_ok());
        let out = self.finish(t, images)?;
        report.entries = out.entries;
        report.index_offset = out.index_offset;
        report.relocated = self.relocated.is_some();
        pb.release_tick_list()?;
        pb.release_delayed_writes()?;
        pb.set_index_view(self.index.view(ps))?;
        self.tick = t + 1;
        pb.set_tick(self.tick)?;
        Ok((out, report))
    }

    /// Builds the index and header for tick `t`, writes everything (images, index, header),
    /// and releases superseded space older than max_lag ticks.
    fn finish(&mut self, t: u64, images: Vec<ImageWrite>) -> Result<TickOutput> {
        let ps = self.params.page_size;
        let index = self.index.to_disk(t);
        let bytes = index.encode()?;
        let len = bytes.len() as u64;
        let reserved = ps * self.params.md_pages_reserved;
        let index_offset = if self.relocated.is_none() && HEADER_LEN as u64 + len <= reserved {
            HEADER_LEN as u64
        } else {
            // A fresh extent every tick: a reader that read the previous header must find
            // that header's index intact (SWMR-048, SWMR-081).
            let at = self.space.allocate(len);
            if let Some((old, old_len)) = self.relocated.replace((at, len)) {
                self.frees.push(t, old, old_len);
            }
            at
        };
        let page_size = u32::try_from(ps).map_err(|_| SwmrError::FormatLimit {
            what: "page size",
            value: ps,
        })?;
        let header = MdHeader {
            page_size,
            tick: t,
            index_offset,
            index_length: len,
        }
        .encode();
        let out = TickOutput {
            tick: t,
            images,
            index_offset,
            index: bytes,
            header,
            entries: index.entries.len(),
        };
        if let Some(s) = &self.storage {
            apply(&**s, &out)?;
        }
        for (a, l) in self.frees.due(t, self.params.max_lag) {
            self.space.free(a, l);
        }
        self.last_published = Some(index);
        Ok(out)
    }
}

/// Writes a publication into a metadata file: images first, then the index, then the header
/// (one write when the index follows the header) (SWMR-047).
pub fn apply(storage: &dyn Storage, out: &TickOutput) -> Result<()> {
    if !out.images.is_empty() {
        let segs: Vec<WriteSegment<'_>> = out
            .images
            .iter()
            .map(|i| WriteSegment::new(i.md_offset, &i.bytes))
            .collect();
        storage.write_vectored(&segs)?;
    }
    if out.index_offset == HEADER_LEN as u64 {
        let mut both = Vec::with_capacity(HEADER_LEN + out.index.len());
        both.extend_from_slice(&out.header);
        both.extend_from_slice(&out.index);
        storage.write_at(0, &both)?;
    } else {
        storage.write_at(out.index_offset, &out.index)?;
        storage.write_at(0, &out.header)?;
    }
    Ok(())
}
