//! Writing strings to a string dataset of either kind.

use h5_chunkcache::selection::Selection;
use h5_format::datatype::{Datatype, StringPadding, VarLenKind};

use crate::{Dataset, Error, Result};

impl Dataset {
    /// Writes every element of a string dataset (variable or fixed length) from `data` (C
    /// order). A fixed-length string longer than the type is an error.
    pub fn write_strs<S: AsRef<str>>(&self, data: &[S]) -> Result<()> {
        if data.len() != self.size() {
            return Err(Error::Invalid(format!(
                "{} strings written to a dataset of {}",
                data.len(),
                self.size()
            )));
        }
        let file = self.file_shared();
        let bytes = match self.dtype() {
            Datatype::VarLen(v) if matches!(v.kind, VarLenKind::String { .. }) => {
                let mut ctx = super::EncodeCtx::new(file);
                let size = v.size as usize;
                let mut out = vec![0u8; data.len() * size];
                for (s, o) in data.iter().zip(out.chunks_exact_mut(size)) {
                    let s = s.as_ref();
                    let len = u32::try_from(s.len())
                        .map_err(|_| Error::Invalid("a string longer than 4 GiB".into()))?;
                    ctx.put_vlen(o, len, s.as_bytes(), true)?;
                }
                ctx.finish()?;
                out
            }
            Datatype::String(t) => {
                let size = t.size as usize;
                let pad = if t.padding == StringPadding::SpacePad {
                    b' '
                } else {
                    0
                };
                let mut out = vec![pad; data.len() * size];
                for (s, o) in data.iter().zip(out.chunks_exact_mut(size)) {
                    let b = s.as_ref().as_bytes();
                    let slot = o.get_mut(..b.len()).ok_or_else(|| {
                        Error::Invalid(format!(
                            "{:?} is longer than the {size}-byte strings of {}",
                            s.as_ref(),
                            self.path()
                        ))
                    })?;
                    slot.copy_from_slice(b);
                }
                out
            }
            other => {
                return Err(Error::Invalid(format!(
                    "writing strings to a dataset of {}",
                    other.describe()
                )));
            }
        };
        let r =
            h5_core::write::dataset::write(file, &self.info(), &Selection::All, None, None, &bytes);
        self.ctx(r)
    }
}
