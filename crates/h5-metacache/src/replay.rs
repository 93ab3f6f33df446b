//! Synthetic clients and trace replay (MDC-128, an extension: HDF5 has no playback tool).
//!
//! [`SyntheticTypes`] is a client family whose entries are plain byte vectors: a load of `n` bytes
//! (the udata) decodes to those bytes, and serialize writes them back (zero-padded after a resize).

use std::sync::Arc;

use crate::MetadataCache;
use crate::class::{
    CacheTypes, Class, ClassFlags, ClassInfo, Deserialized, MemType, UnboundedFile,
};
use crate::error::ClientError;

/// A client family of byte-vector entries, for replay, the tour and benchmarks.
#[derive(Debug)]
pub struct SyntheticTypes;

impl CacheTypes for SyntheticTypes {
    type Icr = Vec<u8>;
    type Udata = usize;
    type Ctx = UnboundedFile;
}

/// A synthetic class: loads `udata` bytes, serializes the entry's bytes.
#[derive(Debug)]
pub struct SyntheticClass {
    info: ClassInfo,
}

const SYNTHETIC_NAMES: [&str; 8] = [
    "synthetic-0",
    "synthetic-1",
    "synthetic-2",
    "synthetic-3",
    "synthetic-4",
    "synthetic-5",
    "synthetic-6",
    "synthetic-7",
];

/// A class table of `n` synthetic classes (ids `0..n`, at most 32).
pub fn synthetic_classes(n: usize) -> Vec<Arc<dyn Class<SyntheticTypes>>> {
    (0..n.min(crate::MAX_CLASS_IDS))
        .map(|i| {
            Arc::new(SyntheticClass {
                info: ClassInfo {
                    id: i as u8,
                    name: SYNTHETIC_NAMES.get(i).copied().unwrap_or("synthetic"),
                    flags: ClassFlags::NONE,
                    mem_type: MemType::Other,
                },
            }) as Arc<dyn Class<SyntheticTypes>>
        })
        .collect()
}

impl Class<SyntheticTypes> for SyntheticClass {
    fn info(&self) -> &ClassInfo {
        &self.info
    }
    fn get_initial_load_size(&self, udata: &usize) -> Result<usize, ClientError> {
        Ok(*udata)
    }
    fn deserialize(
        &self,
        image: &[u8],
        _udata: &usize,
    ) -> Result<Deserialized<Vec<u8>>, ClientError> {
        Ok(Deserialized::clean(image.to_vec()))
    }
    fn image_len(&self, icr: &Vec<u8>) -> Result<usize, ClientError> {
        Ok(icr.len())
    }
    fn serialize(
        &self,
        _cache: &mut MetadataCache<SyntheticTypes>,
        icr: &mut Vec<u8>,
        image: &mut [u8],
    ) -> Result<(), ClientError> {
        let n = image.len().min(icr.len());
        image[..n].copy_from_slice(&icr[..n]);
        image[n..].fill(0);
        Ok(())
    }
}
