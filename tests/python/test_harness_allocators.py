"""Allocator detection, command-line specs, profiles and the TOML config file."""
import pytest

from conftest import FAKE_ALLOC, NOT_ALLOC, build_so
from larder_bench import allocators as A


def test_detect_lists_builtin_allocators_and_says_how_to_get_missing(tmp_path):
    found = {a.name: a for a in A.detect(tmp_path)}
    assert found["glibc"].found and found["glibc"].path is None
    # An empty build folder: larder is missing and the message says how to build it.
    assert not found["larder"].found
    assert "make build" in found["larder"].missing
    for name in ("jemalloc", "tcmalloc", "mimalloc"):
        a = found[name]
        if not a.found:
            assert "apt-get install" in a.missing and a.package in a.missing
        else:
            assert a.path.endswith(".so.2") or ".so.4" in a.path


def test_parse_spec_with_environment(tmp_path, cc):
    lib = build_so(cc, tmp_path, "x", FAKE_ALLOC)
    a = A.parse_spec(f"mine={lib},MY_OPT=1,OTHER=a=b")
    assert a.name == "mine" and a.path == str(lib) and a.found
    assert a.env == {"MY_OPT": "1", "OTHER": "a=b"}
    env = a.child_env(base={"LD_PRELOAD": "/leak.so", "PATH": "/bin"}, extra={"X": "y"})
    assert env["LD_PRELOAD"] == str(lib) and env["MY_OPT"] == "1" and env["X"] == "y"


def test_parse_spec_missing_library_is_reported_not_fatal():
    a = A.parse_spec("ghost=/nonexistent/libghost.so")
    assert not a.found
    assert "/nonexistent/libghost.so not found" in a.missing


@pytest.mark.parametrize("spec", ["noequals", "=/x.so", "a=/x.so,NOVALUE", "a=/x.so,1BAD=2"])
def test_parse_spec_rejects_bad_input(spec):
    with pytest.raises(A.AllocatorError):
        A.parse_spec(spec)


def test_glibc_child_env_drops_inherited_preload():
    g = A.Allocator("glibc", None)
    assert "LD_PRELOAD" not in g.child_env(base={"LD_PRELOAD": "/x.so"})


def test_config_file(tmp_path, cc):
    lib = build_so(cc, tmp_path, "hoard", FAKE_ALLOC)
    cfg = tmp_path / "larder-bench.toml"
    cfg.write_text(f'[allocators.hoard]\npath = "{lib}"\nenv = {{ HOARD_X = 2 }}\n'
                   '[allocators.gone]\npath = "/nonexistent/libgone.so"\npackage = "libgone1"\n')
    got = {a.name: a for a in A.load_config(cfg)}
    assert got["hoard"].found and got["hoard"].env == {"HOARD_X": "2"}
    assert not got["gone"].found and "apt-get install libgone1" in got["gone"].missing


@pytest.mark.parametrize("text, msg", [
    ("[allocators.x]\npath = 3\n", "path must be a string"),
    ("[allocators.x]\nlib = '/x.so'\n", "unknown keys"),
    ("[allocators\n", "not valid TOML"),
])
def test_config_errors_are_clear(tmp_path, text, msg):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    with pytest.raises(A.AllocatorError, match=msg):
        A.load_config(cfg)


def test_select_and_merge():
    base = [A.Allocator("glibc", None), A.Allocator("larder", "/a.so")]
    merged = A.merge(base, [A.Allocator("larder", "/b.so")])
    assert [a.path for a in merged] == [None, "/b.so"]
    assert [a.name for a in A.select(merged, ["larder", "glibc"])] == ["larder", "glibc"]
    with pytest.raises(A.AllocatorError, match="unknown allocator"):
        A.select(merged, ["nope"])


