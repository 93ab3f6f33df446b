#!/usr/bin/env python3
"""Checks an HDF5 file against expectations, reading it with h5py (libhdf5) as the reference.

    h5py_check.py FILE... EXPECT.json     (EXPECT.json may be "-" for standard input)

Every FILE is checked against the same expectations (one interpreter start for several files).
Prints one line per mismatch (prefixed with the file's name when there are several) and exits 1
if there is any, 0 if everything matches. Exits 2, with
the reason on stderr, on a usage error, on malformed expectations (an unknown key is an error, so
a typo cannot make a check pass silently; such lines start with "h5py_check: bad expectations:"),
or when h5py cannot open FILE (the exception is printed). hdf5plugin is imported so that datasets
compressed with plugin filters (lz4, zstd, blosc, bitshuffle, bzip2, ...) can be read; it must be
installed (scripts/setup-tools does it).

Expectation format (JSON object; every key optional; paths absolute):

  "superblock_version": int      superblock version byte of FILE (the format bounds it was written
                                 with: 0/1 = earliest, 2 = v1.8, 3 = v1.10 and later)
  "userblock_size": int          as h5py reports it
  "groups": {path: G}            PATH must be a group; G = {"members": [names]} checks its exact
                                 member names (any order), {} only that it is a group;
                                 "ordered_members": [names] the names in h5py's iteration order
                                 (creation order when the group tracks it);
                                 "storage": "symbol_table" | "compact" | "dense" how libhdf5
                                 reports the links are stored (H5Gget_info)
  "attr_names": {path: [names]}  exact attribute names of any object (any order)
  "attr_order": {path: [names]}  the attribute names in h5py's iteration order (creation order
                                 when the object tracks it)
  "links": {path: L}             how the link named PATH is stored in its parent:
                                 {"kind": "hard"} | {"kind": "soft", "target": "/p"}
                                 | {"kind": "external", "file": "f.h5", "path": "/p"}
  "datasets": {path: D}          PATH must be a dataset; every key of D optional:
     "dtype": DTYPE              see below
     "shape": [n...] | null      [] for a scalar, null for a null dataspace
     "maxshape": [n | null...]   null entries are unlimited
     "chunks": [n...] | null     null: not chunked
     "layout": "compact" | "contiguous" | "chunked" | "virtual"
     "compression": str | null   ds.compression ("gzip", "lzf", "szip"; plugins give null)
     "compression_opts": any     ds.compression_opts (gzip level, szip [mask, ppb], ...)
     "shuffle", "fletcher32": bool
     "scaleoffset": int | null   ds.scaleoffset
     "filters": [[id, flags, [values...]] or [id, flags, [values...], name]...]
                                 the raw pipeline, get_create_plist().get_filter(i) in order
     "fillvalue": VALUE          ds.fillvalue
     "values": VALUE             every element (nested lists of the dataset's shape)
     "digest": {"sha256": hex, "as": DTYPE}
                                 sha256 of np.ascontiguousarray(ds[()].astype(as)).tobytes();
                                 "as" defaults to "dtype"; it must be a numpy type (a plain type
                                 string or a compound list/object), e.g. "<f8" hashes the values
                                 as little-endian doubles
     "spot": [[[i, j, ...], VALUE]...]  single elements ([] indexes a scalar)
  "objects": {path: O}           object header facts libhdf5 reports (H5Oget_native_info, through
                                 ctypes): O = {"header_version": 1 | 2,
                                 "attr_storage": "compact" | "dense",
                                 "refcount": int (hard links to the object)}, each key optional
  "attrs": {path: {name: A}}     attributes of any object; A = {"dtype": DTYPE, "shape": [n...],
                                 "value": VALUE}, each key optional

DTYPE:
  "<f4", ">i2", "|u1", "|b1", "<c16", "|V4", "|S10"   numpy's dtype.str of a plain type ("|S10"
                                 is a fixed-size string of 10 bytes, any character set)
  "|S10/ascii", "|S10/utf-8"     a fixed-size string with that character set
  "vlen-str-utf8", "vlen-str-ascii"   variable-length strings
  "ref-object", "ref-region"     references
  [[name, DTYPE, offset]...]     compound (fields in order; size not checked)
  {"compound": [[name, DTYPE, offset]...], "itemsize": n}   compound with its size
  {"enum": DTYPE, "mapping": {name: int}}                   enumeration (h5py gives bool as "|b1")
  {"array": DTYPE, "shape": [n...]}                         array type
  {"vlen": DTYPE}                                           variable-length sequence
A plain type string never matches an enum, array, vlen or compound type. A mismatch prints the
actual type in the same notation.

VALUE (one element; datasets and array-typed elements nest lists in C order):
  integers, enums (their integer value): JSON integers, compared exactly;
  bools: true / false;
  floats: JSON numbers or the strings "nan", "inf", "-inf"; the expected number is first rounded
    to the element's float type, then compared exactly (NaN equals NaN; 0.0 and -0.0 differ);
  complex: [re, im], each as a float;
  strings (fixed or variable, any character set): a JSON string equal to the stored bytes
    decoded as UTF-8 (for fixed-size strings h5py drops trailing NUL padding, as numpy does;
    space padding stays), or {"hex": "..."} with the exact bytes; opaque elements: {"hex": ...};
  compound: {field: VALUE} (every field); variable-length sequences: lists;
  object references: the referenced object's path (null for a null reference);
  a null dataspace's value: null.
"""

