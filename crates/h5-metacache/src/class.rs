//! The client interface: what an on-disk structure must provide to live in the cache (seed 000 App. 3,
//! spec §3.13).
//!
//! A *class* is a static descriptor of one kind of on-disk structure (object header, B-tree node, ...).
//! Its callbacks size, decode and encode entries; the cache calls them and does all I/O itself.

use crate::MetadataCache;
use crate::error::ClientError;

/// The types one cache instance works with. The format engine uses an enum of all its structures as
/// `Icr`; tests use a mock.
pub trait CacheTypes: Sized + 'static {
    /// The in-core representation of an entry (decoded object), owned by the cache while cached.
    type Icr: 'static;
    /// Parameters a load needs besides the address (HDF5's `udata`).
    type Udata: ?Sized;
    /// The file context the cache keeps for clients and for freeing file space.
    type Ctx: FileContext;
}

/// What the cache needs from the file besides storage: the end of allocated space and a way to free it.
pub trait FileContext {
    /// End of allocated address space (HDF5's EOA). Non-speculative reads and all writes must end at or
    /// before it; addresses at or past it are temporary file space.
    fn end_of_allocation(&self) -> u64;
    /// Give `[addr, addr + len)` back to the file-space manager.
    fn free_file_space(&mut self, addr: u64, len: u64) -> Result<(), ClientError>;
    /// Whether `addr` is in temporary file space (not yet given a real address).
    fn is_temporary(&self, addr: u64) -> bool {
        addr >= self.end_of_allocation()
    }
}

/// A file context with unbounded address space that ignores frees; for standalone use and replay.
#[derive(Debug, Default, Clone, Copy)]
pub struct UnboundedFile;

impl FileContext for UnboundedFile {
    fn end_of_allocation(&self) -> u64 {
        u64::MAX
    }
    fn free_file_space(&mut self, _addr: u64, _len: u64) -> Result<(), ClientError> {
        Ok(())
    }
}

/// Class flags (MDC-090). The numeric values are the source's.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub struct ClassFlags(u8);

impl ClassFlags {
    /// No flags.
    pub const NONE: Self = Self(0);
    /// `get_initial_load_size` is only a guess; the real size is known after the first read.
    pub const SPECULATIVE_LOAD: Self = Self(0x1);
    /// The image is compressed: the load size is an upper bound and the real size comes from
    /// `image_len` after decoding.
    pub const COMPRESSED: Self = Self(0x2);
    /// Test only: any load is an error and writes are suppressed.
    #[cfg(any(test, feature = "test-classes"))]
    pub const NO_IO: Self = Self(0x4);
    /// Test only: nothing is read; deserialize gets a zeroed buffer of the right length.
    #[cfg(any(test, feature = "test-classes"))]
    pub const SKIP_READS: Self = Self(0x8);
    /// Test only: serialize runs but the write is skipped.
    #[cfg(any(test, feature = "test-classes"))]
    pub const SKIP_WRITES: Self = Self(0x10);

    /// Writes of an entry whose cached image is what the file holds (it was loaded, or written
    /// since) store only the byte ranges that changed (an extension: libhdf5 writes whole
    /// entries). Runs closer than [`DIFF_WRITE_GAP`](crate::DIFF_WRITE_GAP) bytes are written
    /// as one.
    pub const DIFF_WRITES: Self = Self(0x20);

    /// Whether every flag in `other` is set.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0 && other.0 != 0
    }

    /// The raw value (the source's flag values, MDC-090).
    pub const fn bits(self) -> u8 {
        self.0
    }

    pub(crate) const fn no_io(self) -> bool {
        self.0 & 0x4 != 0
    }
    pub(crate) const fn skip_reads(self) -> bool {
        self.0 & 0x8 != 0
    }
    pub(crate) const fn skip_writes(self) -> bool {
        self.0 & 0x10 != 0
    }
    pub(crate) const fn diff_writes(self) -> bool {
        self.0 & 0x20 != 0
    }
}

