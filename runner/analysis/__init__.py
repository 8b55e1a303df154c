"""Analysis: metrics (fast_p, geometric mean), tables and the markdown report."""
