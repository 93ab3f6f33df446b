//! Every attribute of every object in the fixture corpus (files written by h5py, netCDF4 and
//! PyTables through libhdf5) reads back what h5py read: the names, and the values of numeric,
//! enum and string attributes (large ones by SHA-256); other classes by element count.

use h5::File;
use h5_testkit::values::{flatten_all, parse_f64, same_f64};
use h5_testkit::{ObjectKind, TypeDesc, manifest, sha256_hex};
use serde_json::Value as J;

fn num(v: &J) -> Option<f64> {
    match v {
        J::Bool(b) => Some(f64::from(u8::from(*b))),
        other => parse_f64(other),
    }
}

#[test]
fn every_attribute_reads_back_what_h5py_read() {
    let m = manifest();
    let (mut numeric, mut strings, mut other) = (0, 0, 0);
    let mut failures = Vec::new();
    for f in &m.files {
        // Files a writer left open are read as libhdf5 reads them after h5clear.
        let access = h5::FileAccess::default()
            .ignore_open_for_writing(f.name.starts_with("open_for_writing"));
        let file = File::open_with(f.path(), &access).unwrap();
        for o in &f.objects {
            let attrs = match o.kind {
                ObjectKind::Group => file.group(&o.path).and_then(|g| g.attrs()),
                ObjectKind::Dataset => file.dataset(&o.path).and_then(|d| d.attrs()),
                _ => continue,
            };
            let attrs = match attrs {
                Ok(a) => a,
                Err(e) => {
                    failures.push(format!("{}:{}: {e}", f.name, o.path));
                    continue;
                }
            };
            let mut got_names: Vec<&str> = attrs.iter().map(|a| a.name()).collect();
            got_names.sort_unstable();
            let mut want_names: Vec<&str> = o.attributes.iter().map(|a| a.name.as_str()).collect();
            want_names.sort_unstable();
            if got_names != want_names {
                failures.push(format!(
                    "{}:{}: names {got_names:?} != {want_names:?}",
                    f.name, o.path
                ));
                continue;
            }
            for want in &o.attributes {
                let what = format!("{}:{} @{}", f.name, o.path, want.name);
                let Some(a) = attrs.iter().find(|a| a.name() == want.name) else {
                    continue;
                };
                match &want.type_desc {
                    TypeDesc::Integer { .. } | TypeDesc::Float { .. } | TypeDesc::Enum { .. } => {
                        let got = h5_core::values::numbers::<f64>(a.dtype(), &a.read_raw(), true);
                        let got = match got {
                            Ok(g) => g,
                            Err(e) => {
                                failures.push(format!("{what}: {e}"));
                                continue;
                            }
                        };
                        if let Some(v) = &want.value {
                            let exp: Vec<Option<f64>> =
                                flatten_all(v).into_iter().map(num).collect();
                            let ok = exp.len() == got.len()
                                && exp
                                    .iter()
                                    .zip(&got)
                                    .all(|(e, g)| e.is_some_and(|e| same_f64(e, *g)));
                            if !ok {
                                failures.push(format!("{what}: {got:?} != {exp:?}"));
                            }
                        } else if let Some(h) = &want.values_sha256
                            && matches!(
                                want.type_desc,
                                TypeDesc::Integer {
                                    order: h5_testkit::ByteOrder::Le,
                                    ..
                                } | TypeDesc::Float {
                                    order: h5_testkit::ByteOrder::Le,
                                    ..
                                }
                            )
                            && &sha256_hex(&a.read_raw()) != h
                        {
                            failures.push(format!("{what}: sha256 differs"));
                        }
                        numeric += 1;
                    }
                    TypeDesc::String { .. } => {
                        let got = match a.read_strings() {
                            Ok(g) => g,
                            Err(e) => {
                                failures.push(format!("{what}: {e}"));
                                continue;
                            }
                        };
                        if let Some(v) = &want.value {
                            let exp: Vec<String> = flatten_all(v)
                                .into_iter()
                                .map(|s| s.as_str().unwrap_or_default().to_owned())
                                .collect();
                            if got != exp {
                                failures.push(format!("{what}: {got:?} != {exp:?}"));
                            }
                        }
                        strings += 1;
                    }
                    _ => {
                        match a.read_values() {
                            Ok(v) => {
                                let n: u64 = want.shape.as_ref().map_or(0, |s| s.iter().product());
                                if want.value.is_some() && v.len() as u64 != n {
                                    failures.push(format!(
                                        "{what}: {} elements, {n} expected",
                                        v.len()
                                    ));
                                }
                            }
                            Err(e) => failures.push(format!("{what}: {e}")),
                        }
                        other += 1;
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(
        numeric >= 150 && strings >= 100 && other >= 20,
        "{numeric} {strings} {other}"
    );
}
