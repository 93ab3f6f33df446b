//! The page buffer's entries, lists and counters, and the operations on them. Every function
//! here runs under the buffer's lock; I/O goes to the underlying storage passed in.
//!
//! Invariants (checked by [`State::check_invariants`], SWMR-062, SWMR-063, SWMR-068):
//! * an entry's key is its page number; its image starts at `key × page_size`; an entry is a
//!   multi-page metadata entry (MPMDE) exactly when it is metadata longer than a page, and
//!   MPMDEs exist only in VFD SWMR writer mode;
//! * every regular page is on exactly one of the LRU and the delayed-write list; an MPMDE is
//!   never on the LRU (it is on the tick list, the delayed-write list, or both);
//! * the tick list holds exactly the entries with `modified_this_tick`; the delayed-write list
//!   exactly those with a non-zero `delay_write_until`;
//! * the counters (pages by kind, MPMDEs, bytes, dirty entries and bytes, and the bytes on the
//!   tick list and on the delayed-write list) equal the sums over the entries, so that no
//!   operation needs a walk over a list to keep them.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::lru::LruQueue;

use h5_io::{Storage, WriteSegment};

use crate::buffer::copy_into_image;
use crate::config::Geometry;
use crate::stats::{PageBufferStats, StatKind};

/// What a page holds.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum PageKind {
    /// Metadata (everything the metadata cache reads and writes).
    Metadata,
    /// Raw data (chunks, contiguous data).
    Raw,
}

/// One cached page or multi-page metadata entry.
#[derive(Debug)]
pub(crate) struct Entry {
    /// The bytes at `key × page_size`: one page, or more for an MPMDE.
    pub(crate) image: Vec<u8>,
    pub(crate) kind: PageKind,
    pub(crate) mpmde: bool,
    pub(crate) dirty: bool,
    /// The HDF5 file holds a version of these bytes (loaded from it, present when the buffer
    /// first saw it, or written to it since): a change must then be delayed in VFD SWMR writer
    /// mode unless the metadata file index covers it (SWMR-066).
    pub(crate) in_file: bool,
    /// Position on the LRU (`None`: not on it).
    pub(crate) lru_seq: Option<u64>,
    pub(crate) modified_this_tick: bool,
    /// Earliest tick at which the entry may be written to the HDF5 file (0: no constraint).
    pub(crate) delay_write_until: u64,
}

impl Entry {
    pub(crate) fn stat_kind(&self) -> StatKind {
        match (self.mpmde, self.kind) {
            (true, _) => StatKind::Mpmde,
            (false, PageKind::Metadata) => StatKind::Metadata,
            (false, PageKind::Raw) => StatKind::Raw,
        }
    }
}

/// VFD SWMR writer mode: the tick list, the delayed-write list and the view of the published
/// metadata file index they need.
#[derive(Debug, Default)]
pub(crate) struct WriterMode {
    pub(crate) tick: u64,
    pub(crate) max_lag: u64,
    pub(crate) tick_list: BTreeSet<u64>,
    /// Bytes of the entries on the tick list.
    pub(crate) tl_size: u64,
    /// (delay_write_until, key): iterated from the back, the head of the seed's list (largest
    /// delay first).
    pub(crate) dwl: BTreeSet<(u64, u64)>,
    /// Bytes of the entries on the delayed-write list.
    pub(crate) dwl_size: u64,
    /// Pages (or MPMDE base pages) in the last published index, with their delayed-flush tick.
    pub(crate) index_delays: HashMap<u64, u64>,
    /// Keys written to the HDF5 file since the last `take_flushed`.
    pub(crate) flushed: Vec<u64>,
    /// Every page the published index covers → the first page of its entry.
    pub(crate) index_pages: HashMap<u64, u64>,
    /// Index entries (first pages) whose pages received raw data since the last take.
    pub(crate) raw_over_index: BTreeSet<u64>,
    /// The file's length when writer mode started: pages below it existed before.
    pub(crate) initial_len: u64,
    /// Metadata pages written to the HDF5 file since writer mode started.
    pub(crate) written_meta: std::collections::HashSet<u64>,
}

/// The buffer's mode.
#[derive(Debug)]
pub(crate) enum Mode {
    /// An ordinary page buffer.
    Plain,
    /// VFD SWMR writer.
    Writer(Box<WriterMode>),
    /// VFD SWMR reader: metadata pages only; raw data goes around the buffer.
    Reader,
}

