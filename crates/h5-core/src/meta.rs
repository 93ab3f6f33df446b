//! The engine as a metadata-cache client (DESIGN.md, "the one rule").
//!
//! Every on-disk metadata structure is loaded through one [`MetadataCache`]: one class per
//! [`MetadataKind`], all with the same behaviour — the caller's [`Load`] says how many bytes to
//! read first, how to learn the real size from that prefix, and how to decode the bytes with
//! `h5-format`. The decoded value is kept behind an `Arc` so a reader can protect an entry, clone
//! the value out and unprotect at once (read-only access never holds the cache).

use std::any::Any;
use std::sync::Arc;

use h5_format::FormatError;
use h5_metacache::{
    CacheTypes, Class, ClassFlags, ClassInfo, ClientError, Deserialized, FileContext, MemType,
    MetadataCache, MetadataKind,
};

/// The engine's cache types.
#[derive(Debug)]
pub struct Meta;

impl CacheTypes for Meta {
    type Icr = Decoded;
    type Udata = Load;
    type Ctx = FileSpace;
}

/// Encodes a cached value (the `Decoded::value` it belongs to) into its on-disk image.
pub type EncodeFn =
    Arc<dyn Fn(&(dyn Any + Send + Sync)) -> Result<Vec<u8>, FormatError> + Send + Sync>;

/// A decoded structure: its on-disk length and the value.
#[derive(Clone)]
pub struct Decoded {
    /// Bytes the structure occupies in the file.
    pub len: usize,
    /// The decoded value (an `h5-format` type).
    pub value: Arc<dyn Any + Send + Sync>,
    /// How to write the value back (`None`: a structure loaded for reading, never written).
    pub encode: Option<EncodeFn>,
}

impl Decoded {
    /// A structure written by this process: `value` occupies `len` bytes and `encode` produces
    /// exactly that many (checked when the cache writes it).
    pub fn writable<T: Any + Send + Sync>(
        len: usize,
        value: T,
        encode: impl Fn(&T) -> Result<Vec<u8>, FormatError> + Send + Sync + 'static,
    ) -> Self {
        Decoded {
            len,
            value: Arc::new(value),
            encode: Some(encoder(encode)),
        }
    }

    /// The value as a `T` to change in place (`None`: it is another type). A value a reader
    /// still holds (an `Arc` cloned out by a read-only protect) is copied first, so readers keep
    /// the version they read.
    pub fn value_mut<T: Any + Send + Sync + Clone>(&mut self) -> Option<&mut T> {
        if Arc::get_mut(&mut self.value).is_none() {
            let copy: T = self.value.downcast_ref::<T>()?.clone();
            self.value = Arc::new(copy);
        }
        Arc::get_mut(&mut self.value)?.downcast_mut::<T>()
    }
}

/// `encode` as the type-erased encoder a [`Decoded`] carries.
pub fn encoder<T: Any + Send + Sync>(
    encode: impl Fn(&T) -> Result<Vec<u8>, FormatError> + Send + Sync + 'static,
) -> EncodeFn {
    Arc::new(move |v: &(dyn Any + Send + Sync)| {
        let v = v.downcast_ref::<T>().ok_or(FormatError::Unsupported {
            structure: "metadata entry",
            address: u64::MAX,
            what: "a cached value of another type than its encoder".into(),
        })?;
        encode(v)
    })
}

impl std::fmt::Debug for Decoded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoded")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// A decoder: the image (possibly longer than the structure for speculative loads) to the
/// decoded value and the structure's length.
pub type DecodeFn = Box<dyn Fn(&[u8]) -> Result<Decoded, FormatError> + Send + Sync>;

/// The real length of a structure from a prefix of its image.
pub type FinalLenFn = Box<dyn Fn(&[u8]) -> Result<usize, FormatError> + Send + Sync>;

/// How to load one structure (the cache's udata).
pub struct Load {
    /// Bytes to read first (clipped at the end of the file).
    pub initial: usize,
    /// The real length from the prefix, when the initial read is only a guess.
    pub final_len: Option<FinalLenFn>,
    /// The decoder.
    pub decode: DecodeFn,
}

