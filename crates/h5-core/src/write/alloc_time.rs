//! Late allocation: storage that libhdf5 allocates at the first write (contiguous data by
//! default, chunked data when asked), allocated here just before the first write reaches the
//! chunk cache.

use std::sync::Arc;

use h5_chunkcache::DiskLocation;
use h5_format::message::fill_value::FillTime;
use h5_format::message::layout::{Layout, LayoutClass};
use h5_format::message::{Message, encode_message, kind};

use crate::error::{Error, Result};
use crate::file::FileShared;
use crate::write::alloc::SpaceKind;
use crate::write::chunks::{ChunkedWriteLayout, ContiguousLayout};
use crate::write::ohdr;

/// Storage waiting for the first write of its dataset.
#[derive(Debug, Clone)]
pub(crate) enum Pending {
    /// A contiguous block of `bytes` bytes; the layout message gets its address.
    Contiguous {
        layout: Arc<ContiguousLayout>,
        bytes: u64,
        fill_time: FillTime,
        fill_defined: bool,
    },
    /// Every chunk of the extent at that time.
    Chunked(Arc<ChunkedWriteLayout>),
}

/// Whether libhdf5 writes the fill value into newly allocated storage.
pub(crate) fn writes_fill(fill_time: FillTime, fill_defined: bool) -> bool {
    fill_time == FillTime::OnAlloc || (fill_time == FillTime::IfSet && fill_defined)
}

impl FileShared {
    /// Allocates the storage of the dataset whose header is at `header` if it waits for its
    /// first write.
    pub(crate) fn allocate_pending(&self, header: u64) -> Result<()> {
        let Some(p) = self.state()?.pending.remove(&header) else {
            return Ok(());
        };
        match p {
            Pending::Chunked(l) => {
                let dims = l.dims.lock().map_err(|_| Error::Poisoned)?.clone();
                self.allocate_chunks(&l, &dims)
            }
            Pending::Contiguous {
                layout,
                bytes,
                fill_time,
                fill_defined,
            } => {
                let address = self.allocate(SpaceKind::Raw, bytes)?;
                if writes_fill(fill_time, fill_defined) {
                    self.initialise(address, bytes, &layout.fill)?;
                }
                *layout.location.lock().map_err(|_| Error::Poisoned)? = Some(DiskLocation {
                    addr: self.abs(address)?,
                    size: bytes,
                });
                let body = encode_message(
                    &Message::Layout(Layout {
                        version: 3,
                        class: LayoutClass::Contiguous {
                            address,
                            size: Some(bytes),
                        },
                    }),
                    self.sizes,
                )?;
                ohdr::update(self, header, |msgs| {
                    for m in msgs.iter_mut().filter(|m| m.kind == kind::LAYOUT) {
                        m.body = body.clone();
                    }
                    Ok(())
                })
            }
        }
    }
}
