"""Tasks: the task record, loaders for the native and KernelBench layouts, suites and locks."""
