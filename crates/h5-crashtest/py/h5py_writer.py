"""The crash-test workload written by h5py (for comparison with h5's writer): argv = FILE SEED
FLUSH_EVERY. Continues the file if h5py opens it, creates it otherwise; appends a checkpoint
line to FILE.progress after every flush; prints "started" once the file is open; runs until
killed."""


import sys

import h5py
import numpy as np

from workload import GRID, GRID_COLS, GROUPS, RAW, ZIP, grid_values, group_name, raw_values, zip_values

MASK = (1 << 64) - 1


class Rng:
    """SplitMix64, as src/lib.rs."""

    def __init__(self, seed):
        self.s = seed & MASK

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & MASK
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n


path, seed, every = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
try:
    f = h5py.File(path, "r+")
    f[RAW], f[ZIP], f[GRID], f[GROUPS]
except Exception:  # noqa: BLE001 - a file h5py cannot continue is made anew
    f = h5py.File(path, "w")
    f.create_dataset(RAW, shape=(0,), maxshape=(None,), chunks=(64,), dtype="<i8")
    f.create_dataset(ZIP, shape=(0,), maxshape=(None,), chunks=(64,), dtype="<i8", compression="gzip", compression_opts=4)
    f.create_dataset(GRID, shape=(0, GRID_COLS), maxshape=(None, GRID_COLS), chunks=(16, GRID_COLS), dtype="<f8", compression="gzip", compression_opts=1)
    f.create_group(GROUPS)
progress = open(path + ".progress", "a")
state = [len(f[RAW]), len(f[ZIP]), len(f[GRID]), len(f[GROUPS])]
print("started", flush=True)
rng = Rng(seed)
done = 0
while True:
    choice, m = rng.below(100), 1 + rng.below(60)
    if choice < 70:
        k = 0 if choice < 35 else 1
        name, values = (RAW, raw_values) if k == 0 else (ZIP, zip_values)
        n = state[k]
        f[name].resize((n + m,))
        f[name][n:n + m] = values(n, n + m)
        state[k] += m
    elif choice < 94:
        n = state[2]
        f[GRID].resize((n + m, GRID_COLS))
        f[GRID][n:n + m] = grid_values(n, n + m)
        state[2] += m
    else:
        k = state[3]
        f[GROUPS].create_group(group_name(k)).attrs["i"] = np.uint64(k)
        state[3] += 1
    done += 1
    if done % every == 0:
        f.flush()
        progress.write("%d %d %d %d\n" % tuple(state))
        progress.flush()
