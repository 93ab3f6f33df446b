//! The cache instance: slab, address index, lists, totals and the bookkeeping every operation shares.
//!
//! Invariants (checked by [`MetadataCache::check_invariants`]):
//! 1. every live entry is in the index exactly once, and on exactly one of LRU / protected / pinned;
//! 2. an LRU entry is on exactly one of the clean LRU and dirty LRU, matching its dirty bit;
//! 3. an entry is in the slist exactly when it is dirty;
//! 4. list lengths and byte totals add up to the index's; clean + dirty = total; slist size = dirty;
//! 5. an entry is pinned exactly when the client pinned it or it has flush-dependency children;
//! 6. a parent's dirty-children count equals the number of its children whose subtree is dirty.

#[cfg(debug_assertions)]
use std::collections::BTreeMap;
use std::sync::Arc;

use h5_io::Storage;

use crate::class::{CacheTypes, Class, ClassInfo};
use crate::config::{CacheConfig, DerivedFlags, MAX_EPOCH_MARKERS};
use crate::error::{CacheError, Result};
use crate::list::{Chain, LinkStore, Links, List, NIL};
use crate::resize::{EpochMarkers, ResizeReport};
use crate::stats::Stats;
use crate::trace::Tracer;

/// Source of process-unique cache ids for [`ProtectHandle`]s.
static NEXT_CACHE_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Receiver of resize reports (MDC-125).
pub(crate) type ReportHook = Box<dyn FnMut(&ResizeReport) + Send>;

/// Upper bound on the number of client class ids (MDC-009).
pub const MAX_CLASS_IDS: usize = 32;
/// Default index bucket count (MDC-002).
pub const DEFAULT_HASH_TABLE_LEN: usize = 65_536;

/// Where an entry lives (MDC-013).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Place {
    Lru,
    Protected,
    Pinned,
}

/// Per-entry lifetime statistics (MDC-133).
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct EntryLifeStats {
    pub(crate) accesses: u64,
    pub(crate) clears: u64,
    pub(crate) flushes: u64,
    pub(crate) pins: u64,
}

/// The cache's record of one entry.
pub(crate) struct Entry<I> {
    pub(crate) addr: u64,
    pub(crate) size: usize,
    pub(crate) class: u8,
    /// `None` while the object is lent to one of its own callbacks.
    pub(crate) icr: Option<I>,
    pub(crate) image: Vec<u8>,
    pub(crate) image_up_to_date: bool,
    /// `image` is what the file holds at the entry's address (it was loaded or written there
    /// since the entry last moved or changed size).
    pub(crate) image_on_disk: bool,
    pub(crate) place: Place,
    pub(crate) dirty: bool,
    pub(crate) read_only: bool,
    pub(crate) ro_refs: u32,
    pub(crate) dirtied: bool,
    pub(crate) pinned_client: bool,
    pub(crate) flush_marker: bool,
    pub(crate) flush_last: bool,
    pub(crate) collective: bool,
    pub(crate) flush_in_progress: bool,
    pub(crate) destroy_in_progress: bool,
    pub(crate) clear_on_unprotect: bool,
    pub(crate) parents: Vec<u32>,
    pub(crate) children: Vec<u32>,
    pub(crate) ndirty_children: u32,
    /// The entry's position in the slist while it is dirty.
    pub(crate) slist_pos: u32,
    pub(crate) tag: Option<u64>,
    pub(crate) life: EntryLifeStats,
}

impl<I> Entry<I> {
    pub(crate) fn new(addr: u64, size: usize, class: u8, icr: I, dirty: bool) -> Self {
        Self {
            addr,
            size,
            class,
            icr: Some(icr),
            image: Vec::new(),
            image_up_to_date: false,
            image_on_disk: false,
            place: Place::Lru,
            dirty,
            read_only: false,
            ro_refs: 0,
            dirtied: false,
            pinned_client: false,
            flush_marker: false,
            slist_pos: 0,
            flush_last: false,
            collective: false,
            flush_in_progress: false,
            destroy_in_progress: false,
            clear_on_unprotect: false,
            parents: Vec::new(),
            children: Vec::new(),
            ndirty_children: 0,
            tag: None,
            life: EntryLifeStats::default(),
        }
    }
    pub(crate) fn is_pinned(&self) -> bool {
        self.pinned_client || !self.children.is_empty()
    }
    pub(crate) fn subtree_dirty(&self) -> bool {
        self.dirty || self.ndirty_children > 0
    }
    pub(crate) fn busy(&self) -> bool {
        self.icr.is_none()
    }
}

/// One slab slot. Slots `0..MAX_EPOCH_MARKERS` are the epoch markers and never hold entries.
pub(crate) struct Node<I> {
    pub(crate) generation: u32,
    pub(crate) main: Links,
    pub(crate) aux: Links,
    pub(crate) hash: Links,
    pub(crate) entry: Option<Entry<I>>,
}

/// The slab of slots.
pub(crate) struct Slab<I> {
    pub(crate) nodes: Vec<Node<I>>,
    free: Vec<u32>,
}

impl<I> LinkStore for Slab<I> {
    fn links(&self, slot: u32, chain: Chain) -> Links {
        let n = &self.nodes[slot as usize];
        match chain {
            Chain::Main => n.main,
            Chain::Aux => n.aux,
        }
    }
    fn links_mut(&mut self, slot: u32, chain: Chain) -> &mut Links {
        let n = &mut self.nodes[slot as usize];
        match chain {
            Chain::Main => &mut n.main,
            Chain::Aux => &mut n.aux,
        }
    }
}

