"""Tracking: the run directory's journal, the environment fingerprint, the MLflow sink."""
