"""The one table of limits on what a study file or a command may ask for.

Every number, name and nesting a user gives is checked against it where it enters (the study
file reader, the command line, the YAML loader), so a value that would overflow NumPy, run for
ever, fill the memory or not fit a database column is refused with a message naming the key
and the range, instead of failing deep inside (a traceback) or running without a word.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    """The values a number may take, and what it counts (for the message)."""

    low: float
    high: float
    what: str = ""

    def describe(self) -> str:
        unit = f" {self.what}" if self.what else ""
        return f"{_shown(self.low)} to {_shown(self.high)}{unit}"


def _shown(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:g}"


# Numbers a study file or command takes, by the key that names them.
NUMBERS: dict[str, Range] = {
    "seed": Range(0, 2**32 - 1),  # NumPy's legacy seeding (TPE, CMA-ES) takes 32 bits
    "workers": Range(1, 4096, "workers"),
    "batch_size": Range(1, 100_000, "configs a round"),
    "budget.trials": Range(1, 100_000_000, "trials a workload"),
    "budget.time_s": Range(0, 30 * 86400, "seconds"),  # a month
    "ladder.keep": Range(1, 1_000_000, "configs"),
    "ladder.budget.trials": Range(1, 100_000_000, "trials"),
    "ladder.per_group": Range(1, 1_000_000, "configs"),
    "ladder.refine": Range(0, 1_000_000, "configs"),
    "ladder.confirm": Range(0, 1_000, "configs"),
    "sampler.n_startup_trials": Range(0, 100_000_000, "trials"),
    "sampler.n_ei_candidates": Range(1, 100_000, "candidates"),
    "sampler.population_size": Range(2, 100_000, "individuals"),
    "sampler.sigma0": Range(1e-9, 1e9),
    "evaluator.seconds_per_config": Range(0, 3600, "seconds"),  # a synthetic cost, a timeout
    "trials.limit": Range(1, 1_000_000, "rows"),
    "trials.offset": Range(0, 2**62, "rows"),
    "ingest.elapsed_s": Range(0, 30 * 86400, "seconds"),  # a measurement of a month at most
}
WORKLOADS = 1000  # in one study (a grid multiplies its axes)
NAME_CHARS = 200  # a study's name: what the database column holds
TEXT_CHARS = 10_000  # any other string of a study file (a constraint, a path)
YAML_DEPTH = 64  # nesting of lists and mappings in a study file
YAML_ALIASES = 1000  # uses of &anchors in one study file (expanded, they can fill the memory)
SHOWN_CHARS = 120  # of a refused value quoted in a message
STORAGE_CHARS = 4096  # a storage path or URL (Linux's longest path)
COUNT_MAX = 1_000_000_000  # any other count on the command line (--top, --points, --k-mt)
# What an ingested results file may hold (checked before anything of it is stored, the same for
# every backend: SQLite and PostgreSQL refuse different values, or store them differently)
REASON_CHARS = 100_000  # why a config failed: a compiler's log, which the runner cuts shorter
HOST_CHARS = 200  # the host that measured: what the database column holds
MEASURED_ITEMS = 100_000  # items of one measured list or mapping (the times of each repeat)
INTEGER_BITS = 63  # an integer a metric holds: what SQL's BIGINT and JSON readers take


def out_of_range(key: str, value: object) -> str | None:
    """Why ``value`` cannot be ``key`` (see :data:`NUMBERS`), or None when it can."""
    limit = NUMBERS[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value \
            or not limit.low <= value <= limit.high:
        return f"expected {limit.describe()}"
    return None


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a study (too long, control characters, a path), or None."""
    if len(name) > NAME_CHARS:
        return f"a study name holds at most {NAME_CHARS} characters, not {len(name):,}"
    bad = next((c for c in name if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co")), None)
    if bad is not None:
        return f"a study name may not hold the control character U+{ord(bad):04X}"
    if "/" in name or "\\" in name or name.strip(".") == "":
        return "a study name may not hold '/' or '\\' or be only dots (it names files)"
    if name != name.strip():
        return "a study name may not begin or end with a space"
    return None


def shown(value: object) -> str:
    """``repr(value)`` cut to about :data:`SHOWN_CHARS` (a refused value may be huge, or an
    integer of more digits than Python prints)."""
    import reprlib

    if isinstance(value, int) and value.bit_length() > 3000:
        return f"an integer of about {value.bit_length() * 0.30103:,.0f} digits"
    short = reprlib.Repr()
    short.maxstring = short.maxother = SHOWN_CHARS
    short.maxlist = short.maxdict = short.maxtuple = short.maxset = 4
    short.maxlevel = 2
    try:
        text = short.repr(value)
    except ValueError:  # a huge integer inside a list or mapping
        return f"a {type(value).__name__} too large to show"
    return cut(text)


def cut(text: str, most: int = 2 * SHOWN_CHARS) -> str:
    """``text`` as a message quotes it: at most ``most`` characters."""
    return text if len(text) <= most else text[:most - 3] + "..."


def text_problem(text: str, what: str, most: int = TEXT_CHARS) -> str | None:
    """Why ``text`` (a name, a path, a URL given on the command line) cannot be used: too long,
    a NUL, or an undecodable byte (which no database or file name takes); None when it can."""
    if len(text) > most:
        return f"{what} holds at most {most:,} characters, not {len(text):,}"
    if "\0" in text:
        return f"{what} may not hold a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"{what} holds a byte that is not UTF-8 (at character {exc.start})"
    return None