impl<I> Slab<I> {
    fn new() -> Self {
        let nodes = (0..MAX_EPOCH_MARKERS)
            .map(|_| Node {
                generation: 0,
                main: Links::default(),
                aux: Links::default(),
                hash: Links::default(),
                entry: None,
            })
            .collect();
        Self {
            nodes,
            free: Vec::new(),
        }
    }
    fn alloc(&mut self, entry: Entry<I>) -> u32 {
        if let Some(slot) = self.free.pop() {
            self.nodes[slot as usize].entry = Some(entry);
            slot
        } else {
            self.nodes.push(Node {
                generation: 0,
                main: Links::default(),
                aux: Links::default(),
                hash: Links::default(),
                entry: Some(entry),
            });
            (self.nodes.len() - 1) as u32
        }
    }
    fn release(&mut self, slot: u32) -> Option<Entry<I>> {
        let node = &mut self.nodes[slot as usize];
        node.generation = node.generation.wrapping_add(1);
        let e = node.entry.take();
        self.free.push(slot);
        e
    }
    pub(crate) fn entry(&self, slot: u32) -> &Entry<I> {
        self.nodes[slot as usize]
            .entry
            .as_ref()
            .expect("slot holds an entry")
    }
    pub(crate) fn entry_mut(&mut self, slot: u32) -> &mut Entry<I> {
        self.nodes[slot as usize]
            .entry
            .as_mut()
            .expect("slot holds an entry")
    }
    pub(crate) fn is_marker(slot: u32) -> bool {
        (slot as usize) < MAX_EPOCH_MARKERS
    }
    pub(crate) fn live(&self, slot: u32, generation: u32) -> bool {
        self.nodes
            .get(slot as usize)
            .is_some_and(|n| n.generation == generation && n.entry.is_some())
    }
}

/// A protection: returned by [`protect`](MetadataCache::protect), consumed by
/// [`unprotect`](MetadataCache::unprotect). Not `Clone`, so one protection is released once.
#[derive(Debug, PartialEq, Eq)]
pub struct ProtectHandle {
    /// The cache that issued it: a handle is valid only in its own cache.
    pub(crate) cache: u64,
    pub(crate) slot: u32,
    pub(crate) generation: u32,
    pub(crate) addr: u64,
    pub(crate) read_only: bool,
}

impl ProtectHandle {
    /// The entry's address when it was protected.
    pub fn addr(&self) -> u64 {
        self.addr
    }
    /// Whether this is a read-only protection.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }
}

/// What [`status`](MetadataCache::status) reports about a cached address (MDC-011).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryStatus {
    /// Class id.
    pub class: u8,
    /// Entry size in bytes.
    pub size: usize,
    /// Dirty.
    pub dirty: bool,
    /// Protected (in either mode).
    pub protected: bool,
    /// Protected read-only.
    pub read_only: bool,
    /// Number of read-only protections held.
    pub ro_refs: u32,
    /// Pinned by the client.
    pub pinned_by_client: bool,
    /// Pinned by the cache (it is a flush-dependency parent).
    pub pinned_by_cache: bool,
    /// Flush marker set.
    pub flush_marker: bool,
    /// Flush-last.
    pub flush_last: bool,
    /// Flush-collectively was requested (recorded only, Q-30).
    pub flush_collectively: bool,
    /// The cached image equals what serialize would produce.
    pub image_up_to_date: bool,
    /// Being written now.
    pub flush_in_progress: bool,
    /// Being evicted now.
    pub destroy_in_progress: bool,
    /// Number of flush-dependency parents.
    pub parents: usize,
    /// Number of flush-dependency children.
    pub children: usize,
    /// Children whose subtree holds dirty entries.
    pub dirty_children: u32,
    /// Tag (owner object address).
    pub tag: Option<u64>,
}

/// Sizes reported by [`size_info`](MetadataCache::size_info) (MDC-124).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeInfo {
    /// Current (soft) maximum size.
    pub max_size: usize,
    /// Current minimum clean size.
    pub min_clean_size: usize,
    /// Bytes held by entries.
    pub cur_size: usize,
    /// Number of entries.
    pub cur_num_entries: usize,
}

/// Totals and list snapshot for tests and tools.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Totals {
    /// Entries in the index.
    pub index_len: usize,
    /// Bytes in the index.
    pub index_size: usize,
    /// Clean bytes.
    pub clean_size: usize,
    /// Dirty bytes.
    pub dirty_size: usize,
    /// Dirty entries (slist length).
    pub slist_len: usize,
    /// Dirty bytes by the slist.
    pub slist_size: usize,
    /// LRU length.
    pub lru_len: usize,
    /// LRU bytes.
    pub lru_size: usize,
    /// Clean LRU length.
    pub clru_len: usize,
    /// Dirty LRU length.
    pub dlru_len: usize,
    /// Protected list length.
    pub pl_len: usize,
    /// Protected list bytes.
    pub pl_size: usize,
    /// Pinned list length.
    pub pel_len: usize,
    /// Pinned list bytes.
    pub pel_size: usize,
    /// Active epoch markers.
    pub epoch_markers: usize,
    /// Flush-last entries.
    pub num_last_entries: usize,
}

/// Event passed to the log-flush callback after each write (MDC-068 step 6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogFlushEvent {
    /// Address written.
    pub addr: u64,
    /// Bytes written.
    pub len: usize,
    /// Class id.
    pub class: u8,
    /// I/O hint of the class.
    pub mem_type: crate::class::MemType,
}

