"""Shared fixtures for the larder-bench harness tests."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"


def build_dir() -> Path:
    return Path(os.environ.get("LARDER_BUILD_DIR", REPO / "build")).resolve()


@pytest.fixture(scope="session")
def bench_build() -> Path:
    """The build folder with the workload programs. The workloads are part of the build
    (`make test` builds first), so their absence is a failure, not a skip."""
    b = build_dir()
    missing = [w for w in ("malloc-test", "heap-leak", "threadtest", "larson") if not (b / "bin" / w).is_file()]
    if missing:
        pytest.fail(f"workload programs {missing} not found in {b}/bin: run `make build` "
                    f"(or set LARDER_BUILD_DIR to a build folder)")
    return b


@pytest.fixture(scope="session")
def cc() -> str:
    c = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if c is None:
        pytest.fail("no C compiler found to build the test allocators")
    return c


def build_so(cc: str, tmp: Path, name: str, source: str) -> Path:
    src = tmp / f"{name}.c"
    src.write_text(source)
    out = tmp / f"lib{name}.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", str(out), str(src)], check=True)
    return out


CRASH_MALLOC = r"""
#include <stdlib.h>
#include <stddef.h>
/* An allocator that fails every call: the harness must report the crash and go on. */
void *malloc(size_t n) { (void)n; abort(); }
void *calloc(size_t a, size_t b) { (void)a; (void)b; abort(); }
void *realloc(void *p, size_t n) { (void)p; (void)n; abort(); }
void free(void *p) { if (p) abort(); }
"""

CRASH_CTOR = r"""
#include <stdlib.h>
/* An allocator whose initialisation fails before main (it forwards to glibc until then). */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
void *malloc(size_t n) { return __libc_malloc(n); }
void free(void *p) { __libc_free(p); }
__attribute__((constructor)) static void larder_test_ctor(void) { abort(); }
"""

# A shared object that defines malloc and free (never preloaded by the tests that use it).
FAKE_ALLOC = r"""
#include <stddef.h>
void *malloc(size_t n) { (void)n; return NULL; }
void free(void *p) { (void)p; }
"""

# A shared object that defines no malloc: refused as an allocator.
NOT_ALLOC = r"""
int larder_test_not_an_allocator(int x) { return x + 1; }
"""
