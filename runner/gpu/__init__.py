"""Host-side GPU access: NVML readings and the health gate, per-GPU locks. Read-only: kbench
never changes clocks, power limits or modes."""