/// Builder for a [`MetadataCache`] (MDC-010).
pub struct CacheBuilder<T: CacheTypes> {
    storage: Arc<dyn Storage>,
    classes: Vec<Arc<dyn Class<T>>>,
    ctx: T::Ctx,
    hash_table_len: usize,
    config: CacheConfig,
    raw_sizes: Option<(usize, usize)>,
    write_permitted: bool,
    check_write_permitted: Option<Box<dyn FnMut() -> bool + Send>>,
    log_flush: Option<Box<dyn FnMut(LogFlushEvent) + Send>>,
    aux: Option<Box<dyn std::any::Any + Send>>,
    checksum_retries: u32,
}

impl<T: CacheTypes> CacheBuilder<T> {
    /// Start with the default serial configuration.
    pub fn new(storage: Arc<dyn Storage>, classes: Vec<Arc<dyn Class<T>>>, ctx: T::Ctx) -> Self {
        Self {
            storage,
            classes,
            ctx,
            hash_table_len: DEFAULT_HASH_TABLE_LEN,
            config: CacheConfig::default_serial(),
            raw_sizes: None,
            write_permitted: true,
            check_write_permitted: None,
            log_flush: None,
            aux: None,
            checksum_retries: 1,
        }
    }
    /// Index bucket count; must be a power of two (MDC-003).
    pub fn hash_table_len(mut self, len: usize) -> Self {
        self.hash_table_len = len;
        self
    }
    /// The configuration applied at creation.
    pub fn config(mut self, config: CacheConfig) -> Self {
        self.config = config;
        self
    }
    /// Low-level creation sizes (HDF5's `H5C_create` arguments), used only if no resize mode moves
    /// them: the initial maximum in [1 KiB, 128 MiB] and a minimum clean size no larger than it.
    pub fn initial_sizes(mut self, max_size: usize, min_clean_size: usize) -> Self {
        self.raw_sizes = Some((max_size, min_clean_size));
        self
    }
    /// Fallback write permission when no callback is set (MDC-019).
    pub fn write_permitted(mut self, permitted: bool) -> Self {
        self.write_permitted = permitted;
        self
    }
    /// Callback asked at the start of every operation that may write (MDC-019).
    pub fn check_write_permitted(mut self, f: impl FnMut() -> bool + Send + 'static) -> Self {
        self.check_write_permitted = Some(Box::new(f));
        self
    }
    /// Callback run after every write (MDC-068).
    pub fn log_flush(mut self, f: impl FnMut(LogFlushEvent) + Send + 'static) -> Self {
        self.log_flush = Some(Box::new(f));
        self
    }
    /// Opaque parallel context, stored but never interpreted.
    pub fn aux(mut self, aux: Box<dyn std::any::Any + Send>) -> Self {
        self.aux = Some(aux);
        self
    }
    /// How many times a load re-reads after a checksum mismatch (Q-35; default 1).
    pub fn checksum_retries(mut self, retries: u32) -> Self {
        self.checksum_retries = retries;
        self
    }

    /// Validate and build.
    pub fn build(self) -> Result<MetadataCache<T>> {
        if !self.hash_table_len.is_power_of_two() {
            return Err(CacheError::InvalidArgument {
                what: "hash_table_len",
                reason: "must be a power of two",
            });
        }
        if self.classes.is_empty() || self.classes.len() > MAX_CLASS_IDS {
            return Err(CacheError::BadClass {
                id: self.classes.len(),
                reason: "the class table must hold 1 to 32 classes",
            });
        }
        for (i, c) in self.classes.iter().enumerate() {
            let info: &ClassInfo = c.info();
            if info.id as usize != i {
                return Err(CacheError::BadClass {
                    id: i,
                    reason: "class ids must run without gaps from 0",
                });
            }
            if info.name.is_empty() {
                return Err(CacheError::BadClass {
                    id: i,
                    reason: "class name is empty",
                });
            }
        }
        if let Some((max, min_clean)) = self.raw_sizes {
            if !(crate::config::MIN_MAX_CACHE_SIZE..=crate::config::MAX_MAX_CACHE_SIZE)
                .contains(&max)
            {
                return Err(CacheError::InvalidArgument {
                    what: "max_size",
                    reason: "must be in [1 KiB, 128 MiB]",
                });
            }
            if min_clean > max {
                return Err(CacheError::InvalidArgument {
                    what: "min_clean_size",
                    reason: "must not exceed the max size",
                });
            }
        }
        self.config.validate()?;
        let nclasses = self.classes.len();
        let mut cache = MetadataCache {
            id: NEXT_CACHE_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            storage: self.storage,
            classes: self.classes,
            ctx: self.ctx,
            slab: Slab::new(),
            buckets: vec![NIL; self.hash_table_len],
            bucket_mask: (self.hash_table_len - 1) as u64,
            index_len: 0,
            index_size: 0,
            clean_size: 0,
            dirty_size: 0,
            lru: List::default(),
            clru: List::default(),
            dlru: List::default(),
            pl: List::default(),
            pel: List::default(),
            slist: Vec::new(),
            slist_joined: None,
            #[cfg(debug_assertions)]
            by_addr: BTreeMap::new(),
            slist_size: 0,
            num_last_entries: 0,
            max_cache_size: 0,
            min_clean_size: 0,
            config: self.config.clone(),
            derived: DerivedFlags::default(),
            flash_threshold_bytes: 0,
            cache_full: false,
            size_decreased: false,
            cache_hits: 0,
            cache_accesses: 0,
            markers: EpochMarkers::default(),
            epochs: 0,
            flush_in_progress: false,
            slist_changed: false,
            removals: 0,
            image_writes: 0,
            spare_image: Vec::new(),
            page_check: None,
            spare_runs: Vec::new(),
            write_permitted: self.write_permitted,
            check_write_permitted: self.check_write_permitted,
            log_flush: self.log_flush,
            aux: self.aux,
            report_hook: None,
            reports: Vec::new(),
            tracer: None,
            stats: Stats::new(nclasses),
            current_tag: None,
            ignore_tags: true,
            checksum_retries: self.checksum_retries,
            stats_prefix: String::new(),
            dump_stats_on_close: false,
            callback_depth: 0,
            invariant_checks: true,
        };
        cache.apply_config(&self.config)?;
        if let Some((max, min_clean)) = self.raw_sizes {
            cache.max_cache_size = max;
            cache.min_clean_size = min_clean;
            cache.flash_threshold_bytes = (max as f64 * cache.config.flash_threshold) as usize;
        }
        Ok(cache)
    }
}

