#!/usr/bin/env python3
"""Compares a copy of an HDF5 file with its source, reading both with h5py (libhdf5).

    h5_compare.py SRC DST OPTIONS.json

OPTIONS (JSON object, every key optional):
  "skip": [path...]     paths (links, or "path@attr" for attributes) expected absent from DST
  "storage": bool       also check that every chunked source dataset keeps its chunk shape and
                        raw filter pipeline, and that unchunked ones stay unchunked unless they
                        can grow (default true); false for repacked copies
  "shared": bool        check that links sharing an object in SRC share one in DST (default true)

With "storage", datasets the source never wrote (storage size 0) must stay unallocated in the
copy, and a chunked dataset copied with its chunk shape must allocate as many chunks as the
source.

Walks SRC from the root: every link must exist in DST with the same kind (hard, soft with the
same target, external), every object the same kind; datasets the same datatype (H5Tequal),
shape, maximum shape, fill value and values; committed datatypes the same type (H5Tequal);
objects the same attribute names, datatypes,
shapes and values. Object references compare by the path of what they refer to, region
references by that path and the selection; HDF5 1.12 revised references, which h5py cannot read,
through libhdf5's C API (refs.py) by what they resolve to. Prints one
line per difference and exits 1 if there is any, 0 otherwise.
"""

import json
import os
import sys

import h5py
import hdf5plugin  # noqa: F401  (plugin filters)
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import refs  # noqa: E402  (the C API for revised references)

_lib = []


def revised(obj_id, is_attr, shape):
    """What the revised references of a dataset or attribute resolve to."""
    if not _lib:
        _lib.append(refs.libhdf5())
    return refs.revised(_lib[0], obj_id, is_attr, int(np.prod(shape or (1,))))


def norm(v, f):
    """A comparable form of a value read by h5py from file f."""
    if isinstance(v, h5py.RegionReference):
        if not v:
            return ("regionref", None)
        ds = f[v]
        sel = h5py.h5r.get_region(v, ds.id)
        kind = sel.get_select_type()
        if kind == h5py.h5s.SEL_HYPERSLABS:
            what = sel.get_select_hyper_blocklist().tolist()
        elif kind == h5py.h5s.SEL_POINTS:
            what = sel.get_select_elem_pointlist().tolist()
        else:
            what = kind
        return ("regionref", ds.name, kind, what)
    if isinstance(v, h5py.Reference):
        return ("ref", f[v].name if v else None)
    if isinstance(v, np.ndarray):
        if v.dtype.hasobject:
            return ("arr", v.shape, [norm(x, f) for x in v.ravel()])
        return ("arr", v.dtype.str, v.shape, np.ascontiguousarray(v).tobytes())
    if isinstance(v, np.void):
        if v.dtype.hasobject:
            return ("rec", [norm(v[n], f) for n in v.dtype.names])
        return ("rec", bytes(v.tobytes()))
    if isinstance(v, np.generic):
        return ("num", v.dtype.str, v.tobytes())
    if isinstance(v, (list, tuple)):
        return ("seq", [norm(x, f) for x in v])
    return v


def dcpl_filters(ds):
    p = ds.id.get_create_plist()
    out = []
    for i in range(p.get_nfilters()):
        code, flags, values, _name = p.get_filter(i)
        out.append((code, flags, tuple(values)))
    return out