/// Everything behind the lock.
#[derive(Debug)]
pub(crate) struct State {
    /// `None` until the page size is known: every call passes through.
    pub(crate) geo: Option<Geometry>,
    pub(crate) entries: BTreeMap<u64, Entry>,
    /// seq → key; the largest seq is the most recently used (the seed's LRU head).
    pub(crate) lru: LruQueue,
    pub(crate) next_seq: u64,
    pub(crate) md_pages: usize,
    pub(crate) rd_pages: usize,
    pub(crate) mpmdes: usize,
    pub(crate) index_size: u64,
    pub(crate) dirty_len: usize,
    pub(crate) dirty_size: u64,
    /// The length the faces report: the underlying storage's plus anything written only here.
    pub(crate) logical_len: u64,
    /// The underlying storage's length as this buffer last left it.
    pub(crate) inner_len: u64,
    pub(crate) mode: Mode,
    pub(crate) stats: PageBufferStats,
    /// Requests split at page boundaries since the last `take_split_log` (recorded when on).
    pub(crate) split_log: Option<Vec<(u64, u64)>>,
}

/// What [`State::write_in_place`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum InPlace {
    /// The bytes were copied into a settled entry.
    Written,
    /// The entry holding the page (its key) needs the general write path.
    Found(u64),
    /// No entry holds the page.
    Missing,
}

impl State {
    pub(crate) fn new(inner_len: u64) -> State {
        State {
            geo: None,
            entries: BTreeMap::new(),
            lru: LruQueue::default(),
            next_seq: 0,
            md_pages: 0,
            rd_pages: 0,
            mpmdes: 0,
            index_size: 0,
            dirty_len: 0,
            dirty_size: 0,
            logical_len: inner_len,
            inner_len,
            mode: Mode::Plain,
            stats: PageBufferStats::default(),
            split_log: None,
        }
    }

    pub(crate) fn page_size(&self) -> u64 {
        self.geo.map_or(0, |g| g.page_size)
    }

    pub(crate) fn writer(&self) -> Option<&WriterMode> {
        match &self.mode {
            Mode::Writer(w) => Some(w),
            _ => None,
        }
    }

    /// The key of the entry holding `page`: the page itself, or an MPMDE that starts before it
    /// and reaches into it.
    pub(crate) fn find(&mut self, page: u64) -> Option<u64> {
        let ps = self.page_size();
        let found = self.entries.range(..=page).next_back().and_then(|(&k, e)| {
            let end = k * ps + e.image.len() as u64;
            (k == page || end > page * ps).then_some(k)
        });
        if found.is_some() {
            self.stats.successful_searches += 1;
        } else {
            self.stats.failed_searches += 1;
        }
        found
    }

    /// Keys of every entry overlapping `[start, end)` (bytes).
    pub(crate) fn overlapping(&self, start: u64, end: u64) -> Vec<u64> {
        let ps = self.page_size();
        if end <= start || ps == 0 {
            return Vec::new();
        }
        let first = start / ps;
        let last = (end - 1) / ps;
        let mut keys: Vec<u64> = Vec::new();
        if let Some((&k, e)) = self.entries.range(..first).next_back()
            && k * ps + e.image.len() as u64 > start
        {
            keys.push(k);
        }
        keys.extend(self.entries.range(first..=last).map(|(&k, _)| k));
        keys
    }

    fn bump_seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// Moves the entry to the head of the LRU (if it is on the LRU). An entry already at the
    /// head stays where it is (requests in address order touch one page many times in a row).
    pub(crate) fn touch(&mut self, key: u64) {
        if let Some(e) = self.entries.get_mut(&key) {
            touch_lru(&mut self.lru, &mut self.next_seq, e, key);
        }
        self.compact_lru_if_stale();
    }

    /// Drops the LRU's stale positions once they outnumber the live ones.
    fn compact_lru_if_stale(&mut self) {
        if self.lru.wants_compaction() {
            let entries = &self.entries;
            self.lru
                .compact(|seq, key| entries.get(&key).is_some_and(|e| e.lru_seq == Some(seq)));
        }
    }