/// The metadata cache of one file. See the crate documentation for the model.
///
/// Single-threaded, like the C original: the file layer guards it with one lock.
pub struct MetadataCache<T: CacheTypes> {
    /// Process-unique id, stamped into every handle this cache issues.
    pub(crate) id: u64,
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) classes: Vec<Arc<dyn Class<T>>>,
    pub(crate) ctx: T::Ctx,
    pub(crate) slab: Slab<T::Icr>,
    pub(crate) buckets: Vec<u32>,
    pub(crate) bucket_mask: u64,
    pub(crate) index_len: usize,
    pub(crate) index_size: usize,
    pub(crate) clean_size: usize,
    pub(crate) dirty_size: usize,
    pub(crate) lru: List,
    pub(crate) clru: List,
    pub(crate) dlru: List,
    pub(crate) pl: List,
    pub(crate) pel: List,
    /// The dirty entries' slots, in no order (a flush sorts them by address once, see
    /// [`MetadataCache::sorted_slist`]); each dirty entry's `slist_pos` is its index here.
    pub(crate) slist: Vec<u32>,
    /// While a flush runs: the slots that joined the slist since the flush last looked, so that
    /// it adds them to its sorted copy instead of sorting the slist again.
    pub(crate) slist_joined: Option<Vec<u32>>,
    /// Every entry by address, kept in debug builds for the overlap check (MDC-001).
    #[cfg(debug_assertions)]
    pub(crate) by_addr: BTreeMap<u64, u32>,
    pub(crate) slist_size: usize,
    pub(crate) num_last_entries: usize,
    pub(crate) max_cache_size: usize,
    pub(crate) min_clean_size: usize,
    pub(crate) config: CacheConfig,
    pub(crate) derived: DerivedFlags,
    pub(crate) flash_threshold_bytes: usize,
    pub(crate) cache_full: bool,
    pub(crate) size_decreased: bool,
    pub(crate) cache_hits: u64,
    pub(crate) cache_accesses: u64,
    pub(crate) markers: EpochMarkers,
    pub(crate) epochs: u64,
    pub(crate) flush_in_progress: bool,
    pub(crate) slist_changed: bool,
    /// Incremented on every removal from the index; make-space restarts its scan when it changes.
    pub(crate) removals: u64,
    /// Entry images written to storage so far (a detached load older than the last write may
    /// be stale, see `load.rs`).
    pub(crate) image_writes: u64,
    /// A buffer left over from the last write that compared images (the replaced on-disk
    /// image), reused for the next serialization so that writes do not allocate.
    pub(crate) spare_image: Vec<u8>,
    /// VFD SWMR writer: the page size misaligned writes are checked against (SWMR-074).
    pub(crate) page_check: Option<u64>,
    /// The changed-run list of the last diff write, kept for its allocation.
    pub(crate) spare_runs: Vec<(usize, usize)>,
    pub(crate) write_permitted: bool,
    pub(crate) check_write_permitted: Option<Box<dyn FnMut() -> bool + Send>>,
    pub(crate) log_flush: Option<Box<dyn FnMut(LogFlushEvent) + Send>>,
    pub(crate) aux: Option<Box<dyn std::any::Any + Send>>,
    pub(crate) report_hook: Option<ReportHook>,
    pub(crate) reports: Vec<ResizeReport>,
    pub(crate) tracer: Option<Tracer>,
    pub(crate) stats: Stats,
    pub(crate) current_tag: Option<u64>,
    pub(crate) ignore_tags: bool,
    pub(crate) checksum_retries: u32,
    pub(crate) stats_prefix: String,
    pub(crate) dump_stats_on_close: bool,
    /// Number of callbacks currently running (their calls back into the cache are nested).
    pub(crate) callback_depth: u32,
    /// Whether `extreme-checks` runs the full check after each public call.
    pub(crate) invariant_checks: bool,
}

impl<T: CacheTypes> std::fmt::Debug for MetadataCache<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetadataCache")
            .field("index_len", &self.index_len)
            .field("index_size", &self.index_size)
            .field("max_cache_size", &self.max_cache_size)
            .finish_non_exhaustive()
    }
}

impl<T: CacheTypes> MetadataCache<T> {
    // ----- index (MDC-002, MDC-004, MDC-130) -----

    /// Bucket of `addr`: the address bits from bit 3 up, masked to the table length (MDC-002, Q-23).
    pub fn bucket_of(&self, addr: u64) -> usize {
        ((addr >> 3) & self.bucket_mask) as usize
    }

    /// Find `addr`, moving a found entry to the head of its chain and recording search depth.
    pub(crate) fn lookup(&mut self, addr: u64) -> Option<u32> {
        let b = self.bucket_of(addr);
        let mut cur = self.buckets[b];
        let mut depth = 0u64;
        while cur != NIL {
            if self.slab.entry(cur).addr == addr {
                self.stats.ht_search(true, depth);
                if depth > 0 {
                    self.hash_unlink(cur, b);
                    self.hash_link_head(cur, b);
                }
                return Some(cur);
            }
            cur = self.slab.nodes[cur as usize].hash.next;
            depth += 1;
        }
        self.stats.ht_search(false, depth);
        None
    }