impl std::ops::BitOr for ClassFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// Kind of I/O an entry's reads and writes are, passed on as a hint (HDF5's `mem_type`).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum MemType {
    /// Superblock and driver info.
    Superblock,
    /// B-tree nodes.
    BTree,
    /// Heaps (local, global, fractal).
    Heap,
    /// Object headers.
    ObjectHeader,
    /// Free-space manager metadata.
    FreeSpace,
    /// Anything else.
    #[default]
    Other,
}

/// The static description of a class (MDC-089).
#[derive(Clone, Debug)]
pub struct ClassInfo {
    /// Class id: its index in the cache's class table.
    pub id: u8,
    /// Name, for statistics and errors. Must be non-empty.
    pub name: &'static str,
    /// Class flags.
    pub flags: ClassFlags,
    /// I/O hint.
    pub mem_type: MemType,
}

/// Notifications delivered to [`Class::notify`] (MDC-092).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum NotifyAction {
    /// The entry was just inserted (it can already be queried).
    AfterInsert,
    /// The entry was just loaded by a protect.
    AfterLoad,
    /// The entry was just written.
    AfterFlush,
    /// The entry is about to be evicted (it can still be queried).
    BeforeEvict,
}

/// What `deserialize` returns.
#[derive(Debug)]
pub struct Deserialized<I> {
    /// The decoded object.
    pub icr: I,
    /// The image had to be repaired: the entry starts out dirty (MDC-037).
    pub repaired: bool,
}

impl<I> Deserialized<I> {
    /// A clean, unrepaired object.
    pub fn clean(icr: I) -> Self {
        Self {
            icr,
            repaired: false,
        }
    }
}

/// Flags returned by [`Class::pre_serialize`] (MDC-069).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct PreSerializeFlags {
    /// `new_len` is the entry's new size.
    pub resized: bool,
    /// `new_addr` is the entry's new address.
    pub moved: bool,
}

/// What `pre_serialize` reports. `new_addr` and `new_len` are ignored unless the matching flag is set.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct PreSerialize {
    /// Which of the values below apply.
    pub flags: PreSerializeFlags,
    /// The new address, when `flags.moved`.
    pub new_addr: u64,
    /// The new length, when `flags.resized`.
    pub new_len: usize,
}

/// The callbacks of one class (seed 000 App. 3). Required: sizing, `deserialize`, `image_len`,
/// `serialize`. The rest have defaults that do nothing.
///
/// Callbacks that receive `&mut MetadataCache` may call back into the cache to operate on *other*
/// entries (MDC-071); operations on the entry being processed fail with `EntryBusy`.
///
/// `image_len` is required for every class, so the rule that speculative and compressed classes must
/// provide it (MDC-046) holds at compile time:
///
/// ```compile_fail
/// use h5_metacache::{Class, ClassInfo, CacheTypes, Deserialized, UnboundedFile, ClientError};
/// struct T;
/// impl CacheTypes for T { type Icr = Vec<u8>; type Udata = usize; type Ctx = UnboundedFile; }
/// struct NoImageLen(ClassInfo);
/// impl Class<T> for NoImageLen {
///     fn info(&self) -> &ClassInfo { &self.0 }
///     fn get_initial_load_size(&self, u: &usize) -> Result<usize, ClientError> { Ok(*u) }
///     fn deserialize(&self, b: &[u8], _: &usize) -> Result<Deserialized<Vec<u8>>, ClientError> {
///         Ok(Deserialized::clean(b.to_vec()))
///     }
///     fn serialize(&self, _: &mut h5_metacache::MetadataCache<T>, i: &mut Vec<u8>, b: &mut [u8])
///         -> Result<(), ClientError> { b.copy_from_slice(i); Ok(()) }
/// }
/// ```
pub trait Class<T: CacheTypes>: Send + Sync {
    /// The class descriptor.
    fn info(&self) -> &ClassInfo;

    /// Bytes to read for a load (a first guess for speculative classes, an upper bound for compressed
    /// ones). Zero is an error.
    fn get_initial_load_size(&self, udata: &T::Udata) -> Result<usize, ClientError>;

