# A dataset of 1,000,000 chunks with two unlimited dimensions, written by libhdf5 (h5py,
# libver="latest": a version 2 B-tree chunk index), for crates/h5/tests/incremental_metadata.rs.
# Element (i, j) holds (1000 * i + j) % 251.
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w", libver="latest") as f:
    d = f.create_dataset("m", shape=(1000, 1000), maxshape=(None, None), chunks=(1, 1), dtype="u1")
    d[...] = (np.arange(1_000_000) % 251).astype("u1").reshape(1000, 1000)