def test_so_without_malloc_is_refused(tmp_path, cc):
    """Issue 10: a .so that defines no malloc would be preloaded without effect and measured
    as glibc; it is refused with the reason."""
    lib = build_so(cc, tmp_path, "notalloc", NOT_ALLOC)
    a = A.parse_spec(f"fake={lib}")
    assert not a.found and "defines no malloc" in a.missing and "measure glibc" in a.missing
    good = A.parse_spec(f"good={build_so(cc, tmp_path, 'good', FAKE_ALLOC)}")
    assert good.found
    text = tmp_path / "libtext.so"
    text.write_text("not a library")
    assert "not an ELF" in A.parse_spec(f"t={text}").missing


@pytest.mark.parametrize("spec, name, base, env", [
    ("jem-nodecay=jemalloc MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0", "jem-nodecay", "jemalloc",
     {"MALLOC_CONF": "dirty_decay_ms:0,muzzy_decay_ms:0"}),
    ("g=glibc GLIBC_TUNABLES=glibc.malloc.mmap_threshold=65536:glibc.malloc.trim_threshold=131072",
     "g", "glibc", {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=65536:glibc.malloc.trim_threshold=131072"}),
    ("two=larder LARDER_PURGE_DELAY_MS=0 LARDER_LARGE_CACHE_MB=0", "two", "larder",
     {"LARDER_PURGE_DELAY_MS": "0", "LARDER_LARGE_CACHE_MB": "0"}),
    ("q=tcmalloc 'X=a value, with: spaces=and more'", "q", "tcmalloc", {"X": "a value, with: spaces=and more"}),
    ("bare=mimalloc", "bare", "mimalloc", {}),
])
def test_profile_spec_keeps_commas_colons_equals(spec, name, base, env):
    p = A.parse_profile(spec)
    assert (p.name, p.base, p.env) == (name, base, env)


@pytest.mark.parametrize("spec", ["", "noequals", "=glibc", "x=", "x=glibc NOVALUE", "x=glibc 1BAD=2", "x=glibc 'open"])
def test_profile_spec_rejects_bad_input(spec):
    with pytest.raises(A.AllocatorError):
        A.parse_profile(spec)


def test_profiles_from_config_and_apply(tmp_path):
    cfg = tmp_path / "larder-bench.toml"
    cfg.write_text('[profiles.glibc-64k]\nallocator = "glibc"\n'
                   'env = { GLIBC_TUNABLES = "glibc.malloc.mmap_threshold=65536:glibc.malloc.arena_max=1" }\n'
                   '[profiles.jem-x]\nallocator = "jemalloc"\nenv = { MALLOC_CONF = "narenas:1,tcache:false" }\n')
    profs = A.load_profiles(cfg)
    base = [A.Allocator("glibc", None), A.Allocator("jemalloc", "/j.so", env={"A": "1"}),
            A.Allocator("tcmalloc", "/t.so", found=False, missing="not installed")]
    got = {a.name: a for a in A.apply_profiles(base, profs + [A.parse_profile("tc=tcmalloc TCMALLOC_SKIP_MMAP=1")])}
    assert got["glibc-64k"].path is None and got["glibc-64k"].profile_of == "glibc"
    assert got["glibc-64k"].env["GLIBC_TUNABLES"] == "glibc.malloc.mmap_threshold=65536:glibc.malloc.arena_max=1"
    assert got["jem-x"].path == "/j.so" and got["jem-x"].env == {"A": "1", "MALLOC_CONF": "narenas:1,tcache:false"}
    assert not got["tc"].found and "missing" in got["tc"].missing
    assert "LD_PRELOAD" not in got["glibc-64k"].child_env(base={"LD_PRELOAD": "/x.so"})
    with pytest.raises(A.AllocatorError, match="unknown allocator"):
        A.apply_profiles(base, [A.parse_profile("z=hoard")])
    bad = tmp_path / "bad.toml"
    bad.write_text('[profiles.x]\nenv = { A = "1" }\n')
    with pytest.raises(A.AllocatorError, match="needs allocator"):
        A.load_profiles(bad)