    /// Puts the entry at the LRU head.
    pub(crate) fn put_on_lru(&mut self, key: u64) {
        let seq = self.bump_seq();
        if let Some(e) = self.entries.get_mut(&key) {
            let moved = e.lru_seq.replace(seq).is_some();
            self.lru.push(seq, key, moved);
        }
        self.compact_lru_if_stale();
    }

    fn take_off_lru(&mut self, key: u64) {
        if let Some(e) = self.entries.get_mut(&key)
            && e.lru_seq.take().is_some()
        {
            self.lru.left();
        }
    }

    /// Adds an entry (regular pages go to the LRU head) and updates counters and high-water
    /// marks.
    pub(crate) fn insert(&mut self, key: u64, entry: Entry) {
        let on_lru = !entry.mpmde;
        let size = entry.image.len() as u64;
        match (entry.mpmde, entry.kind) {
            (true, _) => self.mpmdes += 1,
            (false, PageKind::Metadata) => self.md_pages += 1,
            (false, PageKind::Raw) => self.rd_pages += 1,
        }
        if entry.dirty {
            self.dirty_len += 1;
            self.dirty_size += size;
        }
        self.index_size += size;
        self.stats.insertions.bump(entry.stat_kind());
        self.stats.total_ht_insertions += 1;
        self.entries.insert(key, entry);
        if on_lru {
            self.put_on_lru(key);
        }
        self.high_water();
    }

    pub(crate) fn high_water(&mut self) {
        let s = &mut self.stats;
        let len = self.entries.len() as u64;
        s.max_index_len = s.max_index_len.max(len);
        s.max_index_size = s.max_index_size.max(self.index_size);
        s.max_dirty_index_len = s.max_dirty_index_len.max(self.dirty_len as u64);
        s.max_clean_index_len = s.max_clean_index_len.max(len - self.dirty_len as u64);
        s.max_md_pages = s.max_md_pages.max(self.md_pages as u64);
        s.max_rd_pages = s.max_rd_pages.max(self.rd_pages as u64);
        s.max_mpmde_count = s.max_mpmde_count.max(self.mpmdes as u64);
        s.max_lru_len = s.max_lru_len.max(self.lru.len() as u64);
        if let Mode::Writer(w) = &self.mode {
            s.max_tl_len = s.max_tl_len.max(w.tick_list.len() as u64);
            s.max_tl_size = s.max_tl_size.max(w.tl_size);
            s.max_dwl_len = s.max_dwl_len.max(w.dwl.len() as u64);
            s.max_dwl_size = s.max_dwl_size.max(w.dwl_size);
        }
    }

    /// Removes an entry from the map and every list, fixing the counters.
    pub(crate) fn remove(&mut self, key: u64) -> Option<Entry> {
        self.take_off_lru(key);
        let e = self.entries.remove(&key)?;
        let size = e.image.len() as u64;
        match (e.mpmde, e.kind) {
            (true, _) => self.mpmdes -= 1,
            (false, PageKind::Metadata) => self.md_pages -= 1,
            (false, PageKind::Raw) => self.rd_pages -= 1,
        }
        if e.dirty {
            self.dirty_len -= 1;
            self.dirty_size -= size;
        }
        self.index_size -= size;
        self.stats.total_ht_deletions += 1;
        if let Mode::Writer(w) = &mut self.mode {
            if w.tick_list.remove(&key) {
                w.tl_size -= size;
            }
            if e.delay_write_until != 0 && w.dwl.remove(&(e.delay_write_until, key)) {
                w.dwl_size -= size;
            }
        }
        Some(e)
    }

    pub(crate) fn set_dirty(&mut self, key: u64, dirty: bool) {
        if let Some(e) = self.entries.get_mut(&key)
            && e.dirty != dirty
        {
            let size = e.image.len() as u64;
            e.dirty = dirty;
            if dirty {
                self.dirty_len += 1;
                self.dirty_size += size;
            } else {
                self.dirty_len -= 1;
                self.dirty_size -= size;
            }
        }
    }

