//! The C-API side of the standard workloads (feature `c-api`): libhdf5 2.0.0, linked
//! statically through `hdf5-metno`'s `static` feature, called through its raw bindings
//! (`hdf5-metno-sys`), so that each timed phase makes exactly the C calls a C program makes
//! (no wrapper objects, no global lock, no per-call checks beyond the return codes).
//!
//! Property lists are h5py's (`h5py/_hl/files.py`, `dataset.py`, `group.py`, `base.py`): a file
//! access list with the format bounds and alignment 1/1 and the chunk cache set from its own
//! defaults (or `rdcc_*` where h5py's side passes them); a file creation list with object times
//! off; dataset and group creation lists with object times off; a link creation list creating
//! intermediate groups with ASCII names. Data is written and read in the file's type (float32,
//! int32, int64 little-endian: no conversion on either side).
//!
//! Each function mirrors the function of the same name in `h5side` and returns the same
//! [`RunOut`]; what was read is checked by the caller against the same expected checksum.
//! Large read buffers are allocated as numpy allocates them (see [`read_buffer`]).

// FFI: every call into libhdf5 is `unsafe`. The calls pass pointers to live buffers of the
// sizes the dataspaces describe, and every identifier is closed exactly once (by [`Id`]).
#![allow(unsafe_code)]

use std::ffi::{CString, c_char, c_void};
use std::path::Path;

use h5::FormatBounds;
use hdf5_metno_sys::h5::{H5_index_t, H5_iter_order_t, herr_t, hsize_t};
use hdf5_metno_sys::h5d::{
    H5Dclose, H5Dcreate2, H5Dget_space, H5Dopen2, H5Dread, H5Dset_extent, H5Dwrite,
};
use hdf5_metno_sys::h5e::H5Eset_auto2;
use hdf5_metno_sys::h5f::{
    H5F_ACC_RDONLY, H5F_ACC_TRUNC, H5F_LIBVER_LATEST, H5F_libver_t, H5Fclose, H5Fcreate, H5Fopen,
};
use hdf5_metno_sys::h5g::{H5Gclose, H5Gcreate2, H5Gopen2};
use hdf5_metno_sys::h5i::hid_t;
use hdf5_metno_sys::h5l::{H5L_info2_t, H5Literate2};
use hdf5_metno_sys::h5p::{
    H5P_CLS_DATASET_CREATE, H5P_CLS_FILE_ACCESS, H5P_CLS_FILE_CREATE, H5P_CLS_GROUP_CREATE,
    H5P_CLS_LINK_CREATE, H5P_DEFAULT, H5Pclose, H5Pcreate, H5Pget_cache, H5Pset_alignment,
    H5Pset_cache, H5Pset_chunk, H5Pset_create_intermediate_group, H5Pset_deflate,
    H5Pset_libver_bounds, H5Pset_obj_track_times, H5Pset_shuffle,
};
use hdf5_metno_sys::h5s::{
    H5S_ALL, H5S_UNLIMITED, H5S_seloper_t, H5Sclose, H5Screate_simple, H5Sselect_hyperslab,
};
use hdf5_metno_sys::h5t::{H5T_IEEE_F32LE, H5T_STD_I32LE, H5T_STD_I64LE};

use super::RunOut;
use super::h5side::{AppendSizes, Field, FieldKind, w4_name, w4_value, w5_name, w5_out, w5_value};
use crate::common::{BenchResult, Bits, checksum};
use crate::probe::Probe;

/// An open libhdf5 identifier, closed by its close function when dropped.
struct Id {
    id: hid_t,
    close: unsafe extern "C" fn(hid_t) -> herr_t,
}

impl Id {
    /// `id` from a call named `what`: an error when negative (libhdf5's failure value).
    fn new(id: hid_t, close: unsafe extern "C" fn(hid_t) -> herr_t, what: &str) -> BenchResult<Id> {
        if id < 0 {
            return Err(format!("libhdf5: {what} failed"));
        }
        Ok(Id { id, close })
    }
}

