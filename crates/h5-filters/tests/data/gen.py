"""Generates the real-chunk test vectors of h5-filters (run once; outputs are committed).

Usage: python gen.py   (needs h5py; hdf5plugin for the registered plugin filters)

For every case it writes <name>.chunk (the raw chunk bytes as stored in the file, read with
read_direct_chunk) and <name>.expected (the decoded chunk in the dataset's file byte order),
and appends one line to MANIFEST:

    name elem_size chunk_elems filter_mask | id:flags:cd0,cd1,... ; id:flags:...
"""
import json
import os
import tempfile

import h5py
import numpy as np

try:
    import hdf5plugin
except ImportError:  # plugin cases are skipped
    hdf5plugin = None

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(1234)
lines = []
dsets = {}  # case name -> dataset path, for verify_encoded.py


def emit(name, dset, expected, tail=None):
    """Records chunk 0 of `dset` whose decoded content is `expected` (a numpy array or bytes).

    h5py's get_filter returns at most 16 client data values (the rest is garbage), so the
    values past 16 are replaced by `tail` (scale-offset: zeros, the unused fill-value words).
    """
    dsets[name] = dset.name
    mask, raw = dset.id.read_direct_chunk((0,) * dset.ndim)
    plist = dset.id.get_create_plist()
    filters = []
    for i in range(plist.get_nfilters()):
        code, flags, values, _name = plist.get_filter(i)
        values = list(values)
        if len(values) > 16:
            values = values[:16] + (tail if tail is not None else [0] * (len(values) - 16))
        filters.append("%d:%d:%s" % (code, flags, ",".join(str(v) for v in values)))
    exp = expected if isinstance(expected, bytes) else np.ascontiguousarray(expected).astype(dset.dtype).tobytes()
    with open(os.path.join(HERE, name + ".chunk"), "wb") as f:
        f.write(raw)
    with open(os.path.join(HERE, name + ".expected"), "wb") as f:
        f.write(exp)
    lines.append("%s %d %d %d | %s" % (name, dset.id.get_type().get_size(), nelem(dset), mask, " ; ".join(filters)))


def nelem(dset):
    return int(np.prod(dset.chunks))


def raw_read(dset, mtype):
    """The dataset's content in its file type, unconverted, as bytes."""
    buf = np.zeros(dset.size * mtype.get_size(), dtype="u1")
    dset.id.read(h5py.h5s.ALL, h5py.h5s.ALL, buf, mtype=mtype)
    return buf.tobytes()


def smooth(n, dtype):
    x = np.cumsum(rng.integers(-3, 4, n)).astype(np.int64) + 1000
    return x.astype(dtype)


