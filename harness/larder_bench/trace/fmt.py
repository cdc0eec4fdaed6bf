"""The larder trace file, version 1 (docs/trace-format.md; tracer/trace_format.h is the C side).

A file is a 64-byte header and blocks; a block is one thread's flushed buffer: a 32-byte block
header (thread, count, and a clock calibration point), then fixed 32-byte records. Record
times are TSC ticks when the header has FLAG_TSC, else nanoseconds; `Trace.seconds()` converts. Blocks of several threads interleave; `merged()` orders
all records by timestamp, keeping each thread's own order (seed 004 §5.4 merges per-heap traces
the same way).

The text form (`to_text` / `from_text`) keeps every field and the block structure, so binary ->
text -> binary gives back the same bytes.
"""
from __future__ import annotations

import bisect
import gzip
import heapq
import struct
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = b"LRDTRACE"
VERSION = 1
HEADER_SIZE = 64
BLOCK_SIZE = 32
RECORD_SIZE = 32
BLOCK_MAGIC = 0x314B4C42
SIZE_MAX = (1 << 48) - 1
ALIGN_BAD = 0xFF
FLAG_TSC = 1

HEADER = struct.Struct("<8sHHHHIIQQII16s")
BLOCK = struct.Struct("<IIIIQQ")
RECORD = struct.Struct("<QQQQ")

OPS = {1: "malloc", 2: "calloc", 3: "realloc", 4: "reallocarray", 5: "free", 6: "posix_memalign",
       7: "aligned_alloc", 8: "memalign", 9: "valloc", 10: "pvalloc"}
OP_CODES = {v: k for k, v in OPS.items()}
FREE = 5
REALLOCS = (3, 4)


class TraceError(ValueError):
    """A file that is not a valid trace; the message names the byte offset."""


@dataclass
class Record:
    t: int                  # ticks or ns since the start (see FLAG_TSC)
    op: int
    size: int
    align_log2: int
    addr_in: int
    addr_out: int

    def pack(self) -> bytes:
        packed = min(self.size, SIZE_MAX) | (self.op & 0xFF) << 48 | (self.align_log2 & 0xFF) << 56
        return RECORD.pack(self.t, self.addr_in, self.addr_out, packed)


@dataclass
class Block:
    tid: int
    thread_seq: int
    records: list[Record] = field(default_factory=list)
    clock_ticks: int = 0    # the clock when the block was written, in record units ...
    clock_ns: int = 0       # ... and in ns since the start


@dataclass
class Header:
    pid: int = 0
    ppid: int = 0
    start_ns: int = 0
    proc_start: int = 0
    exec_seq: int = 0
    comm: str = ""
    flags: int = 0
    root_pid: int = 0   # pid of the process that started the recorded tree (0: older file)

    def pack(self) -> bytes:
        return HEADER.pack(MAGIC, VERSION, HEADER_SIZE, RECORD_SIZE, self.flags, self.pid, self.ppid,
                           self.start_ns, self.proc_start, self.exec_seq, self.root_pid,
                           self.comm.encode()[:16].ljust(16, b"\0"))


@dataclass
class Trace:
    header: Header
    blocks: list[Block]

    def to_bytes(self) -> bytes:
        out = [self.header.pack()]
        for b in self.blocks:
            out.append(BLOCK.pack(BLOCK_MAGIC, b.tid, len(b.records), b.thread_seq, b.clock_ticks, b.clock_ns))
            out.extend(r.pack() for r in b.records)
        return b"".join(out)

    def write(self, path: str | Path) -> None:
        data = self.to_bytes()
        if str(path).endswith(".gz"):
            with gzip.open(path, "wb") as f:
                f.write(data)
        else:
            Path(path).write_bytes(data)

    @property
    def records(self) -> int:
        return sum(len(b.records) for b in self.blocks)

    def threads(self) -> list[tuple]:
        """Thread keys in order of first appearance (seq, or tid for records of a dying thread)."""
        seen: dict = {}
        for b in self.blocks:
            seen.setdefault(_thread_key(b), len(seen))
        return list(seen)

    def merged(self) -> list[tuple[int, Record]]:
        """All records as (thread index, record), ordered by time; ties and each thread's own
        sequence keep file order."""
        keys: dict = {}
        per: list[list[Record]] = []
        for b in self.blocks:
            k = _thread_key(b)
            if k not in keys:
                keys[k] = len(per)
                per.append([])
            per[keys[k]].extend(b.records)
        heads = [(recs[0].t, ti, 0) for ti, recs in enumerate(per) if recs]
        heapq.heapify(heads)
        out = []
        while heads:
            _, ti, i = heapq.heappop(heads)
            out.append((ti, per[ti][i]))
            if i + 1 < len(per[ti]):
                heapq.heappush(heads, (per[ti][i + 1].t, ti, i + 1))
        return out

    def seconds(self):
        """A function from record time to seconds since the start: the identity scaled for ns
        traces; for TSC traces, piecewise-linear through the blocks' (ticks, ns) points, which
        keeps the order of the ticks."""
        if not self.header.flags & FLAG_TSC:
            return lambda t: t / 1e9
        pts = sorted({(0, 0)} | {(b.clock_ticks, b.clock_ns) for b in self.blocks})
        xs, ys = [0], [0]
        for x, y in pts[1:]:
            if x > xs[-1] and y > ys[-1]:      # drop points that would bend time backwards
                xs.append(x)
                ys.append(y)
        if len(xs) == 1:
            return lambda t: 0.0

        def conv(t: int) -> float:
            i = bisect.bisect_right(xs, t) - 1
            i = min(max(i, 0), len(xs) - 2)
            return (ys[i] + (t - xs[i]) * (ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i])) / 1e9
        return conv


