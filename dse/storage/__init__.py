"""Results storage: SQLAlchemy 2 over SQLite (default ``./dse.db``) or PostgreSQL."""

from dse.storage.engine import DEFAULT_STORAGE, normalise_url
from dse.storage.store import ResultStore, StorageError, canonical_key

__all__ = ["DEFAULT_STORAGE", "ResultStore", "StorageError", "canonical_key", "normalise_url"]
