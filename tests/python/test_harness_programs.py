"""The `programs` suite at the short scale `make test` uses: real programs from Debian packages
(scripts/install-deps.sh) under two allocators, each output checked, the server stopped."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from larder_bench import suites

PROGRAMS = ("python3", "sqlite3", "clang", "memcached", "memcaslap")


def test_programs_suite_short_scale_over_two_allocators(tmp_path, bench_build):
    missing = [p for p in PROGRAMS if not shutil.which(p)]
    if missing:
        pytest.fail(f"{missing} missing: scripts/install-deps.sh installs them (`make deps` as root)")
    entries = suites.select("programs", scale=0.02)
    assert [e.series for e in entries] == ["python", "sqlite", "clang", "memcached"]
    assert {e.kind for e in entries} == {"program"} and entries[3].command.is_server
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    r = subprocess.run([sys.executable, "-m", "larder_bench", "run", "--suite", "programs", "--scale", "0.02",
                        "--repeats", "1", "--strace", "none", "--allocators", "glibc,larder",
                        "--build-dir", str(bench_build), "--output-dir", str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    (out,) = list(tmp_path.iterdir())
    doc = json.loads((out / "results.json").read_text())
    runs = doc["runs"]
    assert len(runs) == 8
    assert all(x["status"] == "ok" for x in runs), [(x["series"], x["allocator"], x.get("message")) for x in runs]
    checked = {x["series"] for x in runs if x.get("check")}
    assert checked == {"python", "sqlite", "clang"}
    for s in checked:
        assert len({x["check"]["sha256"] for x in runs if x["series"] == s}) == 1
    mc = [x for x in runs if x["series"] == "memcached"]
    assert all(x["figures"]["rss_after_idle_kb"] > 0 and x["figures"]["client_wall_s"] > 0 for x in mc)
    assert r.stdout.startswith("Verdict against glibc")
    larder = next(ln for ln in r.stdout.splitlines() if ln.startswith("larder "))
    assert larder.split()[1] == "4"   # four series in the verdict
