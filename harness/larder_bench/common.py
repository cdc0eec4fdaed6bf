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
    p.add_argument("--config", help="TOML file with more allocators ([allocators.NAME] path=..., env={...}); "
                                    "default ./larder-bench.toml when it exists")
    p.add_argument("--allocator", action="append", default=[], metavar="NAME=PATH[,ENV=VAL...]",
                   help="add an allocator by its .so path (repeatable; NAME= alone means no preload)")


def error(msg: str) -> int:
    print(f"larder-bench: {msg}", file=sys.stderr)
    return 2


def allocators_from_args(args) -> list[A.Allocator]:
    """Built-in detection, then the config file, then --allocator (later names win)."""
    found = A.detect(args.build_dir)
    cfg = args.config
    if cfg is None and Path("larder-bench.toml").is_file():
        cfg = "larder-bench.toml"
    if cfg is not None:
        found = A.merge(found, A.load_config(cfg))
    extra = [A.parse_spec(s) for s in args.allocator]
    return A.merge(found, extra)