impl Drop for Id {
    fn drop(&mut self) {
        // SAFETY: `id` is a valid identifier of the kind `close` closes, closed only here.
        unsafe { (self.close)(self.id) };
    }
}

/// A return code: an error when negative.
fn ok(rc: herr_t, what: &str) -> BenchResult<()> {
    if rc < 0 {
        Err(format!("libhdf5: {what} failed"))
    } else {
        Ok(())
    }
}

fn cpath(path: &Path) -> BenchResult<CString> {
    CString::new(path.as_os_str().as_encoded_bytes()).map_err(|e| e.to_string())
}

fn cname(name: &str) -> CString {
    CString::new(name).unwrap_or_default()
}

/// libhdf5's version as `major.minor.micro`, and turns off its automatic error printing (every
/// failure is reported through the return codes instead).
pub(crate) fn init() -> String {
    // SAFETY: plain library calls without pointers (a null handler turns printing off).
    unsafe {
        hdf5_metno_sys::h5::H5open();
        H5Eset_auto2(0, None, std::ptr::null_mut());
    }
    let (a, b, c) = hdf5_metno::library_version();
    format!("{a}.{b}.{c}")
}

/// The libhdf5 bound of h5's format bounds (h5py's `libver` low bound, see `h5py_libver`).
fn low_bound(bounds: FormatBounds) -> H5F_libver_t {
    use hdf5_metno_sys::h5f::H5F_libver_t::*;
    match bounds {
        FormatBounds::Earliest => H5F_LIBVER_EARLIEST,
        FormatBounds::V18 => H5F_LIBVER_V18,
        FormatBounds::V110 => H5F_LIBVER_V110,
        FormatBounds::V112 => H5F_LIBVER_V112,
        FormatBounds::V114 => H5F_LIBVER_V114,
        _ => H5F_LIBVER_LATEST,
    }
}

/// h5py's file access list: bounds (low, latest), alignment 1/1, the chunk cache from the
/// list's defaults with `nbytes`/`nslots` replaced when given.
fn fapl(bounds: FormatBounds, nbytes: Option<u64>, nslots: Option<u64>) -> BenchResult<Id> {
    // SAFETY: property list calls on a list created here; out-pointers are locals.
    unsafe {
        let p = Id::new(H5Pcreate(*H5P_CLS_FILE_ACCESS), H5Pclose, "H5Pcreate(fapl)")?;
        ok(
            H5Pset_libver_bounds(p.id, low_bound(bounds), H5F_LIBVER_LATEST),
            "H5Pset_libver_bounds",
        )?;
        ok(H5Pset_alignment(p.id, 1, 1), "H5Pset_alignment")?;
        let (mut mdc, mut slots, mut bytes, mut w0) = (0, 0, 0, 0.0);
        ok(
            H5Pget_cache(p.id, &mut mdc, &mut slots, &mut bytes, &mut w0),
            "H5Pget_cache",
        )?;
        if let Some(n) = nslots {
            slots = n as usize;
        }
        if let Some(n) = nbytes {
            bytes = n as usize;
        }
        ok(H5Pset_cache(p.id, mdc, slots, bytes, w0), "H5Pset_cache")?;
        Ok(p)
    }
}

/// h5py's file creation list (object times off).
fn fcpl() -> BenchResult<Id> {
    // SAFETY: property list calls on a list created here.
    unsafe {
        let p = Id::new(H5Pcreate(*H5P_CLS_FILE_CREATE), H5Pclose, "H5Pcreate(fcpl)")?;
        ok(H5Pset_obj_track_times(p.id, 0), "H5Pset_obj_track_times")?;
        Ok(p)
    }
}

