"""Hoard's fragmentation tables (seed 004 §5.4 Table 4, §5.5 Table 6) from this run's recorded
traces, with Hoard's published figures beside them.

The seeds suite's hoard-frag-* series record each run with liblarder-trace.so in front of
larder and process the trace off-line with trace-frag (tracer/trace_frag.c says how A and U
are computed), as Hoard did so that measuring would not serialise the run. Their figures are
hoard_* in each run.
"""
from __future__ import annotations

from .results import Series

# Seed 004 Table 4, multithreaded benchmarks, 14-processor runs, S = 8 KiB, f = 1/4, K = 4:
# (A/U, max in use U, max allocated A, total requested, objects requested, average size), bytes.
TABLE4 = {
    "threadtest": (1.24, 1_068_864, 1_324_848, 80_391_016, 9_998_831, 8.04),
    "shbench": (3.17, 556_112, 1_761_200, 1_650_564_600, 12_503_613, 132.00),
    "larson": (1.22, 8_162_600, 9_928_760, 1_618_188_592, 27_881_924, 58.04),
}
# Seed 004 Table 6: fragmentation on 14 processors for f = 1/8, 1/4, 1/2.
TABLE6 = {
    "threadtest": {0.125: 1.22, 0.25: 1.24, 0.5: 1.22},
    "shbench": {0.125: 3.17, 0.25: 3.17, 0.5: 3.16},
    "larson": {0.125: 1.22, 0.25: 1.22, 0.5: 1.61},
}
HOARD_SETUP = "Hoard, seed 004 (14 CPUs, S = 8 KiB)"

TABLE4_HEADER = ["workload", "threads", "superblock S", "fragmentation A/U", "max in use U", "max allocated A",
                 "total requested", "objects requested", "average size", "A/U at page granularity"]


def _b(v) -> str:
    return f"{v:,.0f}" if v is not None else "–"


def _med(c, key):
    s = c.figures.get(key) if c else None
    return s.median if s else None


def _spread(c, key) -> str:
    s = c.figures.get(key) if c else None
    if not s:
        return "–"
    return f"{s.median:.2f}" if s.n == 1 or s.min == s.max else f"{s.median:.2f} ({s.min:.2f}–{s.max:.2f})"


def table4(series: list[Series]) -> tuple[list, list] | None:
    """One row per workload and superblock size (this run), each followed by Hoard's row."""
    rows = []
    for s in series:
        if s.entry.get("kind") != "hoard-frag":
            continue
        w = s.entry["workload"]
        for v, x in s.cases:
            for a in s.allocators:
                c = s.cell(v, x, a)
                if c is None or c.ok == 0:
                    continue
                sb = _variant_env(s, v).get("LARDER_SUPERBLOCK_SIZE", "65536")
                rows.append([f"{w} ({a})", str(x), f"{int(sb) // 1024} KiB", _spread(c, "hoard_fragmentation"),
                             _b(_med(c, "hoard_max_in_use_bytes")), _b(_med(c, "hoard_max_allocated_bytes")),
                             _b(_med(c, "hoard_total_requested_bytes")), _b(_med(c, "hoard_objects")),
                             f"{_med(c, 'hoard_average_size'):.2f}" if _med(c, "hoard_average_size") else "–",
                             _spread(c, "hoard_fragmentation_pages")])
        h = TABLE4.get(w)
        if h:
            rows.append([f"{w}: {HOARD_SETUP}", "14", "8 KiB", f"{h[0]:.2f}", _b(h[1]), _b(h[2]), _b(h[3]), _b(h[4]),
                         f"{h[5]:.2f}", "–"])
    return (TABLE4_HEADER, rows) if rows else None


def _variant_env(s: Series, label: str) -> dict:
    for vv in s.entry.get("variants") or []:
        if vv.get("label") == label:
            return vv.get("env") or {}
    return {}


def _f_of(label: str) -> float | None:
    try:
        return float(label.split("=", 1)[1]) if label.startswith("f=") else None
    except ValueError:
        return None


def table6_data(s: Series) -> dict:
    """{threads: {f: Summary}} of one hoard-frag-f series (larder only)."""
    out: dict = {}
    for v, x in s.cases:
        f = _f_of(v)
        for a in s.allocators:
            c = s.cell(v, x, a)
            if f is None or c is None or not c.figures.get("hoard_fragmentation"):
                continue
            out.setdefault(x, {})[f] = c.figures["hoard_fragmentation"]
    return out


def table6(series: list[Series]) -> tuple[list, list] | None:
    fs: list[float] = []
    rows_in = []
    for s in series:
        if s.entry.get("kind") != "hoard-frag-f":
            continue
        data = table6_data(s)
        for d in data.values():
            fs += [f for f in d if f not in fs]
        rows_in.append((s.entry["workload"], data))
    if not rows_in:
        return None
    fs.sort()
    hdr = ["workload", "threads"] + [f"f = {_frac(f)}" for f in fs]
    rows = []
    for w, data in rows_in:
        for x in sorted(data, key=lambda t: (t is None, t)):
            row = [w, str(x)]
            for f in fs:
                sm = data[x].get(f)
                row.append("–" if sm is None else (f"{sm.median:.2f}" if sm.min == sm.max
                                                   else f"{sm.median:.2f} ({sm.min:.2f}–{sm.max:.2f})"))
            rows.append(row)
        h = TABLE6.get(w)
        if h:
            rows.append([f"{w}: {HOARD_SETUP}", "14"] + [f"{h[f]:.2f}" if f in h else "–" for f in fs])
    return hdr, rows


def _frac(f: float) -> str:
    for n, d in ((1, 8), (1, 4), (3, 8), (1, 2), (5, 8), (3, 4)):
        if abs(f - n / d) < 1e-9:
            return f"{n}/{d}"
    return f"{f:g}"


EXPLAIN = ("Hoard measured fragmentation off-line: each per-processor heap recorded its operations with a "
           "timestamp, the traces were merged in time order, and the merged trace gave the maximum memory in "
           "use (U) and allocated (A) (seed 004 §5.4), because keeping the two maxima while running would "
           "serialise every call. Here each run is recorded by liblarder-trace.so (per-thread buffers, no lock) in "
           "front of larder and processed by trace-frag: U is the bytes requested and not yet freed; A counts, "
           "for the addresses larder returned, every superblock (S bytes) holding a live block of a size class "
           "and the page-rounded size of every larger block, without per-object overhead (§5.4, after Wilson and "
           "Johnstone). A/U is max A over max U. This A is a lower bound on what larder holds (an empty superblock "
           "a heap keeps within its K slack does not show in a trace); the page-granularity column counts only "
           "the 4 KiB pages with a live byte. U counts the bytes asked for: an 8-byte request is a 16-byte block "
           "in larder (malloc's 16-byte alignment) and was an 8-byte one in Hoard. The recorder slows each call "
           "(docs/traces.md), so these runs' times are not compared.")