    /// A write into the page at `key`: [`State::set_dirty`], the page made of the kind
    /// written, and [`State::touch`], with one lookup of the page.
    pub(crate) fn note_write(&mut self, key: u64, kind: PageKind) {
        let Some(e) = self.entries.get_mut(&key) else {
            return;
        };
        if !e.dirty {
            e.dirty = true;
            self.dirty_len += 1;
            self.dirty_size += e.image.len() as u64;
        }
        if e.kind != kind && !e.mpmde {
            match kind {
                PageKind::Metadata => {
                    self.rd_pages -= 1;
                    self.md_pages += 1;
                }
                PageKind::Raw => {
                    self.md_pages -= 1;
                    self.rd_pages += 1;
                }
            }
            e.kind = kind;
        }
        touch_lru(&mut self.lru, &mut self.next_seq, e, key);
    }

    /// The common write, with one search of the entries: `data` (inside `page`) copied into
    /// the entry holding `page` when that entry is already dirty, of `kind`, covers the whole
    /// write and (for metadata in writer mode) is already on the tick list, so that only the
    /// copy and the LRU position change; [`State::note_write`] and [`State::mark_modified`]
    /// would look the entry up twice more. Counts the search as [`State::find`] does.
    pub(crate) fn write_in_place(
        &mut self,
        page: u64,
        kind: PageKind,
        offset: u64,
        data: &[u8],
    ) -> InPlace {
        let ps = self.page_size();
        let writer = matches!(self.mode, Mode::Writer(_));
        // Most writes land in an entry that starts at their page: one search, where the range
        // below makes two.
        let found = match self.entries.get_mut(&page) {
            Some(e) => Some((page, e)),
            None => self
                .entries
                .range_mut(..page)
                .next_back()
                .filter(|(k, e)| **k * ps + e.image.len() as u64 > page * ps)
                .map(|(k, e)| (*k, e)),
        };
        let Some((key, e)) = found else {
            self.stats.failed_searches += 1;
            return InPlace::Missing;
        };
        self.stats.successful_searches += 1;
        let end = (offset + data.len() as u64).saturating_sub(key * ps);
        let settled = e.dirty
            && (e.kind == kind || e.mpmde)
            && end <= e.image.len() as u64
            && (kind == PageKind::Raw || !writer || e.modified_this_tick);
        if !settled {
            return InPlace::Found(key);
        }
        copy_into_image(key * ps, &mut e.image, offset, data);
        touch_lru(&mut self.lru, &mut self.next_seq, e, key);
        self.compact_lru_if_stale();
        if kind == PageKind::Metadata && writer {
            self.high_water();
        }
        InPlace::Written
    }

    /// Writes a dirty entry to the underlying storage (clipped at the logical end of file) and
    /// marks it clean. The caller makes sure it is not delayed.
    pub(crate) fn flush_entry(&mut self, inner: &dyn Storage, key: u64) -> h5_io::Result<()> {
        let ps = self.page_size();
        let logical = self.logical_len;
        let Some(e) = self.entries.get(&key) else {
            return Ok(());
        };
        if !e.dirty {
            return Ok(());
        }
        let start = key * ps;
        let end = (start + e.image.len() as u64).min(logical);
        if end > start {
            inner.write_at(start, &e.image[..(end - start) as usize])?;
            self.inner_len = self.inner_len.max(end);
        }
        let kind = e.stat_kind();
        self.stats.flushes.bump(kind);
        self.set_dirty(key, false);
        self.note_written(key);
        Ok(())
    }

    /// Records that the entry at `key` was written to the HDF5 file.
    fn note_written(&mut self, key: u64) {
        let ps = self.page_size();
        let Some(e) = self.entries.get_mut(&key) else {
            return;
        };
        e.in_file = true;
        let meta = e.kind == PageKind::Metadata;
        let pages = (e.image.len() as u64).div_ceil(ps.max(1));
        if let Mode::Writer(w) = &mut self.mode {
            w.flushed.push(key);
            if meta {
                w.written_meta.extend(key..key + pages);
            }
        }
    }

