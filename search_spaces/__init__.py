"""Search spaces, one package per target family, registered by name in :mod:`dse.registry`."""