/// h5py's link creation list (intermediate groups created; names are ASCII, the default).
fn lcpl() -> BenchResult<Id> {
    // SAFETY: property list calls on a list created here.
    unsafe {
        let p = Id::new(H5Pcreate(*H5P_CLS_LINK_CREATE), H5Pclose, "H5Pcreate(lcpl)")?;
        ok(
            H5Pset_create_intermediate_group(p.id, 1),
            "H5Pset_create_intermediate_group",
        )?;
        Ok(p)
    }
}

/// h5py's dataset creation list: `chunk` when given, shuffle + deflate(1) when asked, object
/// times off.
fn dcpl(chunk: Option<&[hsize_t]>, deflate: bool) -> BenchResult<Id> {
    // SAFETY: property list calls on a list created here; `chunk` outlives the call.
    unsafe {
        let p = Id::new(
            H5Pcreate(*H5P_CLS_DATASET_CREATE),
            H5Pclose,
            "H5Pcreate(dcpl)",
        )?;
        if let Some(c) = chunk {
            ok(
                H5Pset_chunk(p.id, c.len() as i32, c.as_ptr()),
                "H5Pset_chunk",
            )?;
        }
        if deflate {
            ok(H5Pset_shuffle(p.id), "H5Pset_shuffle")?;
            ok(H5Pset_deflate(p.id, 1), "H5Pset_deflate")?;
        }
        ok(H5Pset_obj_track_times(p.id, 0), "H5Pset_obj_track_times")?;
        Ok(p)
    }
}

fn create_file(path: &Path, bounds: FormatBounds) -> BenchResult<Id> {
    let name = cpath(path)?;
    let (fc, fa) = (fcpl()?, fapl(bounds, None, None)?);
    // SAFETY: a NUL-terminated path and valid property lists.
    let id = unsafe { H5Fcreate(name.as_ptr(), H5F_ACC_TRUNC, fc.id, fa.id) };
    Id::new(id, H5Fclose, "H5Fcreate")
}

fn open_file(path: &Path, nbytes: Option<u64>, nslots: Option<u64>) -> BenchResult<Id> {
    let name = cpath(path)?;
    let fa = fapl(FormatBounds::Earliest, nbytes, nslots)?;
    // SAFETY: a NUL-terminated path and a valid property list.
    let id = unsafe { H5Fopen(name.as_ptr(), H5F_ACC_RDONLY, fa.id) };
    Id::new(id, H5Fclose, "H5Fopen")
}

fn simple_space(dims: &[hsize_t], max: Option<&[hsize_t]>) -> BenchResult<Id> {
    // SAFETY: `dims` (and `max`, of the same rank) outlive the call.
    let id = unsafe {
        H5Screate_simple(
            dims.len() as i32,
            dims.as_ptr(),
            max.map_or(std::ptr::null(), <[hsize_t]>::as_ptr),
        )
    };
    Id::new(id, H5Sclose, "H5Screate_simple")
}

fn create_dataset(
    loc: &Id,
    name: &str,
    ty: hid_t,
    space: &Id,
    lc: &Id,
    dc: &Id,
) -> BenchResult<Id> {
    let n = cname(name);
    // SAFETY: valid identifiers and a NUL-terminated name.
    let id = unsafe { H5Dcreate2(loc.id, n.as_ptr(), ty, space.id, lc.id, dc.id, H5P_DEFAULT) };
    Id::new(id, H5Dclose, "H5Dcreate2")
}

fn open_dataset(loc: &Id, name: &str) -> BenchResult<Id> {
    let n = cname(name);
    // SAFETY: a valid location and a NUL-terminated name.
    let id = unsafe { H5Dopen2(loc.id, n.as_ptr(), H5P_DEFAULT) };
    Id::new(id, H5Dclose, "H5Dopen2")
}

/// Selects the block at `start` of `count` elements (one value per dimension of `space`).
fn select(space: &Id, start: &[hsize_t], count: &[hsize_t]) -> BenchResult<()> {
    // SAFETY: both arrays have the dataspace's rank and outlive the call.
    ok(
        unsafe {
            H5Sselect_hyperslab(
                space.id,
                H5S_seloper_t::H5S_SELECT_SET,
                start.as_ptr(),
                std::ptr::null(),
                count.as_ptr(),
                std::ptr::null(),
            )
        },
        "H5Sselect_hyperslab",
    )
}