    /// Find `addr` without touching chain order or statistics.
    pub(crate) fn peek(&self, addr: u64) -> Option<u32> {
        let mut cur = self.buckets[self.bucket_of(addr)];
        while cur != NIL {
            if self.slab.entry(cur).addr == addr {
                return Some(cur);
            }
            cur = self.slab.nodes[cur as usize].hash.next;
        }
        None
    }

    fn hash_link_head(&mut self, slot: u32, b: usize) {
        let old = self.buckets[b];
        self.slab.nodes[slot as usize].hash = Links {
            prev: NIL,
            next: old,
        };
        if old != NIL {
            self.slab.nodes[old as usize].hash.prev = slot;
        }
        self.buckets[b] = slot;
    }

    fn hash_unlink(&mut self, slot: u32, b: usize) {
        let Links { prev, next } = self.slab.nodes[slot as usize].hash;
        if prev == NIL {
            self.buckets[b] = next;
        } else {
            self.slab.nodes[prev as usize].hash.next = next;
        }
        if next != NIL {
            self.slab.nodes[next as usize].hash.prev = prev;
        }
        self.slab.nodes[slot as usize].hash = Links::default();
    }

    /// Add a new entry to the slab and index, counting its bytes; it is placed on no list yet.
    pub(crate) fn index_add(&mut self, entry: Entry<T::Icr>) -> u32 {
        let (addr, size, dirty, flush_last) =
            (entry.addr, entry.size, entry.dirty, entry.flush_last);
        let slot = self.slab.alloc(entry);
        let b = self.bucket_of(addr);
        self.hash_link_head(slot, b);
        #[cfg(debug_assertions)]
        self.by_addr.insert(addr, slot);
        self.index_len += 1;
        self.index_size += size;
        if dirty {
            self.dirty_size += size;
            self.slist_insert(slot);
        } else {
            self.clean_size += size;
        }
        if flush_last {
            self.num_last_entries += 1;
        }
        self.stats.ht_insertion();
        self.record_high_water();
        slot
    }

    /// Remove an entry (already off every list) from the index and slab, returning it.
    pub(crate) fn index_remove(&mut self, slot: u32) -> Entry<T::Icr> {
        let (addr, size, dirty, flush_last) = {
            let e = self.slab.entry(slot);
            (e.addr, e.size, e.dirty, e.flush_last)
        };
        let b = self.bucket_of(addr);
        self.hash_unlink(slot, b);
        #[cfg(debug_assertions)]
        self.by_addr.remove(&addr);
        self.index_len -= 1;
        self.index_size -= size;
        if dirty {
            self.dirty_size -= size;
            self.slist_remove(slot);
        } else {
            self.clean_size -= size;
        }
        if flush_last {
            self.num_last_entries -= 1;
        }
        self.stats.ht_deletion();
        self.removals += 1;
        let e = self.slab.release(slot).expect("removed slot held an entry");
        #[cfg(feature = "entry-stats")]
        self.stats.fold_entry(e.class, e.size, &e.life);
        e
    }

    /// Re-key an entry under a new address (index and slist).
    pub(crate) fn rekey(&mut self, slot: u32, new_addr: u64) {
        let old_addr = self.slab.entry(slot).addr;
        let b = self.bucket_of(old_addr);
        self.hash_unlink(slot, b);
        let dirty = self.slab.entry(slot).dirty;
        if dirty {
            self.slist_remove(slot);
        }
        #[cfg(debug_assertions)]
        {
            self.by_addr.remove(&old_addr);
            self.by_addr.insert(new_addr, slot);
        }
        self.slab.entry_mut(slot).addr = new_addr;
        self.slab.entry_mut(slot).image_on_disk = false;
        let nb = self.bucket_of(new_addr);
        self.hash_link_head(slot, nb);
        if dirty {
            self.slist_insert(slot);
        }
    }

    fn slist_insert(&mut self, slot: u32) {
        let pos = self.slist.len() as u32;
        let e = self.slab.entry_mut(slot);
        e.slist_pos = pos;
        let size = e.size;
        self.slist.push(slot);
        if let Some(joined) = self.slist_joined.as_mut() {
            joined.push(slot);
        }
        self.slist_size += size;
        self.slist_changed = true;
    }

    fn slist_remove(&mut self, slot: u32) {
        let (pos, size) = {
            let e = self.slab.entry(slot);
            (e.slist_pos as usize, e.size)
        };
        if self.slist.get(pos) == Some(&slot) {
            self.slist.swap_remove(pos);
            if let Some(&moved) = self.slist.get(pos) {
                self.slab.entry_mut(moved).slist_pos = pos as u32;
            }
        }
        self.slist_size -= size;
        self.slist_changed = true;
    }

    /// The dirty entries as `(address, slot)`, ascending by address.
    pub(crate) fn sorted_slist(&self) -> Vec<(u64, u32)> {
        let mut v: Vec<(u64, u32)> = self
            .slist
            .iter()
            .map(|&slot| (self.slab.entry(slot).addr, slot))
            .collect();
        v.sort_unstable();
        v
    }

    // ----- list placement (MDC-013 .. MDC-015) -----