import hashlib
import json
import math
import sys

try:
    import h5py
    import hdf5plugin  # noqa: F401  (registers the filter plugins with libhdf5)
    import numpy as np
except ImportError as e:  # pragma: no cover - environment problem, loud on purpose
    print(f"h5py_check: cannot import {e.name}: run scripts/setup-tools ({e})", file=sys.stderr)
    sys.exit(2)

MAX_VALUE_MISMATCHES = 10
SIGNATURE = b"\x89HDF\r\n\x1a\n"


class BadExpectations(Exception):
    """The expectation document itself is wrong (exit 2)."""


def keys_known(obj, allowed, where):
    if not isinstance(obj, dict):
        raise BadExpectations(f"{where}: expected an object, got {json.dumps(obj)}")
    unknown = sorted(set(obj) - set(allowed))
    if unknown:
        raise BadExpectations(f"{where}: unknown key(s) {unknown}; known: {sorted(allowed)}")


# --- datatypes ------------------------------------------------------------------------------------


def describe(dt):
    """The DTYPE notation of a numpy dtype as h5py maps HDF5 types."""
    s = h5py.check_string_dtype(dt)
    if s is not None:
        if s.length is None:
            return "vlen-str-utf8" if s.encoding == "utf-8" else "vlen-str-ascii"
        return f"{dt.str}/{s.encoding}"
    ref = h5py.check_ref_dtype(dt)
    if ref is not None:
        return "ref-object" if ref is h5py.Reference else "ref-region"
    vlen = h5py.check_vlen_dtype(dt)
    if vlen is not None:
        return {"vlen": describe(vlen)}
    mapping = h5py.check_enum_dtype(dt)
    if mapping is not None:
        return {"enum": dt.str, "mapping": {k: int(v) for k, v in mapping.items()}}
    if dt.subdtype is not None:
        base, shape = dt.subdtype
        return {"array": describe(base), "shape": list(shape)}
    if dt.names is not None:
        fields = [[n, describe(dt.fields[n][0]), dt.fields[n][1]] for n in dt.names]
        return {"compound": fields, "itemsize": dt.itemsize}
    return dt.str


