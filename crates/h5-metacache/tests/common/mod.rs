//! Shared test support: a recording mock client and a cache over metrics-decorated memory storage.
//!
//! Every callback appends an [`Event`] to the class's log, so tests can assert on the exact sequence
//! of callbacks and, through [`Metrics`], on the exact I/O. Behaviour is steered by [`Knobs`]; hooks
//! are taken out of the knobs while they run so that they may call back into the cache.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use h5_io::{IoOp, MemoryStorage, Metrics, OpRecord, Storage};
use h5_metacache::{
    CacheBuilder, CacheConfig, CacheTypes, Callback, Class, ClassFlags, ClassInfo, ClientError,
    Deserialized, FileContext, MemType, MetadataCache, NotifyAction, PreSerialize,
};

/// The mock client family.
pub struct Mock;

impl CacheTypes for Mock {
    type Icr = MockEntry;
    type Udata = usize;
    type Ctx = MockFile;
}

/// A mock in-core object.
#[derive(Debug, Clone, PartialEq)]
pub struct MockEntry {
    /// Size `image_len` reports.
    pub size: usize,
    /// Byte serialize writes.
    pub fill: u8,
    /// Identifies the object (inserted value, or the first image byte for loads).
    pub tag: u64,
}

impl MockEntry {
    pub fn new(size: usize) -> Self {
        Self {
            size,
            fill: 0x11,
            tag: 0,
        }
    }
    pub fn filled(size: usize, fill: u8) -> Self {
        Self { size, fill, tag: 0 }
    }
}

/// File context: an adjustable end of allocation and a record of freed space.
#[derive(Debug, Default)]
pub struct MockFile {
    pub eoa: u64,
    pub frees: Vec<(u64, u64)>,
}

impl FileContext for MockFile {
    fn end_of_allocation(&self) -> u64 {
        self.eoa
    }
    fn free_file_space(&mut self, addr: u64, len: u64) -> Result<(), ClientError> {
        self.frees.push((addr, len));
        Ok(())
    }
}

/// One recorded callback.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    GetInitialLoadSize,
    GetFinalLoadSize { len: usize },
    VerifyChecksum { len: usize },
    Deserialize { len: usize },
    ImageLen,
    PreSerialize { addr: u64, len: usize },
    Serialize { len: usize },
    Notify { action: NotifyAction, addr: u64 },
    FreeIcr,
    Clear { about_to_destroy: bool },
    GetFsfSize,
}

pub type PreSerializeHook = Box<
    dyn FnMut(
            &mut MetadataCache<Mock>,
            &mut MockEntry,
            u64,
            usize,
        ) -> Result<PreSerialize, ClientError>
        + Send,
>;
pub type SerializeHook = Box<
    dyn FnMut(&mut MetadataCache<Mock>, &mut MockEntry, &mut [u8]) -> Result<(), ClientError>
        + Send,
>;
pub type NotifyHook = Box<
    dyn FnMut(
            &mut MetadataCache<Mock>,
            NotifyAction,
            u64,
            &mut MockEntry,
        ) -> Result<(), ClientError>
        + Send,
>;

/// Behaviour switches of a mock class.
#[derive(Default)]
pub struct Knobs {
    /// Callbacks that fail with a `MockFailure`.
    pub fail: HashSet<Callback>,
    /// Size the loaded object reports through `image_len` (speculative/compressed tests); a list is
    /// consumed one value per deserialize call, the last value repeating.
    pub real_sizes: Vec<usize>,
    /// `get_final_load_size` answer.
    pub final_load_size: Option<usize>,
    /// Deserialize reports a repaired image.
    pub repaired: bool,
    /// Number of checksum verifications that fail before one succeeds.
    pub bad_checksums: u32,
    /// `get_fsf_size` answer.
    pub fsf_size: Option<u64>,
    /// Skip writing some bytes in serialize (to see the poison pattern).
    pub leave_unwritten: usize,
    pub pre_serialize: Option<PreSerializeHook>,
    pub serialize: Option<SerializeHook>,
    pub notify: Option<NotifyHook>,
}

/// The error mock callbacks return when told to fail.
#[derive(Debug)]
pub struct MockFailure(pub Callback);

impl std::fmt::Display for MockFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "mock {} failure", self.0)
    }
}
impl std::error::Error for MockFailure {}

/// A recording mock class.
pub struct MockClass {
    pub info: ClassInfo,
    pub log: Mutex<Vec<Event>>,
    pub knobs: Mutex<Knobs>,
    deserialize_calls: Mutex<usize>,
}

impl MockClass {
    pub fn new(id: u8, name: &'static str, flags: ClassFlags) -> Arc<Self> {
        Arc::new(Self {
            info: ClassInfo {
                id,
                name,
                flags,
                mem_type: MemType::Other,
            },
            log: Mutex::new(Vec::new()),
            knobs: Mutex::new(Knobs::default()),
            deserialize_calls: Mutex::new(0),
        })
    }