def main():
    src_path, dst_path, opts = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    skip = set(opts.get("skip", []))
    storage = opts.get("storage", True)
    problems = []
    first_path = {}  # source object address -> first path seen
    pairs = []  # (path, src addr, dst addr)

    def bad(msg):
        problems.append(msg)

    with h5py.File(src_path, "r") as s, h5py.File(dst_path, "r") as d:

        def attrs(path, so, do):
            names = set(so.attrs.keys())
            dnames = set(do.attrs.keys())
            want = {n for n in names if f"{path}@{n}" not in skip}
            if want != dnames:
                bad(f"{path}: attributes {sorted(want)} in the source, {sorted(dnames)} in the copy")
            for n in sorted(want & dnames):
                sa = h5py.h5a.open(so.id, n.encode())
                da = h5py.h5a.open(do.id, n.encode())
                if sa.get_type() != da.get_type():
                    bad(f"{path}@{n}: datatype differs")
                if sa.shape != da.shape:
                    bad(f"{path}@{n}: shape {sa.shape} vs {da.shape}")
                if refs.is_revised(sa.get_type()):
                    if revised(sa, True, sa.shape) != revised(da, True, da.shape):
                        bad(f"{path}@{n}: revised references differ")
                    continue
                try:
                    sv, dv = so.attrs[n], do.attrs[n]
                except Exception as e:  # noqa: BLE001
                    bad(f"{path}@{n}: cannot read: {e}")
                    continue
                if norm(sv, s) != norm(dv, d):
                    bad(f"{path}@{n}: value {sv!r} vs {dv!r}")

        def dataset(path, so, do):
            # h5py has no numpy type for revised references (nor reads their fill value).
            rev = refs.is_revised(so.id.get_type())
            if so.id.get_type() != do.id.get_type():
                bad(f"{path}: datatype differs" if rev else f"{path}: datatype {so.dtype} vs {do.dtype}")
            if so.shape != do.shape:
                bad(f"{path}: shape {so.shape} vs {do.shape}")
            if so.maxshape != do.maxshape:
                bad(f"{path}: maxshape {so.maxshape} vs {do.maxshape}")
            if not rev and norm(so.fillvalue, s) != norm(do.fillvalue, d):
                bad(f"{path}: fill value {so.fillvalue!r} vs {do.fillvalue!r}")
            if storage:
                grows = so.maxshape != so.shape
                if so.chunks is not None or grows:
                    if so.chunks is not None and so.chunks != do.chunks:
                        bad(f"{path}: chunks {so.chunks} vs {do.chunks}")
                    if dcpl_filters(so) != dcpl_filters(do):
                        bad(f"{path}: filters {dcpl_filters(so)} vs {dcpl_filters(do)}")
                elif do.chunks is not None:
                    bad(f"{path}: chunked {do.chunks} in the copy, not in the source")
                stored_elsewhere = so.is_virtual or so.external is not None
                if not stored_elsewhere and so.id.get_storage_size() == 0 and do.id.get_storage_size() != 0:
                    bad(f"{path}: never written, {do.id.get_storage_size()} bytes allocated in the copy")
                if so.chunks is not None and so.chunks == do.chunks:
                    sn, dn = so.id.get_num_chunks(), do.id.get_num_chunks()
                    if sn != dn:
                        bad(f"{path}: {sn} chunks allocated in the source, {dn} in the copy")
            if rev:
                if revised(so.id, False, so.shape) != revised(do.id, False, do.shape):
                    bad(f"{path}: revised references differ")
                return
            try:
                sv = so[()]
            except Exception as e:  # noqa: BLE001
                bad(f"{path}: source unreadable: {e}")
                return
            try:
                dv = do[()]
            except Exception as e:  # noqa: BLE001
                bad(f"{path}: copy unreadable: {e}")
                return
            if norm(sv, s) != norm(dv, d):
                bad(f"{path}: values differ")

        def group(path, sg, dg):
            attrs(path, sg, dg)
            for name in sg:
                cpath = path.rstrip("/") + "/" + name
                link = sg.get(name, getlink=True)
                if cpath in skip:
                    if name in dg:
                        bad(f"{cpath}: expected to be skipped, present in the copy")
                    continue
                if name not in dg and dg.get(name, getlink=True) is None:
                    bad(f"{cpath}: missing in the copy")
                    continue
                dlink = dg.get(name, getlink=True)
                if type(link) is not type(dlink):
                    bad(f"{cpath}: {type(link).__name__} vs {type(dlink).__name__}")
                    continue
                if isinstance(link, h5py.SoftLink):
                    if link.path != dlink.path:
                        bad(f"{cpath}: soft link to {link.path} vs {dlink.path}")
                    continue
                if isinstance(link, h5py.ExternalLink):
                    if (link.filename, link.path) != (dlink.filename, dlink.path):
                        bad(f"{cpath}: external link differs")
                    continue
                so, do = sg[name], dg[name]
                saddr = h5py.h5o.get_info(so.id).addr
                daddr = h5py.h5o.get_info(do.id).addr
                pairs.append((cpath, saddr, daddr))
                if type(so) is not type(do):
                    bad(f"{cpath}: {type(so).__name__} vs {type(do).__name__}")
                    continue
                if saddr in first_path:
                    continue
                first_path[saddr] = cpath
                if isinstance(so, h5py.Group):
                    group(cpath, so, do)
                elif isinstance(so, h5py.Dataset):
                    attrs(cpath, so, do)
                    dataset(cpath, so, do)
                elif isinstance(so, h5py.Datatype):
                    attrs(cpath, so, do)
                    if not so.id.equal(do.id):
                        bad(f"{cpath}: committed datatype {so.dtype} vs {do.dtype}")

        group("/", s, d)
        if opts.get("shared", True):
            by_src = {}
            for path, sa, da in pairs:
                by_src.setdefault(sa, set()).add((da, path))
            for sa, ds in by_src.items():
                if len({x for x, _ in ds}) != 1:
                    bad(f"links {sorted(p for _, p in ds)} share one object in the source, not in the copy")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