    /// Writes every dirty entry that may be written (not delayed) and, when `only` is given,
    /// of that kind; one vectored write.
    pub(crate) fn flush_all(
        &mut self,
        inner: &dyn Storage,
        only: Option<PageKind>,
    ) -> h5_io::Result<()> {
        let ps = self.page_size();
        let logical = self.logical_len;
        let keys: Vec<u64> = self
            .entries
            .iter()
            .filter(|(_, e)| e.dirty && e.delay_write_until == 0)
            .filter(|(_, e)| only.is_none_or(|k| e.kind == k && !e.mpmde))
            .map(|(&k, _)| k)
            .collect();
        if keys.is_empty() {
            return Ok(());
        }
        let mut max_end = self.inner_len;
        {
            let mut segments = Vec::with_capacity(keys.len());
            for k in &keys {
                let e = &self.entries[k];
                let start = k * ps;
                let end = (start + e.image.len() as u64).min(logical);
                if end > start {
                    segments.push(WriteSegment::new(start, &e.image[..(end - start) as usize]));
                    max_end = max_end.max(end);
                }
            }
            inner.write_vectored(&segments)?;
        }
        self.inner_len = max_end;
        for k in keys {
            let kind = self.entries[&k].stat_kind();
            self.stats.flushes.bump(kind);
            self.set_dirty(k, false);
            self.note_written(k);
        }
        Ok(())
    }

    /// LRU replacement with a second pass for dirty entries, before a new regular page is
    /// added. Entries on the tick list, and pages of a kind at or below its reserve, are
    /// skipped (and counted). The buffer may end up over its size when nothing can go
    /// (SWMR-071).
    pub(crate) fn make_space(&mut self, inner: &dyn Storage) -> h5_io::Result<()> {
        let Some(geo) = self.geo else {
            return Ok(());
        };
        for _pass in 0..2 {
            if self.md_pages + self.rd_pages < geo.max_pages {
                return Ok(());
            }
            // One pass visits the entries on the LRU when it starts, oldest first (an entry
            // moved to the head during the pass gets a position past `end`); it stops as soon
            // as there is room, so it costs what it evicts and skips, not the LRU's length.
            let end = self.next_seq + 1;
            let entries = &self.entries;
            self.lru.drop_stale_oldest(|seq, key| {
                entries.get(&key).is_some_and(|e| e.lru_seq == Some(seq))
            });
            let mut from = 0;
            while let Some((seq, key)) = self.next_on_lru(from, end) {
                from = seq + 1;
                if self.md_pages + self.rd_pages < geo.max_pages {
                    return Ok(());
                }
                let Some(e) = self.entries.get(&key) else {
                    continue;
                };
                if e.modified_this_tick {
                    self.stats.lru_tl_skips += 1;
                    continue;
                }
                match e.kind {
                    PageKind::Metadata if self.md_pages <= geo.min_md_pages => {
                        self.stats.lru_md_skips += 1;
                        continue;
                    }
                    PageKind::Raw if self.rd_pages <= geo.min_rd_pages => {
                        self.stats.lru_rd_skips += 1;
                        continue;
                    }
                    _ => {}
                }
                if e.dirty {
                    // Second pass: write it now, give it another trip through the LRU.
                    self.flush_entry(inner, key)?;
                    self.touch(key);
                    continue;
                }
                let kind = e.stat_kind();
                self.remove(key);
                self.stats.evictions.bump(kind);
            }
        }
        Ok(())
    }

    /// The least recently used entry on the LRU whose position is in `from..end`.
    fn next_on_lru(&self, from: u64, end: u64) -> Option<(u64, u64)> {
        self.lru.range(from, end).find(|&(seq, key)| {
            self.entries
                .get(&key)
                .is_some_and(|e| e.lru_seq == Some(seq))
        })
    }

    /// Whether the HDF5 file holds a version of `page` that a reader may read: in writer
    /// mode, a page that existed when writing started or a metadata page written since (bytes
    /// of a new page inside the file's length are not such a version); otherwise any page
    /// inside the file.
    pub(crate) fn existed(&self, page: u64) -> bool {
        let ps = self.page_size();
        match &self.mode {
            Mode::Writer(w) => page * ps < w.initial_len || w.written_meta.contains(&page),
            _ => page * ps < self.inner_len,
        }
    }

