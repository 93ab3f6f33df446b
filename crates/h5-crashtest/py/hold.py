"""Opens argv[1] with h5py in mode argv[2] (r, r+, w, a), prints "ready" or "refused: ...",
then holds the file until standard input closes."""

import sys

import h5py

try:
    f = h5py.File(sys.argv[1], sys.argv[2])
except Exception as e:  # noqa: BLE001
    print("refused: %s" % str(e).splitlines()[0], flush=True)
    sys.exit(0)
print("ready", flush=True)
sys.stdin.read()
f.close()
