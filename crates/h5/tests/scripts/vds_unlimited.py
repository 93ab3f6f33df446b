"""Virtual datasets with unlimited mappings, written and read by libhdf5 (h5py) for
tests/vds_unlimited.rs.

Usage: python vds_unlimited.py DIR PHASE, PHASE one of
  make  writes the sources and DIR/vds_unlim.h5;
  grow  appends rows to src0.h5 and src2.h5 and adds the printf source p-3.h5;
  gap   removes the printf source p-1.h5.
Then prints, as JSON, what libhdf5 reads of each virtual dataset: {name: {shape, values}}.

  shapes  writes DIR/vds_shapes.h5: virtual datasets larger than one of h5's virtual chunks,
          mapped from hyperslabs of several shapes, and one of 100000 x 100000 elements; prints
          {name: {shape, sha256 of the whole (omitted for the large one), slices: [{sel,
          sha256}]}}, sel as [[start, stop, step], ...] per dimension.
"""
import hashlib
import json
import os
import sys

import h5py
import numpy as np
from h5py import h5d, h5p, h5s, h5t

U = h5s.UNLIMITED
NAMES = ("concat", "interleave", "strided_blocks", "printf", "printf_local", "printf_many")


def source(path, rows, base):
    with h5py.File(path, "w") as f:
        data = np.arange(rows * 4, dtype="<i4").reshape(-1, 4) + base
        f.create_dataset("data", data=data, maxshape=(None, 4), chunks=(2, 4))


def grow(path, rows):
    with h5py.File(path, "a") as f:
        d = f["data"]
        old = d.shape[0]
        d.resize((rows, 4))
        d[old:] = np.arange(old * 4, rows * 4, dtype="<i4").reshape(-1, 4) + 50


def virtual(f, name, mappings):
    """Each mapping: (file, dataset, virtual (start, count, stride, block),
    source selection as such a tuple or None for all, source shape or None for (0, 4) growing)."""
    dcpl = h5p.create(h5p.DATASET_CREATE)
    dcpl.set_fill_value(np.array([-1], dtype="<i4"))
    for file, dset, vsel, ssel, sshape in mappings:
        vspace = h5s.create_simple((0, 4), (U, 4))
        vspace.select_hyperslab(*vsel)
        sspace = h5s.create_simple((0, 4), (U, 4)) if sshape is None else h5s.create_simple(sshape)
        if ssel is None:
            sspace.select_all()
        else:
            sspace.select_hyperslab(*ssel)
        dcpl.set_virtual(vspace, file.encode(), dset.encode(), sspace)
    h5d.create(f.id, name.encode(), h5t.STD_I32LE, h5s.create_simple((0, 4), (U, 4)), dcpl=dcpl)


def make(d):
    for i, rows in enumerate((3, 5, 2)):
        source(os.path.join(d, f"src{i}.h5"), rows, 100 * i)
    for i in range(3):
        source(os.path.join(d, f"p-{i}.h5"), 2, 1000 * (i + 1))
    whole = ((0, 0), (1, 1), (1, 1), (U, 4))
    with h5py.File(os.path.join(d, "vds_unlim.h5"), "w", libver="latest") as f:
        # One source, concatenated: an unlimited block on both sides.
        virtual(f, "concat", [("src0.h5", "data", whole, whole, None)])
        # Three sources interleaved row by row: an unlimited count with stride 3.
        virtual(f, "interleave",
                [(f"src{i}.h5", "data", ((i, 0), (U, 1), (3, 1), (1, 4)), whole, None) for i in range(3)])
        # Blocks of two rows every three rows: the last block may be cut.
        virtual(f, "strided_blocks", [("src1.h5", "data", ((1, 0), (U, 1), (3, 1), (2, 4)), whole, None)])
        # printf-style file names p-0.h5, p-1.h5, ..., two rows each.
        virtual(f, "printf", [("p-%b.h5", "data", ((0, 0), (U, 1), (2, 1), (2, 4)), None, (2, 4))])
        # printf-style dataset names in this same file.
        for j in range(2):
            f.create_dataset(f"part{j}", data=np.full((1, 4), 7 + j, dtype="<i4"))
        virtual(f, "printf_local", [(".", "part%b", ((0, 0), (U, 1), (1, 1), (1, 4)), None, (1, 4))])
        # More printf sources than h5 keeps open at once (64).
        virtual(f, "printf_many", [("m-%b.h5", "data", ((0, 0), (U, 1), (1, 1), (1, 4)), None, (1, 4))])
    for i in range(150):
        source(os.path.join(d, f"m-{i}.h5"), 1, 10 * i)


