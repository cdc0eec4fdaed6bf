"""A plain-text progress bar that also works when the output is not a terminal.

On a terminal one line is redrawn with a carriage return; otherwise each finished
run prints one line, so a log file shows the same progress in order.
Failures are always printed on a line of their own, as soon as they happen.
"""
from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, stream=None, width: int = 30):
        self.total = max(total, 1)
        self.done = 0
        self.stream = stream or sys.stderr
        self.width = width
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.monotonic()
        self._drawn = False

    def _bar(self) -> str:
        filled = int(self.width * self.done / self.total)
        elapsed = time.monotonic() - self.start
        eta = ""
        if 0 < self.done < self.total:
            eta = f" eta {elapsed / self.done * (self.total - self.done):4.0f}s"
        return f"[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} {elapsed:5.0f}s{eta}"

    def step(self, label: str, status: str = "ok", message: str = "", seconds: float | None = None) -> None:
        self.done += 1
        took = f" {seconds:.2f}s" if seconds is not None else ""
        if status != "ok":
            self._clear()
            what = "INVALID (left out of medians)" if status == "invalid" else "FAILED"
            print(f"  {what} {label}: {message}", file=self.stream, flush=True)
        if self.tty:
            text = f"\r{self._bar()} {label[:40]:<40}"
            print(text, end="", file=self.stream, flush=True)
            self._drawn = True
        elif status == "ok":
            print(f"{self._bar()} {label}{took}", file=self.stream, flush=True)

    def note(self, message: str) -> None:
        self._clear()
        print(message, file=self.stream, flush=True)

    def _clear(self) -> None:
        if self.tty and self._drawn:
            print("\r" + " " * (self.width + 80) + "\r", end="", file=self.stream, flush=True)
            self._drawn = False

    def finish(self) -> None:
        if self.tty and self._drawn:
            print(file=self.stream, flush=True)
            self._drawn = False
