"""Generates the chunk-index and dense-group fixtures used by tests/index_structures.rs.

Run with the h5py venv (h5py 3.12.1, HDF5 1.14.4):
    ../../../../.venv/bin/python gen_index_fixtures.py   (the repository's .venv, from this directory)
Each .h5 file gets a .txt manifest beside it: for every dataset, its name and one line per
allocated chunk "scaled offsets (comma separated) address size filter_mask", from
dset.id.get_chunk_info(i) (the header line also gives the shape, chunk shape and
element size); for every group, its link names in creation order; for every object with more
than 8 attributes, their names in creation order.
"""
import h5py
import numpy as np


def manifest(f, out):
    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            d = obj.id
            n = d.get_num_chunks()
            chunk = obj.chunks
            shape = ",".join(map(str, obj.shape))
            out.write(f"dataset {name} {n} {shape} {','.join(map(str, chunk))} {obj.dtype.itemsize}\n")
            for i in range(n):
                info = d.get_chunk_info(i)
                scaled = ",".join(str(o // c) for o, c in zip(info.chunk_offset, chunk))
                out.write(f"{scaled} {info.byte_offset} {info.size} {info.filter_mask}\n")
        elif isinstance(obj, h5py.Group):
            names = list(obj.keys())
            out.write(f"group {name} {len(names)}\n")
            for n in names:
                out.write(n + "\n")
        attrs = list(obj.attrs.keys())
        if len(attrs) > 8:
            out.write(f"attrs {name} {len(attrs)}\n")
            for n in attrs:
                out.write(n + "\n")
    f.visititems(visit)


def make(path, build):
    with h5py.File(path, "w", libver="latest") as f:
        build(f)
    with h5py.File(path, "r") as f, open(path[:-3] + ".txt", "w") as out:
        manifest(f, out)


def earray(f):
    # One unlimited dim: extensible array. Sparse writes reach super block 13, whose 2048-element
    # data blocks are paged (1024 elements a page); a dense run covers the index block's own
    # elements, its data blocks and the first super blocks.
    d = f.create_dataset("sparse", shape=(150000,), maxshape=(None,), chunks=(1,), dtype="u1")
    for i in [0, 3, 4, 20, 100, 1000, 5000, 60000, 131059, 131060, 140000, 141000, 149999]:
        d[i] = 1 + i % 250
    d = f.create_dataset("dense", shape=(300,), maxshape=(None,), chunks=(1,), dtype="u1")
    d[:] = np.arange(300) % 251
    d = f.create_dataset("filtered", shape=(400,), maxshape=(None,), chunks=(4,), dtype="u1",
                         compression="gzip")
    d[:] = np.arange(400) % 7


def farray(f):
    # Fixed dims: fixed array; 3000 and 1100 chunks page at 1024 elements a page.
    d = f.create_dataset("paged", shape=(3000,), chunks=(1,), dtype="u1")
    for i in range(0, 3000, 7):
        d[i] = 1 + i % 250
    d = f.create_dataset("small", shape=(10, 10), chunks=(5, 5), dtype="u1")
    d[:] = 1
    d = f.create_dataset("filtered", shape=(1100,), chunks=(1,), dtype="u1", compression="gzip")
    d[::3] = 5


def btree2(f):
    # Two unlimited dims: v2 B-tree, types 10 and 11.
    d = f.create_dataset("plain", shape=(12, 12), maxshape=(None, None), chunks=(1, 1), dtype="u1")
    d[:] = 1
    d = f.create_dataset("filtered", shape=(6, 6), maxshape=(None, None), chunks=(2, 2),
                         dtype="u1", compression="gzip")
    d[:] = 3


def groups(f):
    # Dense link storage with creation order tracked: v2 B-trees of types 5 and 6. 1200 soft
    # links make both trees two levels deep (512-byte nodes).
    g = f.create_group("small", track_order=True)
    for i in range(20):
        g[f"link{i:02}"] = h5py.SoftLink("/nowhere")
    g = f.create_group("big", track_order=True)
    for i in range(1200):
        g[f"l{i}"] = h5py.SoftLink("/x")
    # Dense attribute storage with creation order tracked: v2 B-trees of types 8 and 9.
    g = f.create_group("attrs", track_order=True)
    for i in range(30):
        g.attrs[f"attr{i}"] = i
    # Too big for the attribute heap's managed blocks: a huge object, tracked by a v2 B-tree of
    # type 1 (8-byte heap IDs cannot hold an address and a length, so access is indirect).
    g.attrs["huge"] = np.arange(3000, dtype="u4")


make("earray.h5", earray)
make("farray.h5", farray)
make("btree2.h5", btree2)
make("groups.h5", groups)
