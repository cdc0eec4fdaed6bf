"""larder-bench: run allocator workloads over several malloc implementations and report."""
__version__ = "0.1.0"