    /// Link an entry at the head of the list its place names.
    pub(crate) fn link(&mut self, slot: u32, place: Place) {
        let (size, dirty) = {
            let e = self.slab.entry_mut(slot);
            e.place = place;
            (e.size, e.dirty)
        };
        match place {
            Place::Lru => {
                self.lru
                    .push_head(&mut self.slab, slot, Chain::Main, size, true);
                let aux = if dirty {
                    &mut self.dlru
                } else {
                    &mut self.clru
                };
                aux.push_head(&mut self.slab, slot, Chain::Aux, size, true);
            }
            // The protected set is counted, not linked: nothing walks it on a hot path.
            Place::Protected => {
                self.pl.len += 1;
                self.pl.size += size;
            }
            Place::Pinned => self
                .pel
                .push_head(&mut self.slab, slot, Chain::Main, size, true),
        }
        // Every list growth passes through here, so the high-water mark of the list that grew is
        // sampled even when no total changes (e.g. an unprotect with PIN) (MDC-131).
        #[cfg(feature = "stats")]
        {
            let m = &mut self.stats.max;
            match place {
                Place::Lru => {
                    m.lru_len = m.lru_len.max(self.lru.len);
                    m.lru_size = m.lru_size.max(self.lru.size);
                }
                Place::Protected => {
                    m.pl_len = m.pl_len.max(self.pl.len);
                    m.pl_size = m.pl_size.max(self.pl.size);
                }
                Place::Pinned => {
                    m.pel_len = m.pel_len.max(self.pel.len);
                    m.pel_size = m.pel_size.max(self.pel.size);
                }
            }
        }
    }

    /// Unlink an entry from whichever list holds it.
    pub(crate) fn unlink(&mut self, slot: u32) {
        let (size, dirty, place) = {
            let e = self.slab.entry(slot);
            (e.size, e.dirty, e.place)
        };
        match place {
            Place::Lru => {
                self.lru
                    .remove(&mut self.slab, slot, Chain::Main, size, true);
                let aux = if dirty {
                    &mut self.dlru
                } else {
                    &mut self.clru
                };
                aux.remove(&mut self.slab, slot, Chain::Aux, size, true);
            }
            Place::Protected => {
                self.pl.len -= 1;
                self.pl.size -= size;
            }
            Place::Pinned => self
                .pel
                .remove(&mut self.slab, slot, Chain::Main, size, true),
        }
    }

    /// Where an unprotected entry belongs.
    pub(crate) fn resting_place(&self, slot: u32) -> Place {
        if self.slab.entry(slot).is_pinned() {
            Place::Pinned
        } else {
            Place::Lru
        }
    }

    /// Re-place an unprotected entry whose pinned state may have changed.
    pub(crate) fn replace_if_pin_changed(&mut self, slot: u32) {
        let e = self.slab.entry(slot);
        if e.place == Place::Protected {
            return;
        }
        let want = self.resting_place(slot);
        if want != e.place {
            self.unlink(slot);
            self.link(slot, want);
        }
    }

    // ----- dirty state (MDC-007, MDC-014, MDC-075) -----

    /// Set the dirty bit, keeping totals, slist, clean/dirty LRU and flush-dependency counts in step.
    /// An LRU entry moves to the LRU head. Dirtying makes the image stale.
    pub(crate) fn set_dirty(&mut self, slot: u32, dirty: bool) {
        let (was, place, size, was_subtree) = {
            let e = self.slab.entry(slot);
            (e.dirty, e.place, e.size, e.subtree_dirty())
        };
        if dirty {
            self.slab.entry_mut(slot).image_up_to_date = false;
        }
        if was == dirty {
            return;
        }
        let on_lru = place == Place::Lru;
        if on_lru {
            self.unlink(slot);
        }
        if dirty {
            self.clean_size -= size;
            self.dirty_size += size;
            self.slab.entry_mut(slot).dirty = true;
            self.slist_insert(slot);
        } else {
            self.slist_remove(slot);
            let e = self.slab.entry_mut(slot);
            e.dirty = false;
            e.flush_marker = false;
            self.clean_size += size;
            self.dirty_size -= size;
        }
        if on_lru {
            self.link(slot, Place::Lru);
        }
        let now_subtree = self.slab.entry(slot).subtree_dirty();
        if now_subtree != was_subtree {
            self.propagate_subtree_dirty(slot, now_subtree);
        }
        self.record_high_water();
    }

    /// A slot's "subtree dirty" state changed: update every ancestor's dirty-children count.
    /// Allocates only when some ancestor's own subtree state flips too (the common case, a
    /// parent that stays dirty or clean, walks the parents in place).
    pub(crate) fn propagate_subtree_dirty(&mut self, slot: u32, now_dirty: bool) {
        let mut work: Vec<(u32, bool)> = Vec::new();
        let mut next = Some((slot, now_dirty));
        while let Some((s, d)) = next {
            for k in 0..self.slab.entry(s).parents.len() {
                let p = self.slab.entry(s).parents[k];
                let pe = self.slab.entry_mut(p);
                let before = pe.subtree_dirty();
                if d {
                    pe.ndirty_children += 1;
                } else {
                    pe.ndirty_children -= 1;
                }
                let after = pe.subtree_dirty();
                if before != after {
                    work.push((p, after));
                }
            }
            next = work.pop();
        }
    }

    /// Change an entry's size, adjusting every total (MDC-063, MDC-069).
    pub(crate) fn change_size(&mut self, slot: u32, new_size: usize) {
        let (old, dirty, place) = {
            let e = self.slab.entry(slot);
            (e.size, e.dirty, e.place)
        };
        if old == new_size {
            return;
        }
        self.unlink(slot);
        if dirty {
            self.slist_size = self.slist_size - old + new_size;
            self.dirty_size = self.dirty_size - old + new_size;
        } else {
            self.clean_size = self.clean_size - old + new_size;
        }
        self.index_size = self.index_size - old + new_size;
        self.slab.entry_mut(slot).size = new_size;
        self.slab.entry_mut(slot).image_on_disk = false;
        self.link(slot, place);
        self.stats
            .size_change(self.slab.entry(slot).class, new_size > old);
        self.record_high_water();
    }

