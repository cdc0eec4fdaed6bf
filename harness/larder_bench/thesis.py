"""Seed 003's tuning figures (§6.7-6.8, Tables 6-18 to 6-25), by profile and thread count.

The thesis's scenarios 1-5 are 1 (main thread only), 2, 4, 8 and 12 threads, each replaying
its LTE trace 10,000 times. Per profile and thread count: (time s, fragmentation %, mmap calls,
sbrk calls). The profile names are the tuning suite's (suites.SUITE_PROFILES["tuning"]); the
defaults are "glibc" (ptmalloc2) and "tcmalloc".
"""
from __future__ import annotations

_T = (1, 2, 4, 8, 12)


def _rows(time, frag, mmap, sbrk) -> dict:
    return {t: (time[i], frag[i], mmap[i], sbrk[i]) for i, t in enumerate(_T)}


TUNING = {
    "glibc": _rows((2.23256285, 6.166512170, 11.260893692, 30.704147983, 45.875697788),
                   (6.46, 6.47, 6.49, 6.62, 6.61), (18, 19, 21, 30022, 70022), (1073, 1067, 1090, 572, 1058)),
    "glibc-cpu": _rows((2.040673119, 5.255585262, 8.451330038, 27.364226350, 41.050878266),
                       (6.68, 6.70, 6.70, 6.75, 6.76), (18, 19, 21, 30022, 70022), (3, 3, 3, 3, 3)),
    "glibc-memory": _rows((2.284160818, 5.825501628, 12.000505537, 31.244709392, 45.958673065),
                          (6.20, 6.22, 6.20, 6.25, 6.26), (18, 19, 21, 30022, 70022),
                          (34487, 34407, 34433, 34460, 18573)),
    "tcmalloc": _rows((1.826141663, 4.664235477, 8.10026102, 16.40313736, 22.95449813),
                      (11.01, 11.49, 10.86, 10.52, 10.38), (27, 28, 30, 30031, 70031), (130, 4, 5, 4, 4)),
    "tcmalloc-skip-mmap": _rows((1.772889502, 4.550674092, 7.896820720, 16.830561543, 24.356924013),
                                (11.01, 11.48, 10.86, 10.54, 10.41), (27, 28, 30, 30013, 70031), (129, 4, 6, 5, 6)),
    "tcmalloc-skip-sbrk": _rows((1.729553238, 4.512883612, 8.023947113, 16.890453551, 24.780461723),
                                (11.07, 11.48, 10.85, 10.53, 10.41), (152, 28, 31, 30022, 70022), (4, 4, 5, 5, 4)),
}
DEFAULT_OF = {"glibc-cpu": "glibc", "glibc-memory": "glibc", "tcmalloc-skip-mmap": "tcmalloc",
              "tcmalloc-skip-sbrk": "tcmalloc", "glibc": "glibc", "tcmalloc": "tcmalloc"}


def tuning_cells(name: str, threads) -> list[str]:
    """[time × the default's, fragmentation, mmap, sbrk] from the thesis, or dashes."""
    row = TUNING.get(name, {}).get(threads)
    base = TUNING.get(DEFAULT_OF.get(name, ""), {}).get(threads)
    if row is None or base is None:
        return ["–"] * 4
    return [f"×{row[0] / base[0]:.2f}", f"{row[1]:.2f}%", str(row[2]), str(row[3])]