    /// Events so far.
    pub fn events(&self) -> Vec<Event> {
        self.log.lock().unwrap().clone()
    }
    /// Forget recorded events.
    pub fn clear_events(&self) {
        self.log.lock().unwrap().clear();
    }
    /// How many recorded events match `pred`.
    pub fn count(&self, pred: impl Fn(&Event) -> bool) -> usize {
        self.log.lock().unwrap().iter().filter(|e| pred(e)).count()
    }
    pub fn knobs(&self) -> std::sync::MutexGuard<'_, Knobs> {
        self.knobs.lock().unwrap()
    }
    fn record(&self, e: Event) {
        self.log.lock().unwrap().push(e);
    }
    fn check_fail(&self, cb: Callback) -> Result<(), ClientError> {
        if self.knobs.lock().unwrap().fail.contains(&cb) {
            Err(Box::new(MockFailure(cb)))
        } else {
            Ok(())
        }
    }
}

impl Class<Mock> for MockClass {
    fn info(&self) -> &ClassInfo {
        &self.info
    }
    fn get_initial_load_size(&self, udata: &usize) -> Result<usize, ClientError> {
        self.record(Event::GetInitialLoadSize);
        self.check_fail(Callback::GetInitialLoadSize)?;
        Ok(*udata)
    }
    fn get_final_load_size(&self, image: &[u8], _u: &usize) -> Result<Option<usize>, ClientError> {
        let k = self.knobs.lock().unwrap().final_load_size;
        if k.is_some() {
            self.record(Event::GetFinalLoadSize { len: image.len() });
            self.check_fail(Callback::GetFinalLoadSize)?;
        }
        Ok(k)
    }
    fn verify_checksum(&self, image: &[u8], _u: &usize) -> Result<bool, ClientError> {
        self.record(Event::VerifyChecksum { len: image.len() });
        self.check_fail(Callback::VerifyChecksum)?;
        let mut k = self.knobs.lock().unwrap();
        if k.bad_checksums > 0 {
            k.bad_checksums -= 1;
            return Ok(false);
        }
        Ok(true)
    }
    fn deserialize(
        &self,
        image: &[u8],
        _u: &usize,
    ) -> Result<Deserialized<MockEntry>, ClientError> {
        self.record(Event::Deserialize { len: image.len() });
        self.check_fail(Callback::Deserialize)?;
        let mut calls = self.deserialize_calls.lock().unwrap();
        let k = self.knobs.lock().unwrap();
        let size = if k.real_sizes.is_empty() {
            image.len()
        } else {
            k.real_sizes[(*calls).min(k.real_sizes.len() - 1)]
        };
        *calls += 1;
        Ok(Deserialized {
            icr: MockEntry {
                size,
                fill: image.first().copied().unwrap_or(0),
                tag: image.first().copied().unwrap_or(0) as u64,
            },
            repaired: k.repaired,
        })
    }
    fn image_len(&self, icr: &MockEntry) -> Result<usize, ClientError> {
        self.record(Event::ImageLen);
        self.check_fail(Callback::ImageLen)?;
        Ok(icr.size)
    }
    fn pre_serialize(
        &self,
        cache: &mut MetadataCache<Mock>,
        icr: &mut MockEntry,
        addr: u64,
        len: usize,
    ) -> Result<PreSerialize, ClientError> {
        self.record(Event::PreSerialize { addr, len });
        self.check_fail(Callback::PreSerialize)?;
        let hook = self.knobs.lock().unwrap().pre_serialize.take();
        match hook {
            Some(mut h) => {
                let r = h(cache, icr, addr, len);
                self.knobs.lock().unwrap().pre_serialize.get_or_insert(h);
                r
            }
            None => Ok(PreSerialize::default()),
        }
    }
    fn serialize(
        &self,
        cache: &mut MetadataCache<Mock>,
        icr: &mut MockEntry,
        image: &mut [u8],
    ) -> Result<(), ClientError> {
        self.record(Event::Serialize { len: image.len() });
        self.check_fail(Callback::Serialize)?;
        let leave = self.knobs.lock().unwrap().leave_unwritten.min(image.len());
        let n = image.len() - leave;
        image[..n].fill(icr.fill);
        let hook = self.knobs.lock().unwrap().serialize.take();
        match hook {
            Some(mut h) => {
                let r = h(cache, icr, image);
                self.knobs.lock().unwrap().serialize.get_or_insert(h);
                r
            }
            None => Ok(()),
        }
    }
    fn notify(
        &self,
        cache: &mut MetadataCache<Mock>,
        action: NotifyAction,
        addr: u64,
        icr: &mut MockEntry,
    ) -> Result<(), ClientError> {
        self.record(Event::Notify { action, addr });
        self.check_fail(Callback::Notify)?;
        let hook = self.knobs.lock().unwrap().notify.take();
        match hook {
            Some(mut h) => {
                let r = h(cache, action, addr, icr);
                self.knobs.lock().unwrap().notify.get_or_insert(h);
                r
            }
            None => Ok(()),
        }
    }
    fn free_icr(&self, _icr: MockEntry) -> Result<(), ClientError> {
        self.record(Event::FreeIcr);
        self.check_fail(Callback::FreeIcr)
    }
    fn clear(&self, _icr: &mut MockEntry, about_to_destroy: bool) -> Result<(), ClientError> {
        self.record(Event::Clear { about_to_destroy });
        self.check_fail(Callback::Clear)
    }
    fn get_fsf_size(&self, _icr: &MockEntry) -> Result<Option<u64>, ClientError> {
        self.record(Event::GetFsfSize);
        self.check_fail(Callback::GetFsfSize)?;
        Ok(self.knobs.lock().unwrap().fsf_size)
    }
}

