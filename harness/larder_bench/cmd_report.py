"""`larder-bench report <results dir>`: rebuild the report and plots from results.json."""
from __future__ import annotations

from pathlib import Path

from . import report, results
from .common import error


def register(sub) -> None:
    p = sub.add_parser("report", help="regenerate report.md/.html and plots from a results folder")
    p.add_argument("results", help="results folder (or its results.json)")
    p.add_argument("--baseline", help="allocator the ratios are taken against (default: the run's baseline)")
    p.set_defaults(func=main)


def main(args) -> int:
    try:
        doc = results.load(Path(args.results))
    except results.ResultsError as e:
        return error(str(e))
    names = [a["name"] for a in doc.get("allocators", []) if a.get("found", True)]
    if args.baseline and args.baseline not in names:
        return error(f"--baseline {args.baseline}: not in this results set ({', '.join(names)})")
    p = Path(args.results)
    out_dir = p if p.is_dir() else p.parent
    md, ht = report.write(doc, out_dir, args.baseline)
    print(report.terminal_summary(doc, args.baseline))
    print(f"\nreport: {md}\n        {ht}")
    return 0
