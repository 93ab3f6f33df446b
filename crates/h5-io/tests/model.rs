//! Property test: random operation sequences on the backends agree with a
//! plain `Vec<u8>` model.

use h5_io::{Error, FileStorage, MemoryStorage, OpenMode, Storage, StorageExt};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Write { offset: u64, data: Vec<u8> },
    Read { offset: u64, len: usize },
    ReadZeroFill { offset: u64, len: usize },
    SetLen(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u64..600, proptest::collection::vec(any::<u8>(), 0..100))
            .prop_map(|(offset, data)| Op::Write { offset, data }),
        (0u64..700, 0usize..120).prop_map(|(offset, len)| Op::Read { offset, len }),
        (0u64..700, 0usize..120).prop_map(|(offset, len)| Op::ReadZeroFill { offset, len }),
        (0u64..700).prop_map(Op::SetLen),
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
                    assert!(buf.iter().all(|&b| b == 0xA5));
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
}