    /// Fold the current totals into the high-water marks (MDC-131).
    pub(crate) fn record_high_water(&mut self) {
        #[cfg(feature = "stats")]
        {
            let m = &mut self.stats.max;
            m.index_len = m.index_len.max(self.index_len);
            m.index_size = m.index_size.max(self.index_size);
            m.clean_size = m.clean_size.max(self.clean_size);
            m.dirty_size = m.dirty_size.max(self.dirty_size);
            m.slist_len = m.slist_len.max(self.slist.len());
            m.slist_size = m.slist_size.max(self.slist_size);
            m.lru_len = m.lru_len.max(self.lru.len);
            m.lru_size = m.lru_size.max(self.lru.size);
            m.pel_len = m.pel_len.max(self.pel.len);
            m.pel_size = m.pel_size.max(self.pel.size);
            m.pl_len = m.pl_len.max(self.pl.len);
            m.pl_size = m.pl_size.max(self.pl.size);
        }
    }

    // ----- small shared helpers -----

    /// Clean size as the min-clean rule counts it: clean bytes plus unused space (glossary).
    pub(crate) fn effective_clean_size(&self) -> usize {
        self.clean_size + self.max_cache_size.saturating_sub(self.index_size)
    }

    /// Check that a class id is registered, without cloning the class.
    pub(crate) fn check_class(&self, id: u8) -> Result<()> {
        if (id as usize) < self.classes.len() {
            Ok(())
        } else {
            Err(CacheError::BadClass {
                id: id as usize,
                reason: "class id not registered",
            })
        }
    }

    pub(crate) fn class(&self, id: u8) -> Result<Arc<dyn Class<T>>> {
        self.classes
            .get(id as usize)
            .cloned()
            .ok_or_else(|| CacheError::BadClass {
                id: id as usize,
                reason: "class id not registered",
            })
    }