/// An uninitialised buffer of `n` elements allocated the way numpy allocates arrays: from
/// malloc, with transparent huge pages requested for the page-aligned rest of buffers of 4 MiB
/// or more (`madvise(MADV_HUGEPAGE)`, numpy's `PyDataMem` allocator on Linux).
fn read_buffer<T>(n: usize) -> Vec<T> {
    let v: Vec<T> = Vec::with_capacity(n);
    let bytes = n * size_of::<T>();
    // The run's setting (`--no-thp`) holds for both sides.
    if bytes >= 4 << 20 && h5::huge_pages() {
        let p = v.as_ptr() as usize;
        let start = p.next_multiple_of(4096);
        let len = (p + bytes).saturating_sub(start) & !4095;
        // SAFETY: the range lies inside the allocation; MADV_HUGEPAGE changes no contents.
        unsafe { libc::madvise(start as *mut c_void, len, libc::MADV_HUGEPAGE) };
    }
    v
}

/// Reads the whole dataset (`n` elements of file type `ty`) into a fresh [`read_buffer`].
fn read_all<T>(ds: &Id, ty: hid_t, n: usize) -> BenchResult<Vec<T>> {
    let mut v = read_buffer::<T>(n);
    // SAFETY: the buffer has room for the dataset's `n` elements of `ty`'s size, which the read
    // fills completely before `set_len`.
    unsafe {
        ok(
            H5Dread(
                ds.id,
                ty,
                H5S_ALL,
                H5S_ALL,
                H5P_DEFAULT,
                v.as_mut_ptr().cast(),
            ),
            "H5Dread",
        )?;
        v.set_len(n);
    }
    Ok(v)
}

/// Writes all of `data` (the whole dataset, file type `ty`).
fn write_all<T>(ds: &Id, ty: hid_t, data: &[T]) -> BenchResult<()> {
    // SAFETY: `data` holds the dataset's elements in `ty`'s layout.
    ok(
        unsafe {
            H5Dwrite(
                ds.id,
                ty,
                H5S_ALL,
                H5S_ALL,
                H5P_DEFAULT,
                data.as_ptr().cast(),
            )
        },
        "H5Dwrite",
    )
}

fn file_size(path: &Path) -> Option<u64> {
    std::fs::metadata(path).ok().map(|m| m.len())
}

/// Whether this build has the C side (it has: feature `c-api`).
pub(crate) const AVAILABLE: bool = true;

/// After `H5Fclose` (which writes everything but does not sync), fsync the file when `sync`
/// asks for durable writes (`--sync`).
fn sync_file(path: &Path, sync: bool) -> BenchResult<()> {
    if sync {
        std::fs::File::open(path)
            .and_then(|f| f.sync_all())
            .map_err(|e| format!("fsync {}: {e}", path.display()))?;
    }
    Ok(())
}

/// W1 / W2: create, write the field, close; then open, read it all, close.
pub(crate) fn field_write_read(
    path: &Path,
    kind: FieldKind,
    field: &Field,
    chunk: usize,
    bounds: FormatBounds,
    sync: bool,
) -> BenchResult<RunOut> {
    let n = field.side as hsize_t;
    let c = chunk as hsize_t;
    let f32le = *H5T_IEEE_F32LE;
    let p = Probe::start();
    {
        let file = create_file(path, bounds)?;
        let (space, dc) = match kind {
            FieldKind::Contiguous => (simple_space(&[n * n], None)?, dcpl(None, false)?),
            FieldKind::Chunked => (simple_space(&[n, n], None)?, dcpl(Some(&[c, c]), false)?),
            FieldKind::Deflate => (simple_space(&[n, n], None)?, dcpl(Some(&[c, c]), true)?),
        };
        let ds = create_dataset(&file, "data", f32le, &space, &lcpl()?, &dc)?;
        write_all(&ds, f32le, &field.values)?;
    }
    sync_file(path, sync)?;
    let write = p.stop();

    let p = Probe::start();
    let a: Vec<f32> = {
        let file = open_file(path, None, None)?;
        let ds = open_dataset(&file, "data")?;
        read_all(&ds, f32le, field.values.len())?
    };
    let read = p.stop();
    let cs = field.check(&a);
    drop(a);
    Ok(RunOut::done(vec![write, read], cs, file_size(path)))
}

