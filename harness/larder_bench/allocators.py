"""Which allocators to compare, and how a program is made to use each one.

glibc is the C library's own malloc (nothing preloaded).  Every other allocator is
a shared object given to the child with LD_PRELOAD (set in the child's environment
only, never in the harness's), plus optional environment variables.
"""
from __future__ import annotations

import os
import subprocess
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

LIBDIR = "/usr/lib/x86_64-linux-gnu"


class AllocatorError(ValueError):
    """A bad allocator specification (command line or config file)."""


@dataclass
class Allocator:
    name: str
    path: str | None  # None: no preload (glibc)
    env: dict = field(default_factory=dict)
    package: str | None = None  # Debian package that ships it, when known
    install_hint: str | None = None
    version: str | None = None
    found: bool = True
    missing: str | None = None  # why it was skipped
    profile_of: str | None = None  # a profile: the allocator it tunes (its own env is on top)

    def child_env(self, base: dict | None = None, extra: dict | None = None) -> dict:
        env = dict(os.environ if base is None else base)
        # The harness's own environment must not leak a preload into a glibc run.
        env.pop("LD_PRELOAD", None)
        if self.path:
            env["LD_PRELOAD"] = self.path
        env.update(self.env)
        if extra:
            env.update(extra)
        return env

    def to_json(self) -> dict:
        return {
            "name": self.name, "path": self.path, "env": dict(self.env),
            "package": self.package, "version": self.version,
            "found": self.found, "missing": self.missing, "profile_of": self.profile_of,
        }


# name, candidate paths (first that exists wins), Debian package per path.
_SYSTEM = [
    ("jemalloc", [(f"{LIBDIR}/libjemalloc.so.2", "libjemalloc2")]),
    ("tcmalloc", [(f"{LIBDIR}/libtcmalloc.so.4", "libgoogle-perftools4"),
                  (f"{LIBDIR}/libtcmalloc_minimal.so.4", "libtcmalloc-minimal4")]),
    ("mimalloc", [(f"{LIBDIR}/libmimalloc.so.2", "libmimalloc2.0")]),
]


# Peers that Debian does not package, built from their sources by scripts/build-peers.sh into
# <build>/peers/lib<name>.so, with <build>/peers/<name>.version saying what from.
_BUILT_PEERS = ["mimalloc3", "snmalloc", "rpmalloc"]
PEERS_HINT = "build it with `make peers` (scripts/build-peers.sh: its sources from crates.io)"


def _built(name: str, lib: Path, hint: str, version: str) -> Allocator:
    """A library built in the build folder (larder's, or a peer's): missing, with hint, when absent."""
    p = lib.resolve()
    a = Allocator(name, str(p), install_hint=hint, version=version)
    if not p.is_file():
        a.found = False
        a.missing = f"{p} not found; {hint}"
    return a


def _built_peer(build: Path, name: str) -> Allocator:
    try:
        version = (build / "peers" / f"{name}.version").read_text().strip()
    except OSError:
        version = ""
    return _built(name, build / "peers" / f"lib{name}.so", PEERS_HINT, version or "built by scripts/build-peers.sh")


