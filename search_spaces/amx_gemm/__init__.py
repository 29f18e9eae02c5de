"""The AMX family: GEMMs on the host CPU's matrix engine (Intel AMX tiles), tuned by measuring
generated C kernels (``amx`` evaluator) after the analytical model ranks the space."""
