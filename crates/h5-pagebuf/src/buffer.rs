//! [`PageBuffer`]: the read and write paths, and the operations the VFD SWMR writer and reader
//! call at the end of a tick.

use std::sync::{Arc, Mutex, MutexGuard};

use h5_io::{IoOp, Storage};

use crate::config::{Geometry, PageBufferConfig};
use crate::error::PageBufferError;
use crate::face::Face;
use crate::split::{per_page, split_at_pages};
use crate::state::{Entry, InPlace, Mode, PageKind, State, WriterMode};
use crate::stats::{PageBufferStats, StatKind};

/// A page buffer over one file's storage.
///
/// Until [`enable`](PageBuffer::enable) is called with the file's page size (known once the
/// superblock has been read), both faces pass every call straight through. Afterwards small
/// requests are served from and gathered into whole pages, and requests of a page or more go
/// around the buffer (in VFD SWMR writer mode, metadata never goes around: a page-aligned
/// metadata write longer than a page becomes a multi-page entry).
#[derive(Debug)]
pub struct PageBuffer {
    inner: Arc<dyn Storage>,
    config: PageBufferConfig,
    state: Mutex<State>,
}

/// One entry modified in the current tick, as the VFD SWMR writer publishes it.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct TickImage {
    /// The HDF5 file page where it starts.
    pub page: u64,
    /// Its bytes (a page, or more for a multi-page metadata entry).
    pub image: Vec<u8>,
    /// The tick before which it may not be written to the HDF5 file (0: none).
    pub delay_write_until: u64,
}

/// Sizes and list lengths at one moment.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct Counts {
    /// Entries held.
    pub index_len: usize,
    /// Bytes held.
    pub index_size: u64,
    /// Metadata pages.
    pub md_pages: usize,
    /// Raw-data pages.
    pub rd_pages: usize,
    /// Multi-page metadata entries.
    pub mpmdes: usize,
    /// Dirty entries.
    pub dirty_len: usize,
    /// Entries on the LRU.
    pub lru_len: usize,
    /// Entries on the tick list.
    pub tl_len: usize,
    /// Entries on the delayed-write list.
    pub dwl_len: usize,
    /// Largest delay on the delayed-write list (0 when it is empty).
    pub max_delay: u64,
    /// Configured size in bytes, rounded to whole pages (0 before `enable`).
    pub max_size: u64,
}

fn poisoned(op: IoOp) -> h5_io::Error {
    h5_io::Error::Io {
        op,
        offset: 0,
        source: std::io::Error::other(PageBufferError::Poisoned),
    }
}

fn read_only(op: IoOp, offset: u64) -> h5_io::Error {
    h5_io::Error::Io {
        op,
        offset,
        source: std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "the page buffer of a VFD SWMR reader is read-only",
        ),
    }
}

impl PageBuffer {
    /// A page buffer over `inner`, passing everything through until [`enable`](Self::enable).
    pub fn new(
        inner: Arc<dyn Storage>,
        config: PageBufferConfig,
    ) -> h5_io::Result<Arc<PageBuffer>> {
        let len = inner.len()?;
        Ok(Arc::new(PageBuffer {
            inner,
            config,
            state: Mutex::new(State::new(len)),
        }))
    }

    /// Starts buffering with `page_size`-byte pages (libhdf5's `H5PB_create` rules, see
    /// [`PageBufferConfig::geometry`]). Calling it again with the same page size is a no-op.
    pub fn enable(&self, page_size: u64) -> Result<Geometry, PageBufferError> {
        let geo = self.config.geometry(page_size)?;
        let mut st = self.lock_state()?;
        if let Some(g) = st.geo {
            if g.page_size != page_size {
                return Err(PageBufferError::PageSize { page_size });
            }
            return Ok(g);
        }
        st.inner_len = self.inner.len()?;
        st.logical_len = st.logical_len.max(st.inner_len);
        st.geo = Some(geo);
        Ok(geo)
    }

    /// The configuration.
    pub fn config(&self) -> &PageBufferConfig {
        &self.config
    }

    /// The page size once enabled.
    pub fn page_size(&self) -> Option<u64> {
        self.state
            .lock()
            .ok()
            .and_then(|s| s.geo.map(|g| g.page_size))
    }

