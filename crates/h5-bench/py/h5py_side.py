"""The h5py side of `h5-bench read`.

One long-lived process: it reads one JSON command per line on stdin and answers one JSON line on
stdout, so interpreter start-up and imports are never timed. Timings use time.perf_counter()
around the h5py work only; checksums are computed afterwards, outside the timed region.

Commands (field "op"):
  versions                      -> h5py, HDF5, numpy, Python versions
  gen   dir, scale              -> writes the input files (fixed seeds) unless a manifest with
                                   the same scale and format version is already there
  full  file, dset              -> open the file, read the whole dataset, close
  slabs file, dset, size, starts-> open, read every size x size block at starts, close
  group file, group, order      -> open, list the group's names, open every dataset by name in
                                   the given order (indices into the listed names) and read its
                                   one element, close
  quit
"""

import json
import os
import sys
import time

try:
    import numpy as np
    import h5py
except ImportError as e:  # answered to the first command, so the Rust side reports it cleanly
    sys.stdout.write(json.dumps({"ok": False, "error": "h5py and numpy are needed but %s for %s"
                                 % (e, sys.executable)}) + "\n")
    sys.stdout.flush()
    sys.exit(3)

# The run's --no-thp: numpy asks for no transparent huge pages for its arrays either.
if os.environ.get("H5_BENCH_NO_THP") == "1":
    _ma = getattr(getattr(np, "_core", None), "multiarray", None) or np.core.multiarray
    _ma._set_madvise_hugepage(False)

FORMAT = 1
MOD = 1_000_003
BLOCK = 1 << 22


def checksum(a):
    """Position-weighted wrapping sum of the element bit patterns (u64 arithmetic).

    sum_i bits(a[i]) * (i mod 1000003 + 1) mod 2**64, over the C-order elements of `a`
    (4-byte elements are zero-extended to u64). The Rust side computes the same thing.
    """
    a = np.ascontiguousarray(a).reshape(-1)
    if a.dtype.itemsize == 4:
        bits = a.view(np.uint32)
    elif a.dtype.itemsize == 8:
        bits = a.view(np.uint64)
    else:
        raise ValueError("unsupported element size %d" % a.dtype.itemsize)
    total = 0
    for start in range(0, bits.size, BLOCK):
        blk = bits[start:start + BLOCK].astype(np.uint64)
        w = np.arange(start, start + blk.size, dtype=np.uint64) % np.uint64(MOD) + np.uint64(1)
        total = (total + int((blk * w).sum(dtype=np.uint64))) % (1 << 64)
    return total


def sizes(scale):
    """Workload sizes for a scale divisor of 1 (full) or 16 (quick)."""
    side = 4096 if scale == 1 else 4096 // 4
    return {
        "side": side,
        "chunk": 256,
        "slabs": 2000 // scale,
        "members": 20000 // scale,
        "contig_elems": (256 << 20) // 8 // scale,
    }


def gen(d, scale):
    os.makedirs(d, exist_ok=True)
    mpath = os.path.join(d, "manifest.json")
    if os.path.exists(mpath):
        with open(mpath) as fh:
            m = json.load(fh)
        if m.get("format") == FORMAT and m.get("scale") == scale:
            m["generated"] = False
            return m
    s = sizes(scale)
    n = s["side"]
    rng = np.random.default_rng(20240501)
    y, x = np.mgrid[0:n, 0:n].astype(np.float32)
    field = (100.0 * np.sin(x / 37.0) * np.cos(y / 53.0)).astype(np.float32)
    field += rng.normal(0.0, 1.0, size=(n, n)).astype(np.float32)
    field = field.astype(np.float32)
    chunked = os.path.join(d, "chunked.h5")
    with h5py.File(chunked, "w") as f:
        f.create_dataset("deflate", data=field, chunks=(s["chunk"], s["chunk"]),
                         shuffle=True, compression="gzip", compression_opts=4)
        f.create_dataset("plain", data=field, chunks=(s["chunk"], s["chunk"]))
    rng = np.random.default_rng(20240502)
    contig = rng.standard_normal(s["contig_elems"])
    cpath = os.path.join(d, "contig.h5")
    with h5py.File(cpath, "w") as f:
        f.create_dataset("data", data=contig)
    gpath = os.path.join(d, "group.h5")
    with h5py.File(gpath, "w") as f:
        g = f.create_group("g")
        for i in range(s["members"]):
            g.create_dataset("d%05d" % i, data=np.array([i * 7 + 3], dtype=np.int64))
    m = {
        "format": FORMAT,
        "scale": scale,
        "sizes": s,
        "files": {
            "chunked": chunked,
            "contig": cpath,
            "group": gpath,
        },
        "bytes": {k: os.path.getsize(p) for k, p in (("chunked", chunked), ("contig", cpath), ("group", gpath))},
        "checksums": {
            "field": checksum(field),
            "contig": checksum(contig),
        },
    }
    with open(mpath, "w") as fh:
        json.dump(m, fh, indent=1)
    m["generated"] = True
    return m


def op_full(c):
    t0 = time.perf_counter()
    with h5py.File(c["file"], "r") as f:
        a = f[c["dset"]][...]
    t = time.perf_counter() - t0
    return {"secs": t, "checksum": checksum(a), "shape": list(a.shape)}


def op_slabs(c):
    k = int(c["size"])
    starts = c["starts"]
    out = []
    t0 = time.perf_counter()
    with h5py.File(c["file"], "r") as f:
        ds = f[c["dset"]]
        for r, q in starts:
            out.append(ds[r:r + k, q:q + k])
    t = time.perf_counter() - t0
    cat = np.concatenate([b.reshape(-1) for b in out]) if out else np.zeros(0, np.float32)
    return {"secs": t, "checksum": checksum(cat), "count": len(out)}


def op_group(c):
    order = c["order"]
    vals = []
    t0 = time.perf_counter()
    with h5py.File(c["file"], "r") as f:
        g = f[c["group"]]
        names = list(g)
        for i in order:
            vals.append(g[names[i]][0])
    t = time.perf_counter() - t0
    if names != sorted(names):
        raise ValueError("h5py listed the names out of order")
    return {"secs": t, "checksum": checksum(np.array(vals, dtype=np.int64)), "members": len(names)}


def versions(_c):
    return {
        "h5py": h5py.version.version,
        "hdf5": h5py.version.hdf5_version,
        "numpy": np.__version__,
        "python": sys.version.split()[0],
    }


OPS = {
    "versions": versions,
    "gen": lambda c: gen(c["dir"], int(c["scale"])),
    "full": op_full,
    "slabs": op_slabs,
    "group": op_group,
}


def main(ops=None):
    """Answers the commands on stdin with `ops` (default: the read workloads' OPS)."""
    ops = OPS if ops is None else ops
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            c = json.loads(line)
            if c.get("op") == "quit":
                break
            r = ops[c["op"]](c)
            r["ok"] = True
        except Exception as e:  # reported to the Rust side, which stops
            r = {"ok": False, "error": "%s: %s" % (type(e).__name__, e)}
        sys.stdout.write(json.dumps(r) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