impl Load {
    /// A structure of exactly `len` bytes decoded by `decode`, whose value is `T`.
    pub fn exact<T: Any + Send + Sync>(
        len: usize,
        decode: impl Fn(&[u8]) -> Result<T, FormatError> + Send + Sync + 'static,
    ) -> Self {
        Self {
            initial: len,
            final_len: None,
            decode: Box::new(move |b| {
                let v = decode(b)?;
                Ok(Decoded {
                    len,
                    value: Arc::new(v),
                    encode: None,
                })
            }),
        }
    }

    /// A structure of exactly `len` bytes that can be changed and written back: decoded by
    /// `decode`, encoded by `encode` (which must produce `len` bytes, or the entry's new length
    /// after a resize).
    pub fn codec<T: Any + Send + Sync>(
        len: usize,
        decode: impl Fn(&[u8]) -> Result<T, FormatError> + Send + Sync + 'static,
        encode: impl Fn(&T) -> Result<Vec<u8>, FormatError> + Send + Sync + 'static,
    ) -> Self {
        let encode = Arc::new(encode);
        Self {
            initial: len,
            final_len: None,
            decode: Box::new(move |b| {
                let e = Arc::clone(&encode);
                Ok(Decoded::writable(len, decode(b)?, move |v: &T| e(v)))
            }),
        }
    }

    /// A structure whose length is learnt from a prefix of `guess` bytes by `final_len`; the
    /// decoder receives exactly the structure's bytes.
    pub fn sized<T: Any + Send + Sync>(
        guess: usize,
        final_len: impl Fn(&[u8]) -> Result<usize, FormatError> + Clone + Send + Sync + 'static,
        decode: impl Fn(&[u8]) -> Result<T, FormatError> + Send + Sync + 'static,
    ) -> Self {
        // Two allocations per load (a load of a cached entry is dropped unused).
        let fl = final_len.clone();
        Self {
            initial: guess,
            final_len: Some(Box::new(fl)),
            decode: Box::new(move |b| {
                let len = final_len(b)?;
                let image = b.get(..len).ok_or(FormatError::Truncated {
                    structure: "metadata image",
                    address: u64::MAX,
                    needed: len as u64,
                    available: b.len() as u64,
                })?;
                let v = decode(image)?;
                Ok(Decoded {
                    len,
                    value: Arc::new(v),
                    encode: None,
                })
            }),
        }
    }
}

impl Load {
    /// This load, its decoded value carrying `encode` so that the entry can be changed in place
    /// and written back (structures a writable file changes one entry at a time).
    pub fn writable_with<T: Any + Send + Sync>(
        self,
        encode: impl Fn(&T) -> Result<Vec<u8>, FormatError> + Clone + Send + Sync + 'static,
    ) -> Self {
        let decode = self.decode;
        Self {
            initial: self.initial,
            final_len: self.final_len,
            // The encoder is made when the structure is decoded: a load of a cached entry (most
            // protects) is dropped unused and allocates nothing for it.
            decode: Box::new(move |b| {
                let mut d = decode(b)?;
                d.encode = Some(encoder(encode.clone()));
                Ok(d)
            }),
        }
    }

    /// The load a protect of an entry found cached passes (its udata, never run): a hit builds
    /// no loader, so it allocates nothing and clones no geometry.
    pub fn for_hit() -> &'static Load {
        static LOAD: std::sync::LazyLock<Load> =
            std::sync::LazyLock::new(|| Load::cached_only("metadata entry"));
        &LOAD
    }

    /// A load for an entry known to be cached (changing or linking an entry just read or put):
    /// loading it fails.
    pub fn cached_only(what: &'static str) -> Self {
        Self::exact(0, move |_| -> Result<(), FormatError> {
            Err(FormatError::Unsupported {
                structure: what,
                address: u64::MAX,
                what: "reloading an entry that should be cached".into(),
            })
        })
    }
}

/// The file context: for a file opened for reading the end of the file bounds every read and no
/// space is ever freed; a writable file's context is its space allocator.
#[derive(Clone, Debug)]
pub struct FileSpace {
    /// End of allocated space (the file's length for a read-only file).
    pub eoa: u64,
    /// The allocator of a writable file (relative addresses).
    pub alloc: Option<Arc<std::sync::Mutex<crate::write::alloc::FileAlloc>>>,
    /// The base address: the cache's addresses are absolute, the allocator's relative to it.
    pub base: u64,
}

