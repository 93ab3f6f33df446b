"""Generates the dense groups the fractal heap builder is compared with (tests/fractal_builder_vs_libhdf5.rs).

Run with h5py 3.12.1 (HDF5 1.14.4):  python make_fractal_builder_fixtures.py [N_LINKS] [OUT_DIR]
(defaults: 300 links, this folder). The test rebuilds each heap from the objects libhdf5 stored,
inserted in creation order, and compares blocks and counters.

- fheap_links.h5: group "g" with N hard links to the root group, inserted in order, named
  "l00000_" + "x" * (i * 37 % 200) (link messages of 19 to 218 bytes).
- fheap_attrs.h5: group "g" with 60 attributes "a00".."a59", 1-D uint8 arrays of
  (i * 53 % 300) + 1 elements, except a29 (2000 elements) and a41 (3500 elements), which do
  not fit the blocks at the heap's allocation iterator, so libhdf5 skips blocks for them.
"""
import sys
import h5py
import numpy as np

n_links = int(sys.argv[1]) if len(sys.argv) > 1 else 300
out = sys.argv[2] if len(sys.argv) > 2 else "."

with h5py.File(f"{out}/fheap_links.h5", "w", libver="latest") as f:
    g = f.create_group("g")
    for i in range(n_links):
        g[f"l{i:05d}_" + "x" * (i * 37 % 200)] = f

with h5py.File(f"{out}/fheap_attrs.h5", "w", libver="latest") as f:
    g = f.create_group("g")
    for i in range(60):
        n = {29: 2000, 41: 3500}.get(i, (i * 53 % 300) + 1)
        g.attrs.create(f"a{i:02d}", data=np.full(n, i, dtype=np.uint8))
