"""The h5py side of `h5-bench` (the standard workloads W1-W6).

Same protocol as h5py_side.py (one JSON command per line on stdin, one JSON answer per line),
whose helpers it imports. Every timed phase is measured by a Probe: peak RSS is reset first
(writing 5 to /proc/self/clear_refs resets VmHWM), then time.perf_counter() runs around the h5py
work only; the answer gives the seconds and the peak RSS growth (VmHWM at the end minus VmRSS at
the start, bytes). Checks (checksums) are computed afterwards, outside the timed region.

Writers close the file; with "sync" (the run's --sync, where h5 opens with FileAccess::sync(true)
and fsyncs at close) they then fsync it inside the timed region ("fsync" is reported apart), so
that both systems do the same durable work.

All parameters (sizes, positions, orders, file format bounds) come from the Rust side, so both
systems do identical work; the data is the generator below, which the Rust side implements too
(the first command compares the two checksums).
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from h5py_side import checksum, h5py, main, np, versions  # noqa: E402

FIELD = None
FIELD_CS = None
ROWS = 256


def status_bytes(key):
    """A VmRSS / VmHWM figure of this process in bytes (None off Linux)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class Probe:
    """Resets the peak RSS, then starts the clock."""

    def __init__(self):
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
            self.base = status_bytes("VmRSS")
        except OSError:
            self.base = None
        self.t0 = time.perf_counter()

    def stop(self, fsync=0.0):
        t = time.perf_counter() - self.t0
        hwm = status_bytes("VmHWM")
        peak = None if self.base is None or hwm is None else max(hwm - self.base, 0)
        return {"secs": t, "peak": peak, "fsync": fsync}


def field_rows(side, salt, r0, r1):
    """Rows r0..r1 of the side x side float32 test field for `salt` (exact in float32).

    v(r, c) = ((r + 2c + salt) mod 1024) / 4 + noise / 1024, noise = bits 8..15 of
    h ^ (h >> 15), h = ((r * side + c + salt * 0x01000193) * 0x9E3779B1) mod 2**32.
    """
    r = np.arange(r0, r1, dtype=np.uint64)[:, None]
    c = np.arange(side, dtype=np.uint64)[None, :]
    h = ((r * np.uint64(side) + c + np.uint64(salt * 0x01000193)) * np.uint64(0x9E3779B1)) \
        & np.uint64(0xFFFFFFFF)
    h ^= h >> np.uint64(15)
    noise = ((h >> np.uint64(8)) & np.uint64(0xFF)).astype(np.float32)
    base = ((r + np.uint64(2) * c + np.uint64(salt)) % np.uint64(1024)).astype(np.float32)
    return base * np.float32(0.25) + noise * np.float32(1.0 / 1024.0)


def make_field(side, salt):
    out = np.empty((side, side), dtype=np.float32)
    for r0 in range(0, side, ROWS):
        r1 = min(side, r0 + ROWS)
        out[r0:r1] = field_rows(side, salt, r0, r1)
    return out


def op_field(c):
    """Generates the W1/W2 field (salt 0) and keeps it; answers its checksum."""
    global FIELD, FIELD_CS
    side = int(c["side"])
    if FIELD is None or FIELD.shape[0] != side:
        FIELD = None
        FIELD = make_field(side, 0)
        FIELD_CS = checksum(FIELD)
    return {"checksum": FIELD_CS}


def libver(c):
    v = c.get("libver", "earliest")
    return tuple(v) if isinstance(v, list) else v


def close_sync(f, path, sync):
    """Closes `f` and, when `sync`, fsyncs the file; returns the fsync's seconds."""
    f.close()
    if not sync:
        return 0.0
    t0 = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - t0


def field_check(a):
    """The checksum of an array read back that should equal the field (cheap when equal)."""
    if a.size == FIELD.size and np.array_equal(a.reshape(-1), FIELD.reshape(-1)):
        return FIELD_CS
    return checksum(a)


def read_data(path):
    with h5py.File(path, "r") as f:
        return f["data"][...]


def op_field_write_read(c):
    """W1 (contiguous 1-D) or W2 (chunked 2-D, optionally shuffle + deflate 1): write, read."""
    path = c["path"]
    kind = c["kind"]
    side = FIELD.shape[0]
    p = Probe()
    f = h5py.File(path, "w", libver=libver(c))
    if kind == "contig":
        f.create_dataset("data", data=FIELD.reshape(-1))
    else:
        k = int(c["chunk"])
        opts = {}
        if kind == "deflate":
            opts = {"shuffle": True, "compression": "gzip", "compression_opts": 1}
        ds = f.create_dataset("data", shape=(side, side), dtype=np.float32, chunks=(k, k), **opts)
        ds[...] = FIELD
    fs = close_sync(f, path, bool(c.get("sync")))
    w = p.stop(fs)
    p = Probe()
    with h5py.File(path, "r") as f:
        a = f["data"][...]
    r = p.stop()
    cs = field_check(a)
    del a
    return {"phases": [w, r], "checksum": cs, "size": os.path.getsize(path)}


def op_check_field(c):
    """Reads another system's W1/W2 file (untimed) and answers its checksum."""
    return {"checksum": field_check(read_data(c["path"]))}


