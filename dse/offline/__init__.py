"""Measuring configurations on a machine that has the device but not dse (export, run, ingest)."""
