//! A file whose dataspace, datatype, fill value, filter pipeline and attribute messages are
//! shared in the shared object header message (SOHM) heap (`fixtures/sohm/`, written by
//! libhdf5 1.14.4 through h5py with the SOHM settings set by `make_sohm.py`) reads back what
//! h5py read.

use h5::File;

#[test]
fn shared_messages_in_the_sohm_heap_resolve() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/sohm");
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("sohm.json")).unwrap()).unwrap();
    let file = File::open(dir.join("sohm.h5")).unwrap();
    let exp = expected.as_object().unwrap();
    assert_eq!(exp.len(), 4);
    for (path, want) in exp {
        let d = file.dataset(path).unwrap();
        assert_eq!(d.shape(), [3, 4], "{path}");
        assert_eq!(d.chunk(), Some(vec![3, 2]), "{path}");
        assert_eq!(d.filters()[0].id, 1, "{path}");
        assert_eq!(
            d.fill_value_raw(),
            Some(&(-7i32).to_le_bytes()[..]),
            "{path}"
        );
        let values: Vec<i64> = d.read::<i64>().unwrap().iter().copied().collect();
        let want_values: Vec<i64> = want["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        assert_eq!(values, want_values, "{path}");
        let units = d.attr("units").unwrap().read::<f64>().unwrap();
        assert_eq!(units.as_slice().unwrap(), &[1.5, 2.5], "{path}");
        assert_eq!(
            d.attr("label").unwrap().read_strings().unwrap(),
            [want["label"].as_str().unwrap()],
            "{path}"
        );
    }
    // The table is there: the messages were really shared.
    let raw = std::fs::read(dir.join("sohm.h5")).unwrap();
    assert!(raw.windows(4).any(|w| w == b"SMTB"));
}
