"""Options and helpers shared by the subcommands."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from . import allocators as A


def default_build_dir() -> str:
    return os.environ.get("LARDER_BUILD_DIR", "build")


def add_allocator_options(p) -> None:
    p.add_argument("--build-dir", default=default_build_dir(),
                   help="build folder with bin/ and lib/ (default: $LARDER_BUILD_DIR or ./build)")
    p.add_argument("--config", help="TOML file with more allocators ([allocators.NAME] path=..., env={...}), "
                                    "profiles and commands ([commands.NAME] cmd=...); "
                                    "default ./larder-bench.toml when it exists")
    p.add_argument("--allocator", action="append", default=[], metavar="NAME=PATH[,ENV=VAL...]",
                   help="add an allocator by its .so path (repeatable; NAME= alone means no preload)")
    p.add_argument("--profile", action="append", default=[], metavar="'NAME=ALLOCATOR VAR=VALUE ...'",
                   help="add a tuning profile: an allocator with environment settings, shown under its own "
                        "name; values may hold commas, colons and '=' (quote the whole spec; repeatable)")


def error(msg: str) -> int:
    print(f"larder-bench: {msg}", file=sys.stderr)
    return 2


def config_path(args) -> str | None:
    """--config, else ./larder-bench.toml when it exists."""
    cfg = args.config
    if cfg is None and Path("larder-bench.toml").is_file():
        cfg = "larder-bench.toml"
    return cfg


def allocators_from_args(args, suite_profiles: list | None = None) -> list[A.Allocator]:
    """Built-in detection, then the config file, then --allocator (later names win); then
    profiles: the suite's own, the config file's [profiles], then --profile."""
    found = A.detect(args.build_dir)
    cfg = config_path(args)
    if cfg is not None:
        found = A.merge(found, A.load_config(cfg))
    extra = [A.parse_spec(s) for s in args.allocator]
    allocs = A.merge(found, extra)
    profiles = list(suite_profiles or [])
    if cfg is not None:
        profiles += A.load_profiles(cfg)
    profiles += [A.parse_profile(s) for s in getattr(args, "profile", []) or []]
    return A.apply_profiles(allocs, profiles)
