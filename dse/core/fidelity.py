"""How faithful an evaluator's results are.

A fidelity is registered under the ``dse.fidelities`` entry-point group; an evaluator names
one (its ``fidelity``), and a study's best configs are judged by the results of the highest
rank it holds. A package adds a fidelity between two of dse's by giving it a rank between
theirs (an emulator at 1.5, say: above the synthetic evaluator, below the simulator).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Fidelity:
    """A fidelity's record: its ``name`` and its ``rank`` (higher: more faithful)."""

    name: str
    rank: float


# dse's own, cheapest first
ANALYTICAL = Fidelity("analytical", 0.0)
SYNTHETIC = Fidelity("synthetic", 1.0)
SIMULATOR = Fidelity("simulator", 2.0)
HARDWARE = Fidelity("hardware", 3.0)
# hardware results measured again beside their closest contenders (a ladder rung's ``confirm``)
CONFIRMED = Fidelity("hardware-confirmed", 3.5)
