"""The `larder-bench` command: a parser with one subcommand per module.

Each module in COMMANDS defines register(subparsers), which adds its parser and sets
`func` to a handler taking the parsed arguments and returning the exit status.
Adding a subcommand is adding one line to COMMANDS.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

COMMANDS = [
    "larder_bench.cmd_run",
    "larder_bench.cmd_list",
    "larder_bench.cmd_report",
    "larder_bench.trace.cli",
]

EXIT_USAGE = 2


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="larder-bench",
                                description="Compare malloc implementations on the larder-bench workloads.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for mod in COMMANDS:
        importlib.import_module(mod).register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("larder-bench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into `head` and closed: end quietly, as other command-line tools do.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except OSError:
            pass
        return 141


if __name__ == "__main__":
    sys.exit(main())
