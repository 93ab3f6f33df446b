"""The crash-test workload's values and checker, for h5py (mirrors src/lib.rs)."""

import numpy as np

RAW, ZIP, GRID, GROUPS, GRID_COLS = "raw", "zip", "grid", "g", 3


def raw_values(n0, n1):
    return np.arange(n0, n1, dtype=np.int64) * 7 + 1


def zip_values(n0, n1):
    i = np.arange(n0, n1, dtype=np.uint64)
    return ((i * i) % np.uint64(1_000_003)).astype(np.int64)


def grid_values(n0, n1):
    i = np.arange(n0, n1, dtype=np.float64)[:, None]
    j = np.arange(GRID_COLS, dtype=np.float64)[None, :] * 0.25
    return i + j


def group_name(k):
    return "g%06d" % k


def verify(f, at_least):
    """Returns ("ok", counts) or ("wrong", message); raises on read errors."""
    counts = []
    for name, values in ((RAW, raw_values), (ZIP, zip_values)):
        v = f[name][()]
        if not np.array_equal(v, values(0, len(v))):
            bad = int(np.nonzero(v != values(0, len(v)))[0][0])
            return "wrong", "%s[%d] = %d" % (name, bad, v[bad])
        counts.append(len(v))
    g = f[GRID][()]
    if g.shape[1:] != (GRID_COLS,) or not np.array_equal(g, grid_values(0, len(g))):
        return "wrong", "grid values"
    counts.append(len(g))
    names = sorted(f[GROUPS].keys())
    for k, name in enumerate(names):
        if name != group_name(k) or int(f[GROUPS][name].attrs["i"]) != k:
            return "wrong", "group %d: %s" % (k, name)
    counts.append(len(names))
    if any(c < a for c, a in zip(counts, at_least)):
        return "wrong", "holds %s, the last completed flush wrote %s" % (counts, at_least)
    return "ok", counts