/// W3 / W6: open (chunk cache `nbytes`/`nslots` when given, else libhdf5's defaults), open the
/// datasets, read every `k`×`k` block (dataset index, row, column) into a new buffer, close.
pub(crate) fn slabs(
    path: &Path,
    names: &[String],
    reads: &[(usize, usize, usize)],
    k: usize,
    nbytes: Option<u64>,
    nslots: Option<u64>,
) -> BenchResult<RunOut> {
    let f32le = *H5T_IEEE_F32LE;
    let kk = k as hsize_t;
    let mut out: Vec<Vec<f32>> = Vec::with_capacity(reads.len());
    let p = Probe::start();
    {
        let file = open_file(path, nbytes, nslots)?;
        let dsets = names
            .iter()
            .map(|n| open_dataset(&file, n))
            .collect::<BenchResult<Vec<Id>>>()?;
        // One file dataspace per dataset, reselected for every block; one memory space.
        let spaces = dsets
            .iter()
            .map(|d| {
                // SAFETY: a valid dataset identifier.
                Id::new(unsafe { H5Dget_space(d.id) }, H5Sclose, "H5Dget_space")
            })
            .collect::<BenchResult<Vec<Id>>>()?;
        let mem = simple_space(&[kk, kk], None)?;
        for &(j, r, c) in reads {
            let (ds, fs) = (&dsets[j], &spaces[j]);
            let start = [r as hsize_t, c as hsize_t];
            let count = [kk, kk];
            let mut v = read_buffer::<f32>(k * k);
            select(fs, &start, &count)?;
            // SAFETY: the buffer holds k×k floats, all written by the read before `set_len`.
            unsafe {
                ok(
                    H5Dread(
                        ds.id,
                        f32le,
                        mem.id,
                        fs.id,
                        H5P_DEFAULT,
                        v.as_mut_ptr().cast(),
                    ),
                    "H5Dread",
                )?;
                v.set_len(k * k);
            }
            out.push(v);
        }
    }
    let s = p.stop();
    let cs = checksum(out.iter().flat_map(|a| a.iter().map(|x| x.bits())));
    Ok(RunOut::done(vec![s], cs, None))
}

/// W4: create `n` extensible int32 datasets (chunk 1024); then `rounds` rounds appending `per`
/// elements to each (set extent + write of the new hyperslab), and close. Phases: create,
/// append.
pub(crate) fn w4(
    path: &Path,
    s: AppendSizes,
    bounds: FormatBounds,
    sync: bool,
) -> BenchResult<RunOut> {
    let i32le = *H5T_STD_I32LE;
    let p = Probe::start();
    let file = create_file(path, bounds)?;
    let dsets = {
        let space = simple_space(&[0], Some(&[H5S_UNLIMITED]))?;
        let (lc, dc) = (lcpl()?, dcpl(Some(&[1024]), false)?);
        (0..s.n)
            .map(|j| create_dataset(&file, &w4_name(j), i32le, &space, &lc, &dc))
            .collect::<BenchResult<Vec<Id>>>()?
    };
    let create = p.stop();

    let p = Probe::start();
    let mut buf = vec![0i32; s.per];
    let mem = simple_space(&[s.per as hsize_t], None)?;
    for k in 0..s.rounds {
        let (lo, hi) = (k * s.per, (k + 1) * s.per);
        for (j, d) in dsets.iter().enumerate() {
            for (e, v) in buf.iter_mut().enumerate() {
                *v = w4_value(j, lo + e);
            }
            let size = [hi as hsize_t];
            let (start, count) = ([lo as hsize_t], [s.per as hsize_t]);
            // SAFETY: valid identifiers; `size` has rank 1.
            let fs = unsafe {
                ok(H5Dset_extent(d.id, size.as_ptr()), "H5Dset_extent")?;
                Id::new(H5Dget_space(d.id), H5Sclose, "H5Dget_space")?
            };
            select(&fs, &start, &count)?;
            // SAFETY: valid identifiers; `buf` holds the `per` int32 both spaces select.
            unsafe {
                ok(
                    H5Dwrite(d.id, i32le, mem.id, fs.id, H5P_DEFAULT, buf.as_ptr().cast()),
                    "H5Dwrite",
                )?;
            }
        }
    }
    drop(dsets);
    drop(file);
    sync_file(path, sync)?;
    let append = p.stop();
    let cs = check_w4(path, s)?;
    Ok(RunOut::done(vec![create, append], cs, file_size(path)))
}