    /// After the first read: the real image size, if the class can tell from the image prefix (Q-35).
    /// `None` (the default) means "decode first, then ask `image_len`" (MDC-042).
    fn get_final_load_size(
        &self,
        _image: &[u8],
        _udata: &T::Udata,
    ) -> Result<Option<usize>, ClientError> {
        Ok(None)
    }

    /// Verify the image's checksum. `false` makes the cache re-read, then fail (Q-35).
    fn verify_checksum(&self, _image: &[u8], _udata: &T::Udata) -> Result<bool, ClientError> {
        Ok(true)
    }

    /// Decode an image. For speculative and compressed classes the buffer may be larger than the image.
    fn deserialize(
        &self,
        image: &[u8],
        udata: &T::Udata,
    ) -> Result<Deserialized<T::Icr>, ClientError>;

    /// The on-disk size of the entry as it is now.
    fn image_len(&self, icr: &T::Icr) -> Result<usize, ClientError>;

    /// Last chance before serialize to move the entry (e.g. out of temporary space) or resize it.
    fn pre_serialize(
        &self,
        _cache: &mut MetadataCache<T>,
        _icr: &mut T::Icr,
        _addr: u64,
        _len: usize,
    ) -> Result<PreSerialize, ClientError> {
        Ok(PreSerialize::default())
    }

    /// Encode the entry into `image`, whose length is the entry size. Every byte must be written.
    fn serialize(
        &self,
        cache: &mut MetadataCache<T>,
        icr: &mut T::Icr,
        image: &mut [u8],
    ) -> Result<(), ClientError>;

    /// Lifecycle notification.
    fn notify(
        &self,
        _cache: &mut MetadataCache<T>,
        _action: NotifyAction,
        _addr: u64,
        _icr: &mut T::Icr,
    ) -> Result<(), ClientError> {
        Ok(())
    }

    /// Release the in-core object. The default drops it.
    fn free_icr(&self, icr: T::Icr) -> Result<(), ClientError> {
        drop(icr);
        Ok(())
    }

    /// The cache marked a dirty entry clean without writing it, or is discarding it (MDC-073).
    fn clear(&self, _icr: &mut T::Icr, _about_to_destroy: bool) -> Result<(), ClientError> {
        Ok(())
    }

    /// Size of the file space to free when this entry is deleted with `FREE_FILE_SPACE`, if it differs
    /// from the entry size (MDC-052, MDC-066).
    fn get_fsf_size(&self, _icr: &T::Icr) -> Result<Option<u64>, ClientError> {
        Ok(None)
    }
}

/// The canonical enumeration of HDF5 metadata kinds (MDC-095): one class id per on-disk structure,
/// used by the format engine's class table. Tests may register their own tables.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
#[repr(u8)]
pub enum MetadataKind {
    /// v1 B-tree node.
    BTreeV1Node = 0,
    /// Symbol table node.
    SymbolTableNode,
    /// Local heap prefix.
    LocalHeapPrefix,
    /// Local heap data block.
    LocalHeapDataBlock,
    /// Global heap collection.
    GlobalHeapCollection,
    /// Object header (first chunk).
    ObjectHeader,
    /// Object header continuation chunk.
    ObjectHeaderChunk,
    /// v2 B-tree header.
    BTreeV2Header,
    /// v2 B-tree internal node.
    BTreeV2Internal,
    /// v2 B-tree leaf node.
    BTreeV2Leaf,
    /// Fractal heap header.
    FractalHeapHeader,
    /// Fractal heap direct block.
    FractalHeapDirectBlock,
    /// Fractal heap indirect block.
    FractalHeapIndirectBlock,
    /// Free-space manager header.
    FreeSpaceHeader,
    /// Free-space section info.
    FreeSpaceSections,
    /// Shared object header message table.
    SharedMessageTable,
    /// Shared object header message list.
    SharedMessageList,
    /// Extensible array header.
    ExtensibleArrayHeader,
    /// Extensible array index block.
    ExtensibleArrayIndexBlock,
    /// Extensible array super block.
    ExtensibleArraySuperBlock,
    /// Extensible array data block.
    ExtensibleArrayDataBlock,
    /// Extensible array data block page.
    ExtensibleArrayDataBlockPage,
    /// Fixed array header.
    FixedArrayHeader,
    /// Fixed array data block.
    FixedArrayDataBlock,
    /// Fixed array data block page.
    FixedArrayDataBlockPage,
    /// Superblock.
    Superblock,
    /// Driver info block.
    DriverInfo,
    /// Test class.
    Test,
}

