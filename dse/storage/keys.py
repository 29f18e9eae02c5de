"""Identities of stored rows, and the store's clock."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any


def canonical_key(obj: Any) -> str:
    """Hash of the canonical JSON of ``obj``: equal content, equal key, whatever the key order."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def config_key(space: str, params: Mapping[str, Any]) -> str:
    """Identity of a config of a search space (parameter order does not matter)."""
    return canonical_key({"space": space, **params})


def now() -> datetime:
    """The local time to the second, as the store records it."""
    return datetime.now().replace(microsecond=0)
