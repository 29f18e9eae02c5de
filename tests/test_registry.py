"""The registry with plug-ins that misbehave: a broken one is named and the rest still work."""

from __future__ import annotations

import pytest

from dse.cli import main
from dse.core import DseError, UsageError, families, load_target, register, unregister
from dse.core.registry import family


@pytest.fixture
def broken_family():
    register("target family", "broken", "no_such_package.family:FAMILY")
    yield
    unregister("target family", "broken")


def test_a_family_that_cannot_load_is_left_out_with_a_warning(broken_family, capsys):
    assert "broken" not in families() and "xdna_gemm" in families()
    assert "no_such_package" in capsys.readouterr().err
    assert load_target("xdna2").space == "xdna_gemm"  # shipped targets still load by name
    with pytest.raises(DseError, match="'broken'.*cannot be loaded.*no_such_package"):
        family("broken")
    assert main(["targets"]) == 0 and "xdna2" in capsys.readouterr().out


def test_a_command_group_that_breaks_is_named(capsys):
    register("command group", "clash", lambda sub: sub.add_parser("run"))  # dse's own name
    try:
        assert main(["targets"]) == 2
        err = capsys.readouterr().err
        assert "command group 'clash' cannot add its commands" in err and "Traceback" not in err
    finally:
        unregister("command group", "clash")


def test_unknown_names_list_the_registered_ones():
    from dse.core import build_evaluator

    with pytest.raises(UsageError, match="unknown kind 'no such kind'; valid: target family"):
        register("no such kind", "x", object)
    with pytest.raises(UsageError, match="unknown evaluator 'nope'; valid: amx, analytical, cpu"):
        build_evaluator("nope")


def test_a_study_of_a_family_not_installed_here_still_lists():
    """A shared database holds studies of families another machine has: the tables show their
    parameters without knowing the family's tile sizes."""
    import pandas as pd

    from dse.cli.studies import kernel_keys, param_columns

    frame = pd.DataFrame({"tile_m": [16, 32], "tile_n": [64, 64]})
    frame.attrs.update(space="not_installed_here", params=["tile_m", "tile_n"])
    assert kernel_keys(frame) == () and param_columns(frame) == ["tile_m"]


def test_a_registered_fidelity_ranks_between_dses_own():
    # an emulator's results outrank the simulator's and yield to a measurement's
    import pandas as pd

    from dse.core import Fidelity, fidelity_ranks
    from dse.storage.frames import best_trials

    frame = pd.DataFrame({"shape": "64x64x64", "dtype": "int8-int8", "b_layout": "col",
                          "status": "ok", "m": [1, 2, 3], "tops": [9.0, 5.0, 7.0],
                          "fidelity": ["simulator", "emulated", "simulator"]})
    frame.attrs["params"] = ["m"]
    assert list(best_trials(frame)["m"]) == [1, 3]  # unknown fidelity: ranked lowest
    register("fidelity", "emulated", Fidelity("emulated", 2.5))
    try:
        assert fidelity_ranks()["simulator"] < fidelity_ranks()["emulated"] < \
            fidelity_ranks()["hardware"]
        assert list(best_trials(frame)["m"]) == [2]
        register("fidelity", "bad", Fidelity("other", 1.0))
        with pytest.raises(DseError, match="must name a dse.core.Fidelity called 'bad'"):
            fidelity_ranks()
    finally:
        unregister("fidelity", "emulated")
        unregister("fidelity", "bad")
