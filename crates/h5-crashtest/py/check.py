"""Checks files with h5py: argv[1] is a JSON list of {"path", "at_least": [raw, zip, grid, groups]}.
Prints a JSON list of results: "ok", "unopenable: ...", "unreadable: ..." or "wrong: ..."."""

import json
import sys

import h5py

from workload import verify

out = []
for item in json.load(open(sys.argv[1])):
    try:
        f = h5py.File(item["path"], "r")
    except Exception as e:  # noqa: BLE001 - every refusal is a result
        out.append("unopenable: %s" % str(e).splitlines()[0])
        continue
    try:
        with f:
            kind, detail = verify(f, item["at_least"])
        out.append("ok" if kind == "ok" else "wrong: %s" % detail)
    except Exception as e:  # noqa: BLE001
        out.append("unreadable: %s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
print(json.dumps(out))