def main():
    keep = os.environ.get("H5_FILTERS_KEEP")  # a directory to keep the file in
    path = os.path.join(keep or tempfile.mkdtemp(), "f.h5")
    n = 1000
    with h5py.File(path, "w") as f:
        ints = smooth(n, "<i4")
        for lvl in (1, 4, 9):
            d = f.create_dataset("gzip%d" % lvl, data=ints, chunks=(n,), compression="gzip", compression_opts=lvl)
            emit("gzip%d_i4" % lvl, d, ints)
        floats = np.sin(np.arange(n) / 37.0) * 100.0
        d = f.create_dataset("shufgz", data=floats, chunks=(n,), shuffle=True, compression="gzip")
        emit("shuffle_gzip_f8", d, floats)
        d = f.create_dataset("fl", data=ints, chunks=(n,), fletcher32=True)
        emit("fletcher32_i4", d, ints)
        odd = np.arange(333, dtype="u1")
        d = f.create_dataset("flodd", data=odd, chunks=(333,), fletcher32=True)
        emit("fletcher32_odd_u1", d, odd)
        d = f.create_dataset("sgf", data=floats, chunks=(n,), shuffle=True, compression="gzip", fletcher32=True)
        emit("shuffle_gzip_fletcher32_f8", d, floats)
        d = f.create_dataset("lzf", data=ints, chunks=(n,), compression="lzf")
        emit("lzf_i4", d, ints)
        d = f.create_dataset("lzfshuf", data=floats, chunks=(n,), compression="lzf", shuffle=True)
        emit("shuffle_lzf_f8", d, floats)
        # scale-offset, integers (auto minbits), several widths and orders
        for dt in ("<i2", "<i4", "<u1", "<i8", ">i4", "<u4"):
            v = smooth(n, "<i8")
            if dt == "<u1":
                v = v % 200
            v = v.astype(dt)
            tag = dt.replace("<", "le").replace(">", "be")
            d = f.create_dataset("so_" + tag, data=v, chunks=(n,), scaleoffset=0)
            emit("scaleoffset_int_" + tag, d, v)
        v = smooth(n, "<i4")
        d = f.create_dataset("so_fill", data=v, chunks=(n,), scaleoffset=0, fillvalue=-7)
        emit("scaleoffset_int_fill_lei4", d, v)
        const = np.full(n, 42, dtype="<i4")
        d = f.create_dataset("so_const", data=const, chunks=(n,), scaleoffset=0)
        emit("scaleoffset_int_const_lei4", d, const)
        # scale-offset float D-scale; the expected values are what libhdf5 reads back
        for dt in ("<f4", "<f8", ">f8"):
            v = (np.sin(np.arange(n) / 11.0) * 50.0).astype(dt)
            tag = dt.replace("<", "le").replace(">", "be")
            f.create_dataset("sof_" + tag, data=v, chunks=(n,), scaleoffset=3)
        # n-bit through the low-level API (libhdf5 1.14 refuses precisions that are not whole
        # bytes without relaxed integrity checks, which h5py does not expose): 24-bit integers
        # at bit offset 8 in a 32-bit word
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((n,))
        dcpl.set_filter(5, 0, ())  # H5Z_FILTER_NBIT; h5py has no set_nbit
        space = h5py.h5s.create_simple((n,))
        t = h5py.h5t.STD_I32LE.copy()
        t.set_precision(24)
        t.set_offset(8)
        d = h5py.Dataset(h5py.h5d.create(f.id, b"nbit_i32", t, space, dcpl=dcpl))
        d[...] = rng.integers(-2000, 2000, n).astype("<i4")
        emit("nbit_i32_p24_o8", d, raw_read(d, t))
        # big-endian float32 with the low 8 mantissa bits dropped
        t = h5py.h5t.IEEE_F32BE.copy()
        t.set_offset(8)
        t.set_precision(24)
        t.set_fields(31, 23, 8, 8, 15)
        t.set_ebias(127)
        d = h5py.Dataset(h5py.h5d.create(f.id, b"nbit_f32", t, space, dcpl=dcpl))
        d[...] = floats.astype("f4")
        emit("nbit_f32be_p24_o8", d, raw_read(d, t))
        # compound {a: the 24-bit integer above at offset 0, b: float64 at offset 4}
        ti = h5py.h5t.STD_I32LE.copy()
        ti.set_precision(24)
        ti.set_offset(8)
        tc = h5py.h5t.create(h5py.h5t.COMPOUND, 12)
        tc.insert(b"a", 0, ti)
        tc.insert(b"b", 4, h5py.h5t.IEEE_F64LE)
        d = h5py.Dataset(h5py.h5d.create(f.id, b"nbit_cmpd", tc, space, dcpl=dcpl))
        src = np.empty(n, dtype=[("a", "<i4"), ("b", "<f8")])
        src["a"] = rng.integers(-2000, 2000, n)
        src["b"] = floats
        d[...] = src
        emit("nbit_compound", d, raw_read(d, tc), tail=[64, 0])
        if hdf5plugin is not None:
            d = f.create_dataset("lz4", data=ints, chunks=(n,), **hdf5plugin.LZ4())
            emit("lz4_i4", d, ints)
            d = f.create_dataset("lz4small", data=floats, chunks=(n,), **hdf5plugin.LZ4(nbytes=1024))
            emit("lz4_blocks_f8", d, floats)
            d = f.create_dataset("zstd", data=ints, chunks=(n,), **hdf5plugin.Zstd())
            emit("zstd_i4", d, ints)
            d = f.create_dataset("bz2", data=ints, chunks=(n,), **hdf5plugin.BZip2())
            emit("bzip2_i4", d, ints)
            for cname in ("blosclz", "lz4", "lz4hc", "zlib", "zstd"):
                for sh, shname in ((hdf5plugin.Blosc.NOSHUFFLE, "noshuf"), (hdf5plugin.Blosc.SHUFFLE, "shuf"),
                                   (hdf5plugin.Blosc.BITSHUFFLE, "bitshuf")):
                    d = f.create_dataset("blosc_%s_%s" % (cname, shname), data=floats, chunks=(n,),
                                         **hdf5plugin.Blosc(cname=cname, clevel=5, shuffle=sh))
                    emit("blosc_%s_%s_f8" % (cname, shname), d, floats)
            big = smooth(20000, "<i4")
            d = f.create_dataset("blosc_big", data=big, chunks=(20000,),
                                 **hdf5plugin.Blosc(cname="blosclz", clevel=1, shuffle=hdf5plugin.Blosc.SHUFFLE))
            emit("blosc_blosclz_big_i4", d, big)
            for cname in ("none", "lz4", "zstd"):
                d = f.create_dataset("bshuf_" + cname, data=floats, chunks=(n,), **hdf5plugin.Bitshuffle(cname=cname))
                emit("bitshuffle_%s_f8" % cname, d, floats)
                odd = smooth(1003, "<i2")
                d = f.create_dataset("bshuf_odd_" + cname, data=odd, chunks=(1003,), **hdf5plugin.Bitshuffle(cname=cname))
                emit("bitshuffle_%s_odd_i2" % cname, d, odd)
    # Lossy D-scale: read back after reopening (libhdf5's chunk cache would otherwise hand
    # back the unfiltered values just written).
    with h5py.File(path, "r") as f:
        for tag in ("lef4", "lef8", "bef8"):
            d = f["sof_" + tag]
            emit("scaleoffset_float_" + tag, d, d[...])
    with open(os.path.join(HERE, "MANIFEST"), "w") as f:
        f.write("\n".join(lines) + "\n")
    if keep:
        with open(os.path.join(keep, "dsets.json"), "w") as f:
            json.dump(dsets, f)


main()
