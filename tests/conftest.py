"""Shared fixtures."""

from __future__ import annotations

import pytest

from dse.problem import build_context, build_evaluator


@pytest.fixture(scope="session")
def analytical():
    return build_evaluator("analytical")


@pytest.fixture
def make_ctx():
    return build_context