    pub(crate) fn class_name(&self, id: u8) -> &'static str {
        self.classes
            .get(id as usize)
            .map(|c| c.info().name)
            .unwrap_or("unknown class")
    }

    /// Ask whether writes are allowed now (MDC-019).
    pub(crate) fn write_ok(&mut self) -> bool {
        match self.check_write_permitted.as_mut() {
            Some(f) => f(),
            None => self.write_permitted,
        }
    }

    /// Run `f` with the entry's object lent out, so that `f` may call back into the cache. The entry
    /// is busy meanwhile: operations on it fail with `EntryBusy` (MDC-071).
    pub(crate) fn with_icr<R>(
        &mut self,
        slot: u32,
        f: impl FnOnce(&mut Self, &Arc<dyn Class<T>>, &mut T::Icr) -> R,
    ) -> Result<R> {
        let class_id = self.slab.entry(slot).class;
        let class = self.class(class_id)?;
        let addr = self.slab.entry(slot).addr;
        let mut icr = self
            .slab
            .entry_mut(slot)
            .icr
            .take()
            .ok_or_else(|| CacheError::EntryBusy { addr })?;
        self.callback_depth += 1;
        let r = f(self, &class, &mut icr);
        self.callback_depth -= 1;
        self.slab.entry_mut(slot).icr = Some(icr);
        Ok(r)
    }

    // ----- public queries (MDC-006, MDC-011, MDC-124) -----

    /// Status of the entry at `addr`, or `None`. Counts a successful lookup (MDC-011).
    pub fn status(&mut self, addr: u64) -> Option<EntryStatus> {
        let slot = self.peek(addr)?;
        self.stats.direct_lookups += 1;
        let e = self.slab.entry(slot);
        Some(EntryStatus {
            class: e.class,
            size: e.size,
            dirty: e.dirty,
            protected: e.place == Place::Protected,
            read_only: e.read_only,
            ro_refs: e.ro_refs,
            pinned_by_client: e.pinned_client,
            pinned_by_cache: !e.children.is_empty(),
            flush_marker: e.flush_marker,
            flush_last: e.flush_last,
            flush_collectively: e.collective,
            image_up_to_date: e.image_up_to_date,
            flush_in_progress: e.flush_in_progress,
            destroy_in_progress: e.destroy_in_progress,
            parents: e.parents.len(),
            children: e.children.len(),
            dirty_children: e.ndirty_children,
            tag: e.tag,
        })
    }

    /// Whether `addr` is cached (does not count as a lookup).
    pub fn contains(&self, addr: u64) -> bool {
        self.peek(addr).is_some()
    }

    /// Number of successful [`status`](Self::status) lookups (MDC-011).
    pub fn direct_lookup_count(&self) -> u64 {
        self.stats.direct_lookups
    }

    /// Read access to a cached entry's object, if it is cached and not lent to a callback.
    pub fn peek_icr(&self, addr: u64) -> Option<&T::Icr> {
        let slot = self.peek(addr)?;
        self.slab.entry(slot).icr.as_ref()
    }

    /// Mutable access to a pinned (unprotected) entry's object. Report changes with
    /// [`mark_dirty`](Self::mark_dirty) (MDC-059, MDC-061).
    pub fn pinned_icr_mut(&mut self, addr: u64) -> Result<&mut T::Icr> {
        let slot = self
            .peek(addr)
            .ok_or_else(|| CacheError::NotCached { addr })?;
        let e = self.slab.entry_mut(slot);
        if e.place != Place::Pinned {
            return Err(CacheError::WrongState {
                addr,
                reason: "entry is not pinned and unprotected",
            });
        }
        e.icr.as_mut().ok_or_else(|| CacheError::EntryBusy { addr })
    }

    /// The cached image of an entry (valid when `image_up_to_date`).
    pub fn image(&self, addr: u64) -> Option<&[u8]> {
        let slot = self.peek(addr)?;
        Some(&self.slab.entry(slot).image)
    }

    /// Current maximum, min clean size, bytes and entry count (MDC-124).
    pub fn size_info(&self) -> SizeInfo {
        SizeInfo {
            max_size: self.max_cache_size,
            min_clean_size: self.min_clean_size,
            cur_size: self.index_size,
            cur_num_entries: self.index_len,
        }
    }

    /// Totals of the index and every list.
    pub fn totals(&self) -> Totals {
        Totals {
            index_len: self.index_len,
            index_size: self.index_size,
            clean_size: self.clean_size,
            dirty_size: self.dirty_size,
            slist_len: self.slist.len(),
            slist_size: self.slist_size,
            lru_len: self.lru.len,
            lru_size: self.lru.size,
            clru_len: self.clru.len,
            dlru_len: self.dlru.len,
            pl_len: self.pl.len,
            pl_size: self.pl.size,
            pel_len: self.pel.len,
            pel_size: self.pel.size,
            epoch_markers: self.markers.active_count(),
            num_last_entries: self.num_last_entries,
        }
    }

    /// Addresses on the LRU, head to tail (markers skipped).
    pub fn lru_addrs(&self) -> Vec<u64> {
        self.lru
            .iter(&self.slab, Chain::Main)
            .filter(|s| !Slab::<T::Icr>::is_marker(*s))
            .map(|s| self.slab.entry(s).addr)
            .collect()
    }

    /// The LRU head to tail with epoch markers shown as `None`.
    pub fn lru_with_markers(&self) -> Vec<Option<u64>> {
        self.lru
            .iter(&self.slab, Chain::Main)
            .map(|s| {
                if Slab::<T::Icr>::is_marker(s) {
                    None
                } else {
                    Some(self.slab.entry(s).addr)
                }
            })
            .collect()
    }

    /// Addresses on the clean LRU, head to tail.
    pub fn clean_lru_addrs(&self) -> Vec<u64> {
        self.clru
            .iter(&self.slab, Chain::Aux)
            .map(|s| self.slab.entry(s).addr)
            .collect()
    }

    /// Addresses on the dirty LRU, head to tail.
    pub fn dirty_lru_addrs(&self) -> Vec<u64> {
        self.dlru
            .iter(&self.slab, Chain::Aux)
            .map(|s| self.slab.entry(s).addr)
            .collect()
    }

    /// Dirty addresses in ascending order (the slist).
    pub fn dirty_addrs(&self) -> Vec<u64> {
        self.sorted_slist().into_iter().map(|(a, _)| a).collect()
    }

    /// Addresses of every cached entry, ascending.
    pub fn cached_addrs(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .slab
            .nodes
            .iter()
            .filter_map(|n| n.entry.as_ref().map(|e| e.addr))
            .collect();
        v.sort_unstable();
        v
    }

    /// Turns the VFD SWMR writer's page check on (`Some(page size)`) or off (SWMR-074): an
    /// entry written across a page boundary without starting on one is then refused with
    /// [`CacheError::MisalignedWrite`], unless it is a fixed or extensible array data block
    /// page (the only structures whose pages the format places inside a larger block). The page
    /// buffer splits and logs the writes it allows.
    pub fn set_page_check(&mut self, page_size: Option<u64>) {
        self.page_check = page_size.filter(|&p| p > 0);
    }

    /// The file context.
    pub fn ctx(&self) -> &T::Ctx {
        &self.ctx
    }

    /// The file context, mutably (clients use it from callbacks).
    pub fn ctx_mut(&mut self) -> &mut T::Ctx {
        &mut self.ctx
    }

    /// The storage the cache reads and writes.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// The opaque parallel context given at construction.
    pub fn aux(&self) -> Option<&(dyn std::any::Any + Send)> {
        self.aux.as_deref()
    }

    /// Set the fallback write permission (MDC-019).
    pub fn set_write_permitted(&mut self, permitted: bool) {
        self.write_permitted = permitted;
    }

    /// Set the tag recorded on entries inserted or loaded from now on (MDC-088).
    pub fn set_tag(&mut self, tag: Option<u64>) {
        self.current_tag = tag;
    }

    /// When false, inserts and loads without a current tag are rejected (MDC-088). Default true.
    pub fn set_ignore_tags(&mut self, ignore: bool) {
        self.ignore_tags = ignore;
    }

    /// Prefix for statistics dumps, e.g. the MPI rank (MDC-134).
    pub fn set_stats_prefix(&mut self, prefix: impl Into<String>) {
        self.stats_prefix = prefix.into();
    }

    /// Dump statistics (to the returned string's consumer) when the cache is closed (MDC-134).
    pub fn set_dump_stats_on_close(&mut self, on: bool) {
        self.dump_stats_on_close = on;
    }

    /// Name of a registered class.
    pub fn class_info(&self, id: u8) -> Option<&ClassInfo> {
        self.classes.get(id as usize).map(|c| c.info())
    }

    /// Number of epochs completed since creation.
    pub fn epochs_completed(&self) -> u64 {
        self.epochs
    }

    /// Whether `h` was issued by this cache and still refers to a live entry.
    pub fn handle_is_live(&self, h: &ProtectHandle) -> bool {
        h.cache == self.id && self.slab.live(h.slot, h.generation)
    }
}
