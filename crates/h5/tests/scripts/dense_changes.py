# Dense storage changed many times, for crates/h5/tests/incremental_metadata.rs.
#   make PATH:   a latest-format file: group /g with 40 soft links (dense), group /a with 30
#                int32 attributes (dense).
#   change PATH N [FIRST]: the same N changes the test makes with h5, in one session, numbered
#                from FIRST (0 by default): change i is, by
#                i % 6, add link "n{i}", remove the first link (name order), rename the first
#                link to "r{i}", add attribute "x{i}" = i, delete the first attribute, rename
#                the first attribute to "y{i}".
import sys
import h5py
import numpy as np

mode, path = sys.argv[1], sys.argv[2]
if mode == "make":
    with h5py.File(path, "w", libver="latest") as f:
        g = f.create_group("g")
        for i in range(40):
            g[f"l{i:03}"] = h5py.SoftLink("/a")
        a = f.create_group("a")
        for i in range(30):
            a.attrs[f"b{i:03}"] = np.int32(i)
elif mode == "change":
    n = int(sys.argv[3])
    first = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    with h5py.File(path, "r+") as f:
        g, a = f["g"], f["a"]
        for i in range(first, first + n):
            k = i % 6
            if k == 0:
                g[f"n{i}"] = h5py.SoftLink("/a")
            elif k == 1:
                del g[sorted(g.keys())[0]]
            elif k == 2:
                g.move(sorted(g.keys())[0], f"r{i}")
            elif k == 3:
                a.attrs[f"x{i}"] = np.int32(i)
            elif k == 4:
                del a.attrs[sorted(a.attrs.keys())[0]]
            else:
                old = sorted(a.attrs.keys())[0]
                h5py.h5a.rename(a.id, old.encode(), f"y{i}".encode())