    /// Reads the page `page` from the underlying storage into a new clean entry.
    pub(crate) fn load_page(
        &mut self,
        inner: &dyn Storage,
        page: u64,
        kind: PageKind,
    ) -> h5_io::Result<u64> {
        let ps = self.page_size();
        let start = page * ps;
        let mut image = vec![0u8; ps as usize];
        let file_len = match self.mode {
            // A reader's file grows under it.
            Mode::Reader => inner.len()?,
            _ => self.inner_len,
        };
        let present = file_len.saturating_sub(start).min(ps);
        if present > 0 {
            inner.read_at(start, &mut image[..present as usize])?;
        }
        let in_file = present > 0 && self.existed(page);
        let entry = Entry {
            image,
            kind,
            mpmde: false,
            dirty: false,
            in_file,
            lru_seq: None,
            modified_this_tick: false,
            delay_write_until: 0,
        };
        let sk = entry.stat_kind();
        self.stats.loads.bump(sk);
        self.insert(page, entry);
        Ok(page)
    }

    /// VFD SWMR writer: records that the entry changed in this tick (tick list) and, when the
    /// HDF5 file already holds a version of it that the published index does not cover for
    /// long enough, moves it to the delayed-write list (SWMR-065, SWMR-066, SWMR-067).
    pub(crate) fn mark_modified(&mut self, key: u64) {
        let Mode::Writer(w) = &mut self.mode else {
            return;
        };
        let Some(e) = self.entries.get_mut(&key) else {
            return;
        };
        // Only the first change in a tick decides: bytes this tick itself wrote to the file
        // (a page written back and changed again) were never published, so no reader reads
        // them.
        let first = !e.modified_this_tick;
        let size = e.image.len() as u64;
        if first {
            e.modified_this_tick = true;
            w.tick_list.insert(key);
            w.tl_size += size;
        }
        if first && e.delay_write_until == 0 && e.in_file {
            let until = match w.index_delays.get(&key) {
                None => w.tick + w.max_lag,
                Some(&d) if d >= w.tick => d,
                Some(_) => 0,
            };
            if until != 0 {
                e.delay_write_until = until;
                let depth = w.dwl.range((until + 1, 0)..).count() as u64;
                w.dwl.insert((until, key));
                w.dwl_size += size;
                self.stats.delayed_writes += 1;
                self.stats.total_delay += until - w.tick;
                self.stats.total_dwl_ins_depth += depth;
                self.take_off_lru(key);
            }
        }
        self.high_water();
    }

    /// Books `grown` more bytes of the entry at `key` (a multi-page entry grown over its last
    /// page) in the counters of the lists it is on.
    pub(crate) fn note_growth(&mut self, key: u64, grown: u64) {
        let Some(e) = self.entries.get(&key) else {
            return;
        };
        self.index_size += grown;
        if e.dirty {
            self.dirty_size += grown;
        }
        if let Mode::Writer(w) = &mut self.mode {
            if e.modified_this_tick {
                w.tl_size += grown;
            }
            if e.delay_write_until != 0 {
                w.dwl_size += grown;
            }
        }
    }

    /// Records raw-data writes to pages `first..=last` that the published index covers.
    pub(crate) fn note_raw_over_index(&mut self, first: u64, last: u64) {
        if let Mode::Writer(w) = &mut self.mode {
            if w.index_pages.is_empty() {
                return;
            }
            for p in first..=last {
                if let Some(&base) = w.index_pages.get(&p) {
                    w.raw_over_index.insert(base);
                }
            }
        }
    }

    /// Makes sure the entry is delayed until at least `until` (an absorbed entry's delay
    /// carries over to the entry that absorbed it).
    pub(crate) fn raise_delay(&mut self, key: u64, until: u64) {
        let Mode::Writer(w) = &mut self.mode else {
            return;
        };
        let Some(e) = self.entries.get_mut(&key) else {
            return;
        };
        if until <= e.delay_write_until {
            return;
        }
        if e.delay_write_until == 0 {
            w.dwl_size += e.image.len() as u64;
        } else {
            w.dwl.remove(&(e.delay_write_until, key));
        }
        e.delay_write_until = until;
        w.dwl.insert((until, key));
        self.take_off_lru(key);
    }