def _thread_key(b: Block) -> tuple:
    return ("seq", b.thread_seq) if b.thread_seq != 0xFFFFFFFF else ("tid", b.tid)


def read_bytes(path: str | Path) -> bytes:
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        # One clear line: the file and what is wrong with it, no errno noise.
        raise TraceError(f"{path}: cannot read the trace: {(e.strerror or str(e)).lower()}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise TraceError(f"{path}: corrupt or truncated gzip data: {e}") from None
    return raw


def parse(data: bytes, name: str = "trace") -> Trace:
    """Checks and decodes a whole trace; every error names the byte offset."""
    n = len(data)
    if n < 8 or data[:8] != MAGIC:
        raise TraceError(f"{name}: byte 0: not a larder trace (magic \"LRDTRACE\" missing)")
    if n < HEADER_SIZE:
        raise TraceError(f"{name}: byte {n}: truncated header ({n} of {HEADER_SIZE} bytes)")
    (_, version, hsize, rsize, flags, pid, ppid, start, pstart, exec_seq, root_pid,
     comm) = HEADER.unpack_from(data, 0)
    if version != VERSION:
        raise TraceError(f"{name}: byte 8: unsupported trace version {version} (this reader knows version {VERSION})")
    if hsize < HEADER_SIZE or hsize > n:
        raise TraceError(f"{name}: byte 10: bad header size {hsize}")
    if rsize != RECORD_SIZE:
        raise TraceError(f"{name}: byte 12: record size {rsize}, expected {RECORD_SIZE}")
    header = Header(pid, ppid, start, pstart, exec_seq, comm.rstrip(b"\0").decode(errors="replace"),
                    flags, root_pid)
    blocks = []
    off = hsize
    while off < n:
        if n - off < BLOCK_SIZE:
            raise TraceError(f"{name}: byte {off}: truncated block header ({n - off} of {BLOCK_SIZE} bytes)")
        magic, tid, count, seq, cticks, cns = BLOCK.unpack_from(data, off)
        if magic != BLOCK_MAGIC:
            raise TraceError(f"{name}: byte {off}: bad block magic 0x{magic:08x} (corrupt trace)")
        body = count * RECORD_SIZE
        if count == 0 or n - off - BLOCK_SIZE < body:
            raise TraceError(f"{name}: byte {off}: truncated block: it announces {count} records, "
                             f"{n - off - BLOCK_SIZE} bytes remain")
        recs = []
        roff = off + BLOCK_SIZE
        for t, ain, aout, packed in RECORD.iter_unpack(data[roff:roff + body]):
            op = (packed >> 48) & 0xFF
            if op not in OPS:
                raise TraceError(f"{name}: byte {roff + 30}: unknown operation {op} in record")
            recs.append(Record(t, op, packed & SIZE_MAX, packed >> 56, ain, aout))
            roff += RECORD_SIZE
        blocks.append(Block(tid, seq, recs, cticks, cns))
        off += BLOCK_SIZE + body
    return Trace(header, blocks)


def load(path: str | Path) -> Trace:
    return parse(read_bytes(path), str(path))


# ---- text form ----
# line 1:  larder-trace 1 pid=.. ppid=.. start_ns=.. proc_start=.. exec_seq=.. flags=.. root_pid=.. comm=..
# then:    block <tid> <thread_seq> <count> <clock_ticks> <clock_ns>
# then count lines: <t> <op> <size> <align_log2> <addr_in hex> <addr_out hex>

def to_text(trace: Trace) -> str:
    h = trace.header
    lines = [f"larder-trace {VERSION} pid={h.pid} ppid={h.ppid} start_ns={h.start_ns} proc_start={h.proc_start} "
             f"exec_seq={h.exec_seq} flags={h.flags} root_pid={h.root_pid} comm={h.comm.encode().hex()}"]
    for b in trace.blocks:
        lines.append(f"block {b.tid} {b.thread_seq} {len(b.records)} {b.clock_ticks} {b.clock_ns}")
        for r in b.records:
            lines.append(f"{r.t} {OPS[r.op]} {r.size} {r.align_log2} {r.addr_in:#x} {r.addr_out:#x}")
    return "\n".join(lines) + "\n"


def from_text(text: str, name: str = "text") -> Trace:
    lines = text.splitlines()
    if not lines or not lines[0].startswith("larder-trace "):
        raise TraceError(f"{name}: line 1: expected 'larder-trace {VERSION} ...'")
    head = lines[0].split()
    if head[1] != str(VERSION):
        raise TraceError(f"{name}: line 1: unsupported version {head[1]}")
    kv = dict(f.split("=", 1) for f in head[2:] if "=" in f)
    try:
        header = Header(int(kv["pid"]), int(kv["ppid"]), int(kv["start_ns"]), int(kv["proc_start"]),
                        int(kv["exec_seq"]), bytes.fromhex(kv.get("comm", "")).decode(errors="replace"),
                        int(kv.get("flags", 0)), int(kv.get("root_pid", kv.get("reserved", 0))))
    except (KeyError, ValueError) as e:
        raise TraceError(f"{name}: line 1: bad header field: {e}") from None
    blocks: list[Block] = []
    want = 0
    for no, line in enumerate(lines[1:], start=2):
        f = line.split()
        if not f:
            continue
        try:
            if f[0] == "block":
                if want:
                    raise TraceError(f"{name}: line {no}: block starts before the previous one has its {want} records")
                blocks.append(Block(int(f[1]), int(f[2]), [], int(f[4]), int(f[5])))
                want = int(f[3])
                continue
            if not blocks or want == 0:
                raise TraceError(f"{name}: line {no}: record outside a block")
            if f[1] not in OP_CODES:
                raise TraceError(f"{name}: line {no}: unknown operation {f[1]!r}")
            blocks[-1].records.append(Record(int(f[0]), OP_CODES[f[1]], int(f[2]), int(f[3]),
                                             int(f[4], 16), int(f[5], 16)))
            want -= 1
        except TraceError:
            raise
        except (IndexError, ValueError):
            raise TraceError(f"{name}: line {no}: cannot read {line!r}") from None
    if want:
        raise TraceError(f"{name}: end: the last block lacks {want} records")
    return Trace(header, blocks)


# ---- the files of one recorded process tree ----
def read_header(path: str | Path) -> Header | None:
    """The header alone (a .gz file is decompressed only that far); None if not a trace."""
    import gzip as _gz
    try:
        opener = _gz.open if str(path).endswith(".gz") else open
        with opener(path, "rb") as f:
            data = f.read(HEADER_SIZE)
    except (OSError, EOFError):
        return None
    if len(data) < HEADER_SIZE or data[:8] != MAGIC:
        return None
    (_, version, _, _, flags, pid, ppid, start, pstart, exec_seq, root_pid, comm) = HEADER.unpack_from(data, 0)
    return Header(pid, ppid, start, pstart, exec_seq, comm.rstrip(b"\0").decode(errors="replace"), flags, root_pid)


@dataclass
class Member:
    path: Path
    header: Header

    @property
    def role(self) -> str:
        h = self.header
        who = "root" if h.pid == h.root_pid else f"child of {h.ppid}"
        image = f", image {h.exec_seq + 1} (after {h.exec_seq} exec)" if h.exec_seq else ""
        return f"pid {h.pid} ({h.comm}), {who}{image}"


def family(path: str | Path, limit: int = 2000) -> list[Member]:
    """Every trace file of the recording that `path` belongs to, `path` included: the files
    in its folder whose header names the same root process (the recorder writes the root's
    pid into every file of the tree; docs/traces.md "Process trees"). Sorted by pid, then
    image. A file written before root_pid existed is its own family."""
    path = Path(path)
    me = read_header(path)
    if me is None:
        return []
    if me.root_pid == 0:
        return [Member(path, me)]
    out = []
    folder = path.parent if str(path.parent) else Path(".")
    for i, p in enumerate(sorted(folder.iterdir())):
        if i >= limit:
            break
        if not p.is_file() or p.stat().st_size < HEADER_SIZE and not p.name.endswith(".gz"):
            continue
        h = read_header(p)
        if h is not None and h.root_pid == me.root_pid:
            out.append(Member(p, h))
    roots = {m.header.proc_start for m in out if m.header.pid == me.root_pid}
    if len(roots) > 1:  # two recordings in one folder whose roots had the same pid
        mine = me.proc_start if me.pid == me.root_pid else None
        if mine is not None:
            out = [m for m in out if m.header.pid != me.root_pid or m.header.proc_start == mine]
    out.sort(key=lambda m: (m.header.pid != m.header.root_pid, m.header.pid, m.header.exec_seq))
    return out


def family_text(path: str | Path) -> str:
    """One line per other file of the same recorded tree, for `trace stats` and `trace replay`."""
    fam = family(path)
    if len(fam) <= 1:
        return ""
    path = Path(path)
    me = next((m for m in fam if m.path == path), None)
    lines = [f"process tree: this file is {me.role if me else path.name}; the recording (root pid "
             f"{fam[0].header.root_pid}) has {len(fam)} files, one per process image:"]
    for m in fam:
        mark = "*" if m.path == path else " "
        lines.append(f" {mark} {m.path.name}: {m.role}")
    return "\n".join(lines)