/// Reads a W4 file back and returns its checksum (untimed).
fn check_w4(path: &Path, s: AppendSizes) -> BenchResult<u64> {
    let file = open_file(path, None, None)?;
    let len = s.rounds * s.per;
    let mut all = Vec::with_capacity(s.n * len);
    for j in 0..s.n {
        let ds = open_dataset(&file, &w4_name(j))?;
        let v: Vec<i32> = read_all(&ds, *H5T_STD_I32LE, len)?;
        all.extend(v.iter().map(|v| u64::from(v.cast_unsigned())));
    }
    Ok(checksum(all))
}

/// Collects link names (the `H5Literate2` callback; `data` is a `Vec<String>`).
extern "C" fn collect_name(
    _group: hid_t,
    name: *const c_char,
    _info: *const H5L_info2_t,
    data: *mut c_void,
) -> herr_t {
    // SAFETY: libhdf5 passes a NUL-terminated name and the `data` given to `H5Literate2`.
    unsafe {
        let names = &mut *data.cast::<Vec<String>>();
        names.push(
            std::ffi::CStr::from_ptr(name)
                .to_string_lossy()
                .into_owned(),
        );
    }
    0
}

/// W5: one group `g` of `members` one-element int64 datasets: create + close; reopen and open
/// every member by name in `order`; open and list the names. Phases: create, open by name,
/// list.
pub(crate) fn w5(
    path: &Path,
    members: usize,
    order: &[usize],
    bounds: FormatBounds,
    sync: bool,
) -> BenchResult<RunOut> {
    let i64le = *H5T_STD_I64LE;
    let p = Probe::start();
    {
        let file = create_file(path, bounds)?;
        let lc = lcpl()?;
        let g = {
            // SAFETY: property list calls on a list created here.
            let gc = unsafe {
                let gc = Id::new(
                    H5Pcreate(*H5P_CLS_GROUP_CREATE),
                    H5Pclose,
                    "H5Pcreate(gcpl)",
                )?;
                ok(H5Pset_obj_track_times(gc.id, 0), "H5Pset_obj_track_times")?;
                gc
            };
            let n = cname("g");
            // SAFETY: valid identifiers and a NUL-terminated name.
            let id = unsafe { H5Gcreate2(file.id, n.as_ptr(), lc.id, gc.id, H5P_DEFAULT) };
            Id::new(id, H5Gclose, "H5Gcreate2")?
        };
        // One dataspace and creation list for every member, as a C program would.
        let space = simple_space(&[1], None)?;
        let dc = dcpl(None, false)?;
        for i in 0..members {
            let ds = create_dataset(&g, &w5_name(i), i64le, &space, &lc, &dc)?;
            write_all(&ds, i64le, &[w5_value(i)])?;
        }
    }
    sync_file(path, sync)?;
    let create = p.stop();

    let p = Probe::start();
    let file = open_file(path, None, None)?;
    let g = {
        let n = cname("g");
        // SAFETY: a valid file and a NUL-terminated name.
        Id::new(
            unsafe { H5Gopen2(file.id, n.as_ptr(), H5P_DEFAULT) },
            H5Gclose,
            "H5Gopen2",
        )?
    };
    let handles = order
        .iter()
        .map(|&i| open_dataset(&g, &w5_name(i)))
        .collect::<BenchResult<Vec<Id>>>()?;
    let opened = p.stop();
    let vals = handles
        .iter()
        .map(|d| read_all::<i64>(d, i64le, 1).map(|v| v[0]))
        .collect::<BenchResult<Vec<i64>>>()?;
    drop(handles);
    drop(g);
    drop(file);

    let p = Probe::start();
    let mut names: Vec<String> = Vec::new();
    {
        let file = open_file(path, None, None)?;
        let n = cname("g");
        // SAFETY: a valid file and a NUL-terminated name.
        let g = Id::new(
            unsafe { H5Gopen2(file.id, n.as_ptr(), H5P_DEFAULT) },
            H5Gclose,
            "H5Gopen2",
        )?;
        let mut idx: hsize_t = 0;
        // SAFETY: the callback receives `names` as its data, alive for the whole call.
        ok(
            unsafe {
                H5Literate2(
                    g.id,
                    H5_index_t::H5_INDEX_NAME,
                    H5_iter_order_t::H5_ITER_INC,
                    &mut idx,
                    Some(collect_name),
                    (&raw mut names).cast(),
                )
            },
            "H5Literate2",
        )?;
    }
    let listed = p.stop();
    w5_out(
        &names,
        members,
        "libhdf5",
        &vals,
        vec![create, opened, listed],
        path,
    )
}