    /// Debug check of the invariants at the top of this module.
    pub(crate) fn check_invariants(&self) -> Result<(), String> {
        let ps = self.page_size();
        let (mut md, mut rd, mut mp, mut size, mut dl, mut ds, mut on_lru) =
            (0, 0, 0, 0u64, 0, 0u64, 0);
        for (&k, e) in &self.entries {
            let is_meta_large = e.kind == PageKind::Metadata && e.image.len() as u64 > ps;
            if e.mpmde != is_meta_large {
                return Err(format!(
                    "entry {k}: mpmde flag {} but size {}",
                    e.mpmde,
                    e.image.len()
                ));
            }
            if !e.mpmde && e.image.len() as u64 != ps {
                return Err(format!("page {k} has {} bytes", e.image.len()));
            }
            if e.mpmde && !matches!(self.mode, Mode::Writer(_)) {
                return Err(format!("MPMDE {k} outside writer mode"));
            }
            match (e.mpmde, e.kind) {
                (true, _) => mp += 1,
                (false, PageKind::Metadata) => md += 1,
                (false, PageKind::Raw) => rd += 1,
            }
            size += e.image.len() as u64;
            if e.dirty {
                dl += 1;
                ds += e.image.len() as u64;
            }
            let delayed = e.delay_write_until != 0;
            if let Some(seq) = e.lru_seq {
                on_lru += 1;
                if self.lru.key_at(seq) != Some(k) {
                    return Err(format!("entry {k}: LRU position {seq} does not point back"));
                }
                if e.mpmde {
                    return Err(format!("MPMDE {k} on the LRU"));
                }
                if delayed {
                    return Err(format!(
                        "entry {k} on both the LRU and the delayed-write list"
                    ));
                }
            } else if !e.mpmde && !delayed {
                return Err(format!(
                    "page {k} on neither the LRU nor the delayed-write list"
                ));
            } else if e.mpmde && !delayed && !e.modified_this_tick {
                return Err(format!("MPMDE {k} on no list"));
            }
            if let Mode::Writer(w) = &self.mode {
                if w.tick_list.contains(&k) != e.modified_this_tick {
                    return Err(format!(
                        "entry {k}: tick-list membership disagrees with its flag"
                    ));
                }
                if delayed && !w.dwl.contains(&(e.delay_write_until, k)) {
                    return Err(format!(
                        "entry {k} delayed but not on the delayed-write list"
                    ));
                }
                if delayed && e.delay_write_until > w.tick + w.max_lag {
                    return Err(format!("entry {k} delayed past tick + max_lag"));
                }
            }
        }
        if (md, rd, mp) != (self.md_pages, self.rd_pages, self.mpmdes) {
            return Err(format!(
                "page counts {:?} but counters {:?}",
                (md, rd, mp),
                (self.md_pages, self.rd_pages, self.mpmdes)
            ));
        }
        if size != self.index_size || dl != self.dirty_len || ds != self.dirty_size {
            return Err("size or dirty counters disagree with the entries".into());
        }
        if on_lru != self.lru.len() {
            return Err("LRU holds entries that are gone".into());
        }
        if let Mode::Writer(w) = &self.mode {
            if w.dwl.len() + on_lru + self.tl_only() != self.entries.len() {
                return Err("LRU + DWL + tick-list-only MPMDEs != entries".into());
            }
            let bytes = |keys: &mut dyn Iterator<Item = u64>| -> u64 {
                keys.filter_map(|k| self.entries.get(&k))
                    .map(|e| e.image.len() as u64)
                    .sum()
            };
            let tl = bytes(&mut w.tick_list.iter().copied());
            let dwl = bytes(&mut w.dwl.iter().map(|&(_, k)| k));
            if (tl, dwl) != (w.tl_size, w.dwl_size) {
                return Err(format!(
                    "tick list / delayed-write list hold {tl} / {dwl} bytes but counters say {} / {}",
                    w.tl_size, w.dwl_size
                ));
            }
        }
        Ok(())
    }

    /// MPMDEs on the tick list and not on the delayed-write list (OQ-34's third population).
    pub(crate) fn tl_only(&self) -> usize {
        self.entries
            .values()
            .filter(|e| e.mpmde && e.modified_this_tick && e.delay_write_until == 0)
            .count()
    }
}

/// Moves the entry `e` (at `key`), if it is on the LRU and not already its head, to the head:
/// a new sequence number past `next_seq` (the head's). Touching the head is a no-op: requests
/// in address order touch one page many times in a row.
fn touch_lru(lru: &mut LruQueue, next_seq: &mut u64, e: &mut Entry, key: u64) {
    if let Some(old) = e.lru_seq
        && old != *next_seq
    {
        *next_seq += 1;
        e.lru_seq = Some(*next_seq);
        lru.push(*next_seq, key, true);
    }
}
