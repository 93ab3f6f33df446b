//! Transfers that skip the cache (spec §2.8, OQ-31, OQ-33).
//!
//! A piece bypasses when its request asks for it or, under [`Bypass::Auto`], when its chunk is
//! larger than `bypass_fraction` of the limit. A chunk whose values are resident is never
//! bypassed: it is served or updated in the cache (SCC-072). The fallback for a bypassed chunk
//! is the cached path followed at once by flush and eviction: a read decodes the chunk, scatters
//! and drops it without admitting it; a write goes through the cache and the chunk is then
//! flushed and evicted within the same call.

use std::collections::HashSet;

use super::read::Miss;
use super::write::WritePiece;
use super::{ChunkCache, IoReport, LoadKind, ReadRequest, WriteRequest};
use crate::ChunkKey;
use crate::error::Result;
use crate::policy::EntryId;

/// Whether a request's chunks skip the cache (OQ-33).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum Bypass {
    /// Skip the cache for chunks larger than `bypass_fraction` of the limit.
    #[default]
    Auto,
    /// Skip the cache for every chunk that is not resident.
    Always,
    /// Never skip the cache.
    Never,
}

impl ChunkCache {
    /// Whether pieces of `ds` under `mode` skip the cache.
    pub(super) fn bypasses(&self, ds: crate::DatasetId, mode: Bypass) -> Result<bool> {
        let st = self.state(ds)?;
        Ok(match mode {
            Bypass::Never => false,
            Bypass::Always => true,
            Bypass::Auto => {
                st.chunk_bytes as f64 > self.config.bypass_fraction * self.budget.limit() as f64
            }
        })
    }

    /// Reads bypassed pieces: chunks that do not exist give fill values; the others are loaded,
    /// scattered and dropped without being admitted (SCC-068's last fallback).
    pub(super) fn read_bypassed(
        &mut self,
        reqs: &mut [ReadRequest<'_>],
        pieces: &[Miss],
        _report: &mut IoReport,
    ) -> Result<()> {
        self.stats.bypassed += pieces.len() as u64;
        // One chunk at a time keeps at most one bypassed chunk in memory (EC-03).
        let mut done: HashSet<ChunkKey> = HashSet::new();
        for m in pieces {
            let key = ChunkKey {
                dataset: reqs[m.req].dataset,
                coord: m.piece.coord,
            };
            if !done.insert(key) {
                continue;
            }
            let res = self.load(&[(key, LoadKind::Values)])?;
            let chunk = res.loaded.into_iter().next().map(|l| l.chunk);
            let mine: Vec<&Miss> = pieces
                .iter()
                .filter(|m| reqs[m.req].dataset == key.dataset && m.piece.coord == key.coord)
                .collect();
            for m in mine {
                let r = &mut reqs[m.req];
                let st = self.state(key.dataset)?;
                match &chunk {
                    Some(c) => Self::scatter_chunk(
                        st,
                        key.dataset,
                        &key.coord,
                        c,
                        &m.piece.runs,
                        r.buf,
                        r.conversion,
                    )?,
                    None => Self::fill_buffer(st, key.dataset, &m.piece.runs, r.buf, r.conversion)?,
                }
            }
        }
        Ok(())
    }

    /// Writes bypassed pieces: through the cache, then each chunk is flushed and evicted at once
    /// (SCC-069's fallback), one chunk at a time.
    pub(super) fn write_bypassed(
        &mut self,
        reqs: &[WriteRequest<'_>],
        pieces: &[WritePiece],
        _report: &mut IoReport,
    ) -> Result<()> {
        self.stats.bypassed += pieces.len() as u64;
        let mut order: Vec<ChunkKey> = Vec::new();
        for w in pieces {
            let key = ChunkKey {
                dataset: reqs[w.req].dataset,
                coord: w.piece.coord,
            };
            if !order.contains(&key) {
                order.push(key);
            }
        }
        for key in order {
            let group: Vec<WritePiece> = pieces
                .iter()
                .filter(|w| reqs[w.req].dataset == key.dataset && w.piece.coord == key.coord)
                .map(|w| WritePiece {
                    req: w.req,
                    piece: w.piece.clone(),
                    covers: w.covers,
                })
                .collect();
            self.write_cached(reqs, &group)?;
            if let Some(id) = self.lookup_id(&key) {
                self.flush_entries(key.dataset, &[id.0])?;
                self.remove(EntryId(id.0));
            }
        }
        Ok(())
    }
}
