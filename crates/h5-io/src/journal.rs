//! A rollback journal: crash safety for storages changed in place.
//!
//! [`Journaled`] keeps, in a second storage (the journal), the old bytes of every range of the
//! last committed state ([`Storage::commit`]) before that range is first overwritten or cut
//! off. A crash at any instant therefore leaves either the committed state or, with the
//! journal, everything needed to get it back: [`recover`] writes the old bytes back and
//! restores the committed length. This is SQLite's rollback journal, per byte range instead of
//! per page.
//!
//! # Journal format (little-endian)
//!
//! A 64-byte header, then records:
//!
//! | header field | bytes |
//! |---|---|
//! | magic `H5JOURNL` | 8 |
//! | version (1) | 4 |
//! | reserved (0) | 4 |
//! | nonce (differs for every committed interval) | 8 |
//! | committed length | 8 |
//! | marker offset (`u64::MAX`: none) | 8 |
//! | marker length (≤ 16) | 4 |
//! | marker bytes, zero padded | 16 |
//! | CRC-32 of the 60 bytes before | 4 |
//!
//! | record field | bytes |
//! |---|---|
//! | tag `JREC` | 4 |
//! | offset | 8 |
//! | length (≤ 1 MiB) | 4 |
//! | CRC-32 of nonce, offset, length and the old bytes | 4 |
//! | the old bytes | length |
//!
//! # The marker
//!
//! A commit may name a [`Marker`]: bytes that the journal writes over the committed state (after
//! journaling what they cover) just before the first in-place change of an interval, and that
//! the caller's final write of the next commit overwrites. A write over the marker is split:
//! its other bytes first, the marker's range last, so that the marker's disappearance is the
//! commit point; a marker that differs from the committed bytes in one byte makes that point a
//! one-byte write, which no crash tears. While the marker is on the storage,
//! readers that know nothing of the journal refuse it (for HDF5, the marker spoils the
//! superblock signature, so libhdf5 reports "file signature not found" instead of reading a mix
//! of two states). The marker is also what makes a journal *hot*: [`recover`] rolls back only
//! when the storage shows the journal's marker, so a journal left beside a file that was since
//! replaced or completed is discarded, never applied.
//!
//! # Ordering
//!
//! For a killed process (the page cache survives) write order is enough: a record is
//! complete in the journal before the write it protects starts, and a torn last record fails
//! its checksum and is ignored (its write had not started). For power loss, [`JournalOptions::
//! sync`] adds the barriers: the journal is synced before the marker is written, the storage
//! after the marker, the journal again before every later in-place change, the storage before
//! the write that removes the marker, and both at commit.

use std::fmt;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::error::{Result, checked_end, len_u64};
use crate::ranges::RangeSet;
use crate::storage::{
    CommitPoint, LockMode, Marker, ReadSegment, Storage, StorageExt, WriteSegment,
};

const MAGIC: &[u8; 8] = b"H5JOURNL";
const VERSION: u32 = 1;
const HEADER_LEN: u64 = 64;
const RECORD_TAG: &[u8; 4] = b"JREC";
const RECORD_HEADER_LEN: u64 = 20;
/// The longest record: bigger ranges are journaled as several records, so neither writing nor
/// recovering ever holds more than this in memory.
pub const MAX_RECORD: usize = 1 << 20;

/// Options of [`Journaled`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct JournalOptions {
    /// Add the `sync` barriers that make the journal safe against power loss, not only against
    /// a killed process (see the module documentation).
    pub sync: bool,
}

/// What [`recover`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Recovery {
    /// The journal was empty: the storage holds a committed state.
    Clean,
    /// The journal held something that does not apply: an incomplete header, or a storage that
    /// does not show the journal's marker (nothing was changed in place, or the interval's last
    /// write had completed the next state, or the storage was replaced). It was emptied.
    Discarded,
    /// The storage was rolled back to its last committed state.
    RolledBack {
        /// Records applied.
        records: u64,
        /// Bytes written back.
        bytes: u64,
        /// The committed length the storage was set to.
        len: u64,
    },
}

/// The decoded journal header.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Header {
    nonce: u64,
    committed_len: u64,
    marker: Option<Marker>,
}

impl Header {
    fn encode(&self) -> [u8; HEADER_LEN as usize] {
        let mut b = [0u8; HEADER_LEN as usize];
        b[0..8].copy_from_slice(MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[16..24].copy_from_slice(&self.nonce.to_le_bytes());
        b[24..32].copy_from_slice(&self.committed_len.to_le_bytes());
        let (offset, bytes): (u64, &[u8]) = match &self.marker {
            Some(m) => (m.offset, &m.bytes),
            None => (u64::MAX, &[]),
        };
        b[32..40].copy_from_slice(&offset.to_le_bytes());
        b[40..44].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
        b[44..44 + bytes.len()].copy_from_slice(bytes);
        let crc = crc32fast::hash(&b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    fn decode(b: &[u8; HEADER_LEN as usize]) -> Option<Header> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u64_at = |i: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[i..i + 8]);
            u64::from_le_bytes(a)
        };
        if &b[0..8] != MAGIC || u32_at(8) != VERSION || crc32fast::hash(&b[..60]) != u32_at(60) {
            return None;
        }
        let offset = u64_at(32);
        let len = usize::try_from(u32_at(40)).ok()?;
        if len > Marker::MAX_LEN {
            return None;
        }
        let marker = (offset != u64::MAX).then(|| Marker {
            offset,
            bytes: b[44..44 + len].to_vec(),
        });
        Some(Header {
            nonce: u64_at(16),
            committed_len: u64_at(24),
            marker,
        })
    }
}