    /// The storage below the buffer.
    pub fn inner(&self) -> &Arc<dyn Storage> {
        &self.inner
    }

    /// The face for metadata I/O (what the metadata cache reads and writes through).
    pub fn metadata(self: &Arc<Self>) -> Arc<dyn Storage> {
        Arc::new(Face::new(Arc::clone(self), PageKind::Metadata))
    }

    /// The face for raw-data I/O (what the chunk cache reads and writes through).
    pub fn raw(self: &Arc<Self>) -> Arc<dyn Storage> {
        Arc::new(Face::new(Arc::clone(self), PageKind::Raw))
    }

    fn lock_state(&self) -> Result<MutexGuard<'_, State>, PageBufferError> {
        self.state.lock().map_err(|_| PageBufferError::Poisoned)
    }

    pub(crate) fn lock_io(&self, op: IoOp) -> h5_io::Result<MutexGuard<'_, State>> {
        self.state.lock().map_err(|_| poisoned(op))
    }

    /// The statistics so far.
    pub fn stats(&self) -> PageBufferStats {
        self.state
            .lock()
            .map(|s| s.stats.clone())
            .unwrap_or_default()
    }

    /// Resets the statistics.
    pub fn reset_stats(&self) {
        if let Ok(mut s) = self.state.lock() {
            s.stats = PageBufferStats::default();
        }
    }

    /// Current sizes and list lengths.
    pub fn counts(&self) -> Counts {
        let Ok(s) = self.state.lock() else {
            return Counts::default();
        };
        let (tl_len, dwl_len, max_delay) = match &s.mode {
            Mode::Writer(w) => (
                w.tick_list.len(),
                w.dwl.len(),
                w.dwl.iter().next_back().map_or(0, |&(d, _)| d),
            ),
            _ => (0, 0, 0),
        };
        Counts {
            index_len: s.entries.len(),
            index_size: s.index_size,
            md_pages: s.md_pages,
            rd_pages: s.rd_pages,
            mpmdes: s.mpmdes,
            dirty_len: s.dirty_len,
            lru_len: s.lru.len(),
            tl_len,
            dwl_len,
            max_delay,
            max_size: s.geo.map_or(0, |g| g.max_size),
        }
    }

    /// Checks the buffer's invariants (lists, counters, MPMDE rules); a description of the
    /// first violation otherwise.
    pub fn check_invariants(&self) -> Result<(), String> {
        self.state
            .lock()
            .map_err(|_| "poisoned".to_owned())?
            .check_invariants()
    }

    /// Writes every dirty entry that may be written now (in VFD SWMR writer mode, delayed
    /// entries stay) to the underlying storage.
    pub fn flush(&self) -> Result<(), PageBufferError> {
        let mut st = self.lock_state()?;
        st.flush_all(&*self.inner, None)?;
        Ok(())
    }

    /// Writes the dirty raw-data pages only (VFD SWMR's `flush_raw_data`).
    pub fn flush_raw(&self) -> Result<(), PageBufferError> {
        let mut st = self.lock_state()?;
        st.flush_all(&*self.inner, Some(PageKind::Raw))?;
        Ok(())
    }

    // ----- the read and write paths (called by the faces) -----

    pub(crate) fn read(&self, kind: PageKind, offset: u64, buf: &mut [u8]) -> h5_io::Result<()> {
        let mut st = self.lock_io(IoOp::Read)?;
        let Some(geo) = st.geo else {
            drop(st);
            return self.inner.read_at(offset, buf);
        };
        let len = buf.len() as u64;
        let end = offset
            .checked_add(len)
            .ok_or(h5_io::Error::AddressOverflow { offset, len })?;
        let reader = matches!(st.mode, Mode::Reader);
        let file_len = if reader {
            self.inner.len()?
        } else {
            st.logical_len
        };
        if end > file_len {
            return Err(h5_io::Error::OutOfBounds {
                offset,
                len,
                file_len,
            });
        }
        if len == 0 {
            return Ok(());
        }
        let sk = stat_kind(kind);
        st.stats.accesses.bump(sk);
        let ps = geo.page_size;
        if (reader && kind == PageKind::Raw) || len >= ps {
            // A page or more (in writer mode, multi-page entries included): the file's bytes
            // with whatever the buffer holds laid over them.
            st.stats.bypasses.bump(sk);
            return self.bypass_read(&mut st, offset, buf, reader);
        }
        let pieces = split_at_pages(offset, len, ps);
        if pieces.len() > 1 {
            st.stats.split_ios += 1;
            if let Some(log) = &mut st.split_log {
                log.push((offset, len));
            }
        }
        for p in pieces {
            let part = &mut buf[p.skip as usize..(p.skip + p.len) as usize];
            self.read_piece(&mut st, kind, p.offset, part)?;
        }
        Ok(())
    }

    /// Reads `buf.len()` bytes within one page through the buffer.
    fn read_piece(
        &self,
        st: &mut State,
        kind: PageKind,
        offset: u64,
        buf: &mut [u8],
    ) -> h5_io::Result<()> {
        let ps = st.page_size();
        let page = offset / ps;
        let sk = stat_kind(kind);
        let key = match st.find(page) {
            Some(k) => {
                st.stats.hits.bump(sk);
                k
            }
            None => {
                st.stats.misses.bump(sk);
                st.make_space(&*self.inner)?;
                st.load_page(&*self.inner, page, kind)?
            }
        };
        st.touch(key);
        let e = &st.entries[&key];
        let at = (offset - key * ps) as usize;
        if at + buf.len() > e.image.len() {
            // The piece runs past the end of a multi-page entry into its last page.
            let reader = matches!(st.mode, Mode::Reader);
            return self.bypass_read(st, offset, buf, reader);
        }
        buf.copy_from_slice(&e.image[at..at + buf.len()]);
        Ok(())
    }

    /// Reads from the underlying storage (zero past its end), then lays every cached entry
    /// over the bytes it covers.
    fn bypass_read(
        &self,
        st: &mut State,
        offset: u64,
        buf: &mut [u8],
        reader: bool,
    ) -> h5_io::Result<()> {
        let len = buf.len() as u64;
        if reader {
            // A reader's entries are never newer than the file (they are only ever loaded from
            // it) and may be older (a page a speculative metadata read brought in that later
            // received raw data): the driver's bytes are the answer.
            return self.inner.read_at(offset, buf);
        } else {
            let present = st.inner_len.saturating_sub(offset).min(len) as usize;
            if present > 0 {
                self.inner.read_at(offset, &mut buf[..present])?;
            }
            buf[present..].fill(0);
        }
        overlay(st, offset, buf);
        Ok(())
    }

    pub(crate) fn write(&self, kind: PageKind, offset: u64, data: &[u8]) -> h5_io::Result<()> {
        let mut st = self.lock_io(IoOp::Write)?;
        let len = data.len() as u64;
        let end = offset
            .checked_add(len)
            .ok_or(h5_io::Error::AddressOverflow { offset, len })?;
        let Some(geo) = st.geo else {
            self.inner.write_at(offset, data)?;
            if len > 0 {
                st.inner_len = st.inner_len.max(end);
                st.logical_len = st.logical_len.max(end);
            }
            return Ok(());
        };
        if matches!(st.mode, Mode::Reader) {
            return Err(read_only(IoOp::Write, offset));
        }
        if len == 0 {
            return Ok(());
        }
        let sk = stat_kind(kind);
        st.stats.accesses.bump(sk);
        st.logical_len = st.logical_len.max(end);
        let ps = geo.page_size;
        let writer = matches!(st.mode, Mode::Writer(_));
        if writer && kind == PageKind::Raw {
            st.note_raw_over_index(offset / ps, (end - 1) / ps);
        }
        if len < ps && offset / ps == (end - 1) / ps {
            // Inside one page and shorter than it: one piece, neither split nor bypassed
            // (what both paths below would make of it, without their piece lists).
            return self.write_piece(&mut st, kind, offset, data);
        }
        if writer && kind == PageKind::Metadata {
            if offset.is_multiple_of(ps) && len > ps {
                return self.write_mpmde(&mut st, offset, data);
            }
            let pieces = per_page(offset, len, ps);
            let misaligned = !offset.is_multiple_of(ps) && pieces.len() > 1;
            if misaligned {
                st.stats.split_ios += 1;
                if let Some(log) = &mut st.split_log {
                    log.push((offset, len));
                }
            }
            for p in pieces {
                let part = &data[p.skip as usize..(p.skip + p.len) as usize];
                self.write_piece(&mut st, kind, p.offset, part)?;
            }
            return Ok(());
        }
        if len >= ps {
            st.stats.bypasses.bump(sk);
            self.inner.write_at(offset, data)?;
            st.inner_len = st.inner_len.max(end);
            // Keep cached pages equal to what was just written.
            for key in st.overlapping(offset, end) {
                if let Some(e) = st.entries.get_mut(&key) {
                    copy_into_image(key * ps, &mut e.image, offset, data);
                }
            }
            return Ok(());
        }
        let pieces = split_at_pages(offset, len, ps);
        if pieces.len() > 1 && kind == PageKind::Metadata {
            st.stats.split_ios += 1;
            if let Some(log) = &mut st.split_log {
                log.push((offset, len));
            }
        }
        for p in pieces {
            let part = &data[p.skip as usize..(p.skip + p.len) as usize];
            self.write_piece(&mut st, kind, p.offset, part)?;
        }
        Ok(())
    }

    /// Writes bytes within one page (or within a multi-page entry) into the buffer.
    fn write_piece(
        &self,
        st: &mut State,
        kind: PageKind,
        offset: u64,
        data: &[u8],
    ) -> h5_io::Result<()> {
        let ps = st.page_size();
        let page = offset / ps;
        let sk = stat_kind(kind);
        let key = match st.write_in_place(page, kind, offset, data) {
            InPlace::Written => {
                st.stats.hits.bump(sk);
                return Ok(());
            }
            InPlace::Found(k) => {
                st.stats.hits.bump(sk);
                k
            }
            InPlace::Missing => {
                st.stats.misses.bump(sk);
                st.make_space(&*self.inner)?;
                if data.len() as u64 == ps {
                    let in_file = page * ps < st.inner_len && st.existed(page);
                    st.insert(
                        page,
                        Entry {
                            image: data.to_vec(),
                            kind,
                            mpmde: false,
                            dirty: false,
                            in_file,
                            lru_seq: None,
                            modified_this_tick: false,
                            delay_write_until: 0,
                        },
                    );
                    page
                } else {
                    st.load_page(&*self.inner, page, kind)?
                }
            }
        };
        // A page just made is clean, so the write takes the general path.
        let inner_len = st.inner_len;
        let mut grown = 0;
        if let Some(e) = st.entries.get_mut(&key) {
            let end = (offset + data.len() as u64 - key * ps) as usize;
            if e.mpmde && end > e.image.len() {
                // A write past the end of a multi-page entry, within its last page (no other
                // entry holds that page): the entry grows over it, the new bytes read from
                // the file first.
                let old = e.image.len();
                grown = (end - old) as u64;
                e.image.resize(end, 0);
                let from = key * ps + old as u64;
                let present = inner_len.saturating_sub(from).min(grown) as usize;
                if present > 0 {
                    self.inner.read_at(from, &mut e.image[old..old + present])?;
                }
            }
            copy_into_image(key * ps, &mut e.image, offset, data);
        }
        if grown > 0 {
            st.note_growth(key, grown);
        }
        // Dirty, of the kind written last (space freed as one kind may come back as the
        // other), at the LRU head.
        st.note_write(key, kind);
        if kind == PageKind::Metadata {
            st.mark_modified(key);
        }
        Ok(())
    }

    /// VFD SWMR writer: a page-aligned metadata write longer than a page is held whole as a
    /// multi-page entry. Entries it overlaps are absorbed into it (their bytes outside the
    /// write are kept), so entries never overlap.
    fn write_mpmde(&self, st: &mut State, offset: u64, data: &[u8]) -> h5_io::Result<()> {
        let ps = st.page_size();
        let key = offset / ps;
        let end = offset + data.len() as u64;
        let same = st
            .entries
            .get(&key)
            .is_some_and(|e| e.mpmde && e.image.len() == data.len());
        if same {
            st.stats.hits.bump(StatKind::Mpmde);
            if let Some(e) = st.entries.get_mut(&key) {
                e.image.copy_from_slice(data);
            }
            st.set_dirty(key, true);
            st.mark_modified(key);
            return Ok(());
        }
        st.stats.misses.bump(StatKind::Mpmde);
        // The union of the write and every entry overlapping it.
        let (mut lo, mut hi) = (offset, end);
        loop {
            let keys = st.overlapping(lo, hi);
            let (l, h) = keys.iter().fold((lo, hi), |(l, h), k| {
                let e = &st.entries[k];
                (l.min(k * ps), h.max(k * ps + e.image.len() as u64))
            });
            if (l, h) == (lo, hi) {
                break;
            }
            (lo, hi) = (l, h);
        }
        let mut image = vec![0u8; (hi - lo) as usize];
        let mut in_file = offset < st.inner_len && st.existed(key);
        let mut delay = 0;
        for k in st.overlapping(lo, hi) {
            if let Some(e) = st.remove(k) {
                let at = (k * ps - lo) as usize;
                image[at..at + e.image.len()].copy_from_slice(&e.image);
                in_file |= e.in_file;
                delay = delay.max(e.delay_write_until);
                st.stats.clears.bump(e.stat_kind());
            }
        }
        image[(offset - lo) as usize..(end - lo) as usize].copy_from_slice(data);
        let base = lo / ps;
        st.insert(
            base,
            Entry {
                image,
                kind: PageKind::Metadata,
                mpmde: true,
                dirty: false,
                in_file,
                lru_seq: None,
                modified_this_tick: false,
                delay_write_until: 0,
            },
        );
        st.set_dirty(base, true);
        st.mark_modified(base);
        st.raise_delay(base, delay);
        Ok(())
    }

    pub(crate) fn len(&self) -> h5_io::Result<u64> {
        let st = self.lock_io(IoOp::Len)?;
        if st.geo.is_none() || matches!(st.mode, Mode::Reader) {
            drop(st);
            return self.inner.len();
        }
        Ok(st.logical_len)
    }

    pub(crate) fn set_len(&self, len: u64) -> h5_io::Result<()> {
        let mut st = self.lock_io(IoOp::SetLen)?;
        if matches!(st.mode, Mode::Reader) {
            return Err(read_only(IoOp::SetLen, len));
        }
        let ps = st.page_size();
        if ps > 0 {
            let gone: Vec<u64> = st
                .entries
                .range(len.div_ceil(ps)..)
                .map(|(&k, _)| k)
                .collect();
            for k in gone {
                if let Some(e) = st.remove(k) {
                    st.stats.clears.bump(e.stat_kind());
                }
            }
            if let Some((&k, e)) = st.entries.range_mut(..len.div_ceil(ps)).next_back() {
                let start = k * ps;
                let keep = len.saturating_sub(start) as usize;
                if keep < e.image.len() {
                    e.image[keep..].fill(0);
                }
            }
        }
        self.inner.set_len(len)?;
        st.inner_len = len;
        st.logical_len = len;
        Ok(())
    }

    /// Writes every dirty page to the storage below (none in reader mode), then commits it
    /// there (a rollback journal's commit point, [`Storage::commit`]).
    pub(crate) fn commit(&self, point: &h5_io::CommitPoint) -> h5_io::Result<()> {
        let mut st = self.lock_io(IoOp::Commit)?;
        if st.geo.is_some() && !matches!(st.mode, Mode::Reader) {
            st.flush_all(&*self.inner, None)?;
        }
        drop(st);
        self.inner.commit(point)
    }

    pub(crate) fn sync(&self) -> h5_io::Result<()> {
        let mut st = self.lock_io(IoOp::Sync)?;
        if st.geo.is_some() && !matches!(st.mode, Mode::Reader) {
            st.flush_all(&*self.inner, None)?;
        }
        drop(st);
        self.inner.sync()
    }

    // ----- VFD SWMR writer -----

    /// Switches to VFD SWMR writer mode at `tick`: metadata changes are listed per tick, and
    /// changes to pages the HDF5 file already holds wait `max_lag` ticks (SWMR-065/066).
    pub fn start_swmr_writer(&self, max_lag: u64, tick: u64) -> Result<(), PageBufferError> {
        let mut st = self.lock_state()?;
        let initial_len = st.inner_len;
        st.mode = Mode::Writer(Box::new(WriterMode {
            tick,
            max_lag,
            initial_len,
            ..WriterMode::default()
        }));
        Ok(())
    }

    /// Switches to VFD SWMR reader mode (raw data goes around the buffer; pages are evicted
    /// when the metadata file index changes).
    pub fn start_swmr_reader(&self) -> Result<(), PageBufferError> {
        let mut st = self.lock_state()?;
        st.mode = Mode::Reader;
        Ok(())
    }

    fn with_writer<T>(
        &self,
        f: impl FnOnce(&mut State, &dyn Storage) -> Result<T, PageBufferError>,
    ) -> Result<T, PageBufferError> {
        let mut st = self.lock_state()?;
        if !matches!(st.mode, Mode::Writer(_)) {
            return Err(PageBufferError::WrongMode {
                needed: "VFD SWMR writer",
            });
        }
        f(&mut st, &*self.inner)
    }

    /// The writer's current tick (SWMR-050).
    pub fn tick(&self) -> Option<u64> {
        self.state.lock().ok()?.writer().map(|w| w.tick)
    }

    /// Sets the writer's current tick.
    pub fn set_tick(&self, tick: u64) -> Result<(), PageBufferError> {
        self.with_writer(|st, _| {
            if let Mode::Writer(w) = &mut st.mode {
                w.tick = tick;
            }
            Ok(())
        })
    }

    /// Copies of every entry on the tick list, in page order.
    pub fn tick_images(&self) -> Result<Vec<TickImage>, PageBufferError> {
        self.with_writer(|st, _| {
            let keys: Vec<u64> = st
                .writer()
                .map(|w| w.tick_list.iter().copied().collect())
                .unwrap_or_default();
            Ok(keys
                .into_iter()
                .filter_map(|k| {
                    st.entries.get(&k).map(|e| TickImage {
                        page: k,
                        image: e.image.clone(),
                        delay_write_until: e.delay_write_until,
                    })
                })
                .collect())
        })
    }

    /// End of tick: empties the tick list; multi-page entries that are not delayed are written
    /// to the HDF5 file and evicted (SWMR-069).
    pub fn release_tick_list(&self) -> Result<(), PageBufferError> {
        self.with_writer(|st, inner| {
            let keys: Vec<u64> = match &mut st.mode {
                Mode::Writer(w) => {
                    w.tl_size = 0;
                    std::mem::take(&mut w.tick_list).into_iter().collect()
                }
                _ => Vec::new(),
            };
            for k in keys {
                let Some(e) = st.entries.get_mut(&k) else {
                    continue;
                };
                e.modified_this_tick = false;
                if e.mpmde && e.delay_write_until == 0 {
                    st.flush_entry(inner, k)?;
                    if let Some(e) = st.remove(k) {
                        st.stats.evictions.bump(e.stat_kind());
                    }
                }
            }
            Ok(())
        })
    }

    /// End of tick: every delayed entry whose delay has run out (delay ≤ current tick) may be
    /// written: pages go to the LRU head, multi-page entries are written and evicted
    /// (SWMR-070).
    pub fn release_delayed_writes(&self) -> Result<(), PageBufferError> {
        self.with_writer(|st, inner| {
            let due: Vec<(u64, u64)> = match &st.mode {
                Mode::Writer(w) => w.dwl.range(..(w.tick + 1, 0)).copied().collect(),
                _ => Vec::new(),
            };
            for (until, k) in due {
                let size = st.entries.get(&k).map_or(0, |e| e.image.len() as u64);
                if let Mode::Writer(w) = &mut st.mode
                    && w.dwl.remove(&(until, k))
                {
                    w.dwl_size -= size;
                }
                let Some(e) = st.entries.get_mut(&k) else {
                    continue;
                };
                e.delay_write_until = 0;
                if e.mpmde {
                    if !e.modified_this_tick {
                        st.flush_entry(inner, k)?;
                        if let Some(e) = st.remove(k) {
                            st.stats.evictions.bump(e.stat_kind());
                        }
                    }
                } else {
                    st.put_on_lru(k);
                }
            }
            Ok(())
        })
    }

    /// The published index as the buffer needs it: every entry's first HDF5 page, its page
    /// count, and the tick before which a change to it must not reach the HDF5 file.
    pub fn set_index_view(
        &self,
        view: impl IntoIterator<Item = (u64, u64, u64)>,
    ) -> Result<(), PageBufferError> {
        let mut delays = std::collections::HashMap::new();
        let mut covered = std::collections::HashMap::new();
        for (base, pages, delay) in view {
            delays.insert(base, delay);
            for p in base..base + pages.max(1) {
                covered.insert(p, base);
            }
        }
        self.with_writer(|st, _| {
            if let Mode::Writer(w) = &mut st.mode {
                w.index_delays = delays;
                w.index_pages = covered;
            }
            Ok(())
        })
    }

    /// Index entries (by first page) whose pages received raw data since the last call: the
    /// space held metadata when they were published and was freed and reused for raw data, so
    /// their images are stale and the entries must leave the index.
    pub fn take_raw_over_index(&self) -> Result<Vec<u64>, PageBufferError> {
        self.with_writer(|st, _| {
            Ok(match &mut st.mode {
                Mode::Writer(w) => std::mem::take(&mut w.raw_over_index).into_iter().collect(),
                _ => Vec::new(),
            })
        })
    }

    /// The pages (entry keys) written to the HDF5 file since the last call.
    pub fn take_flushed(&self) -> Result<Vec<u64>, PageBufferError> {
        self.with_writer(|st, _| {
            Ok(match &mut st.mode {
                Mode::Writer(w) => std::mem::take(&mut w.flushed),
                _ => Vec::new(),
            })
        })
    }

    /// Whether the entry starting at `page` is held and dirty.
    pub fn is_dirty(&self, page: u64) -> bool {
        self.state
            .lock()
            .ok()
            .and_then(|s| s.entries.get(&page).map(|e| e.dirty))
            .unwrap_or(false)
    }

    /// Whether the buffer has grown past `threshold` times its configured size (the early
    /// end-of-tick rule, OQ-15); never with a threshold of 0.
    pub fn over_expansion_threshold(&self, threshold: u32) -> bool {
        if threshold == 0 {
            return false;
        }
        self.state.lock().is_ok_and(|s| {
            s.geo
                .is_some_and(|g| s.index_size > g.max_size.saturating_mul(u64::from(threshold)))
        })
    }

    /// Starts (or stops) recording requests split at page boundaries.
    pub fn record_splits(&self, on: bool) {
        if let Ok(mut s) = self.state.lock() {
            s.split_log = on.then(Vec::new);
        }
    }

    /// The split requests recorded since the last call: (offset, length).
    pub fn take_split_log(&self) -> Vec<(u64, u64)> {
        self.state
            .lock()
            .ok()
            .and_then(|mut s| s.split_log.as_mut().map(std::mem::take))
            .unwrap_or_default()
    }

    // ----- VFD SWMR reader -----

    /// Evicts every entry overlapping `len` bytes from the start of HDF5 page `page` (the
    /// reader's response to an index change, SWMR-077); returns how many went.
    pub fn evict_range(&self, page: u64, len: u64) -> usize {
        let Ok(mut st) = self.state.lock() else {
            return 0;
        };
        let ps = st.page_size();
        if ps == 0 {
            return 0;
        }
        let start = page * ps;
        let keys = st.overlapping(start, start + len.max(1));
        let n = keys.len();
        for k in keys {
            if let Some(e) = st.remove(k) {
                st.stats.evictions.bump(e.stat_kind());
            }
        }
        n
    }
}