impl MetadataKind {
    /// Every kind, in id order.
    pub const ALL: [MetadataKind; 28] = [
        Self::BTreeV1Node,
        Self::SymbolTableNode,
        Self::LocalHeapPrefix,
        Self::LocalHeapDataBlock,
        Self::GlobalHeapCollection,
        Self::ObjectHeader,
        Self::ObjectHeaderChunk,
        Self::BTreeV2Header,
        Self::BTreeV2Internal,
        Self::BTreeV2Leaf,
        Self::FractalHeapHeader,
        Self::FractalHeapDirectBlock,
        Self::FractalHeapIndirectBlock,
        Self::FreeSpaceHeader,
        Self::FreeSpaceSections,
        Self::SharedMessageTable,
        Self::SharedMessageList,
        Self::ExtensibleArrayHeader,
        Self::ExtensibleArrayIndexBlock,
        Self::ExtensibleArraySuperBlock,
        Self::ExtensibleArrayDataBlock,
        Self::ExtensibleArrayDataBlockPage,
        Self::FixedArrayHeader,
        Self::FixedArrayDataBlock,
        Self::FixedArrayDataBlockPage,
        Self::Superblock,
        Self::DriverInfo,
        Self::Test,
    ];

    /// The class id.
    pub const fn id(self) -> u8 {
        self as u8
    }

    /// The name shown in statistics. Exhaustive by construction: a new kind cannot be added without a
    /// name.
    pub const fn name(self) -> &'static str {
        match self {
            Self::BTreeV1Node => "v1 B-tree node",
            Self::SymbolTableNode => "symbol table node",
            Self::LocalHeapPrefix => "local heap prefix",
            Self::LocalHeapDataBlock => "local heap data block",
            Self::GlobalHeapCollection => "global heap collection",
            Self::ObjectHeader => "object header",
            Self::ObjectHeaderChunk => "object header chunk",
            Self::BTreeV2Header => "v2 B-tree header",
            Self::BTreeV2Internal => "v2 B-tree internal node",
            Self::BTreeV2Leaf => "v2 B-tree leaf node",
            Self::FractalHeapHeader => "fractal heap header",
            Self::FractalHeapDirectBlock => "fractal heap direct block",
            Self::FractalHeapIndirectBlock => "fractal heap indirect block",
            Self::FreeSpaceHeader => "free-space header",
            Self::FreeSpaceSections => "free-space sections",
            Self::SharedMessageTable => "shared message table",
            Self::SharedMessageList => "shared message list",
            Self::ExtensibleArrayHeader => "extensible array header",
            Self::ExtensibleArrayIndexBlock => "extensible array index block",
            Self::ExtensibleArraySuperBlock => "extensible array super block",
            Self::ExtensibleArrayDataBlock => "extensible array data block",
            Self::ExtensibleArrayDataBlockPage => "extensible array data block page",
            Self::FixedArrayHeader => "fixed array header",
            Self::FixedArrayDataBlock => "fixed array data block",
            Self::FixedArrayDataBlockPage => "fixed array data block page",
            Self::Superblock => "superblock",
            Self::DriverInfo => "driver info",
            Self::Test => "test",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mdc_095_kinds_have_gapless_ids_and_names() {
        // MDC-095: one canonical enumeration; ids run without gaps and every kind has a name.
        for (i, k) in MetadataKind::ALL.iter().enumerate() {
            assert_eq!(k.id() as usize, i);
            assert!(!k.name().is_empty());
        }
        assert!(MetadataKind::ALL.len() <= crate::MAX_CLASS_IDS);
    }
}
