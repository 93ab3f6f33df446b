//! The load step (spec §3.4: MDC-036, MDC-042 .. MDC-045), runnable without the cache.
//!
//! A load needs only the entry's class, the storage, the end of allocation and the retry budget,
//! so it is a [`DetachedLoad`] taken from the cache: [`MetadataCache::protect`] runs it at once
//! on a miss; a caller that guards the cache with a lock can take it under the lock, run it
//! without (so that loads of different entries overlap), and hand the result back with
//! [`MetadataCache::protect_loaded`], which counts and traces the protect exactly as `protect`
//! would have (the first entry to reach the cache wins: a loaded copy that finds the address
//! cached is dropped, and the protect is a hit).
//!
//! Invariant: a detached load never sees an image older than the cache's. It reads the
//! storage; the cache writes an entry's image only from `write.rs`, which counts
//! `image_writes`. A loaded copy is installed only if no image was written since its load was
//! detached; otherwise the entry is loaded again under the caller's lock.

use std::sync::Arc;

use h5_io::{Storage, StorageExt};

use crate::cache::{MetadataCache, ProtectHandle};
use crate::class::{CacheTypes, Class, ClassFlags, ClassInfo, FileContext};
use crate::error::{CacheError, Callback, ClientError, Result};
use crate::flags::ProtectFlags;

/// A loaded entry before it is indexed.
pub(crate) struct Loaded<I> {
    pub(crate) icr: I,
    pub(crate) size: usize,
    pub(crate) image: Vec<u8>,
    pub(crate) repaired: bool,
}

/// What a load did, added to the statistics when its entry is protected.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LoadCounts {
    reads: u64,
    bytes: u64,
    checksum_retries: u64,
    speculative_retries: u64,
}

/// One entry's load, taken from the cache to run without it (see the module doc).
pub struct DetachedLoad<T: CacheTypes> {
    class: Arc<dyn Class<T>>,
    info: ClassInfo,
    addr: u64,
    storage: Arc<dyn Storage>,
    eoa: u64,
    checksum_retries: u32,
    /// The cache's `image_writes` when detached.
    generation: u64,
    /// The cache it belongs to.
    cache: u64,
}

/// An entry loaded by a [`DetachedLoad`], for [`MetadataCache::protect_loaded`].
pub struct LoadedEntry<T: CacheTypes> {
    class: u8,
    addr: u64,
    loaded: Loaded<T::Icr>,
    counts: LoadCounts,
    generation: u64,
    cache: u64,
}

impl<T: CacheTypes> std::fmt::Debug for LoadedEntry<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoadedEntry")
            .field("class", &self.class)
            .field("addr", &self.addr)
            .field("size", &self.loaded.size)
            .finish_non_exhaustive()
    }
}

impl<T: CacheTypes> std::fmt::Debug for DetachedLoad<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DetachedLoad")
            .field("class", &self.info.name)
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl<T: CacheTypes> MetadataCache<T> {
    /// The load of the `class` entry at `addr`, to run without the cache (MDC-036). The
    /// entry is not looked up: the caller does that first.
    pub fn detach_load(&self, class: u8, addr: u64) -> Result<DetachedLoad<T>> {
        let cls = self.class(class)?;
        let info = cls.info().clone();
        if info.flags.no_io() {
            return Err(CacheError::NoIoClass { class: info.name });
        }
        Ok(DetachedLoad {
            class: cls,
            info,
            addr,
            storage: Arc::clone(&self.storage),
            eoa: self.ctx.end_of_allocation(),
            checksum_retries: self.checksum_retries,
            generation: self.image_writes,
            cache: self.id,
        })
    }

    /// Protects the entry `loaded` is a copy of, exactly as [`protect`](Self::protect) would
    /// (statistics, trace, hit or miss): a hit if the entry is cached by now (the copy is
    /// dropped), else a miss that installs the copy, or loads the entry again when an image
    /// was written since the load was detached (the copy may be stale).
    pub fn protect_loaded(
        &mut self,
        loaded: LoadedEntry<T>,
        udata: &T::Udata,
        flags: ProtectFlags,
    ) -> Result<ProtectHandle> {
        if loaded.cache != self.id {
            return Err(CacheError::InvalidArgument {
                what: "loaded",
                reason: "loaded for another cache",
            });
        }
        let (class, addr) = (loaded.class, loaded.addr);
        self.count_load(&loaded.counts);
        let fresh = loaded.generation == self.image_writes;
        let preloaded = if fresh {
            Some(loaded.loaded)
        } else {
            if let Ok(cls) = self.class(class) {
                let _ = cls.free_icr(loaded.loaded.icr);
            }
            None
        };
        let hits_before = self.stats.total_hits();
        let r = self.protect_inner(class, addr, udata, flags, preloaded);
        self.trace_protect(class, addr, flags, hits_before, &r);
        self.after_op();
        r
    }

    /// Adds what a load did to the statistics.
    pub(crate) fn count_load(&mut self, c: &LoadCounts) {
        self.stats
            .load(c.reads, c.bytes, c.checksum_retries, c.speculative_retries);
    }
}

