//! The dataspace message (type 0x0001), versions 1 and 2.
//!
//! Version 1: version, rank, flags, 5 reserved bytes, then `rank` current dimensions, `rank`
//! maximum dimensions (flag bit 0) and `rank` permutation indices (flag bit 1), each a length
//! of `sizes.length` bytes. A rank of 0 is a scalar.
//! Version 2: version, rank, flags, type (0 scalar, 1 simple, 2 null), dimensions, maximum
//! dimensions (flag bit 0). No permutation.
//!
//! Invariants after decoding: rank ≤ [`MAX_RANK`]; scalar and null dataspaces have no dims;
//! every maximum dimension is [`UNLIMITED`] or ≥ its current dimension.

use crate::error::{FormatError, Result};
use crate::reader::{Reader, Sizes};
use crate::writer::Writer;

/// Largest rank HDF5 allows.
pub const MAX_RANK: usize = 32;

/// A maximum dimension without limit (stored as all ones in `sizes.length` bytes).
pub const UNLIMITED: u64 = u64::MAX;

/// The kind of a dataspace.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum DataspaceKind {
    /// A single element, no dimensions.
    Scalar,
    /// An array with dimensions.
    Simple,
    /// No elements at all.
    Null,
}

/// A decoded dataspace.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Dataspace {
    /// Message version (1 or 2).
    pub version: u8,
    /// Scalar, simple or null.
    pub kind: DataspaceKind,
    /// Current dimensions (empty for scalar and null).
    pub dims: Vec<u64>,
    /// Maximum dimensions if stored ([`UNLIMITED`] for unlimited ones); when absent the
    /// maximum equals the current dimensions.
    pub max_dims: Option<Vec<u64>>,
    /// Permutation indices (version 1 only, when flag bit 1 is set; unused by libhdf5).
    pub permutation: Option<Vec<u64>>,
}