fn record_crc(nonce: u64, offset: u64, data: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&nonce.to_le_bytes());
    h.update(&offset.to_le_bytes());
    h.update(&(data.len() as u32).to_le_bytes());
    h.update(data);
    h.finalize()
}

/// A new nonce: differs between intervals of one process and, practically, between processes.
fn new_nonce() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    time ^ (u64::from(std::process::id()) << 32) ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// What the journal knows of the current interval (since the last commit).
#[derive(Debug)]
struct State {
    /// Length of the storage at the last commit.
    committed_len: u64,
    /// Ranges below `committed_len` that the committed state does not use.
    unused: RangeSet,
    /// Ranges whose old bytes are in the journal.
    journaled: RangeSet,
    /// Bytes in the journal (0: nothing written this interval).
    journal_len: u64,
    nonce: u64,
    marker: Option<Marker>,
    /// The committed bytes under the marker, once the marker was written.
    marker_saved: Option<Vec<u8>>,
    /// Whether the marker is on the storage now.
    marker_on_disk: bool,
    /// Journaling stopped for good ([`Journaled::detach`]): writes and commits pass through.
    detached: bool,
}

impl State {
    /// The parts of `r` that belong to the committed state and are not journaled yet.
    fn unjournaled(&self, r: Range<u64>) -> Vec<Range<u64>> {
        let r = r.start..r.end.min(self.committed_len);
        self.journaled
            .gaps(r)
            .into_iter()
            .flat_map(|g| self.unused.gaps(g))
            .collect()
    }

    /// Whether `r` touches the committed state.
    fn touches_committed(&self, r: Range<u64>) -> bool {
        let r = r.start..r.end.min(self.committed_len);
        !r.is_empty() && !self.unused.covers(r)
    }

    /// Whether reads of `r` must be given the committed bytes under the marker: the marker
    /// is defined and `r` overlaps it (it may be written while the read runs).
    fn hides_marker_in(&self, r: &Range<u64>) -> bool {
        self.marker_range()
            .is_some_and(|m| m.start < r.end && r.start < m.end)
    }

    /// Puts the committed bytes back over the part of `buf` (read at `offset`) that the marker
    /// covers, when the marker is on the storage.
    fn show_committed(&self, offset: u64, buf: &mut [u8]) {
        let (Some(m), true, Some(saved)) =
            (self.marker_range(), self.marker_on_disk, &self.marker_saved)
        else {
            return;
        };
        for (i, b) in buf.iter_mut().enumerate() {
            let at = offset.saturating_add(len_u64(i));
            if m.contains(&at)
                && let Some(&c) = usize::try_from(at - m.start)
                    .ok()
                    .and_then(|k| saved.get(k))
            {
                *b = c;
            }
        }
    }

    fn marker_range(&self) -> Option<Range<u64>> {
        self.marker
            .as_ref()
            .map(|m| m.offset..m.offset.saturating_add(len_u64(m.bytes.len())))
    }
}

/// Decorator that journals the committed bytes of `S` before changing them (see the module
/// documentation); the journal is a second storage `J`.
///
/// Reads pass through, except that the marker is the journal's own: while it is on the
/// storage, reads through the decorator see the committed bytes under it (a page buffer above
/// that reads the superblock's page and writes it back must not carry the marker along). Writes, vector writes and `set_len` first journal what they would
/// change of the last committed state; [`commit`](Storage::commit) empties the journal and
/// makes the storage's current bytes the committed state. Writes past the committed length or
/// into the commit's unused ranges are not journaled: the committed state does not reference
/// them.
///
/// ```
/// use h5_io::{CommitPoint, Journaled, JournalOptions, MemoryStorage, Recovery, Storage, recover};
///
/// let data = MemoryStorage::with_data(b"committed".to_vec());
/// let journal = MemoryStorage::new();
/// let (s, _) = Journaled::open(data.clone(), journal.clone(), JournalOptions::default())?;
/// s.write_at(0, b"CHANGED")?;           // old bytes go to the journal first
/// s.write_at(9, b" and more")?;         // past the committed length: not journaled
/// // The process dies here. The next opener rolls back:
/// let r = recover(&data, &journal, false)?;
/// assert!(matches!(r, Recovery::RolledBack { records: 1, bytes: 7, len: 9 }));
/// assert_eq!(data.snapshot(), b"committed");
/// # Ok::<(), h5_io::Error>(())
/// ```
pub struct Journaled<S, J> {
    inner: S,
    journal: J,
    options: JournalOptions,
    state: Mutex<State>,
}