impl<T: CacheTypes> DetachedLoad<T> {
    /// The address loaded.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Reads and decodes the entry (no cache involved).
    pub fn run(&self, udata: &T::Udata) -> Result<LoadedEntry<T>> {
        let mut counts = LoadCounts::default();
        let loaded = self.load(udata, &mut counts)?;
        Ok(LoadedEntry {
            class: self.info.id,
            addr: self.addr,
            loaded,
            counts,
            generation: self.generation,
            cache: self.cache,
        })
    }

    fn client_err(&self, callback: Callback) -> impl FnOnce(ClientError) -> CacheError + use<T> {
        let (class, addr) = (self.info.name, self.addr);
        move |source| CacheError::Client {
            class,
            callback,
            addr,
            source,
        }
    }

    fn read_image(&self, len: usize, counts: &mut LoadCounts) -> Result<Vec<u8>> {
        if self.info.flags.skip_reads() {
            return Ok(vec![0u8; len]);
        }
        // Reads are clipped to the EOA first; allocated space past the storage's end was never
        // written and reads as zeros (a speculative read may reach into it).
        let mut image = vec![0u8; len];
        self.storage.read_at_zero_fill(self.addr, &mut image)?;
        counts.reads += 1;
        counts.bytes += len as u64;
        Ok(image)
    }

    /// Read length allowed: the full `len` if it ends by the EOA, else clipped (speculative)
    /// or an error (MDC-043).
    fn clip_read(&self, len: usize, speculative: bool) -> Result<usize> {
        let (addr, eoa) = (self.addr, self.eoa);
        match addr.checked_add(len as u64) {
            Some(end) if end <= eoa => Ok(len),
            _ if speculative && addr < eoa => Ok((eoa - addr) as usize),
            _ => Err(CacheError::PastEndOfAllocation {
                what: "read",
                addr,
                len,
                eoa,
            }),
        }
    }

