"""Chunked datasets whose partial edge chunks libhdf5 stores without the filters
(`H5Pset_chunk_opts(dcpl, H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS)`, through ctypes: h5py has no
binding, and its `create_dataset` would reset the option with `H5Pset_chunk`), for
`tests/edge_chunks.rs`.

Usage: edge_chunks.py write PATH | edge_chunks.py read PATH
* write: writes PATH (latest format: fixed array, extensible array and v2 B-tree chunk indexes),
  then reads it back like `read`;
* read: prints, as JSON, per dataset of the root group (written by either): its shape, its
  values (flattened, row-major), its chunk options (`H5Pget_chunk_opts`) and its stored chunks
  as libhdf5 lists them ([scaled offset, filter mask, stored size]).
"""

import ctypes
import glob
import json
import os
import sys

import h5py
import numpy as np

DONT_FILTER_PARTIAL_CHUNKS = 0x0002

# name: (values, chunk shape, maximum shape, filters)
DATASETS = {
    "fixed_gzip": (np.arange(72, dtype="<f4").reshape(12, 6) * 0.5, (5, 5), None, ("gzip",)),
    # Shuffle alone: an edge chunk wrongly unshuffled reads as other numbers, with no error.
    "fixed_shuffle": (np.arange(91, dtype="<i4").reshape(13, 7) * 1000 - 7, (4, 4), None,
                      ("shuffle",)),
    # Fletcher32: an edge chunk stored unfiltered carries no checksum.
    "fixed_fletcher": (np.arange(7, dtype="<i8") * 3, (3,), None, ("fletcher32",)),
    "earray": (np.arange(60, dtype="<f8").reshape(10, 6) / 4, (4, 4), (None, 6),
               ("shuffle", "gzip")),
    "bt2": ((np.arange(399, dtype="<i2") // 5).reshape(19, 21), (8, 8), (None, None), ("gzip",)),
}


def libhdf5():
    libdir = os.path.join(os.path.dirname(os.path.dirname(h5py.__file__)), "h5py.libs")
    found = glob.glob(os.path.join(libdir, "libhdf5-*.so*"))
    return ctypes.CDLL(found[0]) if found else ctypes.CDLL(h5py.h5.__file__)


def create(f, name, values, chunks, maxshape, filters):
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk(chunks)
    for flt in filters:
        if flt == "shuffle":
            dcpl.set_shuffle()
        elif flt == "gzip":
            dcpl.set_deflate(6)
        elif flt == "fletcher32":
            dcpl.set_fletcher32()
    if libhdf5().H5Pset_chunk_opts(ctypes.c_int64(dcpl.id),
                                   ctypes.c_uint(DONT_FILTER_PARTIAL_CHUNKS)) < 0:
        raise SystemExit("H5Pset_chunk_opts failed")
    maxshape = values.shape if maxshape is None else tuple(
        h5py.h5s.UNLIMITED if m is None else m for m in maxshape)
    space = h5py.h5s.create_simple(values.shape, maxshape)
    tid = h5py.h5t.py_create(values.dtype)
    d = h5py.h5d.create(f.id, name.encode(), tid, space, dcpl=dcpl)
    d.write(h5py.h5s.ALL, h5py.h5s.ALL, values)


def chunk_opts(d):
    opts = ctypes.c_uint(0)
    dcpl = d.id.get_create_plist()
    if libhdf5().H5Pget_chunk_opts(ctypes.c_int64(dcpl.id), ctypes.byref(opts)) < 0:
        raise SystemExit("H5Pget_chunk_opts failed")
    return opts.value


def describe(path):
    out = {}
    with h5py.File(path, "r") as f:
        for name in sorted(f):
            d = f[name]
            chunks = []
            for i in range(d.id.get_num_chunks()):
                c = d.id.get_chunk_info(i)
                scaled = [int(o // s) for o, s in zip(c.chunk_offset, d.chunks)]
                chunks.append([scaled, int(c.filter_mask), int(c.size)])
            out[name] = {
                "shape": list(d.shape),
                "values": d[()].ravel().tolist(),
                "chunk_opts": chunk_opts(d),
                "chunks": chunks,
            }
    return out


mode, path = sys.argv[1], sys.argv[2]
if mode == "write":
    fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
    fapl.set_libver_bounds(h5py.h5f.LIBVER_LATEST, h5py.h5f.LIBVER_LATEST)
    fid = h5py.h5f.create(path.encode(), h5py.h5f.ACC_TRUNC, fapl=fapl)
    with h5py.File(fid) as f:
        for name, (values, chunks, maxshape, filters) in DATASETS.items():
            create(f, name, values, chunks, maxshape, filters)
print(json.dumps(describe(path)))