def dtype_matches(exp, act):
    """exp: DTYPE from the expectations; act: describe() of the actual type."""
    if isinstance(exp, list):
        exp = {"compound": exp}
    if isinstance(exp, str):
        if not isinstance(act, str):
            return False
        if exp == act:
            return True
        # "|S10" matches "|S10/ascii" and "|S10/utf-8".
        return "/" not in exp and act.startswith("|S") and act.split("/")[0] == exp
    if not isinstance(exp, dict) or not isinstance(act, dict):
        return False
    for key, want in exp.items():
        if key not in act:
            return False
        got = act[key]
        if key == "compound":
            if not isinstance(want, list) or len(want) != len(got):
                return False
            for wf, gf in zip(want, got):
                if not (isinstance(wf, list) and len(wf) == 3):
                    raise BadExpectations(f"compound field {json.dumps(wf)} is not [name, DTYPE, offset]")
                if wf[0] != gf[0] or wf[2] != gf[2] or not dtype_matches(wf[1], gf[1]):
                    return False
        elif key in ("enum", "array", "vlen"):
            if not dtype_matches(want, got):
                return False
        elif want != got:
            return False
    return True


def numpy_dtype(exp):
    """A numpy dtype from a DTYPE (plain strings and compounds only), for digests."""
    if isinstance(exp, str):
        if exp.startswith("|S") and "/" in exp:
            exp = exp.split("/")[0]
        try:
            return np.dtype(exp)
        except TypeError as e:
            raise BadExpectations(f"digest: {exp!r} is not a numpy type ({e})")
    if isinstance(exp, list):
        exp = {"compound": exp}
    if isinstance(exp, dict) and "compound" in exp:
        fields = exp["compound"]
        spec = {
            "names": [f[0] for f in fields],
            "formats": [numpy_dtype(f[1]) for f in fields],
            "offsets": [f[2] for f in fields],
        }
        if "itemsize" in exp:
            spec["itemsize"] = exp["itemsize"]
        return np.dtype(spec)
    raise BadExpectations(f"digest: cannot hash as {json.dumps(exp)}; give a numpy type in \"as\"")


# --- values ---------------------------------------------------------------------------------------


def parse_float(exp, ftype):
    if isinstance(exp, bool) or not isinstance(exp, (int, float, str)):
        return None
    if isinstance(exp, str):
        if exp not in ("nan", "inf", "-inf"):
            return None
        exp = float(exp)
    with np.errstate(over="ignore"):
        return np.array(exp, dtype=np.float64).astype(ftype)[()]


def same_float(a, b):
    if math.isnan(a) and math.isnan(b):
        return True
    return a == b and np.signbit(a) == np.signbit(b)


def show(v):
    if isinstance(v, (bytes, np.bytes_)):
        return repr(bytes(v))
    if isinstance(v, np.generic):
        v = v.item()
    return json.dumps(v) if isinstance(v, (bool, list, dict, str, type(None))) else repr(v)