    /// The load step (MDC-036, MDC-042 .. MDC-045, Q-35). Neither makes space nor inserts. A
    /// checksum mismatch re-reads the whole entry, up to `checksum_retries` times.
    pub(crate) fn load(&self, udata: &T::Udata, counts: &mut LoadCounts) -> Result<Loaded<T::Icr>> {
        let initial = self
            .class
            .get_initial_load_size(udata)
            .map_err(self.client_err(Callback::GetInitialLoadSize))?;
        if initial == 0 {
            return Err(CacheError::InvalidSize {
                addr: self.addr,
                size: 0,
            });
        }
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            if let Some(loaded) = self.load_attempt(udata, initial, counts)? {
                return Ok(loaded);
            }
            counts.checksum_retries += 1;
            if attempts > self.checksum_retries {
                return Err(CacheError::Checksum {
                    class: self.info.name,
                    addr: self.addr,
                    attempts,
                });
            }
        }
    }

    /// One read-verify-decode attempt; `None` when the checksum of the final image is wrong. The
    /// checksum is always verified on the image of the entry's real size: before decoding when the
    /// size is known from the image prefix or fixed, after sizing when only decoding tells it.
    fn load_attempt(
        &self,
        udata: &T::Udata,
        initial: usize,
        counts: &mut LoadCounts,
    ) -> Result<Option<Loaded<T::Icr>>> {
        let cls = &self.class;
        let addr = self.addr;
        let speculative = self.info.flags.contains(ClassFlags::SPECULATIVE_LOAD);
        let compressed = self.info.flags.contains(ClassFlags::COMPRESSED);
        let len = self.clip_read(initial, speculative)?;
        let mut image = self.read_image(len, counts)?;
        let verify = |image: &[u8]| {
            cls.verify_checksum(image, udata)
                .map_err(self.client_err(Callback::VerifyChecksum))
        };
        let deserialize = |image: &[u8]| {
            cls.deserialize(image, udata)
                .map_err(self.client_err(Callback::Deserialize))
        };
        // Release a decoded object on a failed load, like every other failed-load path (MDC-038).
        let discard = |icr: T::Icr, err: CacheError| {
            let _ = cls.free_icr(icr);
            Err(err)
        };
        let final_len = cls
            .get_final_load_size(&image, udata)
            .map_err(self.client_err(Callback::GetFinalLoadSize))?;
        if let Some(final_len) = final_len {
            if final_len == 0 {
                return Err(CacheError::InvalidSize { addr, size: 0 });
            }
            if final_len > image.len() {
                if !speculative {
                    return Err(CacheError::LoadSizeGrew {
                        addr,
                        bound: image.len(),
                        reported: final_len,
                    });
                }
                let len = self.clip_read(final_len, false)?;
                image = self.read_image(len, counts)?;
            } else {
                image.truncate(final_len);
            }
        }
        if final_len.is_some() || !(speculative || compressed) {
            if !verify(&image)? {
                return Ok(None);
            }
            let d = deserialize(&image)?;
            let size = image.len();
            return Ok(Some(Loaded {
                icr: d.icr,
                size,
                image,
                repaired: d.repaired,
            }));
        }
        // The size is known only after decoding (MDC-042 speculative, MDC-045 compressed).
        let image_len = |icr: &T::Icr| {
            cls.image_len(icr)
                .map_err(self.client_err(Callback::ImageLen))
        };
        // The reported size is larger than the bytes read, and no (further) re-read is allowed.
        let grew = |icr, bound, reported| {
            discard(
                icr,
                CacheError::LoadSizeGrew {
                    addr,
                    bound,
                    reported,
                },
            )
        };
        let mut d = deserialize(&image)?;
        let actual = match image_len(&d.icr) {
            Ok(n) => n,
            Err(e) => return discard(d.icr, e),
        };
        if actual == 0 {
            return discard(d.icr, CacheError::InvalidSize { addr, size: 0 });
        }
        if actual > image.len() {
            if compressed || !speculative {
                return grew(d.icr, image.len(), actual);
            }
            // Speculative guess too small: discard the first object and read again (MDC-042).
            cls.free_icr(d.icr)
                .map_err(self.client_err(Callback::FreeIcr))?;
            counts.speculative_retries += 1;
            let len = self.clip_read(actual, false)?;
            image = self.read_image(len, counts)?;
            d = deserialize(&image)?;
            let again = match image_len(&d.icr) {
                Ok(n) => n,
                Err(e) => return discard(d.icr, e),
            };
            if again > image.len() {
                return grew(d.icr, image.len(), again);
            }
            image.truncate(again);
        } else {
            image.truncate(actual);
        }
        match verify(&image) {
            Ok(true) => {}
            Ok(false) => {
                let _ = cls.free_icr(d.icr);
                return Ok(None);
            }
            Err(e) => return discard(d.icr, e),
        }
        let size = image.len();
        Ok(Some(Loaded {
            icr: d.icr,
            size,
            image,
            repaired: d.repaired,
        }))
    }
}