def op_slabs(c):
    """W3 / W6: open (chunk cache rdcc_nbytes / rdcc_nslots when given), read every k x k block
    (dataset index, row, column), close."""
    k = int(c["size"])
    reads = c["reads"]
    names = c["dsets"]
    kw = {}
    if c.get("rdcc_nbytes") is not None:
        kw["rdcc_nbytes"] = int(c["rdcc_nbytes"])
    if c.get("rdcc_nslots") is not None:
        kw["rdcc_nslots"] = int(c["rdcc_nslots"])
    out = []
    p = Probe()
    with h5py.File(c["path"], "r", **kw) as f:
        ds = [f[n] for n in names]
        for j, r, q in reads:
            out.append(ds[j][r:r + k, q:q + k])
    s = p.stop()
    cat = np.concatenate([b.reshape(-1) for b in out]) if out else np.zeros(0, np.float32)
    return {"phases": [s], "checksum": checksum(cat)}


def w6_names(n):
    return ["d%02d" % j for j in range(n)]


def op_w6_gen(c):
    """Writes the W6 input (dsets datasets of side x side, chunk x chunk, shuffle + deflate 1,
    dataset j holding the field of salt j + 1) unless a file with the same parameters exists."""
    path = c["path"]
    n, side, k = int(c["dsets"]), int(c["side"]), int(c["chunk"])
    stamp = "%d/%d/%d/1" % (n, side, k)
    if os.path.exists(path):
        try:
            with h5py.File(path, "r") as f:
                if f.attrs.get("h5bench") == stamp:
                    return {"generated": False, "size": os.path.getsize(path)}
        except OSError:
            pass
    with h5py.File(path, "w") as f:
        for j, name in enumerate(w6_names(n)):
            f.create_dataset(name, data=make_field(side, j + 1), chunks=(k, k), shuffle=True,
                             compression="gzip", compression_opts=1)
        f.attrs["h5bench"] = stamp
    return {"generated": True, "size": os.path.getsize(path)}


def op_w2b_gen(c):
    """Writes W2(b)'s file with h5py (untimed) when W3 runs without W2."""
    path = c["path"]
    k = int(c["chunk"])
    with h5py.File(path, "w", libver=libver(c)) as f:
        f.create_dataset("data", data=FIELD, chunks=(k, k), shuffle=True, compression="gzip",
                         compression_opts=1)
    return {"size": os.path.getsize(path)}


def w4_check(path, n, rounds, per):
    with h5py.File(path, "r") as f:
        parts = [f["d%04d" % j][...] for j in range(n)]
    if any(p.shape != (rounds * per,) for p in parts):
        raise ValueError("W4: a dataset has the wrong length")
    return checksum(np.concatenate(parts).astype(np.int32))


def op_w4(c):
    """W4: create n extensible int32 datasets (chunk 1024), then `rounds` rounds appending `per`
    elements to each (resize + write); value of element e of round k of dataset j is
    j * 1000000 + k * per + e."""
    path = c["path"]
    n, rounds, per = int(c["n"]), int(c["rounds"]), int(c["per"])
    base = np.arange(per, dtype=np.int32)
    p = Probe()
    f = h5py.File(path, "w", libver=libver(c))
    dsets = [f.create_dataset("d%04d" % j, shape=(0,), maxshape=(None,), chunks=(1024,),
                              dtype=np.int32) for j in range(n)]
    create = p.stop()
    p = Probe()
    for k in range(rounds):
        lo, hi = k * per, (k + 1) * per
        for j, d in enumerate(dsets):
            d.resize((hi,))
            d[lo:hi] = base + np.int32(j * 1000000 + lo)
    del dsets
    fs = close_sync(f, path, bool(c.get("sync")))
    append = p.stop(fs)
    return {"phases": [create, append], "checksum": w4_check(path, n, rounds, per),
            "size": os.path.getsize(path)}


def op_check_w4(c):
    return {"checksum": w4_check(c["path"], int(c["n"]), int(c["rounds"]), int(c["per"]))}


def w5_name(i):
    return "d%05d" % i


def w5_check(path, order):
    with h5py.File(path, "r") as f:
        g = f["g"]
        vals = [g[w5_name(i)][0] for i in order]
    return checksum(np.array(vals, dtype=np.int64))


def op_w5(c):
    """W5: one group of `members` one-element int64 datasets (value i * 7 + 3): create + close;
    reopen and open every member by name in `order`; open and list the names."""
    path = c["path"]
    m = int(c["members"])
    order = c["order"]
    p = Probe()
    f = h5py.File(path, "w", libver=libver(c))
    g = f.create_group("g")
    for i in range(m):
        g.create_dataset(w5_name(i), data=np.array([i * 7 + 3], dtype=np.int64))
    del g
    fs = close_sync(f, path, bool(c.get("sync")))
    create = p.stop(fs)
    p = Probe()
    f = h5py.File(path, "r")
    g = f["g"]
    handles = [g[w5_name(i)] for i in order]
    opened = p.stop()
    vals = np.array([h[0] for h in handles], dtype=np.int64)
    del handles, g
    f.close()
    p = Probe()
    with h5py.File(path, "r") as f:
        names = list(f["g"])
    listed = p.stop()
    if names != [w5_name(i) for i in range(m)]:
        raise ValueError("W5: h5py listed other names (%d)" % len(names))
    return {"phases": [create, opened, listed], "checksum": checksum(vals),
            "size": os.path.getsize(path)}


def op_check_w5(c):
    return {"checksum": w5_check(c["path"], c["order"])}


OPS = {
    "versions": versions,
    "field": op_field,
    "field_write_read": op_field_write_read,
    "check_field": op_check_field,
    "slabs": op_slabs,
    "w2b_gen": op_w2b_gen,
    "w6_gen": op_w6_gen,
    "w4": op_w4,
    "check_w4": op_check_w4,
    "w5": op_w5,
    "check_w5": op_check_w5,
}

if __name__ == "__main__":
    main(OPS)
