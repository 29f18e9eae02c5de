"""Every shipped target of every registered family honours the contract (dse.core.Target) and
its family's reader refuses a malformed file, naming the key."""

from __future__ import annotations

import json
import re

import pytest

from dse.core import (
    DTYPE_PAIRS,
    Target,
    TargetFileError,
    load_target,
    registered,
    shipped_targets,
)

TARGETS = sorted(shipped_targets())


@pytest.fixture(params=TARGETS)
def target(request):
    return load_target(request.param)


def test_a_target_is_the_contract_s(target):
    assert isinstance(target, Target)
    assert target.space in registered("target family")
    assert target.dtypes and set(target.dtypes) <= set(DTYPE_PAIRS)
    assert target.name and target.description and target.source


def test_constants_are_plain_data_and_their_digest_is_the_identity(target):
    constants = target.to_dict()
    assert "source" not in constants and constants["space"] == target.space
    json.dumps(constants)  # stored with every study
    again = load_target(target.source)  # by path, from any folder
    assert again.digest() == target.digest() and again.to_dict() == constants


def test_listing_roofline_and_occupancy(target):
    units, clock = target.compute_units()
    assert isinstance(units, str) and (clock is None or clock > 0)
    for pair in target.dtypes:
        roof = target.roofline(pair.split("-")[0])
        assert roof is None or (len(roof) == 2 and min(roof) > 0)
    assert isinstance(target.occupancy({}), list)


def test_an_edited_copy_is_another_target(target):
    constants = target.to_dict()
    section, values = next((name, values) for name, values in constants.items()
                           if isinstance(values, dict)
                           and any(isinstance(v, float) for v in values.values()))
    key = next(k for k, v in values.items() if isinstance(v, float))
    edited = target.with_values(**{section: {key: values[key] * 2}})
    assert edited.digest() != target.digest() and type(edited) is type(target)
    assert target.to_dict() == constants  # the original is unchanged


def test_a_malformed_copy_is_refused_naming_the_key(target, tmp_path):
    text = open(target.source, encoding="utf-8").read()
    unknown = tmp_path / "unknown.toml"
    unknown.write_text(text.replace("\n[", "\nbogus_key = 1\n\n[", 1))
    with pytest.raises(TargetFileError, match="bogus_key"):
        load_target(str(unknown))
    missing = tmp_path / "missing.toml"
    missing.write_text(re.sub(r"(?m)^description\s*=.*$", "", text, count=1))
    with pytest.raises(TargetFileError, match="description"):
        load_target(str(missing))
    nobody = tmp_path / "nobody.toml"
    nobody.write_text(re.sub(r'(?m)^space\s*=.*$', 'space = "no_such_family"', text, count=1))
    with pytest.raises(TargetFileError, match="no_such_family.*names no target family"):
        load_target(str(nobody))