class ValueChecker:
    """Compares an h5py value with a VALUE tree, collecting at most MAX_VALUE_MISMATCHES lines."""

    def __init__(self, f, out):
        self.f = f
        self.out = out
        self.count = 0

    def report(self, where, msg):
        self.count += 1
        if self.count <= MAX_VALUE_MISMATCHES:
            self.out.append(f"{where}: {msg}")

    def finish(self, where):
        if self.count > MAX_VALUE_MISMATCHES:
            self.out.append(f"{where}: ... and {self.count - MAX_VALUE_MISMATCHES} more value mismatches")
        self.count = 0

    def compare(self, exp, act, where):
        if isinstance(act, h5py.Empty):
            if exp is not None:
                self.report(where, f"value is empty (null dataspace), expected {show(exp)}")
            return
        if isinstance(act, np.ndarray):
            if act.ndim == 0:
                return self.compare(exp, act[()], where)
            if not isinstance(exp, list):
                return self.report(where, f"value is an array of shape {list(act.shape)}, expected {show(exp)}")
            if len(exp) != act.shape[0]:
                return self.report(where, f"length {act.shape[0]} != expected {len(exp)}")
            for i, (e, a) in enumerate(zip(exp, act)):
                self.compare(e, a, f"{where}[{i}]")
            return
        if isinstance(act, np.void) and act.dtype.names is not None:
            if not isinstance(exp, dict):
                return self.report(where, f"value is a compound, expected {show(exp)}")
            names = list(act.dtype.names)
            if sorted(exp) != sorted(names):
                return self.report(where, f"compound fields {names} != expected {sorted(exp)}")
            for n in names:
                self.compare(exp[n], act[n], f"{where}.{n}")
            return
        if isinstance(act, (bytes, np.bytes_, str, np.void)):
            got = act.encode("utf-8") if isinstance(act, str) else bytes(act.tobytes() if isinstance(act, np.void) else act)
            if isinstance(exp, dict) and set(exp) == {"hex"}:
                want = bytes.fromhex(exp["hex"])
            elif isinstance(exp, str) and not isinstance(act, np.void):
                want = exp.encode("utf-8")
            else:
                return self.report(where, f"value {show(got)}, expected {show(exp)} (strings: a JSON string or {{\"hex\"}})")
            if got != want:
                self.report(where, f"value {show(got)} != expected {show(exp)}")
            return
        if isinstance(act, (bool, np.bool_)):
            if not isinstance(exp, bool) or bool(act) != exp:
                self.report(where, f"value {show(bool(act))} != expected {show(exp)}")
            return
        if isinstance(act, (int, np.integer)):
            if isinstance(exp, bool) or not isinstance(exp, int) or int(act) != exp:
                self.report(where, f"value {int(act)} != expected {show(exp)}")
            return
        if isinstance(act, (float, np.floating)):
            act = np.asarray(act)[()]
            want = parse_float(exp, act.dtype)
            if want is None or not same_float(act, want):
                self.report(where, f"value {show(act)} != expected {show(exp)}")
            return
        if isinstance(act, (complex, np.complexfloating)):
            act = np.asarray(act)[()]
            ftype = act.real.dtype
            ok = isinstance(exp, list) and len(exp) == 2
            if ok:
                re, im = parse_float(exp[0], ftype), parse_float(exp[1], ftype)
                ok = re is not None and im is not None and same_float(act.real, re) and same_float(act.imag, im)
            if not ok:
                self.report(where, f"value [{show(act.real)}, {show(act.imag)}] != expected {show(exp)}")
            return
        if isinstance(act, h5py.Reference):
            got = self.f[act].name if act else None
            if got != exp:
                self.report(where, f"reference to {show(got)} != expected {show(exp)}")
            return
        self.report(where, f"cannot compare a {type(act).__name__} ({show(act)}) with {show(exp)}")


# --- objects --------------------------------------------------------------------------------------


def superblock_version(path):
    with open(path, "rb") as fh:
        data = fh.read()
    offset = 0
    while offset + 9 <= len(data):
        if data[offset : offset + 8] == SIGNATURE:
            return data[offset + 8]
        offset = 512 if offset == 0 else offset * 2
    return None


def get_kind(f, path, want, out):
    obj = f.get(path)
    if obj is None:
        out.append(f"{path}: missing (expected a {want.__name__.lower()})")
        return None
    if not isinstance(obj, want):
        out.append(f"{path}: is a {type(obj).__name__.lower()}, expected a {want.__name__.lower()}")
        return None
    return obj


def check_eq(out, where, what, got, want):
    if got != want:
        out.append(f"{where}: {what} {json.dumps(got)} != expected {json.dumps(want)}")


def check_group(f, path, g, out):
    keys_known(g, ["members", "ordered_members", "storage"], f"groups[{path}]")
    grp = get_kind(f, path, h5py.Group, out)
    if grp is None:
        return
    if "members" in g:
        check_eq(out, path, "members", sorted(grp.keys()), sorted(g["members"]))
    if "ordered_members" in g:
        check_eq(out, path, "ordered members", list(grp.keys()), g["ordered_members"])
    if "storage" in g:
        names = {0: "symbol_table", 1: "compact", 2: "dense"}
        got = names.get(group_storage_type(grp), "unknown")
        check_eq(out, path, "storage", got, g["storage"])