/// Storage used by the test caches: metrics over memory, 4 MiB long so loads find bytes.
pub type TestStorage = Metrics<MemoryStorage>;

/// A test cache with its storage and classes.
pub struct Harness {
    pub cache: MetadataCache<Mock>,
    pub storage: Arc<TestStorage>,
    pub classes: Vec<Arc<MockClass>>,
}

pub const STORAGE_LEN: u64 = 4 << 20;

/// Build a cache with `nclasses` plain mock classes (ids 0..n, named "mock-i") and `config`.
pub fn harness(nclasses: usize, config: CacheConfig) -> Harness {
    let flags = vec![ClassFlags::NONE; nclasses];
    harness_with_flags(&flags, config)
}

/// Like [`harness`], with the given class flags per class.
pub fn harness_with_flags(flags: &[ClassFlags], config: CacheConfig) -> Harness {
    const NAMES: [&str; 6] = ["mock-0", "mock-1", "mock-2", "mock-3", "mock-4", "mock-5"];
    let storage = Arc::new(Metrics::new(MemoryStorage::new()));
    storage.set_len(STORAGE_LEN).unwrap();
    storage.record_ops(true);
    let classes: Vec<Arc<MockClass>> = flags
        .iter()
        .enumerate()
        .map(|(i, f)| MockClass::new(i as u8, NAMES[i], *f))
        .collect();
    let table: Vec<Arc<dyn Class<Mock>>> = classes
        .iter()
        .map(|c| c.clone() as Arc<dyn Class<Mock>>)
        .collect();
    let cache = CacheBuilder::new(
        storage.clone() as Arc<dyn Storage>,
        table,
        MockFile {
            eoa: STORAGE_LEN,
            frees: Vec::new(),
        },
    )
    .config(config)
    .build()
    .unwrap();
    Harness {
        cache,
        storage,
        classes,
    }
}

/// A fixed-size configuration with every resize mode off and the given min-clean fraction.
pub fn fixed(max: usize, min_clean_fraction: f64) -> CacheConfig {
    CacheConfig {
        min_clean_fraction,
        ..CacheConfig::fixed_size(max)
    }
}

impl Harness {
    /// Addresses written, in order.
    pub fn writes(&self) -> Vec<u64> {
        self.storage
            .ops_of(IoOp::Write)
            .iter()
            .map(|r| r.offset)
            .collect()
    }
    /// Write records, in order.
    pub fn write_ops(&self) -> Vec<OpRecord> {
        self.storage.ops_of(IoOp::Write)
    }
    /// Read records, in order.
    pub fn read_ops(&self) -> Vec<OpRecord> {
        self.storage.ops_of(IoOp::Read)
    }
    /// Forget recorded I/O.
    pub fn clear_io(&self) {
        self.storage.clear_ops();
    }
    /// Protect (read-write) then unprotect with no flags: a load of `size` bytes if absent.
    pub fn touch(&mut self, class: u8, addr: u64, size: usize) {
        let h = self
            .cache
            .protect(class, addr, &size, h5_metacache::ProtectFlags::NONE)
            .unwrap();
        self.cache
            .unprotect(h, h5_metacache::UnprotectFlags::NONE)
            .unwrap();
    }
    /// Insert a dirty entry of `size` bytes.
    pub fn insert(&mut self, class: u8, addr: u64, size: usize) {
        self.cache
            .insert(
                class,
                addr,
                MockEntry::new(size),
                h5_metacache::InsertFlags::NONE,
            )
            .unwrap();
    }
    /// Check every invariant.
    pub fn check(&self) {
        self.cache.check_invariants().unwrap();
    }
}
