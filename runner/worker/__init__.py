"""The in-sandbox side: load a task and a candidate, check correctness, time, write a result.

Everything under this package depends only on torch, triton (optional), NVML (optional) and
the standard library: it runs inside a container or a fresh subprocess and speaks to the
orchestrator only through the job directory (``job.json`` in, ``result.json`` out).
"""