def hdf5_lib():
    """The libhdf5 h5py loaded, for the calls h5py does not wrap."""
    import ctypes

    with open("/proc/self/maps") as maps:
        paths = sorted({
            line.split()[-1] for line in maps
            if "/libhdf5" in line and "libhdf5_hl" not in line and line.split()[-1].startswith("/")
        })
    if not paths:
        raise RuntimeError("cannot find the libhdf5 h5py loaded")
    return ctypes.CDLL(paths[0])


def check_object(f, path, o, out):
    import ctypes

    keys_known(o, ["header_version", "attr_storage", "refcount"], f"objects[{path}]")
    obj = f.get(path)
    if obj is None:
        out.append(f"{path}: missing")
        return

    class IhInfo(ctypes.Structure):
        _fields_ = [("index_size", ctypes.c_uint64), ("heap_size", ctypes.c_uint64)]

    class NativeInfo(ctypes.Structure):
        _fields_ = [
            ("version", ctypes.c_uint), ("nmesgs", ctypes.c_uint), ("nchunks", ctypes.c_uint),
            ("flags", ctypes.c_uint), ("space", ctypes.c_uint64 * 4), ("mesg", ctypes.c_uint64 * 2),
            ("obj", IhInfo), ("attr", IhInfo),
        ]

    info = NativeInfo()
    hdr_and_meta = 0x0008 | 0x0010
    if hdf5_lib().H5Oget_native_info(ctypes.c_int64(obj.id.id), ctypes.byref(info), hdr_and_meta) < 0:
        out.append(f"{path}: H5Oget_native_info failed")
        return
    if "header_version" in o:
        check_eq(out, path, "object header version", info.version, o["header_version"])
    if "attr_storage" in o:
        got = "dense" if info.attr.heap_size > 0 else "compact"
        check_eq(out, path, "attribute storage", got, o["attr_storage"])
    if "refcount" in o:
        check_eq(out, path, "reference count", h5py.h5o.get_info(obj.id).rc, o["refcount"])


def group_storage_type(grp):
    """H5Gget_info's storage type of an open group (h5py does not wrap H5Gget_info): called
    through ctypes in the libhdf5 h5py loaded."""
    import ctypes

    class GroupInfo(ctypes.Structure):
        _fields_ = [
            ("storage_type", ctypes.c_int),
            ("nlinks", ctypes.c_uint64),
            ("max_corder", ctypes.c_int64),
            ("mounted", ctypes.c_bool),
        ]

    info = GroupInfo()
    if hdf5_lib().H5Gget_info(ctypes.c_int64(grp.id.id), ctypes.byref(info)) < 0:
        raise RuntimeError(f"H5Gget_info failed on {grp.name}")
    return info.storage_type


def check_link(f, path, lk, out):
    keys_known(lk, ["kind", "target", "file", "path"], f"links[{path}]")
    parent, _, name = path.rstrip("/").rpartition("/")
    parent = parent or "/"
    if parent not in f or not isinstance(f.get(parent), h5py.Group) or name not in f[parent]:
        out.append(f"{path}: link missing")
        return
    link = f[parent].get(name, getlink=True)
    kind = {h5py.HardLink: "hard", h5py.SoftLink: "soft", h5py.ExternalLink: "external"}.get(type(link), type(link).__name__)
    if "kind" in lk and kind != lk["kind"]:
        out.append(f"{path}: link kind {kind} != expected {lk['kind']}")
        return
    if "target" in lk:
        check_eq(out, path, "soft link target", getattr(link, "path", None), lk["target"])
    if "file" in lk:
        check_eq(out, path, "external link file", getattr(link, "filename", None), lk["file"])
    if "path" in lk:
        check_eq(out, path, "external link path", getattr(link, "path", None), lk["path"])


def norm(v):
    """JSON-comparable form of h5py's property values (tuples -> lists, numpy scalars -> Python)."""
    if isinstance(v, (tuple, list)):
        return [norm(x) for x in v]
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.generic):
        return v.item()
    return v


