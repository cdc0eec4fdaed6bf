"""Any program as a workload: `--command 'NAME=CMD ARGS...'`, `[commands.NAME]` in the config
file, and server entries (a server under the allocator, a client driving it on loopback).

A command becomes an ordinary suite Entry (one series, one case) whose `command` holds a
Command: the runner starts it under every allocator like a workload program, with the same
repeats, measurements and system-call pass (docs/harness.md, "Any program").

Placeholders in the words of cmd, server and check, and in cwd: {repo}, {build_dir},
{out_dir} (this run's results folder), {work_dir} (a scratch folder per series inside it),
{stdout} (check only: the file holding the run's standard output; for a server, the
client's), {host} and {port} (server entries: the loopback address and the free port chosen
for this run), {user} (the user running the harness), and every name in the entry's params.
A word that is exactly {NAME} for a list parameter becomes one word per item. Any other
brace is left as written, so `awk '{print $1}'` needs no escaping.
"""
from __future__ import annotations

import getpass
import ipaddress
import os
import re
import shlex
import shutil
import signal
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

COMMANDS_SUITE = "commands"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# Figures a server run reports; the first is what server series are compared by.
SERVER_METRIC = "client_wall_s"


class CommandError(ValueError):
    """A bad command entry (command line or config file)."""


@dataclass(frozen=True)
class Figure:
    """A figure the program prints (a benchmark that runs for a fixed time and reports its
    throughput), compared instead of wall time: the first group of `pattern`, searched in its
    standard output (for a server entry, the client's), read as a number times `scale`."""
    name: str                        # the figure's name in results (e.g. ops_per_s)
    pattern: str                     # a regular expression with one group: the number
    higher_is_better: bool = False
    scale: float = 1.0               # multiplies the number read (e.g. 1e9 / iterations: use invert)
    invert: bool = False             # the figure is scale / number (a rate turned into a time)

    def read(self, text: str) -> float | None:
        """The figure in `text`, or None when the pattern does not match a positive number."""
        m = re.search(self.pattern, text, re.MULTILINE)
        if not m:
            return None
        try:
            v = float(m.group(1))
        except (IndexError, ValueError):
            return None
        if not 0 < v < float("inf"):  # (NaN fails it too)
            return None
        return self.scale / v if self.invert else self.scale * v


