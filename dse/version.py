"""dse's version, in a module of its own: what records it (a kept frame's format, a run's
versions) imports it without importing the package's conveniences, which import the store."""

__version__ = "0.1.0"