def mapping(dcpl, vshape, vsel, file, dset, sshape, ssel):
    """vsel, ssel: (start, count, stride, block) or None for all."""
    vspace = h5s.create_simple(vshape)
    if vsel is not None:
        vspace.select_hyperslab(*vsel)
    sspace = h5s.create_simple(sshape)
    if ssel is not None:
        sspace.select_hyperslab(*ssel)
    dcpl.set_virtual(vspace, file.encode(), dset.encode(), sspace)


def shapes(d):
    rng = np.random.default_rng(7)
    def src(name, shape):
        with h5py.File(os.path.join(d, name), "w") as f:
            f.create_dataset("data", data=rng.integers(-2**31, 2**31, size=shape, dtype="<i4"), chunks=True)
    src("a.h5", (1000, 700))
    src("b.h5", (500, 350))
    src("c.h5", (10, 10, 10))
    src("e.h5", (600, 600))
    src("g.h5", (4, 600, 600))
    with h5py.File(os.path.join(d, "vds_shapes.h5"), "w", libver="latest") as f:
        f.create_dataset("local", data=np.arange(2000, dtype="<i4") * 3)
        dcpl = h5p.create(h5p.DATASET_CREATE)
        dcpl.set_fill_value(np.array([-7], dtype="<i4"))
        grid = (3000, 700)
        mapping(dcpl, grid, ((0, 0), (1, 1), None, (1000, 700)), "a.h5", "data", (1000, 700), None)
        mapping(dcpl, grid, ((1000, 0), (250, 175), (1, 2), (1, 1)), "b.h5", "data", (500, 350),
                ((0, 0), (250, 175), (2, 2), (1, 1)))
        mapping(dcpl, grid, ((1300, 5), (1, 1), None, (10, 100)), "c.h5", "data", (10, 10, 10), None)
        # Across h5's chunk boundary at row 1496 (374 rows of 700 per chunk), rows of 40 from
        # planes of 100: the pieces of the two sides do not line up.
        mapping(dcpl, grid, ((1480, 200), (1, 1), None, (25, 40)), "c.h5", "data", (10, 10, 10), None)
        mapping(dcpl, grid, ((2000, 3), (100, 20), (3, 7), (1, 1)), ".", "local", (2000,), None)
        mapping(dcpl, grid, ((2400, 1), (4, 3), (50, 200), (20, 150)), "a.h5", "data", (1000, 700),
                ((5, 5), (1, 1), None, (240, 150)))
        # An irregular virtual selection (two overlapping boxes, across h5's chunk boundary at
        # row 2618) from a 1-D source: h5 lists its elements.
        vspace = h5s.create_simple(grid)
        vspace.select_hyperslab((2600, 0), (1, 1), block=(10, 10))
        vspace.select_hyperslab((2605, 5), (1, 1), block=(15, 15), op=h5s.SELECT_OR)
        n = vspace.get_select_npoints()
        with h5py.File(os.path.join(d, "irr.h5"), "w") as g:
            g.create_dataset("data", data=np.arange(n, dtype="<i4") * 11 - 5)
        dcpl.set_virtual(vspace, b"irr.h5", b"data", h5s.create_simple((n,)))
        h5d.create(f.id, b"grid", h5t.STD_I32LE, h5s.create_simple(grid), dcpl=dcpl)
        dcpl = h5p.create(h5p.DATASET_CREATE)
        dcpl.set_fill_value(np.array([-7], dtype="<i4"))
        cube = (4, 600, 600)
        mapping(dcpl, cube, ((1, 0, 0), (1, 1, 1), None, (1, 600, 600)), "e.h5", "data", (600, 600), None)
        mapping(dcpl, cube, ((0, 300, 0), (2, 300, 600), (2, 1, 1), (1, 1, 1)), "g.h5", "data", (4, 600, 600),
                ((0, 0, 0), (4, 300, 300), (1, 1, 2), (1, 1, 1)))
        h5d.create(f.id, b"cube", h5t.STD_I32LE, h5s.create_simple(cube), dcpl=dcpl)
        dcpl = h5p.create(h5p.DATASET_CREATE)
        dcpl.set_fill_value(np.array([-7], dtype="<i4"))
        big = (100000, 100000)
        mapping(dcpl, big, ((5, 0), (1, 1), None, (1, 700)), "a.h5", "data", (1000, 700), ((3, 0), (1, 1), None, (1, 700)))
        mapping(dcpl, big, ((99990, 99000), (2, 1), (7, 1), (1, 500)), "c.h5", "data", (10, 10, 10), None)
        h5d.create(f.id, b"big", h5t.STD_I32LE, h5s.create_simple(big), dcpl=dcpl)
    # Sources of other types than their virtual datasets: libhdf5 converts them.
    with h5py.File(os.path.join(d, "types.h5"), "w") as f:
        f.create_dataset("i16", data=np.array([-300, -1, 0, 7, 32767, -32768], dtype="<i2"))
        f.create_dataset("f32", data=np.array([0.5, -2.25, 1e30, -0.0, 3.75, 65504], dtype="<f4"))
        f.create_dataset("u8", data=np.array([0, 1, 127, 128, 200, 255], dtype="u1"))
        f.create_dataset("i32", data=np.array([-200, -129, -128, 127, 128, 100000], dtype=">i4"))
        f.create_dataset("f64", data=np.array([-1e10, -128.9, -0.5, 0.99, 127.5, np.nan], dtype="<f8"))
    with h5py.File(os.path.join(d, "vds_shapes.h5"), "a") as f:
        for name, vtype, sources in (("widened", "<f8", ("i16", "f32", "u8", "i32")),
                                     ("narrowed", "i1", ("i16", "u8", "i32", "f64"))):
            layout = h5py.VirtualLayout(shape=(len(sources), 6), dtype=vtype)
            for k, src_name in enumerate(sources):
                layout[k] = h5py.VirtualSource("types.h5", src_name, shape=(6,))
            f.create_virtual_dataset(name, layout, fillvalue=0)
    out = {}
    with h5py.File(os.path.join(d, "vds_shapes.h5"), "r") as f:
        for name in ("widened", "narrowed"):
            v = f[name]
            out[name] = {"shape": list(v.shape), "values": [None if x != x else float(x) for x in v[...].ravel()]}
    slices = {
        "grid": [[[1234, 2500, 3], [100, 650, 7]], [[990, 1010, 1], [0, 700, 1]], [[2399, 2600, 1], [0, 700, 5]],
                 [[1490, 1500, 1], [190, 250, 1]], [[2595, 2625, 1], [0, 30, 1]]],
        "cube": [[[0, 4, 1], [290, 310, 1], [0, 600, 3]], [[1, 3, 1], [0, 600, 7], [599, 600, 1]]],
        # libhdf5 1.14.4 crashes or fails on wider reads of the far corner of "big".
        "big": [[[4, 7, 1], [0, 800, 1]], [[99996, 99998, 1], [98995, 99005, 1]],
                [[99990, 99991, 1], [99000, 99010, 1]]],
    }
    with h5py.File(os.path.join(d, "vds_shapes.h5"), "r") as f:
        for name, sels in slices.items():
            v = f[name]
            entry = {"shape": list(v.shape), "slices": []}
            if name != "big":
                entry["sha256"] = hashlib.sha256(v[...].astype("<i4").tobytes()).hexdigest()
            for sel in sels:
                part = v[tuple(slice(*s) for s in sel)]
                entry["slices"].append({"sel": sel, "sha256": hashlib.sha256(part.astype("<i4").tobytes()).hexdigest()})
            out[name] = entry
    print(json.dumps(out))


def main():
    d, phase = sys.argv[1], sys.argv[2]
    if phase == "shapes":
        shapes(d)
        return
    if phase == "make":
        make(d)
    elif phase == "grow":
        grow(os.path.join(d, "src0.h5"), 5)
        grow(os.path.join(d, "src2.h5"), 6)
        source(os.path.join(d, "p-3.h5"), 2, 4000)
    elif phase == "gap":
        os.remove(os.path.join(d, "p-1.h5"))
    else:
        sys.exit(f"unknown phase {phase}")
    out = {}
    with h5py.File(os.path.join(d, "vds_unlim.h5"), "r") as f:
        for name in NAMES:
            v = f[name]
            out[name] = {"shape": list(v.shape), "values": v[...].ravel().tolist()}
    print(json.dumps(out))


main()
