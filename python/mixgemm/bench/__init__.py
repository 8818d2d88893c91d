"""Profiling and comparison tools behind ``python -m mixgemm`` (DESIGN.md sections 4 and 7).

One concept per module: ``timing`` (the measurement protocol), ``metrics`` (bytes, flops and the
roofline floor of a problem), ``peers`` (what we time: our GEMM and the kernels we compare against),
``report`` (tables, JSON/CSV, PNG plots) and ``cli`` (the subcommands). Importing this package needs no
GPU and no plotting library; those are imported where they are used.
"""
