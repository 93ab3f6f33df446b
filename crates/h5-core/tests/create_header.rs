//! The header `FileShared::create_dataset` hands over (built by the creator, not read back) is
//! the one a load decodes: in the same file through the metadata cache, and from the storage
//! after the file is closed and opened again.

use std::sync::Arc;

use h5_core::file::{CacheSettings, FileShared};
use h5_core::object::{HeaderMessage, ObjectHeader};
use h5_core::write::chunk_index::ChunkIndexKind;
use h5_core::write::dataset::{NewDataset, NewLayout};
use h5_core::write::{CreateOptions, FormatBounds};
use h5_format::datatype::{
    ByteOrder, Charset, Datatype, FixedPoint, FloatType, Normalization, StringPadding, StringType,
};
use h5_format::message::dataspace::UNLIMITED;
use h5_format::message::fill_value::AllocTime;
use h5_format::message::filter_pipeline::Filter;
use h5_io::{MemoryStorage, Storage};

fn int64() -> Datatype {
    Datatype::FixedPoint(FixedPoint {
        size: 8,
        order: ByteOrder::LittleEndian,
        signed: true,
        lo_pad: false,
        hi_pad: false,
        bit_offset: 0,
        precision: 64,
    })
}

fn float32_big_endian() -> Datatype {
    Datatype::Float(FloatType {
        size: 4,
        order: ByteOrder::BigEndian,
        lo_pad: false,
        hi_pad: false,
        internal_pad: false,
        normalization: Normalization::Implied,
        sign_location: 31,
        bit_offset: 0,
        precision: 32,
        exponent_location: 23,
        exponent_size: 8,
        mantissa_location: 0,
        mantissa_size: 23,
        exponent_bias: 127,
    })
}

fn string5() -> Datatype {
    Datatype::String(StringType {
        size: 5,
        padding: StringPadding::NullPad,
        charset: Charset::Ascii,
    })
}

fn spec(datatype: Datatype, dims: &[u64], layout: NewLayout) -> NewDataset {
    NewDataset {
        datatype,
        dims: dims.to_vec(),
        max_dims: None,
        layout,
        fill: None,
        chunk_index: None,
        alloc_time: None,
        fill_time: None,
        data_follows: false,
    }
}

fn chunked(chunk: &[u64], filters: Vec<Filter>) -> NewLayout {
    NewLayout::Chunked {
        chunk: chunk.to_vec(),
        filters,
        unfiltered_edges: false,
    }
}

fn deflate() -> Filter {
    Filter {
        id: 1,
        name: None,
        flags: 0,
        client_data: vec![4],
    }
}

/// Datasets of every layout, with and without fill values, filters and growth; the string
/// type is read back by the creator (kept to check that path too).
fn specs() -> Vec<NewDataset> {
    let mut out = vec![
        spec(int64(), &[1], NewLayout::Contiguous),
        spec(int64(), &[], NewLayout::Contiguous),
        spec(float32_big_endian(), &[3, 4], NewLayout::Contiguous),
        spec(int64(), &[0], NewLayout::Contiguous),
        spec(int64(), &[6], NewLayout::Compact),
        spec(float32_big_endian(), &[10, 10], chunked(&[4, 5], vec![])),
        spec(int64(), &[100], chunked(&[10], vec![deflate()])),
        spec(string5(), &[4], NewLayout::Contiguous),
    ];
    let mut early = spec(int64(), &[8], NewLayout::Contiguous);
    early.alloc_time = Some(AllocTime::Early);
    out.push(early);
    let mut filled = spec(int64(), &[5], NewLayout::Contiguous);
    filled.fill = Some(7i64.to_le_bytes().to_vec());
    out.push(filled);
    let mut growing = spec(int64(), &[4, 3], chunked(&[2, 3], vec![deflate()]));
    growing.max_dims = Some(vec![UNLIMITED, 3]);
    out.push(growing);
    let mut v2_index = spec(int64(), &[4, 3], chunked(&[2, 3], vec![]));
    v2_index.max_dims = Some(vec![UNLIMITED, UNLIMITED]);
    out.push(v2_index);
    let mut single = spec(int64(), &[4, 3], chunked(&[4, 3], vec![]));
    single.chunk_index = Some(ChunkIndexKind::SingleChunk);
    out.push(single);
    out
}

fn assert_same(name: &str, created: &ObjectHeader, loaded: &ObjectHeader) {
    assert_eq!(created.address, loaded.address, "{name}: address");
    assert_eq!(created.version, loaded.version, "{name}: version");
    let view = |m: &HeaderMessage| {
        (
            m.kind,
            m.flags,
            m.creation_order,
            m.message.clone(),
            m.shared_from,
        )
    };
    let created: Vec<_> = created.messages.iter().map(view).collect();
    let loaded: Vec<_> = loaded.messages.iter().map(view).collect();
    assert_eq!(created, loaded, "{name}: messages");
}

#[test]
fn created_dataset_header_equals_the_one_loaded() {
    for bounds in [
        FormatBounds::Earliest,
        FormatBounds::V18,
        FormatBounds::V110,
        FormatBounds::V200,
    ] {
        let storage: Arc<dyn Storage> = Arc::new(MemoryStorage::new());
        let settings = CacheSettings::default();
        let options = CreateOptions {
            bounds,
            ..CreateOptions::default()
        };
        let file = FileShared::create(Arc::clone(&storage), &settings, &options, None).unwrap();
        let root = file.root_address();
        let mut made = Vec::new();
        for (i, s) in specs().iter().enumerate() {
            if s.chunk_index == Some(ChunkIndexKind::SingleChunk) && bounds < FormatBounds::V110 {
                continue;
            }
            let name = format!("{bounds:?} d{i}");
            let created = file.create_dataset(root, &format!("d{i}"), s).unwrap();
            assert_eq!(created.header.address, created.address, "{name}");
            let loaded = ObjectHeader::load(&file, created.address).unwrap();
            assert_same(&name, &created.header, &loaded);
            made.push((name, created));
        }
        assert!(made.len() >= specs().len() - 1);
        file.close().unwrap();
        let file = FileShared::open(storage, &settings, None).unwrap();
        for (name, created) in &made {
            let loaded = ObjectHeader::load(&file, created.address).unwrap();
            assert_same(name, &created.header, &loaded);
        }
    }
}
