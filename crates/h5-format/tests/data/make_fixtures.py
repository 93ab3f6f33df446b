"""Generates the real-file fixtures of h5-format's tests (h5py 3.12.1, HDF5 1.14.4).

Run from this directory:  ../../../../.venv/bin/python make_fixtures.py
Outputs: earliest.h5, latest.h5 (committed), and prints each object's header address (used in
tests/real_files.rs) and the fletcher32 vectors used in src/checksum.rs.  Datasets are written
with track_times=False; the root group of latest.h5 still stores times in its OHDR prefix, so a
rerun changes those bytes (and its checksum) but no address or decoded value the tests check.
"""
import h5py
import numpy as np

# Superblock v0, object header v1, symbol-table root group, layout v3, filter pipeline v1.
with h5py.File("earliest.h5", "w", libver="earliest") as f:
    f.create_dataset("contig", data=np.arange(4, dtype="<i4"), track_times=False)
    f.create_dataset("chunked", data=np.arange(8, dtype="<i2"), chunks=(4,),
                     compression="gzip", shuffle=True, track_times=False)
    f.create_group("grp", track_order=False)
    f["soft"] = h5py.SoftLink("/contig")
    # Attributes added after the fact overflow the header: a v1 continuation block.
    for i in range(4):
        f["contig"].attrs["a%d" % i] = np.arange(8, dtype="<i8")

# Superblock v3, object header v2, compact links in the root, layout v4, filter pipeline v2.
with h5py.File("latest.h5", "w", libver="latest") as f:
    f.create_dataset("contig", data=np.arange(4, dtype="<i4"), track_times=False)
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_layout(h5py.h5d.COMPACT)
    f.create_dataset("compact", data=np.arange(3, dtype="u1"), track_times=False,
                     dcpl=dcpl)
    f.create_dataset("f32", data=np.arange(10, dtype="<i4"), chunks=(10,),
                     fletcher32=True, track_times=False)
    f.create_dataset("f8", data=np.arange(17, dtype="u1"), chunks=(17,),
                     fletcher32=True, track_times=False)
    f.create_dataset("ea", shape=(5,), maxshape=(None,), dtype="<i4", chunks=(2,),
                     track_times=False)
    f.create_group("grp", track_order=True)
    f["soft"] = h5py.SoftLink("/contig")
    f["ext"] = h5py.ExternalLink("other.h5", "/x")
    # Attributes added after the fact overflow the header: an OCHK continuation block.
    for i in range(4):
        f["contig"].attrs["a%d" % i] = np.arange(8, dtype="<i8")

for fn in ("earliest.h5", "latest.h5"):
    with h5py.File(fn, "r") as f:
        f.visititems(lambda n, o: print(fn, n, "object header at", h5py.h5o.get_info(o.id).addr))

with h5py.File("latest.h5", "r") as f:
    for name in ("f32", "f8"):
        filt, chunk = f[name].id.read_direct_chunk((0,))
        print(name, "chunk", chunk.hex(), "stored checksum LE = %#010x" %
              int.from_bytes(chunk[-4:], "little"))

# Superblock v2 (the 1.8 format) behind a 512-byte user block.
with h5py.File("sb_v2_userblock.h5", "w", libver=("v108", "v108"), userblock_size=512) as f:
    f.create_group("g", track_order=False)
