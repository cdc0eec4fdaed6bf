"""Allocator detection, command-line specs and the TOML config file."""
import pytest

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


def test_parse_spec_with_environment(tmp_path):
    lib = tmp_path / "libx.so"
    lib.write_bytes(b"")
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


def test_config_file(tmp_path):
    lib = tmp_path / "libhoard.so"
    lib.write_bytes(b"")
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
