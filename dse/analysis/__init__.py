"""Analyses of stored studies: the balance point and its sensitivity."""
