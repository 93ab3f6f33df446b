"""Generates the small HDF5 files the heap / symbol-node / v1 B-tree tests of h5-format read.

Run with h5py 3.12.1 (HDF5 1.14.4):  python make_heap_fixtures.py  (writes into this folder).
The tests locate structures by following the format from the superblock or by their
signatures, so the exact addresses do not matter; the contents below do.
"""
import h5py
import numpy as np

# Local heap, symbol table nodes and a group B-tree (v1): an 'earliest' file whose group "g"
# has 20 members: 16 soft links ("soft_00".."soft_15" -> "/target_NN") and 4 subgroups
# ("sub_0".."sub_3").
with h5py.File("earliest_group.h5", "w", libver="earliest") as f:
    g = f.create_group("g")
    for i in range(16):
        g[f"soft_{i:02d}"] = h5py.SoftLink(f"/target_{i:02d}")
    for i in range(4):
        g.create_group(f"sub_{i}")

# Chunk B-tree (v1, node type 1): 40x40 int32 in 4x4 chunks (100 chunks, so the tree has two
# levels with K = 32); element (r, c) = r * 40 + c.
with h5py.File("earliest_chunked.h5", "w", libver="earliest") as f:
    f.create_dataset("c", data=np.arange(1600, dtype="<i4").reshape(40, 40), chunks=(4, 4))

# Global heap: variable-length strings "vlen_0".."vlen_9" ("vlen_" + str(i) * (i + 1) to vary sizes).
with h5py.File("earliest_vlen.h5", "w", libver="earliest") as f:
    dt = h5py.string_dtype("utf-8")
    f.create_dataset("s", data=[f"vlen_{str(i) * (i + 1)}" for i in range(10)], dtype=dt)

# Fractal heap (+ v2 B-tree of names): a 'latest' group with 100 hard links "link_000".."link_099"
# all pointing to the root group.
with h5py.File("latest_links.h5", "w", libver="latest") as f:
    g = f.create_group("g")
    for i in range(100):
        g[f"link_{i:03d}"] = f

# Fractal heap with a huge object: dense attribute storage ('latest', 10 attributes "a0".."a9"
# of 4 int32 each plus "big", 2000 int32 = 8000 bytes, above the heap's 4096-byte managed
# object limit) -> 8-byte heap IDs, so the huge object is found through a v2 B-tree key.
with h5py.File("latest_dense_attrs.h5", "w", libver="latest") as f:
    g = f.create_group("g")
    for i in range(10):
        g.attrs[f"a{i}"] = np.full(4, i, dtype="<i4")
    g.attrs["big"] = np.arange(2000, dtype="<i4")