def check_figure(body, where: str) -> Figure:
    """figure = { name = "...", pattern = "...", higher_is_better = false, scale = 1, invert = false }"""
    if not isinstance(body, dict):
        raise CommandError(f"{where}: figure must be a table with name and pattern (docs/harness.md)")
    unknown = set(body) - {"name", "pattern", "higher_is_better", "scale", "invert"}
    if unknown:
        raise CommandError(f"{where}: figure: unknown keys {sorted(unknown)} "
                           f"(known: higher_is_better, invert, name, pattern, scale)")
    name, pattern = body.get("name"), body.get("pattern")
    if not isinstance(name, str) or not re.match(r"^[a-z][a-z0-9_]*$", name):
        raise CommandError(f"{where}: figure.name must be a lowercase name (letters, digits, _), e.g. ops_per_s")
    if not isinstance(pattern, str) or not pattern:
        raise CommandError(f"{where}: figure.pattern must be a regular expression with one group, the number")
    try:
        groups = re.compile(pattern).groups
    except re.error as e:
        raise CommandError(f"{where}: figure.pattern {pattern!r} is not a regular expression: {e}") from None
    if groups < 1:
        raise CommandError(f"{where}: figure.pattern {pattern!r} has no group: put the number in ( )")
    hib, invert = body.get("higher_is_better", False), body.get("invert", False)
    if not isinstance(hib, bool) or not isinstance(invert, bool):
        raise CommandError(f"{where}: figure.higher_is_better and figure.invert must be true or false")
    scale = body.get("scale", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
        raise CommandError(f"{where}: figure.scale must be a positive number")
    return Figure(name, pattern, hib, float(scale), invert)


@dataclass(frozen=True)
class Command:
    argv: tuple                      # the program, or for a server entry the client (load generator)
    cwd: str | None = None           # working directory (placeholders allowed); default: the harness's
    env: dict = field(default_factory=dict)   # set for the program (and the client, and check)
    check: tuple | None = None       # its standard output must be the same under every allocator
    server: tuple | None = None      # server entries: the server, started under the allocator
    host: str = "127.0.0.1"          # loopback only
    idle: float | str = 0.0          # seconds the server idles after the client ends (or "{param}")
    ready_timeout: float = 30.0      # seconds for the server to accept connections
    stop_signal: str = "TERM"        # how the harness asks the server to stop
    stop_timeout: float = 10.0       # then it is killed
    package: str | None = None       # Debian package(s) with the program(s): the install hint
    hint: str | None = None          # how to get a missing program, where no package has it
    figure: "Figure | None" = None   # the comparison figure, read from the output (else wall time)

    @property
    def is_server(self) -> bool:
        return self.server is not None


# ---------------------------------------------------------------- parsing

def _words(value, where: str, what: str) -> tuple:
    if isinstance(value, str):
        try:
            words = shlex.split(value)
        except ValueError as e:
            raise CommandError(f"{where}: {what}: {e}") from None
    elif isinstance(value, (list, tuple)) and all(isinstance(w, (str, int, float)) for w in value):
        words = [str(w) for w in value]
    else:
        raise CommandError(f"{where}: {what} must be a string (split like a shell line) or a list of strings")
    if not words or not words[0].strip():
        raise CommandError(f"{where}: empty {what}: give the program to run and its arguments")
    return tuple(words)


def check_name(name: str, where: str) -> str:
    name = name.strip()
    if not name:
        raise CommandError(f"{where}: empty name; expected NAME=CMD ARGS...")
    if not _NAME.match(name):
        raise CommandError(f"{where}: bad name {name!r}: use letters, digits and . _ + - (it names the series)")
    return name


def _loopback(host: str, where: str) -> str:
    if host == "localhost":
        return host
    try:
        ok = ipaddress.ip_address(host).is_loopback
    except ValueError:
        ok = False
    if not ok:
        raise CommandError(f"{where}: host {host!r} is not a loopback address: servers are run on 127.0.0.0/8 "
                           f"or ::1 only (nothing here may send traffic off this machine)")
    return host


def _signal_name(name: str, where: str) -> str:
    n = name.upper().removeprefix("SIG")
    if not hasattr(signal, f"SIG{n}") or n in ("KILL", "STOP"):
        raise CommandError(f"{where}: stop_signal {name!r} is not a signal a server can handle (e.g. TERM, INT)")
    return n


def entry(name: str, command: Command, *, suite: str = COMMANDS_SUITE, title: str | None = None,
          params: dict | None = None, work: tuple = (), timeout: float | None = None,
          repeats: int | None = None, setup: tuple = (), rss_plot: bool = True):
    """The suite Entry that runs `command` as series `name`."""
    from .suites import Entry   # here: suites.py imports the programs suite, which calls this
    prog = os.path.basename((command.server or command.argv)[0])
    if title is None:
        if command.is_server:
            title = f"server {shlex.join(command.server)}, driven by {shlex.join(command.argv)}"
        else:
            title = f"{shlex.join(command.argv)}"
    metric = SERVER_METRIC if command.is_server else "wall_s"
    higher = False
    if command.figure is not None:
        metric, higher = command.figure.name, command.figure.higher_is_better
    return Entry(suite, name, prog, title, params=dict(params or {}), axis=None, values=(None,),
                 kind="program", work=tuple(work), metric=metric, higher_is_better=higher,
                 repeats=repeats, timeout=timeout, setup=tuple(setup), rss_plot=rss_plot, command=command)


def parse_spec(spec: str):
    """`--command 'NAME=CMD ARGS...'`: the whole spec is split like a shell line."""
    where = f"--command {spec!r}"
    try:
        words = shlex.split(spec)
    except ValueError as e:
        raise CommandError(f"{where}: {e}") from None
    if not words or "=" not in words[0]:
        raise CommandError(f"{where}: expected NAME=CMD ARGS... (e.g. --command 'gzip=gzip -9 -c big.txt')")
    name, prog = words[0].split("=", 1)
    name = check_name(name, where)
    argv = ([prog] if prog else []) + words[1:]
    if not argv or not argv[0].strip():
        raise CommandError(f"{where}: empty command: give the program to run after {name}=")
    return entry(name, Command(tuple(argv)))


_KEYS = {"cmd", "cwd", "env", "timeout", "check", "repeats", "params", "scale", "server", "host", "idle",
         "ready_timeout", "stop_signal", "stop_timeout", "title", "figure"}


def _number(body: dict, key: str, where: str, default, positive: bool = True):
    v = body.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (positive and v <= 0) or v < 0:
        raise CommandError(f"{where}: {key} must be a {'positive' if positive else 'non-negative'} number of seconds"
                           if key != "repeats" else f"{where}: repeats must be a positive integer")
    return v


def load_config(path: str | os.PathLike) -> list:
    """[commands.NAME] tables of the config file (docs/harness.md):

        [commands.sort]
        cmd = "sort -S 64M data.txt"     # or a list of words
        cwd = "/srv/data"                # optional
        env = { LC_ALL = "C" }           # optional
        timeout = 60                     # optional, seconds per run
        check = "sha256sum {stdout}"     # optional: output that must match under every allocator
        [commands.kv]                    # a server entry
        server = "memcached -u {user} -l {host} -p {port}"
        cmd = "memcslap --servers={host}:{port} --concurrency=4"   # the client
        idle = 5                         # seconds idle after the client, then RSS is read
    """
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except OSError as e:
        raise CommandError(f"config {p}: cannot read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise CommandError(f"config {p}: not valid TOML: {e}") from None
    table = data.get("commands", {})
    if not isinstance(table, dict):
        raise CommandError(f"config {p}: [commands] must be a table of [commands.NAME] tables")
    out = []
    for name, body in table.items():
        where = f"config {p}: commands.{name}"
        check_name(name, where)
        if not isinstance(body, dict):
            raise CommandError(f"{where}: must be a table (cmd = \"...\", ...)")
        unknown = set(body) - _KEYS
        if unknown:
            raise CommandError(f"{where}: unknown keys {sorted(unknown)} (known: {', '.join(sorted(_KEYS))})")
        if "cmd" not in body:
            raise CommandError(f"{where}: needs cmd = \"PROGRAM ARGS...\" (for a server entry, the client)")
        argv = _words(body["cmd"], where, "cmd")
        env = body.get("env", {})
        if not isinstance(env, dict):
            raise CommandError(f"{where}: env must be a table of strings")
        for k, v in env.items():
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k):
                raise CommandError(f"{where}: bad environment variable name {k!r}")
            if k == "LD_PRELOAD":
                raise CommandError(f"{where}: env may not set LD_PRELOAD: the harness sets it per allocator")
            if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                raise CommandError(f"{where}: env.{k} must be a string or number")
        cwd = body.get("cwd")
        if cwd is not None and (not isinstance(cwd, str) or not cwd):
            raise CommandError(f"{where}: cwd must be a folder name")
        check = _words(body["check"], where, "check") if "check" in body else None
        params = body.get("params", {})
        if not isinstance(params, dict) or not all(isinstance(v, (int, float, str, list)) for v in params.values()):
            raise CommandError(f"{where}: params must be a table of numbers, strings or lists")
        scale = body.get("scale", [])
        if not isinstance(scale, list) or any(s not in params for s in scale):
            raise CommandError(f"{where}: scale must list names of params (multiplied by --scale)")
        server = _words(body["server"], where, "server") if "server" in body else None
        srv_keys = {"host", "idle", "ready_timeout", "stop_signal", "stop_timeout"} & set(body)
        if server is None and srv_keys:
            raise CommandError(f"{where}: {', '.join(sorted(srv_keys))} only apply to a server entry (server = ...)")
        host = _loopback(str(body.get("host", "127.0.0.1")), where)
        idle = _number(body, "idle", where, 0.0, positive=False)
        timeout = _number(body, "timeout", where, None)
        repeats = body.get("repeats")
        if repeats is not None and (not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1):
            raise CommandError(f"{where}: repeats must be a positive integer")
        stop = _signal_name(str(body.get("stop_signal", "TERM")), where)
        figure = check_figure(body["figure"], where) if "figure" in body else None
        cmd = Command(argv, cwd=cwd, env={k: str(v) for k, v in env.items()}, check=check, server=server, host=host,
                      idle=idle, ready_timeout=_number(body, "ready_timeout", where, 30.0),
                      stop_signal=stop, stop_timeout=_number(body, "stop_timeout", where, 10.0), figure=figure)
        title = body.get("title")
        out.append(entry(name, cmd, title=str(title) if title else None, params=params, work=tuple(scale),
                         timeout=timeout, repeats=repeats))
    return out


def check_unique(entries: list, sources: dict | None = None) -> None:
    """A series name used twice (two --command, --command and the config, a command and a series of
    the suite) is an error: both would land in one table."""
    seen: dict = {}
    for e in entries:
        if e.series in seen:
            a, b = seen[e.series], (sources or {}).get(id(e), e.suite)
            raise CommandError(f"the name {e.series!r} is used twice ({a} and {b}); give each command its own name")
        seen[e.series] = (sources or {}).get(id(e), e.suite)


# ---------------------------------------------------------------- placeholders and programs

def substitute(word: str, subst: dict) -> list[str]:
    """One word with its placeholders filled in; a word that is exactly {NAME} of a list becomes
    one word per item. Unknown names are left as written."""
    m = re.fullmatch(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", word)
    if m and isinstance(subst.get(m.group(1)), (list, tuple)):
        return [w for x in subst[m.group(1)] for w in substitute(str(x), {**subst, m.group(1): None})]

    def one(mm):
        v = subst.get(mm.group(1))
        if v is None:
            return mm.group(0)
        if isinstance(v, (list, tuple)):
            return " ".join(str(x) for x in v)
        return str(v)
    return [_PLACEHOLDER.sub(one, word)]


def expand(words, subst: dict) -> list[str]:
    out: list[str] = []
    for w in words or ():
        out += substitute(str(w), subst)
    return out


def source_dir(build_dir: Path) -> Path:
    """The source tree that build_dir was configured from ({repo}): CMakeCache.txt's
    CMAKE_HOME_DIRECTORY when it names an existing folder (a build folder outside the tree,
    or a copy of one), else build_dir's parent (the usual ./build)."""
    build_dir = Path(build_dir).resolve()
    try:
        for line in (build_dir / "CMakeCache.txt").read_text().splitlines():
            if line.startswith("CMAKE_HOME_DIRECTORY:"):
                home = Path(line.split("=", 1)[1].strip())
                if home.is_dir():
                    return home.resolve()
                break
    except (OSError, IndexError):
        pass
    return build_dir.parent


def base_subst(build_dir: Path, out_dir: Path | None = None) -> dict:
    build_dir = Path(build_dir)
    s = {"build_dir": str(build_dir.resolve()), "repo": str(source_dir(build_dir))}
    try:
        s["user"] = getpass.getuser()
    except (KeyError, OSError):
        s["user"] = str(os.getuid())
    if out_dir is not None:
        s["out_dir"] = str(Path(out_dir).resolve())
    return s


def entry_subst(e, base: dict) -> dict:
    """Placeholders for one series: the base ones, its scratch folder and its params."""
    s = dict(base)
    if "out_dir" in s:
        s["work_dir"] = str(Path(s["out_dir"]) / "work" / e.series)
    for k, v in e.params.items():
        s.setdefault(k, v)
    return s


def resolve_program(word: str, cwd: str | None = None) -> str | None:
    """The file a program word names: a path (relative to cwd), or a name looked up on PATH."""
    if "/" in word:
        p = Path(word) if os.path.isabs(word) or cwd is None else Path(cwd) / word
        return str(p) if p.is_file() and os.access(p, os.X_OK) else None
    return shutil.which(word)


def missing_programs(e, subst: dict) -> list[str]:
    """The programs of a command entry (program, server, client, check) that cannot be found."""
    c = e.command
    cwd = expand([c.cwd], subst)[0] if c.cwd else None
    if cwd and "{" in cwd:
        cwd = None
    out = []
    for words in (c.server, c.argv, c.check):
        if not words:
            continue
        first = expand(words[:1], subst)
        if not first or "{" in first[0]:
            continue   # filled in only at run time ({out_dir}, {work_dir})
        if resolve_program(first[0], cwd) is None and first[0] not in out:
            out.append(first[0])
    return out


def unknown_program_message(e, missing: list[str]) -> str:
    hint = (f"; {e.command.hint}" if e.command.hint else
            f"; install it with `sudo apt-get install {e.command.package}` (or scripts/install-deps.sh)"
            if e.command.package else "")
    what = "programs" if len(missing) > 1 else "program"
    return f"{e.series}: unknown {what} {', '.join(repr(m) for m in missing)} (not found on PATH or not executable){hint}"


def validate(entries: list, build_dir: Path) -> None:
    """User commands (--command, [commands]) that name a program that cannot be found are bad
    input: stop before anything runs. The programs suite's are skipped at run time instead
    (its packages may be missing on a machine that has the rest)."""
    base = base_subst(build_dir)
    for e in entries:
        if e.command is None or e.suite != COMMANDS_SUITE:
            continue
        miss = missing_programs(e, entry_subst(e, base))
        if miss:
            raise CommandError(unknown_program_message(e, miss))


def scaled_idle(e, subst: dict) -> float:
    v = e.command.idle
    if isinstance(v, str):
        v = expand([v], subst)[0]
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise CommandError(f"{e.series}: idle {e.command.idle!r} is not a number of seconds") from None
    if f < 0:
        raise CommandError(f"{e.series}: idle must not be negative")
    return f