fn stat_kind(kind: PageKind) -> StatKind {
    match kind {
        PageKind::Metadata => StatKind::Metadata,
        PageKind::Raw => StatKind::Raw,
    }
}

/// Copies the part of `data` (at file offset `offset`) that falls in an image starting at
/// `image_start`.
pub(crate) fn copy_into_image(image_start: u64, image: &mut [u8], offset: u64, data: &[u8]) {
    let image_end = image_start + image.len() as u64;
    let end = offset + data.len() as u64;
    let lo = offset.max(image_start);
    let hi = end.min(image_end);
    if lo < hi {
        image[(lo - image_start) as usize..(hi - image_start) as usize]
            .copy_from_slice(&data[(lo - offset) as usize..(hi - offset) as usize]);
    }
}

/// Lays the cached entries over a buffer read at `offset`.
fn overlay(st: &State, offset: u64, buf: &mut [u8]) {
    let ps = st.page_size();
    let end = offset + buf.len() as u64;
    for key in st.overlapping(offset, end) {
        let e = &st.entries[&key];
        let start = key * ps;
        let lo = offset.max(start);
        let hi = end.min(start + e.image.len() as u64);
        if lo < hi {
            buf[(lo - offset) as usize..(hi - offset) as usize]
                .copy_from_slice(&e.image[(lo - start) as usize..(hi - start) as usize]);
        }
    }
}
