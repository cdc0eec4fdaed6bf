"""Allocation traces: the format (fmt), statistics (stats), synthetic traces (synth),
replay over allocators (replay) and the `larder-bench trace` command (cli).

The recorder (liblarder-trace.so) and the replayer (trace-replay) are C programs in tracer/;
this package reads and writes the same files (docs/trace-format.md).
"""
