#!/usr/bin/env python3
"""Describes every reference stored in an HDF5 file as libhdf5 resolves it, in the fixture
manifest's form (fixtures/README.md), so that files h5 writes (and copies it makes) can be
checked by libhdf5 itself.

    refs.py FILE        prints {"PATH" or "PATH@ATTRIBUTE": [description, ...], ...} as JSON

A description is null for a null reference, {"object": path} for an object reference,
{"region_of": path, "selection": "none"|"points"|"hyperslab"|"all", "npoints", "bounds_start",
"bounds_end", "values": [...]} for a region reference (values: the selected elements, flat, in
libhdf5's order; integers as numbers, floats as repr strings; absent for revised references)
and {"attribute": name, "of": path} for an attribute reference. HDF5 1.8 references are read
with h5py; HDF5 1.12 revised references (H5T_STD_REF), which h5py cannot read, through the C
API of h5py's own libhdf5 (ctypes). Only datasets and attributes whose type is a reference
(not references nested in compounds) are listed.
"""

import ctypes
import glob
import json
import os
import sys

import h5py
import numpy as np
from h5py import h5r, h5s, h5t

REF_BUF_SIZE = 64  # sizeof(H5R_ref_t)
SELECTIONS = {h5s.SEL_NONE: "none", h5s.SEL_POINTS: "points", h5s.SEL_HYPERSLABS: "hyperslab",
              h5s.SEL_ALL: "all"}


def libhdf5():
    """h5py's bundled libhdf5, with the return types of the calls used here."""
    libdir = os.path.join(os.path.dirname(os.path.dirname(h5py.__file__)), "h5py.libs")
    lib = ctypes.CDLL(glob.glob(os.path.join(libdir, "libhdf5-*.so*"))[0])
    lib.H5Ropen_region.restype = ctypes.c_int64
    lib.H5Sget_select_npoints.restype = ctypes.c_int64
    lib.H5Rget_obj_name.restype = ctypes.c_ssize_t
    lib.H5Rget_attr_name.restype = ctypes.c_ssize_t
    return lib


def number(x):
    if isinstance(x, (np.integer, int)):
        return int(x)
    return repr(float(x))


def region(space, name, values):
    n = int(space.get_select_npoints())
    lo, hi = space.get_select_bounds() if n else ((), ())
    d = {"region_of": name, "selection": SELECTIONS.get(space.get_select_type(), "?"), "npoints": n,
         "bounds_start": [int(x) for x in lo], "bounds_end": [int(x) for x in hi]}
    if values is not None:
        d["values"] = [number(x) for x in np.asarray(values).reshape(-1)]
    return d


def old_reference(v, f):
    if isinstance(v, h5r.RegionReference):
        if not v:
            return None
        ds = f[v]
        space = h5r.get_region(v, ds.id)
        values = ds[v] if space.get_select_npoints() else []
        return region(space, ds.name, values)
    return {"object": f[v].name} if v else None


def revised(lib, obj_id, is_attr, n):
    """The revised references of a dataset or attribute through the C API."""
    refs = (ctypes.c_ubyte * (REF_BUF_SIZE * max(n, 1)))()
    std_ref = ctypes.c_int64.in_dll(lib, "H5T_STD_REF_g")
    if is_attr:
        ok = lib.H5Aread(ctypes.c_int64(obj_id.id), std_ref, refs)
    else:
        zero = ctypes.c_int64(0)
        ok = lib.H5Dread(ctypes.c_int64(obj_id.id), std_ref, zero, zero, zero, refs)
    assert ok >= 0, "H5Aread/H5Dread of H5T_STD_REF failed"
    out = []
    for i in range(n):
        ref = ctypes.byref(refs, REF_BUF_SIZE * i)
        kind = lib.H5Rget_type(ref)
        name = ctypes.create_string_buffer(4096)
        if kind <= 0 or lib.H5Rget_obj_name(ref, ctypes.c_int64(0), name, ctypes.c_size_t(4096)) < 0:
            out.append(None)
            continue
        path = name.value.decode()
        if kind == 2:
            out.append({"object": path})
        elif kind == 4:
            attr = ctypes.create_string_buffer(4096)
            assert lib.H5Rget_attr_name(ref, attr, ctypes.c_size_t(4096)) >= 0
            out.append({"attribute": attr.value.decode(), "of": path})
        elif kind == 3:
            sid = lib.H5Ropen_region(ref, ctypes.c_int64(0), ctypes.c_int64(0))
            assert sid >= 0, "H5Ropen_region failed"
            out.append(region(h5s.SpaceID(sid), path, None))
        else:
            out.append({"unknown_kind": kind})
        lib.H5Rdestroy(ref)
    return out


def is_revised(t):
    return (t.get_class() == h5t.REFERENCE and not t.equal(h5t.STD_REF_OBJ)
            and not t.equal(h5t.STD_REF_DSETREG))


def describe(path):
    out = {}
    lib = None
    with h5py.File(path, "r") as f:
        def one(key, tid, read, obj_id, is_attr, shape):
            nonlocal lib
            if tid.get_class() != h5t.REFERENCE:
                return
            if is_revised(tid):
                lib = lib or libhdf5()
                out[key] = revised(lib, obj_id, is_attr, int(np.prod(shape or (1,))))
            else:
                out[key] = [old_reference(v, f) for v in np.asarray(read()).reshape(-1)]

        def visit(name, obj):
            p = "/" + name if name else "/"
            for a in obj.attrs:
                aid = h5py.h5a.open(obj.id, a.encode())
                one(f"{p}@{a}", aid.get_type(), lambda: obj.attrs[a], aid, True, aid.shape)
            if isinstance(obj, h5py.Dataset):
                one(p, obj.id.get_type(), lambda: obj[()], obj.id, False, obj.shape)

        visit("", f)
        f.visititems(visit)
    return out


if __name__ == "__main__":
    print(json.dumps(describe(sys.argv[1]), sort_keys=True))
