"""Evaluators that measure real hardware, through one measurement harness."""
