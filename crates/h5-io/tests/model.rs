//! Property test: random operation sequences on the backends agree with a
//! plain `Vec<u8>` model.

use h5_io::{
    CoalesceLimits, Coalescing, Error, FileStorage, MemoryStorage, OpenMode, ReadSegment, Storage,
    StorageExt, WriteSegment,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Write { offset: u64, data: Vec<u8> },
    Read { offset: u64, len: usize },
    ReadZeroFill { offset: u64, len: usize },
    SetLen(u64),
    WriteVectored(Vec<(u64, Vec<u8>)>),
    ReadVectored(Vec<(u64, usize)>),
}

/// Segment offsets and lengths: scattered ones (small ranges, so overlaps and
/// exact adjacency happen) mixed with a shuffled run of adjacent segments.
fn extents() -> impl Strategy<Value = Vec<(u64, usize)>> {
    let scattered = proptest::collection::vec((0u64..300, 0usize..40), 0..5);
    let run = (0u64..300, proptest::collection::vec(0usize..30, 0..5)).prop_map(|(start, lens)| {
        let mut at = start;
        lens.into_iter()
            .map(|n| {
                let seg = (at, n);
                at += n as u64;
                seg
            })
            .collect::<Vec<_>>()
    });
    (scattered, run)
        .prop_map(|(mut a, b)| {
            a.extend(b);
            a
        })
        .prop_shuffle()
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u64..600, proptest::collection::vec(any::<u8>(), 0..100))
            .prop_map(|(offset, data)| Op::Write { offset, data }),
        (0u64..700, 0usize..120).prop_map(|(offset, len)| Op::Read { offset, len }),
        (0u64..700, 0usize..120).prop_map(|(offset, len)| Op::ReadZeroFill { offset, len }),
        (0u64..700).prop_map(Op::SetLen),
        extents().prop_map(|ext| Op::WriteVectored(
            ext.into_iter()
                .enumerate()
                .map(|(k, (offset, n))| (offset, vec![k as u8 + 1; n]))
                .collect()
        )),
        extents().prop_map(Op::ReadVectored),
    ]
}

/// Apply `ops` to `s` and to a model, checking every result.
fn check_against_model(s: &dyn Storage, ops: &[Op]) {
    let mut model: Vec<u8> = Vec::new();
    for op in ops {
        match op {
            Op::Write { offset, data } => {
                s.write_at(*offset, data).unwrap();
                if !data.is_empty() {
                    let end = *offset as usize + data.len();
                    if end > model.len() {
                        model.resize(end, 0);
                    }
                    model[*offset as usize..end].copy_from_slice(data);
                }
            }
            Op::Read { offset, len } => {
                let mut buf = vec![0xA5; *len];
                let r = s.read_at(*offset, &mut buf);
                let end = *offset as usize + len;
                if end <= model.len() {
                    r.unwrap();
                    assert_eq!(buf, model[*offset as usize..end]);
                } else {
                    match r {
                        Err(Error::OutOfBounds {
                            offset: o,
                            len: l,
                            file_len,
                        }) => {
                            assert_eq!(
                                (o, l as usize, file_len as usize),
                                (*offset, *len, model.len())
                            );
                        }
                        other => panic!("{op:?}: expected OutOfBounds, got {other:?}"),
                    }
                    // The buffer's contents are unspecified after a failed read.
                }
            }
            Op::ReadZeroFill { offset, len } => {
                let mut buf = vec![0xA5; *len];
                s.read_at_zero_fill(*offset, &mut buf).unwrap();
                let expect: Vec<u8> = (*offset as usize..*offset as usize + len)
                    .map(|i| model.get(i).copied().unwrap_or(0))
                    .collect();
                assert_eq!(buf, expect);
            }
            Op::SetLen(n) => {
                s.set_len(*n).unwrap();
                model.resize(*n as usize, 0);
            }
            Op::WriteVectored(parts) => {
                let segs: Vec<WriteSegment<'_>> = parts
                    .iter()
                    .map(|(offset, data)| WriteSegment::new(*offset, data))
                    .collect();
                s.write_vectored(&segs).unwrap();
                for (offset, data) in parts.iter().filter(|(_, d)| !d.is_empty()) {
                    let end = *offset as usize + data.len();
                    if end > model.len() {
                        model.resize(end, 0);
                    }
                    model[*offset as usize..end].copy_from_slice(data);
                }
            }
            Op::ReadVectored(extents) => {
                let mut bufs: Vec<Vec<u8>> = extents.iter().map(|&(_, n)| vec![0xA5; n]).collect();
                let mut segs: Vec<ReadSegment<'_>> = extents
                    .iter()
                    .zip(bufs.iter_mut())
                    .map(|(&(offset, _), buf)| ReadSegment::new(offset, buf))
                    .collect();
                let r = s.read_vectored(&mut segs);
                let first_bad = extents
                    .iter()
                    .find(|&&(offset, n)| offset as usize + n > model.len());
                match (first_bad, r) {
                    (None, Ok(())) => {
                        for (&(offset, n), buf) in extents.iter().zip(&bufs) {
                            assert_eq!(buf[..], model[offset as usize..offset as usize + n]);
                        }
                    }
                    (
                        Some(&(offset, n)),
                        Err(Error::OutOfBounds {
                            offset: o,
                            len: l,
                            file_len,
                        }),
                    ) => assert_eq!((o, l as usize, file_len as usize), (offset, n, model.len())),
                    (bad, r) => panic!("{op:?}: first bad segment {bad:?}, got {r:?}"),
                }
            }
        }
        assert_eq!(s.len().unwrap(), model.len() as u64);
    }
    assert_eq!(s.read_vec(0, model.len()).unwrap(), model);
}

proptest! {
    #[test]
    fn memory_matches_model(ops in proptest::collection::vec(op(), 0..40)) {
        check_against_model(&MemoryStorage::new(), &ops);
    }

    #[test]
    fn file_matches_model(ops in proptest::collection::vec(op(), 0..40)) {
        let dir = tempfile::tempdir().unwrap();
        let f = FileStorage::open(dir.path().join("m.bin"), OpenMode::Create).unwrap();
        check_against_model(&f, &ops);
    }

    /// Held writes (small limits, so that the limits are passed and writes pass through too)
    /// are invisible: the decorator behaves as the storage below it, and that storage ends with
    /// the model's bytes once everything is sent down.
    #[test]
    fn coalescing_matches_model(ops in proptest::collection::vec(op(), 0..40)) {
        let limits = CoalesceLimits { pass_through: 48, max_held: 200, max_runs: 3 };
        let s = Coalescing::with_limits(MemoryStorage::new(), limits);
        check_against_model(&s, &ops);
        s.sync().unwrap();
        prop_assert_eq!(s.held_bytes(), 0);
        prop_assert_eq!(s.inner().len().unwrap(), s.len().unwrap());
    }

    #[test]
    fn coalescing_file_matches_model(ops in proptest::collection::vec(op(), 0..40)) {
        let dir = tempfile::tempdir().unwrap();
        let f = FileStorage::open(dir.path().join("m.bin"), OpenMode::Create).unwrap();
        check_against_model(&Coalescing::new(f), &ops);
    }
}