impl<S: Storage, J: Storage> Journaled<S, J> {
    /// Recovers `inner` with `journal` ([`recover`]), then journals changes to the state found:
    /// everything below the storage's current length is committed until the first
    /// [`commit`](Storage::commit) says otherwise.
    pub fn open(inner: S, journal: J, options: JournalOptions) -> Result<(Self, Recovery)> {
        let recovery = recover(&inner, &journal, options.sync)?;
        let committed_len = inner.len()?;
        let state = State {
            committed_len,
            unused: RangeSet::new(),
            journaled: RangeSet::new(),
            journal_len: 0,
            nonce: new_nonce(),
            marker: None,
            marker_saved: None,
            marker_on_disk: false,
            detached: false,
        };
        Ok((
            Journaled {
                inner,
                journal,
                options,
                state: Mutex::new(state),
            },
            recovery,
        ))
    }

    /// The journaled storage.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The journal.
    pub fn journal(&self) -> &J {
        &self.journal
    }

    /// Bytes in the journal now (0 right after a commit).
    pub fn journal_len(&self) -> u64 {
        self.lock_state().journal_len
    }

    /// Stops journaling for good: later writes and commits go straight to the storage, so that
    /// no marker ever spoils the committed bytes (a legacy SWMR writer's readers must always
    /// find the superblock). Only right after a commit, when the journal is empty and the
    /// storage holds exactly the committed state; returns whether journaling stopped (`false`:
    /// a change is under way, commit first).
    pub fn detach(&self) -> bool {
        let mut st = self.lock_state();
        if st.journal_len != 0 || st.marker_on_disk {
            return false;
        }
        st.detached = true;
        true
    }

    /// Whether [`detach`](Self::detach) stopped journaling.
    pub fn is_detached(&self) -> bool {
        self.lock_state().detached
    }

    fn lock_state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends the old bytes of `r` (inside the committed length) as records.
    fn journal_range(&self, st: &mut State, r: Range<u64>) -> Result<()> {
        let mut at = r.start;
        while at < r.end {
            let n = (r.end - at).min(MAX_RECORD as u64);
            let mut rec = vec![0u8; RECORD_HEADER_LEN as usize + n as usize];
            let (head, data) = rec.split_at_mut(RECORD_HEADER_LEN as usize);
            // The storage may have been cut below the committed length earlier in this
            // interval only by `set_len`, which journals first; what lies past its end now
            // was journaled then, so a zero fill is never recorded for live bytes.
            self.inner.read_at_zero_fill(at, data)?;
            head[0..4].copy_from_slice(RECORD_TAG);
            head[4..12].copy_from_slice(&at.to_le_bytes());
            head[12..16].copy_from_slice(&(n as u32).to_le_bytes());
            head[16..20].copy_from_slice(&record_crc(st.nonce, at, data).to_le_bytes());
            self.journal.write_at(st.journal_len, &rec)?;
            st.journal_len += len_u64(rec.len());
            at += n;
        }
        Ok(())
    }

    /// Journals what a change of the ranges `extents` would change of the committed state and
    /// writes the marker when the interval's first in-place change comes. Returns the marker's
    /// range when the change overwrites the marker that is on the storage (the caller then
    /// writes it with [`write_clearing_marker`](Self::write_clearing_marker)).
    fn before_change(&self, extents: &[Range<u64>]) -> Result<Option<Range<u64>>> {
        let mut st = self.lock_state();
        if st.detached {
            return Ok(None);
        }
        if !extents.iter().any(|r| st.touches_committed(r.clone())) {
            return Ok(None);
        }
        let mut needed: Vec<Range<u64>> = Vec::new();
        if !st.marker_on_disk
            && let Some(m) = st.marker_range()
        {
            needed.extend(st.unjournaled(m));
        }
        for r in extents {
            needed.extend(st.unjournaled(r.clone()));
        }
        if !needed.is_empty() {
            if st.journal_len == 0 {
                let header = Header {
                    nonce: st.nonce,
                    committed_len: st.committed_len,
                    marker: st.marker.clone(),
                };
                self.journal.write_at(0, &header.encode())?;
                st.journal_len = HEADER_LEN;
            }
            for r in needed {
                if st.journaled.covers(r.clone()) {
                    continue; // listed twice (the marker's range and a write's)
                }
                self.journal_range(&mut st, r.clone())?;
                st.journaled.insert(r);
            }
            if self.options.sync {
                self.journal.sync()?;
            }
        }
        if !st.marker_on_disk
            && let Some(m) = st.marker.clone()
        {
            if st.marker_saved.is_none() {
                let mut saved = vec![0u8; m.bytes.len()];
                self.inner.read_at_zero_fill(m.offset, &mut saved)?;
                st.marker_saved = Some(saved);
            }
            self.inner.write_at(m.offset, &m.bytes)?;
            if self.options.sync {
                self.inner.sync()?;
            }
            st.marker_on_disk = true;
        }
        Ok(st.marker_range().filter(|m| {
            st.marker_on_disk && extents.iter().any(|r| r.start < m.end && m.start < r.end)
        }))
    }

