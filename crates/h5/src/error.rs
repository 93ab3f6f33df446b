//! [`Error`], the one error type of the API, and every type its variants expose, so that code
//! using h5 can name and match them without depending on h5's inner crates.
//!
//! Errors a caller acts on come as they are: [`Error::NotFound`], [`Error::Exists`],
//! [`Error::WrongKind`], [`Error::Invalid`] (a bad argument), [`Error::Convert`] (a conversion
//! that would lose values), [`Error::FilterSetup`], [`Error::ReadOnly`],
//! [`Error::Unsupported`], [`Error::Failed`]; their messages name the object path. Errors of the
//! layers below (damaged bytes, storage I/O, the caches, filters, file space) come inside
//! [`Error::Context`], which names the file and the object they happened in; match on
//! [`Error::inner`] to see through it:
//!
//! ```
//! # fn main() -> h5::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let file = h5::File::create(dir.path().join("e.h5"))?;
//! match file.dataset("missing") {
//!     Err(h5::Error::NotFound(path)) => assert_eq!(path, "/missing"),
//!     other => panic!("{other:?}"),
//! }
//! let e = file.new_dataset::<u8>().shape([2]).create("x")?.write(&[1u8]).unwrap_err();
//! assert!(matches!(e.inner(), h5::Error::Invalid(_)));
//! assert!(e.to_string().contains("/x"), "{e}");
//! # Ok(()) }
//! ```

pub use h5_chunkcache::layout::LayoutError;
pub use h5_chunkcache::selection::SelectionError;
pub use h5_chunkcache::{ChunkCacheError, DatasetId};
pub use h5_core::convert::{ConvertError, FloatLayout, NumType, Order};
pub use h5_core::error::{Error, ErrorKind, Result};
pub use h5_core::filters::{FilterError, FilterSetupError};
pub use h5_core::space::SpaceError;
pub use h5_core::write::alloc::AllocError;
pub use h5_format::FormatError;
pub use h5_io::{Error as IoError, IoOp, OpenMode};
pub use h5_metacache::{CacheError, Callback, ClientError, ConfigError};