def _dpkg_version(package: str) -> str | None:
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def _dpkg_owner(path: str) -> str | None:
    """The package that ships path (tries the /usr-merged and unmerged spellings)."""
    cands = [path, os.path.realpath(path)]
    for p in list(cands):
        if p.startswith("/usr/lib/"):
            cands.append(p[len("/usr"):])
    for p in cands:
        try:
            out = subprocess.run(["dpkg-query", "-S", p], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode == 0 and ":" in out.stdout:
            return out.stdout.split(":", 1)[0].split(",")[0].strip()
    return None


def glibc_version() -> str | None:
    try:
        return os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        return None


def _with_version(a: Allocator) -> Allocator:
    if a.path is None:
        a.package = a.package or "libc6"
    elif a.package is None and a.found:
        a.package = _dpkg_owner(a.path)
    if a.package and a.version is None:
        a.version = _dpkg_version(a.package)
    return a


def detect(build_dir: str | os.PathLike) -> list[Allocator]:
    """The built-in allocators, found or not (a missing one says how to get it)."""
    build = Path(build_dir)
    out = [Allocator("glibc", None, package="libc6", version=None)]
    out[0].version = _dpkg_version("libc6") or glibc_version()
    for name, lib, hint in [("larder", "liblarder.so", "build it with `make build`"),
                            ("larder-pool", "liblarder-pool.so", "build it with `make build` (built only when the pool library provides it)")]:
        out.append(_built(name, build / "lib" / lib, hint, "built from this tree"))
    for name, cands in _SYSTEM:
        for path, pkg in cands:
            if os.path.isfile(path):
                out.append(_with_version(Allocator(name, path, package=pkg)))
                break
        else:
            path, pkg = cands[0]
            out.append(Allocator(name, path, package=pkg, found=False,
                                 install_hint=f"sudo apt-get install {pkg}",
                                 missing=f"{path} not found; install it with `sudo apt-get install {pkg}`"))
    out.extend(_built_peer(build, name) for name in _BUILT_PEERS)
    return out


def _check_env_name(name: str, where: str) -> None:
    if not name or not (name[0].isalpha() or name[0] == "_") or not all(ch.isalnum() or ch == "_" for ch in name):
        raise AllocatorError(f"{where}: bad environment variable name {name!r}")


def parse_spec(spec: str) -> Allocator:
    """`name=/path/lib.so[,ENV=VAL...]` from the command line (`name=` alone: no preload)."""
    if "=" not in spec:
        raise AllocatorError(f"--allocator {spec!r}: expected name=/path/lib.so[,ENV=VAL...]")
    name, rest = spec.split("=", 1)
    name = name.strip()
    if not name or "," in name or "/" in name:
        raise AllocatorError(f"--allocator {spec!r}: bad allocator name {name!r}")
    parts = rest.split(",")
    path = parts[0].strip() or None
    env = {}
    for kv in parts[1:]:
        if "=" not in kv:
            raise AllocatorError(f"--allocator {spec!r}: {kv!r} is not ENV=VALUE")
        k, v = kv.split("=", 1)
        _check_env_name(k, f"--allocator {spec!r}")
        env[k] = v
    return _finish_user(Allocator(name, path, env=env), f"--allocator {name}")


def _finish_user(a: Allocator, where: str) -> Allocator:
    if a.path is not None:
        a.path = os.path.abspath(os.path.expanduser(a.path))
        if not os.path.isfile(a.path):
            a.found = False
            hint = f"; install it with `sudo apt-get install {a.package}`" if a.package else ""
            a.missing = f"{where}: {a.path} not found{hint}"
        else:
            why = not_an_allocator(a.path)
            if why:
                a.found = False
                a.missing = f"{where}: {a.path} is not an allocator: {why}"
    return _with_version(a) if a.found else a


def dynamic_symbols(path: str) -> set[str] | None:
    """Names a shared object defines in its dynamic symbol table (.dynsym), read from the
    ELF file itself; None if it is not a 64-bit little-endian ELF file."""
    import struct
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    out: set[str] = set()
    for sh in sections:
        if sh[1] != 11:  # SHT_DYNSYM
            continue
        _, _, _, _, off, size, link, _, _, entsize = sh
        stroff = sections[link][4]
        for k in range(size // (entsize or 24)):
            name, info, _, shndx, value, _ = struct.unpack_from("<IBBHQQ", data, off + k * (entsize or 24))
            if shndx == 0 or (info & 0xF) != 2:  # undefined, or not a function
                continue
            end = data.index(b"\0", stroff + name)
            out.add(data[stroff + name:end].decode(errors="replace"))
    return out


def not_an_allocator(path: str) -> str | None:
    """Why a .so cannot replace malloc (None when it can): it must define malloc and free.
    A library without them would be preloaded without effect and measured as glibc."""
    syms = dynamic_symbols(path)
    if syms is None:
        return "not an ELF shared object"
    missing = [f for f in ("malloc", "free") if f not in syms]
    if missing:
        return f"it defines no {' and no '.join(missing)} (preloading it would measure glibc)"
    return None


def load_config(path: str | os.PathLike) -> list[Allocator]:
    """Allocators from a TOML file:

        [allocators.hoard]
        path = "/opt/hoard/libhoard.so"   # omit for no preload
        env = { HOARD_OPTION = "1" }      # optional
        package = "libhoard"              # optional: dpkg version and install hint
    """
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except OSError as e:
        raise AllocatorError(f"config {p}: cannot read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise AllocatorError(f"config {p}: not valid TOML: {e}") from None
    table = data.get("allocators", {})
    if not isinstance(table, dict):
        raise AllocatorError(f"config {p}: [allocators] must be a table")
    out = []
    for name, body in table.items():
        where = f"config {p}: allocators.{name}"
        if not isinstance(body, dict):
            raise AllocatorError(f"{where}: must be a table with path/env")
        unknown = set(body) - {"path", "env", "package"}
        if unknown:
            raise AllocatorError(f"{where}: unknown keys {sorted(unknown)} (known: path, env, package)")
        apath = body.get("path")
        if apath is not None and not isinstance(apath, str):
            raise AllocatorError(f"{where}: path must be a string")
        env = body.get("env", {})
        if not isinstance(env, dict):
            raise AllocatorError(f"{where}: env must be a table of strings")
        for k, v in env.items():
            _check_env_name(k, where)
            if not isinstance(v, (str, int, float)):
                raise AllocatorError(f"{where}: env.{k} must be a string or number")
        pkg = body.get("package")
        out.append(_finish_user(Allocator(name, apath or None, env={k: str(v) for k, v in env.items()},
                                          package=pkg), where))
    return out


# ---- profiles: an allocator plus its settings ----
@dataclass
class Profile:
    name: str
    base: str
    env: dict = field(default_factory=dict)
    note: str = ""


def parse_profile(spec: str) -> Profile:
    """`NAME=BASE [VAR=VALUE ...]` from --profile, split like a shell line (quote a value with
    spaces); a value is everything after the variable's first '=', so commas, colons and
    equals signs pass through: jem-nodecay=jemalloc MALLOC_CONF=dirty_decay_ms:0,muzzy_decay_ms:0"""
    import shlex
    try:
        words = shlex.split(spec)
    except ValueError as e:
        raise AllocatorError(f"--profile {spec!r}: {e}") from None
    if not words or "=" not in words[0]:
        raise AllocatorError(f"--profile {spec!r}: expected NAME=ALLOCATOR [VAR=VALUE ...]")
    name, base = (x.strip() for x in words[0].split("=", 1))
    if not name or "/" in name or "," in name or not base:
        raise AllocatorError(f"--profile {spec!r}: bad profile name {name!r} or allocator {base!r}")
    env = {}
    for w in words[1:]:
        if "=" not in w:
            raise AllocatorError(f"--profile {spec!r}: {w!r} is not VAR=VALUE")
        k, v = w.split("=", 1)
        _check_env_name(k, f"--profile {name}")
        env[k] = v
    return Profile(name, base, env)


def load_profiles(path: str | os.PathLike) -> list[Profile]:
    """[profiles.NAME] tables of the config file: allocator = "glibc", env = { ... }."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except OSError as e:
        raise AllocatorError(f"config {p}: cannot read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise AllocatorError(f"config {p}: not valid TOML: {e}") from None
    table = data.get("profiles", {})
    if not isinstance(table, dict):
        raise AllocatorError(f"config {p}: [profiles] must be a table")
    out = []
    for name, body in table.items():
        where = f"config {p}: profiles.{name}"
        if not isinstance(body, dict) or not isinstance(body.get("allocator"), str):
            raise AllocatorError(f"{where}: needs allocator = \"NAME\" (and optionally env = {{...}}, note = \"...\")")
        unknown = set(body) - {"allocator", "env", "note"}
        if unknown:
            raise AllocatorError(f"{where}: unknown keys {sorted(unknown)} (known: allocator, env, note)")
        env = body.get("env", {})
        if not isinstance(env, dict):
            raise AllocatorError(f"{where}: env must be a table of strings")
        for k, v in env.items():
            _check_env_name(k, where)
            if not isinstance(v, (str, int, float)):
                raise AllocatorError(f"{where}: env.{k} must be a string or number")
        out.append(Profile(name, body["allocator"], {k: str(v) for k, v in env.items()}, str(body.get("note", ""))))
    return out


def apply_profiles(allocs: list[Allocator], profiles: list[Profile]) -> list[Allocator]:
    """Each profile becomes an allocator of its own name: its base's library and environment
    with the profile's variables on top. A profile of a missing allocator is missing too."""
    byname = {a.name: a for a in allocs}
    out = list(allocs)
    for pr in profiles:
        base = byname.get(pr.base)
        if base is None:
            raise AllocatorError(f"profile {pr.name}: unknown allocator {pr.base!r}; known: {', '.join(byname)}")
        a = Allocator(pr.name, base.path, env={**base.env, **pr.env}, package=base.package,
                      install_hint=base.install_hint, version=base.version, found=base.found,
                      missing=(f"profile of {base.name}, which is missing: {base.missing}" if not base.found else None),
                      profile_of=base.profile_of or base.name)
        byname[pr.name] = a
        out = [x for x in out if x.name != pr.name] + [a]
    return out


def merge(builtin: list[Allocator], extra: list[Allocator]) -> list[Allocator]:
    """Later definitions replace earlier ones of the same name, keeping first position."""
    byname: dict[str, Allocator] = {}
    for a in builtin + extra:
        byname[a.name] = a
    return list(byname.values())


def select(allocs: list[Allocator], names: list[str] | None) -> list[Allocator]:
    """Keep the named allocators in the order given; an unknown name is an error."""
    if not names:
        return allocs
    byname = {a.name: a for a in allocs}
    unknown = [n for n in names if n not in byname]
    if unknown:
        raise AllocatorError(f"unknown allocator(s) {', '.join(unknown)}; known: {', '.join(byname)}")
    return [byname[n] for n in names]
