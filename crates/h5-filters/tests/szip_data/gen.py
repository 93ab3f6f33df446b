"""Regenerates the szip test vectors: raw chunks written by libhdf5 (through h5py, whose
build carries libaec's szip encoder) and the bytes libhdf5 reads back from them.

Run from the repository root with the pinned venv:
    python crates/h5-filters/tests/szip_data/gen.py
Each case writes NAME.chunk (the stored chunk, as `read_direct_chunk` returns it) and
NAME.expected (the chunk's decoded bytes, in the file's byte order); MANIFEST lists
`name elem_size chunk_elems filter_mask | 4:flags:cd0,cd1,cd2,cd3`.
"""
import os
import tempfile

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", "..", ".."))
lines = []


def emit(name, dset, chunk_index=0):
    info = dset.id.get_chunk_info(chunk_index)
    mask, raw = dset.id.read_direct_chunk(info.chunk_offset)
    sel = tuple(slice(o, o + c) for o, c in zip(info.chunk_offset, dset.chunks))
    values = dset[sel]
    assert values.shape == dset.chunks, (name, values.shape)
    expected = np.ascontiguousarray(values, dtype=dset.dtype).tobytes()
    flags, cd = None, None
    plist = dset.id.get_create_plist()
    for i in range(plist.get_nfilters()):
        fid, fl, vals, _ = plist.get_filter(i)
        if fid == 4:
            flags, cd = fl, vals
    assert cd is not None
    with open(os.path.join(HERE, name + ".chunk"), "wb") as fh:
        fh.write(raw)
    with open(os.path.join(HERE, name + ".expected"), "wb") as fh:
        fh.write(expected)
    n = int(np.prod(dset.chunks))
    lines.append(f"{name} {dset.dtype.itemsize} {n} {mask} | 4:{flags}:{','.join(map(str, cd))}")


def main():
    src = h5py.File(os.path.join(ROOT, "fixtures/files/filters.h5"), "r")
    emit("fixture_szip_nn", src["szip_nn"])
    nn = src["szip_nn"]
    at_20_0 = [i for i in range(nn.id.get_num_chunks()) if nn.id.get_chunk_info(i).chunk_offset == (20, 0)]
    emit("fixture_szip_nn_r20", nn, at_20_0[0])
    emit("fixture_szip_ec", src["szip_ec"])
    emit("fixture_szip_ec_c3", src["szip_ec"], 3)

    rng = np.random.default_rng(20240611)
    tmp = tempfile.mkdtemp()
    f = h5py.File(os.path.join(tmp, "gen.h5"), "w")

    def make(name, data, chunks, opts):
        d = f.create_dataset(name, data=data, chunks=chunks, compression="szip", compression_opts=opts)
        emit(name, d)

    smooth = np.cumsum(rng.integers(-3, 4, size=4096))
    for dt in ["u1", "i1", "<i2", ">i2", "<u2", "<i4", ">i4", "<u4", "<i8", ">u8"]:
        info = np.iinfo(np.dtype(dt))
        vals = np.clip(smooth + (info.max // 2 if info.min == 0 else 0), info.min, info.max)
        data = vals.astype(dt).reshape(64, 64)
        tag = dt.replace("<", "le").replace(">", "be")
        for mode, ppb in [("nn", 16), ("ec", 8), ("nn", 32)]:
            make(f"{tag}_{mode}{ppb}", data, (16, 64), (mode, ppb))

    waves = np.sin(np.linspace(0, 20, 4096)) * 1000.0
    for dt in ["<f4", ">f4", "<f8", ">f8"]:
        data = waves.astype(dt).reshape(64, 64)
        tag = dt.replace("<", "le").replace(">", "be")
        for mode, ppb in [("nn", 16), ("ec", 32)]:
            make(f"{tag}_{mode}{ppb}", data, (32, 32), (mode, ppb))

    # Noise (uncompressed and split blocks) and constants (zero blocks).
    # (Noise only in some stretches, so the chunk still shrinks and is stored compressed.)
    noisy = np.full(2000, 1234, dtype=np.int64)
    noisy[::5] = rng.integers(0, 65535, size=400)
    noisy[1000:1100] = rng.integers(0, 65535, size=100)
    make("noise_u2_nn8", noisy.astype("<u2").reshape(40, 50), (40, 50), ("nn", 8))
    wide = np.zeros(1000, dtype=np.int64)
    wide[100:164] = rng.integers(-2**31, 2**31 - 1, size=64)
    wide[500:700] = rng.integers(-2**20, 2**20, size=200)
    make("noise_i4_ec16", wide.astype("<i4"), (1000,), ("ec", 16))
    make("const_u1_nn8", np.full((30, 40), 7, dtype="u1"), (30, 40), ("nn", 8))
    make("zeros_i2_ec32", np.zeros((50, 64), dtype="<i2"), (50, 64), ("ec", 32))
    # Scanlines that are not a multiple of the block (padded lines).
    make("pad_i2_nn8_w13", smooth[:13 * 20].astype("<i2").reshape(20, 13), (20, 13), ("nn", 8))
    make("pad_u1_ec16_w50", (smooth[:50 * 9] % 256).astype("u1").reshape(9, 50), (9, 50), ("ec", 16))
    make("pad_f4_nn8_w13", waves[:13 * 7].astype("<f4").reshape(7, 13), (7, 13), ("nn", 8))
    # A scanline shorter than a block (the whole chunk becomes the scanline).
    make("short_u2_nn16_w5", (smooth[:5 * 40] + 500).astype("<u2").reshape(40, 5), (40, 5), ("nn", 16))
    # A long 1-D chunk (scanline capped at 128 blocks).
    make("long_i4_nn32_1d", smooth.astype("<i4"), (4096,), ("nn", 32))

    # Reduced precision: 12-bit and 20-bit integers (bits per pixel 12 and 20).
    for bits, base, mode in [(12, h5py.h5t.STD_U16LE, "nn"), (20, h5py.h5t.STD_U32LE, "ec"), (20, h5py.h5t.STD_U32BE, "nn")]:
        t = base.copy()
        t.set_precision(bits)
        name = f"prec{bits}_{'be' if base == h5py.h5t.STD_U32BE else 'le'}_{mode}"
        dtype = np.dtype(">u4" if base == h5py.h5t.STD_U32BE else ("<u4" if bits > 16 else "<u2"))
        data = ((smooth + 2000) % (1 << bits)).astype(dtype).reshape(64, 64)
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((16, 64))
        dcpl.set_szip(h5py.h5z.SZIP_NN_OPTION_MASK if mode == "nn" else h5py.h5z.SZIP_EC_OPTION_MASK, 16)
        space = h5py.h5s.create_simple((64, 64))
        did = h5py.h5d.create(f.id, name.encode(), t, space, dcpl=dcpl)
        did.write(h5py.h5s.ALL, h5py.h5s.ALL, data)
        emit(name, h5py.Dataset(did))

    with open(os.path.join(HERE, "MANIFEST"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print(len(lines), "cases")


main()