impl Dataspace {
    /// Decodes a dataspace message body from `r`.
    pub fn decode(r: &mut Reader<'_>, sizes: Sizes) -> Result<Dataspace> {
        let version = r.u8()?;
        let rank = usize::from(r.u8()?);
        let flags = r.u8()?;
        if rank > MAX_RANK {
            return Err(r.corrupted(format!("dataspace rank {rank} (at most {MAX_RANK})")));
        }
        let (kind, has_perm) = match version {
            1 => {
                r.skip(5)?;
                let kind = if rank == 0 {
                    DataspaceKind::Scalar
                } else {
                    DataspaceKind::Simple
                };
                (kind, flags & 2 != 0)
            }
            2 => {
                let kind = match r.u8()? {
                    0 => DataspaceKind::Scalar,
                    1 => DataspaceKind::Simple,
                    2 => DataspaceKind::Null,
                    other => return Err(r.corrupted(format!("dataspace type {other}"))),
                };
                if kind != DataspaceKind::Simple && rank != 0 {
                    return Err(r.corrupted(format!("{kind:?} dataspace with rank {rank}")));
                }
                (kind, false)
            }
            other => return Err(r.unsupported(format!("dataspace message version {other}"))),
        };
        let all_ones = crate::reader::all_ones(usize::from(sizes.length));
        // rank ≤ 32 bounds every allocation below.
        let list = |r: &mut Reader<'_>| -> Result<Vec<u64>> {
            (0..rank).map(|_| r.length(sizes)).collect()
        };
        let dims = list(r)?;
        let max_dims = if flags & 1 != 0 {
            let mut max = list(r)?;
            for v in &mut max {
                if *v == all_ones {
                    *v = UNLIMITED;
                }
            }
            for (i, (&m, &d)) in max.iter().zip(&dims).enumerate() {
                if m != UNLIMITED && m < d {
                    return Err(
                        r.corrupted(format!("dimension {i}: maximum {m} below current size {d}"))
                    );
                }
            }
            Some(max)
        } else {
            None
        };
        let permutation = if has_perm { Some(list(r)?) } else { None };
        Ok(Dataspace {
            version,
            kind,
            dims,
            max_dims,
            permutation,
        })
    }

    /// Encodes the message body at [`Dataspace::version`] (1 or 2), the inverse of
    /// [`Dataspace::decode`]. Version 1 writes 5 reserved zero bytes and cannot express a
    /// null dataspace; version 2 cannot store a permutation. [`UNLIMITED`] is written as all
    /// ones. Fails on those cases, on a rank above [`MAX_RANK`], on list lengths that differ
    /// from the rank, and on a scalar or null dataspace with dimensions.
    pub fn encode(&self, sizes: Sizes) -> Result<Vec<u8>> {
        self.encode_with_dims(&self.dims, sizes)
    }

    /// [`Dataspace::encode`] of this dataspace with the current dimensions `dims` instead of
    /// its own (a resize encoded without copying the description; the rank must be the same).
    pub fn encode_with_dims(&self, dims: &[u64], sizes: Sizes) -> Result<Vec<u8>> {
        let err = |what: String| FormatError::Unsupported {
            structure: "dataspace (encoding)",
            address: u64::MAX,
            what,
        };
        if dims.len() != self.dims.len() {
            return Err(err(format!(
                "{} dims for a dataspace of rank {}",
                dims.len(),
                self.dims.len()
            )));
        }
        let rank = dims.len();
        if rank > MAX_RANK {
            return Err(err(format!("rank {rank} (at most {MAX_RANK})")));
        }
        if self.kind != DataspaceKind::Simple && rank != 0 {
            return Err(err(format!("{:?} dataspace with rank {rank}", self.kind)));
        }
        for (what, list) in [
            ("maximum", &self.max_dims),
            ("permutation", &self.permutation),
        ] {
            if let Some(l) = list
                && l.len() != rank
            {
                return Err(err(format!("{} {what} dims for rank {rank}", l.len())));
            }
        }
        let mut flags = u8::from(self.max_dims.is_some());
        let mut w = Writer::with_capacity(self.encoded_len(sizes));
        w.u8(self.version);
        w.u8(rank as u8);
        match self.version {
            1 => {
                if self.kind == DataspaceKind::Null {
                    return Err(err("a null dataspace in version 1".into()));
                }
                if self.kind == DataspaceKind::Simple && rank == 0 {
                    return Err(err("a simple dataspace of rank 0 in version 1".into()));
                }
                flags |= u8::from(self.permutation.is_some()) << 1;
                w.u8(flags);
                w.zeros(5);
            }
            2 => {
                if self.permutation.is_some() {
                    return Err(err("a permutation in version 2".into()));
                }
                w.u8(flags);
                w.u8(match self.kind {
                    DataspaceKind::Scalar => 0,
                    DataspaceKind::Simple => 1,
                    DataspaceKind::Null => 2,
                });
            }
            v => return Err(err(format!("dataspace message version {v}"))),
        }
        for &d in dims {
            w.length(sizes, d);
        }
        for l in [&self.max_dims, &self.permutation].into_iter().flatten() {
            for &d in l {
                w.length(sizes, d);
            }
        }
        Ok(w.into_bytes())
    }

    /// Length of [`Dataspace::encode`]'s output.
    pub fn encoded_len(&self, sizes: Sizes) -> usize {
        let lists = 1usize
            .saturating_add(usize::from(self.max_dims.is_some()))
            .saturating_add(usize::from(self.permutation.is_some()));
        let head = if self.version == 1 { 8 } else { 4 };
        lists
            .saturating_mul(self.dims.len())
            .saturating_mul(usize::from(sizes.length))
            .saturating_add(head)
    }

    /// The rank (number of dimensions; 0 for scalar and null).
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// Number of elements: 0 for null, 1 for scalar, the product of the dims for simple;
    /// `None` if the product overflows u64.
    pub fn num_elements(&self) -> Option<u64> {
        match self.kind {
            DataspaceKind::Null => Some(0),
            DataspaceKind::Scalar => Some(1),
            DataspaceKind::Simple => self.dims.iter().try_fold(1u64, |a, &d| a.checked_mul(d)),
        }
    }

    /// Maximum dimension `i` (`None` when unlimited); the current dimension when no maximum
    /// is stored. Panics never: an out-of-range `i` gives `Some(0)`.
    pub fn max_dim(&self, i: usize) -> Option<u64> {
        let cur = self.dims.get(i).copied().unwrap_or(0);
        match &self.max_dims {
            Some(m) => match m.get(i).copied().unwrap_or(cur) {
                UNLIMITED => None,
                v => Some(v),
            },
            None => Some(cur),
        }
    }

    /// Whether any dimension is unlimited.
    pub fn is_extendible(&self) -> bool {
        self.max_dims
            .as_ref()
            .is_some_and(|m| m.contains(&UNLIMITED))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(b: &[u8]) -> Result<Dataspace> {
        Dataspace::decode(&mut Reader::new(b, "dataspace", 0), Sizes::EIGHT)
    }

    // Real messages from h5py 3.12.1 / HDF5 1.14.4 object headers (throwaway script: create
    // datasets with libver 'earliest' and 'latest', walk the object header, print the
    // message bodies):
    //   f.create_dataset('d', data=np.arange(6,dtype='>i2').reshape(2,3), maxshape=(None,3),
    //                    chunks=(1,3), fillvalue=7)
    //   f.create_dataset('scalar', data=np.float32(1.0)); f.create_dataset('empty', data=h5py.Empty('<i4'))
    const V1_EXTENDIBLE: &str =
        "010201000000000002000000000000000300000000000000ffffffffffffffff0300000000000000";
    const V2_EXTENDIBLE: &str =
        "0202010102000000000000000300000000000000ffffffffffffffff0300000000000000";
    const V1_SCALAR: &str = "0100000000000000";
    const V2_SCALAR: &str = "02000000";
    const V2_NULL_PADDED: &str = "0200000200000000"; // 4 bytes of message padding follow
    const V2_NULL: &str = "02000002";

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len() / 2)
            .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn real_extendible_v1_and_v2() {
        for (v, h) in [(1, V1_EXTENDIBLE), (2, V2_EXTENDIBLE)] {
            let d = dec(&hex(h)).unwrap();
            assert_eq!(d.version, v);
            assert_eq!(d.kind, DataspaceKind::Simple);
            assert_eq!(d.dims, vec![2, 3]);
            assert_eq!(d.max_dims, Some(vec![UNLIMITED, 3]));
            assert_eq!(d.max_dim(0), None);
            assert_eq!(d.max_dim(1), Some(3));
            assert!(d.is_extendible());
            assert_eq!(d.num_elements(), Some(6));
        }
    }

    #[test]
    fn real_scalar_and_null() {
        for h in [V1_SCALAR, V2_SCALAR] {
            let d = dec(&hex(h)).unwrap();
            assert_eq!(d.kind, DataspaceKind::Scalar);
            assert_eq!(d.num_elements(), Some(1));
            assert_eq!(d.rank(), 0);
        }
        for h in [V2_NULL, V2_NULL_PADDED] {
            let d = dec(&hex(h)).unwrap();
            assert_eq!(d.kind, DataspaceKind::Null);
            assert_eq!(d.num_elements(), Some(0));
        }
    }

    #[test]
    fn v1_permutation_and_small_lengths() {
        // v1, rank 2, flags 3 (max + perm), lengths of 4 bytes: dims 5,6; max unlimited
        // (ffffffff), 6; perm 1, 0.
        let mut b = vec![1, 2, 3, 0, 0, 0, 0, 0];
        for v in [5u32, 6, u32::MAX, 6, 1, 0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let s = Sizes::new(8, 4, "t", 0).unwrap();
        let d = Dataspace::decode(&mut Reader::new(&b, "dataspace", 0), s).unwrap();
        assert_eq!(d.dims, vec![5, 6]);
        assert_eq!(d.max_dims, Some(vec![UNLIMITED, 6]));
        assert_eq!(d.permutation, Some(vec![1, 0]));
    }

    #[test]
    fn rejects_bad_values() {
        // Version 3.
        assert!(dec(&[3, 0, 0, 0]).is_err());
        // Rank 33.
        assert!(dec(&hex("02210000")).is_err());
        // Unknown type 3.
        assert!(dec(&hex("02000003")).is_err());
        // Scalar with rank 1.
        assert!(dec(&hex("020100000100000000000000")).is_err());
        // Max below current: dims [5], max [4].
        assert!(dec(&hex("0201010105000000000000000400000000000000")).is_err());
        // Huge dims overflow the element count but decode.
        let d = dec(&hex("0202000100000000000000f000000000000000f0")).unwrap();
        assert_eq!(d.num_elements(), None);
    }

    #[test]
    fn encode_real_messages_byte_exact() {
        for h in [V1_EXTENDIBLE, V2_EXTENDIBLE, V1_SCALAR, V2_SCALAR, V2_NULL] {
            let b = hex(h);
            let d = dec(&b).unwrap();
            assert_eq!(d.encode(Sizes::EIGHT).unwrap(), b, "{h}");
            assert_eq!(d.encoded_len(Sizes::EIGHT), b.len());
        }
        // The padded message re-encodes without the object header's padding.
        let d = dec(&hex(V2_NULL_PADDED)).unwrap();
        assert_eq!(d.encode(Sizes::EIGHT).unwrap(), hex(V2_NULL));
        // Small lengths with a permutation (the hand-built v1 image).
        let mut b = vec![1, 2, 3, 0, 0, 0, 0, 0];
        for v in [5u32, 6, u32::MAX, 6, 1, 0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        let s = Sizes::new(8, 4, "t", 0).unwrap();
        let d = Dataspace::decode(&mut Reader::new(&b, "dataspace", 0), s).unwrap();
        assert_eq!(d.encode(s).unwrap(), b);
    }

    #[test]
    fn encode_refuses_what_the_version_cannot_hold() {
        let d = |version, kind, dims: Vec<u64>, max_dims, permutation| Dataspace {
            version,
            kind,
            dims,
            max_dims,
            permutation,
        };
        use DataspaceKind::*;
        let s = Sizes::EIGHT;
        assert!(d(1, Null, vec![], None, None).encode(s).is_err());
        assert!(
            d(2, Simple, vec![1], None, Some(vec![0]))
                .encode(s)
                .is_err()
        );
        assert!(d(2, Scalar, vec![1], None, None).encode(s).is_err());
        assert!(d(2, Simple, vec![1], Some(vec![]), None).encode(s).is_err());
        assert!(d(3, Simple, vec![1], None, None).encode(s).is_err());
        assert!(d(2, Simple, vec![1; 33], None, None).encode(s).is_err());
        assert!(d(1, Simple, vec![], None, None).encode(s).is_err());
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn round_trip(
                v2 in any::<bool>(),
                dims in proptest::collection::vec(0u64..1 << 40, 0..6),
                max in any::<bool>(),
                unlimited in any::<bool>(),
                null in any::<bool>(),
            ) {
                let kind = match (dims.is_empty(), null && v2) {
                    (_, true) => DataspaceKind::Null,
                    (true, _) => DataspaceKind::Scalar,
                    _ => DataspaceKind::Simple,
                };
                let dims = if kind == DataspaceKind::Simple { dims } else { vec![] };
                let max_dims = (max && kind == DataspaceKind::Simple).then(|| {
                    dims.iter().map(|&d| if unlimited { UNLIMITED } else { d + 1 }).collect()
                });
                let permutation = (!v2 && kind == DataspaceKind::Simple)
                    .then(|| (0..dims.len() as u64).rev().collect());
                let d = Dataspace { version: if v2 { 2 } else { 1 }, kind, dims, max_dims, permutation };
                let b = d.encode(Sizes::EIGHT).unwrap();
                prop_assert_eq!(b.len(), d.encoded_len(Sizes::EIGHT));
                prop_assert_eq!(dec(&b).unwrap(), d);
            }
        }
    }

    #[test]
    fn every_truncation_is_an_error() {
        for h in [V1_EXTENDIBLE, V2_EXTENDIBLE, V1_SCALAR, V2_SCALAR, V2_NULL] {
            let b = hex(h);
            // The v1 scalar's last reserved bytes matter too: all are required.
            for n in 0..b.len() {
                assert!(dec(&b[..n]).is_err(), "{h} truncated to {n}");
            }
        }
    }
}
