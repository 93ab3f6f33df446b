//! The page buffer's settings and libhdf5's validation rules for them
//! (`H5Pset_page_buffer_size` when set, `H5PB_create` when the file's page size is known).

use crate::error::PageBufferError;

/// Page buffer settings: the buffer's size in bytes and the shares of it reserved for
/// metadata and raw-data pages (libhdf5's `H5Pset_page_buffer_size(fapl, size, min_meta_perc,
/// min_raw_perc)`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct PageBufferConfig {
    size: usize,
    min_meta_perc: u32,
    min_raw_perc: u32,
}

impl PageBufferConfig {
    /// A page buffer of `size` bytes in which at least `min_meta_perc` percent of the pages are
    /// kept for metadata and `min_raw_perc` percent for raw data. As libhdf5 checks: each
    /// percentage at most 100, and their sum at most 100. The size is checked against the
    /// file's page size when the file is opened ([`PageBufferConfig::geometry`]).
    pub fn new(
        size: usize,
        min_meta_perc: u32,
        min_raw_perc: u32,
    ) -> Result<Self, PageBufferError> {
        if min_meta_perc > 100 {
            return Err(PageBufferError::Percentage {
                what: "metadata",
                value: min_meta_perc,
            });
        }
        if min_raw_perc > 100 {
            return Err(PageBufferError::Percentage {
                what: "raw data",
                value: min_raw_perc,
            });
        }
        if min_meta_perc + min_raw_perc > 100 {
            return Err(PageBufferError::PercentageSum {
                meta: min_meta_perc,
                raw: min_raw_perc,
            });
        }
        Ok(PageBufferConfig {
            size,
            min_meta_perc,
            min_raw_perc,
        })
    }

    /// The configured size in bytes (before rounding to whole pages).
    pub fn size(&self) -> usize {
        self.size
    }

    /// Percentage of the pages reserved for metadata.
    pub fn min_meta_perc(&self) -> u32 {
        self.min_meta_perc
    }

    /// Percentage of the pages reserved for raw data.
    pub fn min_raw_perc(&self) -> u32 {
        self.min_raw_perc
    }

    /// The buffer's shape for a file with `page_size`-byte pages, as libhdf5's `H5PB_create`
    /// computes it: a size larger than a page is rounded down to whole pages; a size that is
    /// neither a multiple of the page size nor larger than it is an error; the reserved page
    /// counts are `size × perc / (page_size × 100)`.
    pub fn geometry(&self, page_size: u64) -> Result<Geometry, PageBufferError> {
        if page_size == 0 {
            return Err(PageBufferError::PageSize { page_size });
        }
        let size = self.size as u64;
        let size = if size > page_size {
            size / page_size * page_size
        } else if !size.is_multiple_of(page_size) {
            return Err(PageBufferError::SmallerThanPage {
                size: self.size,
                page_size,
            });
        } else {
            size
        };
        let count = |perc: u32| {
            (u128::from(size) * u128::from(perc) / (u128::from(page_size) * 100)) as usize
        };
        Ok(Geometry {
            page_size,
            max_size: size,
            max_pages: (size / page_size) as usize,
            min_md_pages: count(self.min_meta_perc),
            min_rd_pages: count(self.min_raw_perc),
        })
    }
}

/// The page buffer's shape once the page size is known.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Geometry {
    /// Page size in bytes.
    pub page_size: u64,
    /// The size in bytes, rounded down to whole pages.
    pub max_size: u64,
    /// Regular pages held before eviction starts.
    pub max_pages: usize,
    /// Metadata pages never evicted while there are this many or fewer.
    pub min_md_pages: usize,
    /// Raw-data pages never evicted while there are this many or fewer.
    pub min_rd_pages: usize,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn libhdf5_validation_rules() {
        assert!(matches!(
            PageBufferConfig::new(4096, 101, 0),
            Err(PageBufferError::Percentage {
                what: "metadata",
                ..
            })
        ));
        assert!(matches!(
            PageBufferConfig::new(4096, 0, 101),
            Err(PageBufferError::Percentage {
                what: "raw data",
                ..
            })
        ));
        assert!(matches!(
            PageBufferConfig::new(4096, 60, 41),
            Err(PageBufferError::PercentageSum { meta: 60, raw: 41 })
        ));
        let c = PageBufferConfig::new(10_000, 50, 20).unwrap();
        let g = c.geometry(4096).unwrap();
        assert_eq!((g.max_size, g.max_pages), (8192, 2));
        assert_eq!((g.min_md_pages, g.min_rd_pages), (1, 0));
        let g = PageBufferConfig::new(4096, 0, 0)
            .unwrap()
            .geometry(4096)
            .unwrap();
        assert_eq!(g.max_pages, 1);
        assert!(matches!(
            PageBufferConfig::new(1000, 0, 0).unwrap().geometry(4096),
            Err(PageBufferError::SmallerThanPage {
                size: 1000,
                page_size: 4096
            })
        ));
    }
}
