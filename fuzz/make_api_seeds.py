#!/usr/bin/env python3
"""Seed inputs for the API fuzzer (fuzz/api_fuzz.c) that reach the edges from the start:

  - realloc from a block of every kind (small, medium, large, aligned small, aligned to S and
    to 1 MiB, calloc'ed, cache-line shared) to sizes of every kind (small, medium, large,
    possible but huge, impossible: 2^63, PTRDIFF_MAX, SIZE_MAX and neighbours), one below, at
    and one above each, then back, growing and shrinking;
  - memalign, posix_memalign and aligned_alloc with every power of two 2^0 .. 2^63 and every
    alignment of the fuzzer's list of non-powers of two, at a small and a large size.

The encoding is api_fuzz.c's (4 bytes per operation; the edge table's S-independent entries
have fixed indices: [0, 58] = 2^5 .. 2^63, [59, 68] the sizes near PTRDIFF_MAX and SIZE_MAX).
The fuzzer then mutates from these; merge what it finds into fuzz/corpus-api.

usage: make_api_seeds.py OUTDIR
"""
import hashlib
import os
import sys

OP_MALLOC, OP_CALLOC, OP_REALLOC, OP_MEMALIGN, OP_POSIX_MEMALIGN, OP_ALIGNED_ALLOC = 0, 3, 4, 7, 8, 9
OP_USABLE, OP_FREE, OP_VALIDATE, OP_SHARED = 10, 11, 13, 15
TABLE, VARIANT = 0x80, 0x40


def pow2_index(k):
    """Edge-table index of 2^k (k = 5 .. 63)."""
    return k - 5


HUGE = {"PTRDIFF_MAX": 59, "PTRDIFF_MAX-4095": 60, "PTRDIFF_MAX-S": 61, "2^62+S": 62,
        "SIZE_MAX": 63, "SIZE_MAX-15": 64, "SIZE_MAX-100": 65, "SIZE_MAX-4095": 66}


def op(code, slot=0, b2=0, b3=0, flags=0, delta=0):
    return bytes([code | flags, (slot & 63) | (delta << 6), b2 & 255, b3 & 255])


def random_size(exp, low=0):
    """Bytes 2-3 for a size of about 2^exp (api_fuzz.c af_size, random mode)."""
    return ((exp % 23) << 3) | ((low >> 8) & 7), low & 255


# blocks of every kind, made in slot 0
def from_kinds():
    b2, b3 = random_size(7, 100)
    yield "small", [op(OP_MALLOC, 0, b2, b3)]
    yield "medium", [op(OP_MALLOC, 0, *random_size(20))]
    yield "large", [op(OP_MALLOC, 0, *random_size(22))]
    yield "large-table", [op(OP_MALLOC, 0, pow2_index(24), 0, TABLE)]         # 16 MiB
    yield "aligned-small", [op(OP_MEMALIGN, 0, 7 << 3, 12)]                  # memalign(4096, small)
    yield "aligned-S", [op(OP_MEMALIGN, 0, pow2_index(12), 16, TABLE)]       # memalign(64 KiB, 4096)
    yield "aligned-1M", [op(OP_ALIGNED_ALLOC, 0, pow2_index(21), 20, TABLE)]  # aligned_alloc(1 MiB, 2 MiB)
    yield "aligned-1M-big", [op(OP_ALIGNED_ALLOC, 0, pow2_index(24), 20, TABLE)]  # 16 MiB
    yield "calloc", [op(OP_CALLOC, 0, pow2_index(18), 0, TABLE)]
    yield "shared", [op(OP_SHARED, 0, *random_size(9, 300))]


# target sizes: (name, byte 2, table?) - table entries by index, the rest in random mode
TO = [("small", pow2_index(6), True), ("small-top", pow2_index(14), True),
      ("medium", pow2_index(17), True), ("medium-top", random_size(20, 2047), False),
      ("large", pow2_index(22), True), ("large-24", pow2_index(24), True),
      ("cache-limit", pow2_index(26), True), ("huge-30", pow2_index(30), True),
      ("huge-36", pow2_index(36), True), ("huge-46", pow2_index(46), True),
      ("2^63", pow2_index(63), True)] + [(k, v, True) for k, v in sorted(HUGE.items())]


def seeds():
    for fname, make in from_kinds():
        for tname, size, table in TO:
            for delta in (0, 1, 2):
                if table:
                    to = op(OP_REALLOC, 0, size, 0, TABLE, delta)
                else:
                    to = op(OP_REALLOC, 0, size[0], size[1] - delta)
                ops = list(make)
                ops.append(to)
                ops.append(op(OP_USABLE, 0))
                ops.append(op(OP_REALLOC, 0, pow2_index(8), 0, TABLE))  # back down (or from NULL)
                ops.append(to)                                          # and up again
                ops.append(op(OP_FREE, 0))
                ops.append(op(OP_VALIDATE, 0))
                yield "realloc-%s-to-%s-%d" % (fname, tname, delta), b"".join(ops)
    for code, name in ((OP_MEMALIGN, "memalign"), (OP_POSIX_MEMALIGN, "posix_memalign"),
                       (OP_ALIGNED_ALLOC, "aligned_alloc")):
        for k in range(64):  # powers of two over the whole range (the variant's b % 64)
            ops = [op(code, 1, random_size(6, 40)[0], k, VARIANT),
                   op(code, 2, pow2_index(22), k, TABLE | VARIANT),
                   op(OP_REALLOC, 1, pow2_index(12), 0, TABLE), op(OP_FREE, 1), op(OP_FREE, 2)]
            yield "%s-2^%d" % (name, k), b"".join(ops)
        for i in range(16):  # the list of non-powers of two
            ops = [op(code, 1, 6 << 3, 0x80 | i), op(code, 2, pow2_index(20), 0x80 | i, TABLE), op(OP_FREE, 1)]
            yield "%s-odd-%d" % (name, i), b"".join(ops)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    n = 0
    for name, data in seeds():
        with open(os.path.join(out, hashlib.sha1(data).hexdigest()), "wb") as f:
            f.write(data)
        n += 1
    print("make_api_seeds: %d inputs in %s" % (n, out))


if __name__ == "__main__":
    main()
