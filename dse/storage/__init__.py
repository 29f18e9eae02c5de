"""Results storage: SQLAlchemy 2 over SQLite (default ``./dse.db``) or PostgreSQL.

The only part of dse that speaks SQL. Imported lazily: ``DEFAULT_STORAGE`` costs nothing, the
rest loads SQLAlchemy on first use. What callers may ask of a store is
:class:`~dse.storage.face.StoreFace`.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from dse.core.commands import DEFAULT_STORAGE

_EXPORTS = {"ResultStore": "store", "StorageError": "store", "open_store": "store",
            "StoreFace": "face", "canonical_key": "keys", "config_key": "keys",
            "normalise_url": "engine"}

__all__ = ["DEFAULT_STORAGE", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dse.storage' has no attribute {name!r}")
    return getattr(import_module(f"dse.storage.{module}"), name)


if TYPE_CHECKING:
    from dse.storage.engine import normalise_url
    from dse.storage.face import StoreFace
    from dse.storage.keys import canonical_key, config_key
    from dse.storage.store import ResultStore, StorageError, open_store
