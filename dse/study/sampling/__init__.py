"""Optuna samplers as dse builds them, and TPE's capped window and kernel."""