DATASET_KEYS = [
    "dtype", "shape", "maxshape", "chunks", "layout", "compression", "compression_opts", "shuffle",
    "fletcher32", "scaleoffset", "filters", "fillvalue", "values", "digest", "spot",
]
LAYOUTS = {h5py.h5d.COMPACT: "compact", h5py.h5d.CONTIGUOUS: "contiguous", h5py.h5d.CHUNKED: "chunked"}
if hasattr(h5py.h5d, "VIRTUAL"):
    LAYOUTS[h5py.h5d.VIRTUAL] = "virtual"


def check_dataset(f, path, d, out, vc):
    keys_known(d, DATASET_KEYS, f"datasets[{path}]")
    ds = get_kind(f, path, h5py.Dataset, out)
    if ds is None:
        return
    if "dtype" in d and not dtype_matches(d["dtype"], describe(ds.dtype)):
        out.append(f"{path}: dtype {json.dumps(describe(ds.dtype))} != expected {json.dumps(d['dtype'])}")
    if "shape" in d:
        check_eq(out, path, "shape", norm(ds.shape), d["shape"])
    if "maxshape" in d:
        check_eq(out, path, "maxshape", norm(ds.maxshape), d["maxshape"])
    if "chunks" in d:
        check_eq(out, path, "chunks", norm(ds.chunks), d["chunks"])
    plist = ds.id.get_create_plist()
    if "layout" in d:
        check_eq(out, path, "layout", LAYOUTS.get(plist.get_layout(), str(plist.get_layout())), d["layout"])
    for key in ("compression", "compression_opts", "shuffle", "fletcher32", "scaleoffset"):
        if key in d:
            check_eq(out, path, key, norm(getattr(ds, key)), d[key])
    if "filters" in d:
        got = []
        for i in range(plist.get_nfilters()):
            fid, flags, values, name = plist.get_filter(i)
            got.append([fid, flags, list(values), name.decode("utf-8", "replace")])
        want = d["filters"]
        if not isinstance(want, list):
            raise BadExpectations(f"datasets[{path}].filters: expected a list")
        trimmed = [g[: len(w)] if isinstance(w, list) and len(w) in (3, 4) else g for g, w in zip(got, want)]
        if len(got) != len(want) or trimmed != want:
            out.append(f"{path}: filters {json.dumps(got)} != expected {json.dumps(want)}")
    if "fillvalue" in d:
        vc.compare(d["fillvalue"], ds.fillvalue, f"{path} fillvalue")
        vc.finish(f"{path} fillvalue")
    data = None
    if "values" in d or "digest" in d:
        data = ds[()]
    if "values" in d:
        vc.compare(d["values"], data, path)
        vc.finish(path)
    if "digest" in d:
        dg = d["digest"]
        keys_known(dg, ["sha256", "as"], f"datasets[{path}].digest")
        as_type = dg.get("as", d.get("dtype"))
        if as_type is None:
            raise BadExpectations(f"datasets[{path}].digest: give \"as\" or \"dtype\"")
        arr = np.asarray(data).astype(numpy_dtype(as_type))
        got = hashlib.sha256(np.ascontiguousarray(arr).tobytes()).hexdigest()
        if got != dg.get("sha256"):
            out.append(f"{path}: digest sha256 {got} (as {json.dumps(as_type)}) != expected {dg.get('sha256')}")
    for spot in d.get("spot", []):
        if not (isinstance(spot, list) and len(spot) == 2 and isinstance(spot[0], list)):
            raise BadExpectations(f"datasets[{path}].spot: {json.dumps(spot)} is not [[index...], VALUE]")
        idx, want = spot
        where = f"{path}[{','.join(map(str, idx))}]"
        if ds.shape is None or len(idx) != len(ds.shape) or any(not 0 <= i < n for i, n in zip(idx, ds.shape)):
            out.append(f"{where}: index out of the dataset's shape {norm(ds.shape)}")
            continue
        vc.compare(want, ds[tuple(idx)] if idx else ds[()], where)
        vc.finish(where)