    /// One `write_at` for one segment, a vector write for several, nothing for none.
    fn write_segments(&self, segments: &[WriteSegment<'_>]) -> Result<()> {
        match segments {
            [] => Ok(()),
            [one] => self.inner.write_at(one.offset, one.data),
            more => self.inner.write_vectored(more),
        }
    }

    /// Writes `segments`, one of which overlaps the marker that is on the storage: everything
    /// outside the marker's range first (synced, with `sync`), then the bytes over the marker,
    /// whose completion is the commit point. A failure there puts the marker back (best
    /// effort), so that an unknown outcome reads as "roll back" rather than as a half-written
    /// state.
    fn write_clearing_marker(&self, m: Range<u64>, segments: &[WriteSegment<'_>]) -> Result<()> {
        let mut outside = Vec::new();
        let mut inside = Vec::new();
        for seg in segments {
            let end = seg.offset + len_u64(seg.data.len());
            let cut =
                |a: u64, b: u64| &seg.data[(a - seg.offset) as usize..(b - seg.offset) as usize];
            let (a, b) = (seg.offset.max(m.start), end.min(m.end));
            if a < b {
                if seg.offset < a {
                    outside.push(WriteSegment::new(seg.offset, cut(seg.offset, a)));
                }
                if b < end {
                    outside.push(WriteSegment::new(b, cut(b, end)));
                }
                inside.push(WriteSegment::new(a, cut(a, b)));
            } else {
                outside.push(*seg);
            }
        }
        self.write_segments(&outside)?;
        if self.options.sync {
            self.inner.sync()?;
        }
        match self.write_segments(&inside) {
            Ok(()) => {
                self.lock_state().marker_on_disk = false;
                Ok(())
            }
            Err(e) => {
                let st = self.lock_state();
                if let Some(marker) = &st.marker {
                    let _ = self.inner.write_at(marker.offset, &marker.bytes);
                }
                Err(e)
            }
        }
    }
}

impl<S: fmt::Debug, J: fmt::Debug> fmt::Debug for Journaled<S, J> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Journaled")
            .field("inner", &self.inner)
            .field("journal", &self.journal)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

#[deny(clippy::missing_trait_methods)]
impl<S: Storage, J: Storage> Storage for Journaled<S, J> {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = checked_end(offset, len_u64(buf.len()))?;
        let st = self.lock_state();
        if !st.hides_marker_in(&(offset..end)) {
            drop(st);
            return self.inner.read_at(offset, buf);
        }
        // Read under the state's lock, so the marker cannot come or go in between.
        self.inner.read_at(offset, buf)?;
        st.show_committed(offset, buf);
        Ok(())
    }

    fn write_at(&self, offset: u64, data: &[u8]) -> Result<()> {
        let end = checked_end(offset, len_u64(data.len()))?;
        match self.before_change(std::slice::from_ref(&(offset..end)))? {
            None => self.inner.write_at(offset, data),
            Some(m) => self.write_clearing_marker(m, &[WriteSegment::new(offset, data)]),
        }
    }

    fn len(&self) -> Result<u64> {
        self.inner.len()
    }

    fn set_len(&self, len: u64) -> Result<()> {
        let cut = len..self.inner.len()?.max(len);
        // A cut never removes the marker: it is a write's business (a cut over it would leave
        // zeros, which read as "no marker", only after a truncation below the committed state's
        // first bytes, which no HDF5 flush does).
        self.before_change(std::slice::from_ref(&cut))?;
        self.inner.set_len(len)
    }

    fn sync(&self) -> Result<()> {
        self.inner.sync()
    }

    fn lock(&self, mode: LockMode) -> Result<()> {
        self.inner.lock(mode)
    }

    fn unlock(&self) -> Result<()> {
        self.inner.unlock()
    }

    fn read_vectored(&self, segments: &mut [ReadSegment<'_>]) -> Result<()> {
        let mut extents = Vec::with_capacity(segments.len());
        for s in segments.iter() {
            extents.push(s.offset..checked_end(s.offset, len_u64(s.buf.len()))?);
        }
        let st = self.lock_state();
        if !extents.iter().any(|r| st.hides_marker_in(r)) {
            drop(st);
            return self.inner.read_vectored(segments);
        }
        self.inner.read_vectored(segments)?;
        for seg in segments.iter_mut() {
            st.show_committed(seg.offset, seg.buf);
        }
        Ok(())
    }

    fn write_vectored(&self, segments: &[WriteSegment<'_>]) -> Result<()> {
        let mut extents = Vec::with_capacity(segments.len());
        for s in segments {
            extents.push(s.offset..checked_end(s.offset, len_u64(s.data.len()))?);
        }
        match self.before_change(&extents)? {
            None => self.inner.write_vectored(segments),
            Some(m) => self.write_clearing_marker(m, segments),
        }
    }

    /// Empties the journal (after making the storage durable, with `sync`) and takes the
    /// storage's current bytes as the committed state, minus `point.unused`. A marker still on
    /// the storage (the interval never rewrote its range) is replaced by the committed bytes
    /// first.
    fn commit(&self, point: &CommitPoint) -> Result<()> {
        let mut st = self.lock_state();
        if st.detached {
            drop(st);
            return self.inner.commit(point);
        }
        if st.marker_on_disk
            && let (Some(m), Some(saved)) = (&st.marker, &st.marker_saved)
        {
            self.inner.write_at(m.offset, saved)?;
            st.marker_on_disk = false;
        }
        if self.options.sync {
            self.inner.sync()?;
        }
        if st.journal_len > 0 {
            self.journal.set_len(0)?;
            if self.options.sync {
                self.journal.sync()?;
            }
        }
        let committed_len = self.inner.len()?;
        st.committed_len = committed_len;
        st.unused.clear();
        for r in &point.unused {
            st.unused.insert(r.start..r.end.min(committed_len));
        }
        st.journaled.clear();
        st.journal_len = 0;
        st.nonce = new_nonce();
        st.marker = point
            .marker
            .clone()
            .filter(|m| m.bytes.len() <= Marker::MAX_LEN && !m.bytes.is_empty());
        st.marker_saved = None;
        st.marker_on_disk = false;
        self.inner.commit(point)
    }

    fn journals_overwrites(&self) -> bool {
        !self.is_detached()
    }
}

/// One valid record found by [`scan`]: where its bytes are in the journal and where they go.
struct FoundRecord {
    at: u64,
    offset: u64,
    len: u64,
}

/// Reads record `r`'s old bytes.
fn record_bytes<J: Storage + ?Sized>(journal: &J, r: &FoundRecord) -> Result<Vec<u8>> {
    let mut data = vec![0u8; r.len as usize];
    journal.read_at(r.at + RECORD_HEADER_LEN, &mut data)?;
    Ok(data)
}

/// The valid records of a journal, in order, stopping at the first that is torn or damaged.
fn scan<J: Storage + ?Sized>(
    journal: &J,
    header: &Header,
    journal_len: u64,
) -> Result<Vec<FoundRecord>> {
    let mut found = Vec::new();
    let mut at = HEADER_LEN;
    while at + RECORD_HEADER_LEN <= journal_len {
        let mut head = [0u8; RECORD_HEADER_LEN as usize];
        journal.read_at(at, &mut head)?;
        let mut o = [0u8; 8];
        o.copy_from_slice(&head[4..12]);
        let offset = u64::from_le_bytes(o);
        let len = u64::from(u32::from_le_bytes([head[12], head[13], head[14], head[15]]));
        let crc = u32::from_le_bytes([head[16], head[17], head[18], head[19]]);
        let body_end = at + RECORD_HEADER_LEN + len;
        if &head[0..4] != RECORD_TAG
            || len == 0
            || len > MAX_RECORD as u64
            || body_end > journal_len
            || offset
                .checked_add(len)
                .is_none_or(|end| end > header.committed_len)
        {
            break;
        }
        let r = FoundRecord { at, offset, len };
        let data = record_bytes(journal, &r)?;
        if record_crc(header.nonce, offset, &data) != crc {
            break;
        }
        found.push(r);
        at = body_end;
    }
    Ok(found)
}

/// Whether `journal` is hot for `data`: a complete header, at least one complete record, and
/// the header's marker (if any) on `data`. Reads only: a reader can tell whether the file
/// needs [`recover`] without write access.
pub fn is_hot<S, J>(data: &S, journal: &J) -> Result<bool>
where
    S: Storage + ?Sized,
    J: Storage + ?Sized,
{
    let journal_len = journal.len()?;
    if journal_len < HEADER_LEN {
        return Ok(false);
    }
    let mut hb = [0u8; HEADER_LEN as usize];
    journal.read_at(0, &mut hb)?;
    let Some(header) = Header::decode(&hb) else {
        return Ok(false);
    };
    if let Some(m) = &header.marker {
        let mut seen = vec![0u8; m.bytes.len()];
        data.read_at_zero_fill(m.offset, &mut seen)?;
        if seen != m.bytes {
            return Ok(false);
        }
    }
    Ok(!scan(journal, &header, journal_len)?.is_empty())
}

/// Rolls `data` back to the state its journal was protecting, if the journal is hot (see the
/// module documentation), and empties the journal. The caller must have `data` to itself (an
/// exclusive lock): rolling back under a live writer would destroy its work. Idempotent: a
/// crash during recovery leaves a journal that the next call applies again.
///
/// Records not covering the marker are written back first, then the committed length is
/// restored, then the marker's records (so the storage shows the marker, and the journal stays
/// hot, until everything else is back).
pub fn recover<S, J>(data: &S, journal: &J, sync: bool) -> Result<Recovery>
where
    S: Storage + ?Sized,
    J: Storage + ?Sized,
{
    let journal_len = journal.len()?;
    if journal_len == 0 {
        return Ok(Recovery::Clean);
    }
    let discard = || -> Result<Recovery> {
        journal.set_len(0)?;
        if sync {
            journal.sync()?;
        }
        Ok(Recovery::Discarded)
    };
    if journal_len < HEADER_LEN {
        return discard();
    }
    let mut hb = [0u8; HEADER_LEN as usize];
    journal.read_at(0, &mut hb)?;
    let Some(header) = Header::decode(&hb) else {
        return discard();
    };
    if let Some(m) = &header.marker {
        let mut seen = vec![0u8; m.bytes.len()];
        data.read_at_zero_fill(m.offset, &mut seen)?;
        if seen != m.bytes {
            return discard();
        }
    }
    let records = scan(journal, &header, journal_len)?;
    if records.is_empty() {
        return discard();
    }
    let marker = header
        .marker
        .as_ref()
        .map(|m| m.offset..m.offset.saturating_add(len_u64(m.bytes.len())));
    let under_marker = |r: &FoundRecord| {
        marker
            .as_ref()
            .is_some_and(|m| r.offset < m.end && m.start < r.offset + r.len)
    };
    let mut bytes = 0;
    for pass_marker in [false, true] {
        for r in records.iter().filter(|r| under_marker(r) == pass_marker) {
            let old = record_bytes(journal, r)?;
            data.write_at(r.offset, &old)?;
            bytes += r.len;
        }
        if !pass_marker {
            data.set_len(header.committed_len)?;
        }
        if sync {
            data.sync()?;
        }
    }
    journal.set_len(0)?;
    if sync {
        journal.sync()?;
    }
    Ok(Recovery::RolledBack {
        records: len_u64(records.len()),
        bytes,
        len: header.committed_len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FaultInjection, IoOp, MemoryStorage};

    fn marker(offset: u64) -> Option<Marker> {
        Some(Marker {
            offset,
            bytes: b"!!".to_vec(),
        })
    }

    fn commit_with(s: &impl Storage, unused: Vec<Range<u64>>, m: Option<Marker>) {
        s.commit(&CommitPoint { unused, marker: m }).unwrap();
    }

    #[test]
    fn header_round_trip_and_damage() {
        let h = Header {
            nonce: 7,
            committed_len: 1234,
            marker: marker(3),
        };
        let mut b = h.encode();
        assert_eq!(Header::decode(&b), Some(h.clone()));
        let none = Header { marker: None, ..h };
        assert_eq!(Header::decode(&none.encode()), Some(none));
        b[30] ^= 1;
        assert_eq!(Header::decode(&b), None, "checksum");
    }

    #[test]
    fn only_committed_bytes_are_journaled_once() {
        let data = MemoryStorage::with_data(vec![1; 100]);
        let (s, r) = Journaled::open(
            data.clone(),
            MemoryStorage::new(),
            JournalOptions::default(),
        )
        .unwrap();
        assert_eq!(r, Recovery::Clean);
        commit_with(&s, std::iter::once(40..60).collect(), None);
        s.write_at(100, &[9; 10]).unwrap(); // new space
        s.write_at(45, &[9; 10]).unwrap(); // unused space
        assert_eq!(s.journal_len(), 0);
        s.write_at(30, &[2; 20]).unwrap(); // 30..40 committed, 40..50 unused
        assert_eq!(s.journal_len(), HEADER_LEN + RECORD_HEADER_LEN + 10);
        s.write_at(30, &[3; 20]).unwrap(); // already journaled
        s.write_vectored(&[
            WriteSegment::new(0, &[4; 5]),
            WriteSegment::new(95, &[4; 10]),
        ])
        .unwrap();
        assert_eq!(
            s.journal_len(),
            HEADER_LEN + 3 * RECORD_HEADER_LEN + 10 + 5 + 5
        );
        commit_with(&s, vec![], None);
        assert_eq!(s.journal().len().unwrap(), 0, "emptied by commit");
        s.write_at(0, &[5; 1]).unwrap();
        assert_eq!(s.journal_len(), HEADER_LEN + RECORD_HEADER_LEN + 1);
    }

    #[test]
    fn rollback_restores_the_committed_state() {
        let data = MemoryStorage::with_data((0..200u8).collect());
        let journal = MemoryStorage::new();
        let opts = JournalOptions::default();
        let (s, _) = Journaled::open(data.clone(), journal.clone(), opts).unwrap();
        commit_with(&s, std::iter::once(150..200).collect(), marker(0));
        s.write_at(10, &[0xEE; 30]).unwrap();
        assert_eq!(
            &data.snapshot()[0..2],
            b"!!",
            "marker written before the change"
        );
        s.write_at(160, &[0xEE; 30]).unwrap();
        s.write_at(250, &[0xEE; 30]).unwrap();
        s.set_len(120).unwrap();
        s.write_at(100, &[0xEE; 300]).unwrap();
        drop(s);
        let r = recover(&data, &journal, false).unwrap();
        assert!(matches!(r, Recovery::RolledBack { len: 200, .. }), "{r:?}");
        let expect: Vec<u8> = (0..200u8).collect();
        let got = data.snapshot();
        assert_eq!(got.len(), 200);
        assert_eq!(&got[..150], &expect[..150], "committed bytes back");
        assert_eq!(journal.len().unwrap(), 0);
        assert_eq!(recover(&data, &journal, false).unwrap(), Recovery::Clean);
    }

    #[test]
    fn no_marker_on_the_storage_means_not_hot() {
        let data = MemoryStorage::with_data(vec![1; 64]);
        let journal = MemoryStorage::new();
        let (s, _) =
            Journaled::open(data.clone(), journal.clone(), JournalOptions::default()).unwrap();
        commit_with(&s, vec![], marker(0));
        s.write_at(10, &[2; 4]).unwrap();
        // The interval's last write replaces the marker: the next state is complete.
        s.write_at(0, &[3; 2]).unwrap();
        drop(s);
        assert_eq!(
            recover(&data, &journal, false).unwrap(),
            Recovery::Discarded
        );
        assert_eq!(
            &data.snapshot()[..12],
            &[3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2]
        );
    }

    #[test]
    fn a_second_in_place_change_after_the_marker_is_cleared_marks_again() {
        let data = MemoryStorage::with_data(vec![1; 64]);
        let journal = MemoryStorage::new();
        let (s, _) =
            Journaled::open(data.clone(), journal.clone(), JournalOptions::default()).unwrap();
        commit_with(&s, vec![], marker(0));
        s.write_at(0, &[3; 2]).unwrap();
        s.write_at(10, &[2; 4]).unwrap();
        assert_eq!(&data.snapshot()[..2], b"!!");
        drop(s);
        assert!(matches!(
            recover(&data, &journal, false).unwrap(),
            Recovery::RolledBack { .. }
        ));
        assert_eq!(data.snapshot(), vec![1; 64]);
    }

    /// A layer above (a page buffer) that reads the marker's page while the marker is on the
    /// storage and writes the page back whole must not put the marker back: reads through the
    /// decorator show the committed bytes under it, and the storage shows the marker.
    #[test]
    fn reads_see_the_committed_bytes_under_the_marker() {
        let data = MemoryStorage::with_data((0..64u8).collect());
        let (s, _) = Journaled::open(
            data.clone(),
            MemoryStorage::new(),
            JournalOptions::default(),
        )
        .unwrap();
        commit_with(&s, vec![], marker(4));
        s.write_at(20, &[9; 4]).unwrap();
        assert_eq!(&data.snapshot()[4..6], b"!!");
        let mut page = [0u8; 16];
        s.read_at(0, &mut page).unwrap();
        let expect: Vec<u8> = (0..16u8).collect();
        assert_eq!(page.to_vec(), expect);
        let mut tail = [0u8; 3];
        let mut head = [0u8; 5];
        let mut segs = [
            ReadSegment::new(5, &mut tail),
            ReadSegment::new(0, &mut head),
        ];
        s.read_vectored(&mut segs).unwrap();
        assert_eq!((tail, head), ([5, 6, 7], [0, 1, 2, 3, 4]));
        // The page written back whole (as a page buffer flushes it) clears the marker.
        page[10] = 99;
        s.write_at(0, &page).unwrap();
        commit_with(&s, vec![], marker(4));
        let mut expect: Vec<u8> = (0..64u8).collect();
        expect[10] = 99;
        expect[20..24].copy_from_slice(&[9; 4]);
        assert_eq!(data.snapshot(), expect);
    }

    #[test]
    fn commit_without_rewriting_the_marker_range_restores_it() {
        let data = MemoryStorage::with_data(vec![1; 64]);
        let (s, _) = Journaled::open(
            data.clone(),
            MemoryStorage::new(),
            JournalOptions::default(),
        )
        .unwrap();
        commit_with(&s, vec![], marker(0));
        s.write_at(10, &[2; 4]).unwrap();
        commit_with(&s, vec![], marker(0));
        assert_eq!(&data.snapshot()[..2], &[1, 1]);
    }

    #[test]
    fn hot_only_with_the_marker_and_a_record() {
        let data = MemoryStorage::with_data(vec![1; 64]);
        let journal = MemoryStorage::new();
        assert!(!is_hot(&data, &journal).unwrap());
        let (s, _) =
            Journaled::open(data.clone(), journal.clone(), JournalOptions::default()).unwrap();
        commit_with(&s, vec![], marker(0));
        s.write_at(10, &[2; 4]).unwrap();
        assert!(is_hot(&data, &journal).unwrap());
        s.write_at(0, &[3; 2]).unwrap();
        assert!(!is_hot(&data, &journal).unwrap(), "the marker is gone");
    }

    #[test]
    fn a_write_over_the_marker_writes_the_marker_last_and_restores_it_on_failure() {
        let data = crate::Metrics::new(MemoryStorage::with_data(vec![1; 64]));
        data.record_ops(true);
        let journal = MemoryStorage::new();
        let (s, _) = Journaled::open(&data, journal.clone(), JournalOptions::default()).unwrap();
        commit_with(&s, vec![], marker(4));
        s.write_at(20, &[2; 4]).unwrap();
        data.clear_ops();
        // A superblock-like write covering the marker: its other bytes go first.
        s.write_at(0, &[3; 10]).unwrap();
        let ops: Vec<(IoOp, u64, u64)> = data
            .ops()
            .iter()
            .filter(|o| matches!(o.op, IoOp::Write | IoOp::WriteVectored))
            .map(|o| (o.op, o.offset, o.len))
            .collect();
        assert_eq!(
            ops,
            [
                (IoOp::WriteVectored, 0, 4),
                (IoOp::WriteVectored, 6, 4),
                (IoOp::Write, 4, 2)
            ]
        );
        assert!(
            !is_hot(&data, &journal).unwrap(),
            "committed by the last byte"
        );

        // The same write failing on the marker's bytes: the marker stays, the file rolls back.
        let data = MemoryStorage::with_data(vec![1; 64]);
        let flaky = FaultInjection::new(data.clone()).fail_nth(IoOp::Write, 3);
        let journal = MemoryStorage::new();
        let (s, _) = Journaled::open(flaky, journal.clone(), JournalOptions::default()).unwrap();
        commit_with(&s, vec![], marker(4));
        s.write_at(20, &[2; 4]).unwrap(); // call 1: marker, 2: the change
        // The outside parts go as one vector write; call 3 is the marker's bytes.
        assert!(s.write_at(0, &[3; 10]).is_err());
        assert!(is_hot(&data, &journal).unwrap());
        drop(s);
        assert!(matches!(
            recover(&data, &journal, false).unwrap(),
            Recovery::RolledBack { .. }
        ));
        assert_eq!(data.snapshot(), vec![1; 64]);
    }

    #[test]
    fn torn_journal_tail_is_ignored() {
        let data = MemoryStorage::with_data(vec![1; 64]);
        let journal = MemoryStorage::new();
        let (s, _) =
            Journaled::open(data.clone(), journal.clone(), JournalOptions::default()).unwrap();
        commit_with(&s, vec![], marker(0));
        s.write_at(10, &[2; 4]).unwrap();
        s.write_at(20, &[2; 4]).unwrap();
        drop(s);
        // The last record's bytes were cut short: it is ignored, its write never started.
        let j = journal.snapshot();
        journal.set_len(len_u64(j.len()) - 1).unwrap();
        let mut d = data.snapshot();
        d[20..24].copy_from_slice(&[1; 4]);
        data.write_at(0, &d).unwrap();
        let r = recover(&data, &journal, false).unwrap();
        assert!(
            matches!(r, Recovery::RolledBack { records: 2, .. }),
            "{r:?}"
        );
        assert_eq!(data.snapshot(), vec![1; 64]);
    }

    #[test]
    fn failing_journal_write_keeps_the_storage_untouched() {
        let data = MemoryStorage::with_data(vec![1; 64]);
        let journal = FaultInjection::new(MemoryStorage::new()).fail_nth(IoOp::Write, 2);
        let (s, _) = Journaled::open(data.clone(), journal, JournalOptions::default()).unwrap();
        commit_with(&s, vec![], None);
        assert!(s.write_at(10, &[2; 4]).is_err());
        assert_eq!(data.snapshot(), vec![1; 64]);
    }

    #[test]
    fn a_detached_journal_passes_writes_and_commits_through() {
        let data = MemoryStorage::with_data(b"committed".to_vec());
        let journal = MemoryStorage::new();
        let (s, _) =
            Journaled::open(data.clone(), journal.clone(), JournalOptions::default()).unwrap();
        let marker = Marker {
            offset: 0,
            bytes: b"XX".to_vec(),
        };
        commit_with(&s, Vec::new(), Some(marker.clone()));
        assert!(s.journals_overwrites());
        assert!(
            std::sync::Arc::new(&s).journals_overwrites(),
            "forwarded by Arc and &"
        );
        s.write_at(4, b"M").unwrap();
        assert!(!s.detach(), "refused in the middle of a change");
        assert!(journal.len().unwrap() > 0);
        commit_with(&s, Vec::new(), Some(marker));
        assert!(s.detach());
        assert!(s.is_detached());
        assert!(!s.journals_overwrites());
        assert!(!data.journals_overwrites(), "a backend journals nothing");
        s.write_at(0, b"CHANGED").unwrap();
        // No marker, nothing journaled: the bytes are the writes themselves.
        assert_eq!(journal.len().unwrap(), 0);
        assert_eq!(data.snapshot(), b"CHANGEDed");
        commit_with(&s, Vec::new(), None);
        assert_eq!(data.snapshot(), b"CHANGEDed");
    }

    #[test]
    fn sync_barriers_are_in_order() {
        let data = crate::Metrics::new(MemoryStorage::with_data(vec![1; 64]));
        data.record_ops(true);
        let (s, _) =
            Journaled::open(&data, MemoryStorage::new(), JournalOptions { sync: true }).unwrap();
        commit_with(&s, vec![], marker(0));
        data.clear_ops();
        s.write_at(10, &[2; 4]).unwrap();
        s.write_at(0, &[3; 2]).unwrap();
        let ops: Vec<(IoOp, u64)> = data
            .ops()
            .into_iter()
            .filter(|o| matches!(o.op, IoOp::Write | IoOp::Sync))
            .map(|o| (o.op, o.offset))
            .collect();
        assert_eq!(
            ops,
            [
                (IoOp::Write, 0), // marker
                (IoOp::Sync, 0),  // marker durable before the change
                (IoOp::Write, 10),
                (IoOp::Sync, 0), // everything durable before the marker goes
                (IoOp::Write, 0),
            ]
        );
    }
}
