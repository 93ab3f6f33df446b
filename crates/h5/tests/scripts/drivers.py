"""Files of several members, written by libhdf5 (through h5py) with its family, split and multi
drivers, then read back by libhdf5 through the same drivers; prints what it read as JSON, for
`tests/drivers.rs` to compare with h5's reading.

Usage: drivers.py DIR [reopen]. Writes, in DIR:
* fam_early%d.h5: family of 4 KiB members, earliest format (superblock 0, driver info block);
* fam_latest%d.h5: family of 4 KiB members, latest format (superblock 3, driver info message in
  the superblock extension);
* spl-m.h5 / spl-r.h5: split driver (metadata / raw data);
* mul-{s,b,r,g,l,o}.h5: multi driver, libhdf5's default map of six members (through the C API
  with ctypes: h5py has no binding for H5Pset_fapl_multi);
* cache_image.h5: one file whose metadata libhdf5 saved in a metadata cache image
  (H5Pset_mdc_image_config, through ctypes).
With `reopen`: opens cache_image.h5 for writing once (libhdf5 then writes its metadata back in
place and drops the image) and prints what it reads.
"""

import ctypes
import glob
import json
import os
import sys

import h5py
import numpy as np

D = sys.argv[1]


def contents(f):
    f["ints"] = np.arange(5000, dtype="<i4") * 7 - 300
    f.create_dataset(
        "chunked",
        data=np.sin(np.arange(10000, dtype="<f8")).reshape(200, 50),
        chunks=(16, 10),
        compression="gzip",
        shuffle=True,
    )
    g = f.create_group("g/h")
    g.attrs["note"] = "member files"
    g["big_endian"] = np.arange(300, dtype=">i2")
    g.attrs["scale"] = np.array([1.5, 2.5])


def read(f):
    return {
        "ints": f["ints"][()].tolist(),
        "chunked": f["chunked"][()].ravel().tolist(),
        "big_endian": f["g/h/big_endian"][()].tolist(),
        "note": f["g/h"].attrs["note"],
        "scale": f["g/h"].attrs["scale"].tolist(),
    }


def libhdf5():
    libdir = os.path.join(os.path.dirname(os.path.dirname(h5py.__file__)), "h5py.libs")
    found = glob.glob(os.path.join(libdir, "libhdf5-*.so*"))
    return ctypes.CDLL(found[0]) if found else ctypes.CDLL(h5py.h5.__file__)


def multi_fapl():
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    lib = libhdf5()
    lib.H5Pset_fapl_multi.argtypes = [
        ctypes.c_int64,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_bool,
    ]
    # NULL map, member lists, names and addresses: libhdf5's defaults (six members,
    # `%s-X.h5`).
    if lib.H5Pset_fapl_multi(fapl.id, None, None, None, None, True) < 0:
        raise SystemExit("H5Pset_fapl_multi failed")
    return fapl


class CacheImageConfig(ctypes.Structure):
    # H5AC_cache_image_config_t: version, generate_image, save_resize_status, entry_ageout.
    _fields_ = [
        ("version", ctypes.c_int),
        ("generate_image", ctypes.c_bool),
        ("save_resize_status", ctypes.c_bool),
        ("entry_ageout", ctypes.c_int),
    ]


if sys.argv[2:] == ["reopen"]:
    path = os.path.join(D, "cache_image.h5")
    with h5py.File(path, "r+") as f:
        pass
    with h5py.File(path, "r") as f:
        print(json.dumps({"cache_image": read(f)}))
    sys.exit(0)

out = {}
fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
fapl.set_libver_bounds(h5py.h5f.LIBVER_LATEST, h5py.h5f.LIBVER_LATEST)
config = CacheImageConfig(1, True, False, -1)
if libhdf5().H5Pset_mdc_image_config(ctypes.c_int64(fapl.id), ctypes.byref(config)) < 0:
    raise SystemExit("H5Pset_mdc_image_config failed")
path = os.path.join(D, "cache_image.h5").encode()
with h5py.File(h5py.h5f.create(path, h5py.h5f.ACC_TRUNC, fapl=fapl)) as f:
    contents(f)
with h5py.File(path, "r") as f:
    out["cache_image"] = read(f)

for name, libver in (("fam_early", "earliest"), ("fam_latest", "latest")):
    pattern = os.path.join(D, name + "%d.h5")
    with h5py.File(pattern, "w", driver="family", memb_size=4096, libver=libver) as f:
        contents(f)
    with h5py.File(pattern, "r", driver="family", memb_size=4096) as f:
        out[name] = read(f)
    out[name]["members"] = len(glob.glob(os.path.join(D, name + "*.h5")))

base = os.path.join(D, "spl")
with h5py.File(base, "w", driver="split") as f:
    contents(f)
with h5py.File(base, "r", driver="split") as f:
    out["spl"] = read(f)

base = os.path.join(D, "mul").encode()
fid = h5py.h5f.create(base, h5py.h5f.ACC_TRUNC, fapl=multi_fapl())
with h5py.File(fid) as f:
    contents(f)
with h5py.File(h5py.h5f.open(base, h5py.h5f.ACC_RDONLY, fapl=multi_fapl())) as f:
    out["mul"] = read(f)

print(json.dumps(out))