#[cfg(test)]
mod tests {
    use super::super::h5side;
    use super::*;

    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("h5-bench-cside-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    }

    #[test]
    fn c_side_fields_read_back_and_h5_reads_its_files() {
        init();
        let d = dir("field");
        let side = 64;
        let values = super::super::field::make(side, 0);
        let field = Field {
            checksum: checksum(values.iter().map(|x| x.bits())),
            values,
            side,
        };
        for kind in [
            FieldKind::Contiguous,
            FieldKind::Chunked,
            FieldKind::Deflate,
        ] {
            let path = d.join(format!("{}.h5", kind.py_name()));
            let out =
                field_write_read(&path, kind, &field, 16, FormatBounds::V18, false).expect("C run");
            let RunOut::Done { checksum, .. } = out else {
                panic!("C side not available")
            };
            assert_eq!(checksum, field.checksum, "{kind:?}");
            assert_eq!(h5side::check_field(&path, &field), Ok(field.checksum));
        }
        std::fs::remove_dir_all(d).ok();
    }

    #[test]
    fn c_side_appends_and_groups_match_the_expected_checksums() {
        init();
        let d = dir("w45");
        let s = AppendSizes {
            n: 5,
            rounds: 3,
            per: 7,
        };
        let path = d.join("w4.h5");
        let out = w4(&path, s, FormatBounds::V18, true).expect("C W4");
        let RunOut::Done { checksum, .. } = out else {
            panic!("C side not available")
        };
        assert_eq!(checksum, h5side::w4_expected(s));
        assert_eq!(h5side::check_w4(&path, s), Ok(h5side::w4_expected(s)));
        let order = [3, 0, 4, 1, 2];
        let path = d.join("w5.h5");
        let out = w5(&path, 5, &order, FormatBounds::Earliest, false).expect("C W5");
        let RunOut::Done { checksum, .. } = out else {
            panic!("C side not available")
        };
        assert_eq!(checksum, h5side::w5_expected(&order));
        assert_eq!(h5side::check_w5(&path, &order), Ok(checksum));
        std::fs::remove_dir_all(d).ok();
    }
}