def check_attrs(f, path, attrs, out, vc):
    if not isinstance(attrs, dict):
        raise BadExpectations(f"attrs[{path}]: expected an object name -> expectation")
    obj = f.get(path)
    if obj is None:
        out.append(f"{path}: missing (expected attributes {sorted(attrs)})")
        return
    for name, a in attrs.items():
        keys_known(a, ["dtype", "shape", "value"], f"attrs[{path}][{name}]")
        where = f"{path} @{name}"
        if name not in obj.attrs:
            out.append(f"{where}: attribute missing")
            continue
        aid = obj.attrs.get_id(name)
        if "dtype" in a and not dtype_matches(a["dtype"], describe(aid.dtype)):
            out.append(f"{where}: dtype {json.dumps(describe(aid.dtype))} != expected {json.dumps(a['dtype'])}")
        if "shape" in a:
            check_eq(out, where, "shape", norm(aid.shape), a["shape"])
        if "value" in a:
            vc.compare(a["value"], obj.attrs[name], where)
            vc.finish(where)


def guarded(fn, f, path, exp, out, vc):
    """Runs one object's checks; an h5py/libhdf5 error while reading becomes a mismatch line."""
    try:
        fn(f, path, exp, out, vc)
    except BadExpectations:
        raise
    except Exception as e:  # noqa: BLE001 - a read error is a finding about the file
        vc.count = 0
        out.append(f"{path}: h5py error: {type(e).__name__}: {e}")


def check(path, exp):
    top = ["superblock_version", "userblock_size", "groups", "links", "datasets", "attr_names", "attrs",
           "objects", "attr_order"]
    keys_known(exp, top, "top level")
    out = []
    if "superblock_version" in exp:
        check_eq(out, "file", "superblock version", superblock_version(path), exp["superblock_version"])
    with h5py.File(path, "r") as f:
        vc = ValueChecker(f, out)
        if "userblock_size" in exp:
            check_eq(out, "file", "userblock size", f.userblock_size, exp["userblock_size"])
        for p, g in exp.get("groups", {}).items():
            check_group(f, p, g, out)
        for p, o in exp.get("objects", {}).items():
            check_object(f, p, o, out)
        for p, lk in exp.get("links", {}).items():
            check_link(f, p, lk, out)
        for p, d in exp.get("datasets", {}).items():
            guarded(check_dataset, f, p, d, out, vc)
        for p, names in exp.get("attr_names", {}).items():
            obj = f.get(p)
            if obj is None:
                out.append(f"{p}: missing (expected attributes {sorted(names)})")
            else:
                check_eq(out, p, "attribute names", sorted(obj.attrs.keys()), sorted(names))
        for p, names in exp.get("attr_order", {}).items():
            obj = f.get(p)
            if obj is None:
                out.append(f"{p}: missing (expected attributes {names})")
            else:
                check_eq(out, p, "attribute order", list(obj.attrs.keys()), names)
        for p, a in exp.get("attrs", {}).items():
            guarded(check_attrs, f, p, a, out, vc)
    return out


def main(argv):
    if len(argv) < 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        print("h5py_check: usage: h5py_check.py FILE... EXPECT.json", file=sys.stderr)
        return 2
    files, exp_path = argv[1:-1], argv[-1]
    try:
        text = sys.stdin.read() if exp_path == "-" else open(exp_path, encoding="utf-8").read()
        exp = json.loads(text)
    except (OSError, ValueError) as e:
        print(f"h5py_check: bad expectations: cannot read {exp_path}: {e}", file=sys.stderr)
        return 2
    for file in files:
        try:
            h5py.File(file, "r").close()
        except Exception as e:  # noqa: BLE001 - any failure to open is the answer
            print(f"h5py_check: h5py cannot open {file}: {type(e).__name__}: {e}", file=sys.stderr)
            return 2
    failed = False
    for file in files:
        try:
            mismatches = check(file, exp)
        except BadExpectations as e:
            print(f"h5py_check: bad expectations: {e}", file=sys.stderr)
            return 2
        prefix = f"{file}: " if len(files) > 1 else ""
        for line in mismatches:
            print(prefix + line)
        failed = failed or bool(mismatches)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
