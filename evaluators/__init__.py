"""Evaluators score configurations; each is registered by name in :mod:`dse.registry`."""
