"""A page of the dashboard a package adds to the studies of its families.

A page is registered under the ``dse.pages`` entry-point group; the dashboard serves it at
``/page/<name>/<study>`` and links it from the page of every study it applies to.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

    from dse.core.target import Target


@dataclass(frozen=True)
class PageData:
    """What a page is drawn from: the study's name, its target and its trials (one row each:
    ``shape``, ``dtype``, ``b_layout``, ``status``, the evaluator's name and fidelity, the
    parameters and the metrics, as ``dse trials`` shows them)."""

    study: str
    target: Target
    trials: pd.DataFrame


@dataclass(frozen=True)
class StudyPage:
    """A page's record: ``name`` (its URL segment), ``title`` (its heading and the study page's
    link to it), ``render`` (its body, an HTML fragment: the page escapes what it shows) and
    ``spaces`` (the families whose studies get it; empty: every study)."""

    name: str
    title: str
    render: Callable[[PageData], str]
    spaces: tuple[str, ...] = ()

    def applies_to(self, space: str) -> bool:
        """Whether a study of the family ``space`` gets this page."""
        return not self.spaces or space in self.spaces