impl FileContext for FileSpace {
    fn end_of_allocation(&self) -> u64 {
        match &self.alloc {
            Some(a) => a
                .lock()
                .map_or(self.eoa, |a| self.base.saturating_add(a.eoa())),
            None => self.eoa,
        }
    }

    fn free_file_space(&mut self, addr: u64, len: u64) -> Result<(), ClientError> {
        match &self.alloc {
            Some(a) => {
                let mut a = a.lock().map_err(|_| "the space allocator is poisoned")?;
                let rel = addr
                    .checked_sub(self.base)
                    .ok_or("freeing space below the base address")?;
                a.free(crate::write::alloc::SpaceKind::Meta, rel, len)
                    .map_err(|e| Box::new(e) as ClientError)
            }
            None => {
                Err(format!("file opened read-only: cannot free {len} bytes at {addr:#x}").into())
            }
        }
    }
}

/// One class per metadata kind; all behave the same (see the module doc).
struct FormatClass {
    info: ClassInfo,
}

impl Class<Meta> for FormatClass {
    fn info(&self) -> &ClassInfo {
        &self.info
    }

    fn get_initial_load_size(&self, udata: &Load) -> Result<usize, ClientError> {
        Ok(udata.initial)
    }

    fn get_final_load_size(
        &self,
        image: &[u8],
        udata: &Load,
    ) -> Result<Option<usize>, ClientError> {
        match &udata.final_len {
            Some(f) => Ok(Some(f(image)?)),
            None => Ok(None),
        }
    }

    fn deserialize(
        &self,
        image: &[u8],
        udata: &Load,
    ) -> Result<Deserialized<Decoded>, ClientError> {
        Ok(Deserialized::clean((udata.decode)(image)?))
    }

    fn image_len(&self, icr: &Decoded) -> Result<usize, ClientError> {
        Ok(icr.len)
    }

    fn serialize(
        &self,
        _cache: &mut MetadataCache<Meta>,
        icr: &mut Decoded,
        image: &mut [u8],
    ) -> Result<(), ClientError> {
        let Some(encode) = &icr.encode else {
            return Err(format!(
                "{} was loaded for reading and cannot be written",
                self.info.name
            )
            .into());
        };
        let bytes = encode(&*icr.value)?;
        if bytes.len() != image.len() {
            return Err(format!(
                "{} encodes to {} bytes but occupies {}",
                self.info.name,
                bytes.len(),
                image.len()
            )
            .into());
        }
        image.copy_from_slice(&bytes);
        Ok(())
    }
}

fn mem_type(k: MetadataKind) -> MemType {
    use MetadataKind as K;
    match k {
        K::Superblock | K::DriverInfo => MemType::Superblock,
        K::BTreeV1Node | K::BTreeV2Header | K::BTreeV2Internal | K::BTreeV2Leaf => MemType::BTree,
        K::LocalHeapPrefix
        | K::LocalHeapDataBlock
        | K::GlobalHeapCollection
        | K::FractalHeapHeader
        | K::FractalHeapDirectBlock
        | K::FractalHeapIndirectBlock => MemType::Heap,
        K::ObjectHeader | K::ObjectHeaderChunk => MemType::ObjectHeader,
        K::FreeSpaceHeader | K::FreeSpaceSections => MemType::FreeSpace,
        _ => MemType::Other,
    }
}

/// The class table: one class per [`MetadataKind`], in id order. Every class may be loaded
/// speculatively (its [`Load`] says whether the first read is exact).
pub fn classes() -> Vec<Arc<dyn Class<Meta>>> {
    MetadataKind::ALL
        .iter()
        .map(|k| {
            Arc::new(FormatClass {
                info: ClassInfo {
                    id: k.id(),
                    name: k.name(),
                    flags: ClassFlags::SPECULATIVE_LOAD | ClassFlags::DIFF_WRITES,
                    mem_type: mem_type(*k),
                },
            }) as Arc<dyn Class<Meta>>
        })
        .collect()
}
