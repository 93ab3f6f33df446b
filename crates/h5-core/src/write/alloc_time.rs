//! Late allocation: storage that libhdf5 allocates at the first write (contiguous data by
//! default, chunked data when asked), allocated here just before the first write reaches the
//! chunk cache; a contiguous dataset created with its data has it allocated with its header
//! ([`Pending::Allocated`]), where that first write would put it.

use std::sync::Arc;

use h5_chunkcache::DiskLocation;
use h5_format::message::fill_value::FillTime;
use h5_format::message::layout::LayoutClass;

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::write::alloc::SpaceKind;
use crate::write::chunks::{ChunkedWriteLayout, ContiguousLayout};

/// Storage waiting for the first write of its dataset.
#[derive(Debug, Clone)]
pub(crate) enum Pending {
    /// A contiguous block of `bytes` bytes; the layout message gets its address.
    Contiguous {
        layout: Arc<ContiguousLayout>,
        bytes: u64,
        fill_time: FillTime,
    },
    /// Every chunk of the extent at that time.
    Chunked(Arc<ChunkedWriteLayout>),
    /// A contiguous block of `bytes` bytes allocated with the header for the write its creator
    /// makes next ([`NewDataset::data_follows`](crate::write::dataset::NewDataset)): its
    /// address is in the layout message and the layout, nothing is written in it yet.
    Allocated {
        /// Relative address of the block.
        address: u64,
        bytes: u64,
        fill_time: FillTime,
        /// The fill value (empty: zeros), written when the first write is not whole.
        fill: Vec<u8>,
    },
}

/// Whether newly allocated storage is initialised with the fill value. libhdf5 writes it for
/// fill time "alloc", or "if set" with a user-defined value; with "if set" and the default
/// (zero) fill value it leaves the space as it is, which reads as zeros in a new file. h5 also
/// zeroes such space when it may hold old bytes (freed space below the storage's end), and
/// skips zeros past the storage's end, so only "never" leaves space uninitialised.
pub(crate) fn initialises(fill_time: FillTime) -> bool {
    fill_time != FillTime::Never
}

impl FileShared {
    /// Allocates the storage of the dataset whose header is at `header` if it waits for its
    /// first write. `whole`: the write that follows overwrites every element and nothing that
    /// can fail stands between this call and the write reaching the chunk cache, so contiguous
    /// storage needs no fill (libhdf5's "full overwrite": a new file then grows only when the
    /// data is written, not once more for the fill).
    ///
    /// Returns the size of the contiguous block it allocated (`None`: nothing allocated, or
    /// chunks): a block just allocated has no copy in the chunk cache and nothing written yet.
    pub(crate) fn allocate_pending(&self, header: u64, whole: bool) -> Result<Option<u64>> {
        let p = {
            let mut st = self.state()?;
            // Usually nothing is pending (every write asks): no hash computed then.
            if st.pending.is_empty() {
                return Ok(None);
            }
            st.pending.remove(&header)
        };
        let Some(p) = p else {
            return Ok(None);
        };
        match p {
            Pending::Chunked(l) => {
                let dims = l.dims.lock().map_err(|_| Error::Poisoned)?.clone();
                self.allocate_chunks(&l, &dims).map(|()| None)
            }
            Pending::Allocated {
                address,
                bytes,
                fill_time,
                fill,
            } => {
                if initialises(fill_time) && !whole {
                    self.initialise(address, bytes, &fill)?;
                }
                Ok(Some(bytes))
            }
            Pending::Contiguous {
                layout,
                bytes,
                fill_time,
            } => {
                let address = self.allocate(SpaceKind::Raw, bytes)?;
                if initialises(fill_time) && !whole {
                    self.initialise(address, bytes, &layout.fill)?;
                }
                *layout.location.lock().map_err(|_| Error::Poisoned)? = Some(DiskLocation {
                    addr: self.abs(address)?,
                    size: bytes,
                });
                crate::write::chunk_index::create::rewrite_layout(
                    self,
                    header,
                    LayoutClass::Contiguous {
                        address,
                        size: Some(bytes),
                    },
                )?;
                Ok(Some(bytes))
            }
        }
    }
}
