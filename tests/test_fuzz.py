"""Fuzzing dse's edges with Hypothesis: study files, command-line options, ``--where`` filters,
``--storage`` URLs and ingest files, generated from small grammars and mutated; and readers
(commands and a dashboard's pages) while ``dse run`` writes the same store.

The property, for every case: ``main(argv)`` exits 0, or 2 with a short message (one paragraph,
no traceback, no exception class dumped); it takes at most ``DSE_FUZZ_TIME_S`` seconds (20)
and allocates at most ``DSE_FUZZ_MEMORY_MB`` (300, tracemalloc's peak); and when it refuses, the
results store it was given is unchanged (a digest of every ``dse_`` table's rows). ``dse
evaluate`` and ``dse search`` may also exit 1 (a configuration infeasible), without a traceback.
A filter gives the same outcome over the whole study and over a page cut in SQL; an ingest file
is stored only with finite numbers; readers beside a writer have the property too, and the
dashboard answers every page.

The seed is fixed and ``DSE_FUZZ_EXAMPLES`` sets the examples per test (the default keeps the
file near 4 minutes on 2 cores); ``DSE_FUZZ_SHRINK=1`` lets Hypothesis shrink a failure (slow
when the failing case is one that runs into the time limit). Every failure found is kept in
tests/fuzz_corpus/ (a study file per case, the command lines in argv.json) and
:func:`test_corpus` runs each with the same property.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import os
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import traceback
import tracemalloc
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from dse.cli import main
from tests.dashboard_process import dashboard_process

EXAMPLES = int(os.environ.get("DSE_FUZZ_EXAMPLES", "300"))
TIME_LIMIT_S = float(os.environ.get("DSE_FUZZ_TIME_S", "20"))
MEMORY_LIMIT_MB = float(os.environ.get("DSE_FUZZ_MEMORY_MB", "300"))
# dse search enumerates its whole space: ~1.1 million configs of any GEMM past 16K hold 380 MB
# (the README's 4096^3 example peaks at 360 MB), so it has a limit of its own
SEARCH_MEMORY_MB = max(MEMORY_LIMIT_MB, 500)
# a case that blows its memory is stopped (MemoryError) this far past the limit, so that it
# fails the test rather than eat the machine
ADDRESS_SPACE_HEADROOM_MB = 2048
# "one paragraph": a YAML error quotes its line and a caret under it, twice with its context
MESSAGE_LINES = 8
MESSAGE_CHARS = 2000  # a message quoting a huge value whole is not a short message
CORPUS = Path(__file__).parent / "fuzz_corpus"
ARG_CHARS = 131_072  # Linux's limit on one argument of a command line (MAX_ARG_STRLEN)

# a failing case quotes its 100,000-character value: Hypothesis warns that the repr is large
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")

FUZZ = settings(
    max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
    phases=(Phase.explicit, Phase.generate,
            *((Phase.shrink,) if os.environ.get("DSE_FUZZ_SHRINK") else ())),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much],
    print_blob=False)

# The study the pre-populated store holds: random samples, so some are infeasible (a missing
# metric is something the filters must handle).
SEEDED = "seeded"
SEEDED_STUDY = {"name": SEEDED, "target": "xdna2",
                "workload": {"shape": "256x256x256", "dtype": "int8-int8"},
                "evaluator": "analytical", "sampler": "random", "budget": {"trials": 30},
                "seed": 7}


# --- running one case ---------------------------------------------------------------------

class CaseTimeout(BaseException):
    """Raised by SIGALRM in a case that runs past the time limit (a BaseException, so that an
    ``except Exception`` in dse does not swallow it)."""


@dataclass
class Outcome:
    """What one ``main(argv)`` call did."""

    argv: list[str]
    code: int | None
    out: str
    err: str
    seconds: float
    peak_mb: float
    crash: str | None = None  # the traceback of an exception that escaped main()


@contextmanager
def _address_space_cap() -> Iterator[None]:
    """Cap this process's address space ~2.5 GB past what it holds while a case runs: a YAML
    bomb that gets written out ends in MemoryError (a failure) instead of taking the machine."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    try:
        with open("/proc/self/statm") as f:
            size = int(f.read().split()[0]) * resource.getpagesize()
    except OSError:  # not Linux: no cap
        yield
        return
    cap = size + int((SEARCH_MEMORY_MB + ADDRESS_SPACE_HEADROOM_MB) * 2**20)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _terminal() -> io.TextIOWrapper:
    # UTF-8 with strict errors, as a real stdout is: a StringIO would hide a name that cannot
    # be printed (a lone surrogate, as Python decodes a command line's undecodable bytes)
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict", newline="\n")


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8", "replace")


def run_cli(argv: list[str]) -> Outcome:
    """``main(argv)`` in this process: its output captured, stopped by SIGALRM past the time
    limit, its allocations traced, and any exception that escapes it kept as a crash."""
    out, err = _terminal(), _terminal()
    err.reconfigure(errors="backslashreplace")  # as Python's own stderr
    armed = True

    def on_alarm(signum: int, frame: Any) -> None:
        if armed:
            raise CaseTimeout(f"still running after {TIME_LIMIT_S:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    tracing = tracemalloc.is_tracing()
    if not tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    code: int | None = None
    crash = None
    start = time.perf_counter()
    # the alarm fires again every second: a case that swallows the first is stopped anyway
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT_S, 1.0)
    try:
        with _address_space_cap(), redirect_stdout(out), redirect_stderr(err):
            code = main(argv)
    except SystemExit as exc:  # main() itself turns argparse's into a status
        crash = f"SystemExit({exc.code!r}) escaped main()"
    except BaseException:  # any exception that escapes main() is a crash, the alarm's too
        crash = traceback.format_exc()
    finally:
        armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1] - base
        if not tracing:
            tracemalloc.stop()
    return Outcome(list(argv), code, _text(out), _text(err), seconds, peak / 2**20, crash)


# --- the property -------------------------------------------------------------------------

# a crash printed as if it were a message
_CRASH = re.compile(r"Traceback \(most recent call last\)|^\s*File \".*\", line \d+|"
                    r"\b(?:Value|Type|Key|Index|Attribute|Recursion|Overflow|Memory|ZeroDivision|"
                    r"Assertion|Runtime|Lookup|Unicode(?:En|De)code|NotImplemented|Name)Error\b",
                    re.MULTILINE)


def store_digest(path: Path) -> str:
    """A digest of every row of every ``dse_`` table of a SQLite store ("missing" when the
    file is gone)."""
    if not path.is_file():
        return "missing"
    digest = hashlib.sha256()
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in con.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'dse\\_%' "
            "ESCAPE '\\' ORDER BY name")]
        for table in tables:
            digest.update(table.encode())
            for row in sorted(repr(r) for r in con.execute(f'SELECT * FROM "{table}"')):
                digest.update(row.encode())
    finally:
        con.close()
    return digest.hexdigest()


def _message(err: str) -> str:
    """stderr without argparse's usage block (argparse prints it before its one-line error)."""
    lines, kept, usage = err.strip().splitlines(), [], False
    for line in lines:
        if line.startswith("usage:"):
            usage = True
            continue
        if usage and line[:1].isspace():
            continue
        usage = False
        kept.append(line)
    return "\n".join(kept)


def _short(value: Any, width: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= width else f"{text[:width - 40]}...({len(text):,} chars)"


def _tail(text: str, lines: int = 8) -> str:
    return "\n".join(_short(line, 300)[1:-1] for line in text.strip().splitlines()[-lines:])


def problems_of(outcome: Outcome, expect: str = "any", may_exit_1: bool = False,
                changed: bool = False) -> list[str]:
    """What is wrong with an outcome (empty: the property holds). ``expect="refused"``: the
    case must exit 2; ``changed``: the store's digest differs from before the case."""
    found = []
    memory_mb = SEARCH_MEMORY_MB if outcome.argv[:1] == ["search"] else MEMORY_LIMIT_MB
    if outcome.crash:
        found.append("an exception escaped main():\n" + _tail(outcome.crash))
    if outcome.seconds > TIME_LIMIT_S:
        found.append(f"took {outcome.seconds:.1f} s (limit {TIME_LIMIT_S:g} s)")
    if outcome.peak_mb > memory_mb:
        found.append(f"allocated {outcome.peak_mb:,.0f} MB (limit {memory_mb:g} MB)")
    shown = outcome.out + outcome.err
    if "Traceback" in shown:
        found.append("printed a traceback:\n" + _tail(shown))
    if outcome.code == 2:
        message = _message(outcome.err)
        if not message:
            found.append("exit 2 without a message on stderr")
        elif len(message.splitlines()) > MESSAGE_LINES or len(message) > MESSAGE_CHARS:
            found.append(f"exit 2 with a message of {len(message.splitlines())} lines, "
                         f"{len(message):,} characters:\n" + _tail(message, 4))
        elif _CRASH.search(message):
            found.append("exit 2 with an exception dumped as its message:\n" + _tail(message))
        if changed:
            found.append("refused, but the store changed")
    elif outcome.code == 0:
        if expect == "refused":
            found.append("exit 0: accepted what should be refused (exit 2)")
    elif outcome.code == 1 and may_exit_1:
        pass
    elif outcome.code is not None:
        found.append(f"exit {outcome.code}:\n" + _tail(outcome.err or outcome.out))
    return found


def assert_property(outcome: Outcome, context: str = "", **kwargs: Any) -> None:
    """Fail with what went wrong; with ``DSE_FUZZ_COLLECT=FILE``, append it to FILE (a JSON
    line) and go on, to list every failure of a long run rather than stop at the first."""
    found = problems_of(outcome, **kwargs)
    if found and os.environ.get("DSE_FUZZ_COLLECT"):
        with open(os.environ["DSE_FUZZ_COLLECT"], "a", encoding="utf-8") as f:
            f.write(json.dumps({"argv": [_short(a, 300) for a in outcome.argv],
                                "code": outcome.code, "problems": found,
                                "context": context[:5000]}) + "\n")
        return
    if found:
        pytest.fail(f"dse {' '.join(_short(a, 80) for a in outcome.argv[:12])}\n"
                    f"exit {outcome.code}, {outcome.seconds:.2f} s, {outcome.peak_mb:.0f} MB\n"
                    + "\n".join(found) + (f"\n{context[:2000]}" if context else ""),
                    pytrace=False)


# --- the pre-populated store ----------------------------------------------------------------

@pytest.fixture(scope="module")
def seeded_store(tmp_path_factory) -> Path:
    """A SQLite store holding one finished 30-trial study (SEEDED), checkpointed into one file
    that each case copies."""
    where = tmp_path_factory.mktemp("fuzz-store")
    study = where / "seeded.yaml"
    study.write_text(yaml.safe_dump(SEEDED_STUDY))
    live = where / "live.db"
    outcome = run_cli(["run", str(study), "--storage", str(live)])
    assert outcome.code == 0, outcome.err
    template = where / "template.db"
    src, dst = sqlite3.connect(live), sqlite3.connect(template)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return template


@dataclass
class Case:
    """A scratch folder for one case: a copy of the seeded store, and files written there."""

    root: Path
    store: Path
    written: str = ""  # the last file written, shown with a failure

    def write(self, name: str, text: str | bytes, shown: bool = True) -> str:
        """Write a file in the case's folder (``shown``: quoted with a failure, as the study
        file a case is about is)."""
        path = self.root / name
        if shown:
            self.written = f"--- {name}:\n{text!s}"
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8", errors="surrogatepass")
        return str(path)

    def check(self, argv: list[str], **kwargs: Any) -> Outcome:
        """Run argv in the case's folder and assert the property (the store unchanged if
        refused)."""
        before = store_digest(self.store)
        cwd = os.getcwd()
        os.chdir(self.root / "cwd")  # relative paths a case creates stay in its folder
        try:
            outcome = run_cli(argv)
        finally:
            os.chdir(cwd)
        assert_property(outcome, context=self.written,
                        changed=store_digest(self.store) != before, **kwargs)
        return outcome


@contextmanager
def new_case(template: Path) -> Iterator[Case]:
    with tempfile.TemporaryDirectory(prefix="dse-fuzz-") as tmp:
        root = Path(tmp)
        # the case runs two folders down, so that '../x' stays inside the scratch folder
        (root / "cwd" / "a").mkdir(parents=True)
        store = root / "store.db"
        shutil.copyfile(template, store)
        yield Case(root, store)


# --- generators: values -------------------------------------------------------------------

HUGE_INTS = [2**64, 2**64 + 1, 2**63, 2**63 - 1, 2**62, 2**53 + 1, 2**32, 2**31, 10**100,
             -1, -2**63, 0]
SPECIAL_TEXT = ["", " ", "\t", "٥١٢", "５１２", "½", "\x00", "a\x00b", "\x07\x1b[31m", "\u202e",
                "\ufeff", "\u2028", "\udcff", "../../etc/passwd", "/etc/passwd", "~", "*", "%",
                "'; DROP TABLE dse_trials; --", "NaN", "inf", "1e308", "0x10", "1_000", "null",
                "True", "x" * 100_000]
evil_ints = st.sampled_from(HUGE_INTS) | st.integers()
evil_floats = (st.sampled_from([1e308, -1e308, float("inf"), float("-inf"), float("nan"),
                                5e-324, -0.0, 0.5, 2.5])
               | st.floats(allow_nan=True, allow_infinity=True))
evil_text = st.sampled_from(SPECIAL_TEXT) | st.text(max_size=30)
evil_scalars = st.one_of(evil_ints, evil_floats, evil_text, st.booleans(), st.none())
evil_values = st.one_of(
    evil_scalars, st.lists(evil_scalars, max_size=3),
    st.dictionaries(st.text(max_size=8) | st.integers(), evil_scalars, max_size=3))


def _number_texts() -> st.SearchStrategy[str]:
    """Numbers as a command line gives them: huge, negative, in other scripts, malformed."""
    return st.one_of(
        st.integers(1, 6).map(str), evil_ints.map(str),
        st.sampled_from(["1e308", "nan", "inf", "-0", "+5", " 5", "5 ", "0x10", "1_000", "٥",
                         "５", "5.0", "", "-", "--", "9" * 5000]),
        st.text(alphabet=st.characters(categories=["Nd"]), min_size=1, max_size=4))


def _argv_text() -> st.SearchStrategy[str]:
    """Text a command line can carry: no NUL (execve cannot pass one), but undecodable bytes
    arrive as lone surrogates."""
    return (st.sampled_from([t for t in SPECIAL_TEXT if "\x00" not in t])
            | st.text(alphabet=st.characters(exclude_characters="\x00"), max_size=20))


# --- generators: study files --------------------------------------------------------------

TARGETS = {"xdna2": ["int8-int8", "bf16-bf16", "int8-int16"], "xdna": ["int8-int8", "bf16-bf16"]}
SHAPES = ["256x256x256", "512x512x512", "256x512x256", "512x256x512"]
OBJECTIVES = [["tops"], ["latency_s"], "tops", [{"tops": "maximize"}],
              ["tops", "l1_bytes"], [{"tops": "maximize"}, {"dram_bytes": "minimize"}]]
# plausible options of each sampler, to mutate
SAMPLER_OPTIONS = {
    "tpe": ["n_startup_trials", "n_ei_candidates", "multivariate", "gamma", "prior_weight",
            "consider_endpoints", "group", "warn_independent_sampling"],
    "random": ["seed"],
    "cmaes": ["sigma0", "n_startup_trials", "popsize", "inc_popsize", "restart_strategy",
              "x0", "lr_adapt", "with_margin", "use_separable_cma"],
    "nsga2": ["population_size", "mutation_prob", "crossover_prob", "swapping_prob"],
}
EVALUATOR_OPTIONS = {"analytical": ["model", "version"],
                     "synthetic": ["work_s", "fail_fraction", "seed"],
                     "simulator": ["timeout_s", "max_events"]}
# a sentinel a text mutation replaces with raw YAML (deep nesting, an alias bomb)
SENTINEL = "@@fuzz@@"


@st.composite
def valid_studies(draw) -> dict[str, Any]:
    """A study that runs in well under a second: a small GEMM, the analytical model, a few
    random or TPE trials, one worker."""
    target = draw(st.sampled_from(sorted(TARGETS)))
    workload = {"shape": draw(st.sampled_from(SHAPES)),
                "dtype": draw(st.sampled_from(TARGETS[target]))}
    study: dict[str, Any] = {
        "name": draw(st.sampled_from([SEEDED, "fuzz", "fuzz-2", "Ünïcode", "a b"])),
        "target": target}
    if draw(st.booleans()):
        study["workload"] = workload
    else:
        other = {"shape": draw(st.sampled_from(SHAPES)), "dtype": TARGETS[target][0]}
        study["workloads"] = [workload, other]
    objectives = draw(st.sampled_from(OBJECTIVES))
    sampler = draw(st.sampled_from(["random", "tpe"]))
    study.update(evaluator="analytical", sampler=sampler,
                 budget={"trials": draw(st.integers(1, 5))}, seed=draw(st.integers(0, 2**31)))
    if draw(st.booleans()):
        study["objectives"] = objectives
    if draw(st.booleans()):
        study["batch_size"] = draw(st.integers(1, 4))
    if draw(st.booleans()):
        study["workers"] = 1
    if draw(st.booleans()):
        study["budget"]["time_s"] = draw(st.sampled_from([1, 5.5, 30]))
    if draw(st.booleans()):
        study["space"] = draw(st.sampled_from([
            {"fix": {"buf_a_l1": 2}}, {"range": {"m_ct": [32, 128]}},
            {"constraints": ["no_padding"]}, {"free": ["bd_scheme"]}]))
    # a copy: the mutations must not change the lists and dicts sampled_from holds
    return copy.deepcopy(study)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path into a nested study dict (lists by index)."""
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


def _set(study: Any, path: tuple, value: Any) -> None:
    for key in path[:-1]:
        study = study[key]
    study[path[-1]] = value


def _delete(study: Any, path: tuple) -> None:
    for key in path[:-1]:
        study = study[key]
    del study[path[-1]]


def _parent(study: Any, path: tuple) -> Any:
    for key in path[:-1]:
        study = study[key]
    return study


@st.composite
def mutated_studies(draw) -> dict[str, Any]:
    """A valid study with one to three values replaced, keys added or dropped, or sampler and
    evaluator options set."""
    study = draw(valid_studies())
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["value", "value", "value", "unknown key", "drop",
                                     "sampler", "evaluator", "shape", "budget"]))
        if kind == "value":
            path = draw(st.sampled_from(_paths(study)))
            _set(study, path, draw(evil_values))
        elif kind == "unknown key":
            path = draw(st.sampled_from([(), *(p for p in _paths(study)
                                               if isinstance(_parent(study, p), dict))]))
            where = study if not path else _parent(study, path)
            where[draw(evil_text | st.sampled_from(["nme", "Name", "budgets"]))] = draw(
                evil_values)
        elif kind == "drop":
            path = draw(st.sampled_from(_paths(study)))
            _delete(study, path)
        elif kind == "sampler":
            name = draw(st.sampled_from(sorted(SAMPLER_OPTIONS)))
            option = draw(st.sampled_from(SAMPLER_OPTIONS[name]) | evil_text)
            study["sampler"] = {"name": name, "options": {option: draw(
                st.sampled_from([-1, 0, 1, 2**63, 1e308, -0.5, float("nan")]) | evil_values)}}
            if name == "cmaes":
                study["objectives"] = ["tops"]  # one objective: what is tested is the option
        elif kind == "evaluator":
            name = draw(st.sampled_from(sorted(EVALUATOR_OPTIONS)) | evil_text)
            options = EVALUATOR_OPTIONS.get(name, ["x"])
            study["evaluator"] = {"name": name, "options": {
                draw(st.sampled_from(options) | evil_text): draw(evil_values)}}
        elif kind == "shape":
            dims = draw(st.lists(st.one_of(st.sampled_from(["256", "512", "64"]),
                                           evil_ints.map(str), evil_text), min_size=1,
                                 max_size=5))
            shape = draw(st.sampled_from(["x", "X", "*", " x ", "×"])).join(dims)
            study.pop("workloads", None)
            study["workload"] = {"shape": shape, "dtype": "int8-int8"}
        else:
            key = draw(st.sampled_from(["trials", "time_s"]))
            study["budget"] = {key: draw(evil_ints | evil_floats)}
    return study


def _deep(draw, depth: int) -> str:
    kind = draw(st.sampled_from(["list", "map", "mixed"]))
    if kind == "list":
        return "[" * depth + "1" + "]" * depth
    if kind == "map":
        return "{a: " * depth + "1" + "}" * depth
    return "[{a: " * (depth // 2) + "1" + "}]" * (depth // 2)


def alias_bomb(levels: int, fanout: int, leaf: int) -> str:
    """Flow YAML whose value, expanded, has ``fanout ** levels`` leaves of ``leaf`` characters
    while its text stays a few hundred bytes (each level's anchor is defined in its first
    element)."""
    text = f"&a0 {'x' * leaf}"
    for level in range(1, levels + 1):
        text = f"&a{level} [{text}" + f", *a{level - 1}" * (fanout - 1) + "]"
    return text


@st.composite
def study_texts(draw) -> str:
    """A study file's text: valid, mutated, then perhaps mutated as text (a key given twice,
    deep nesting, an alias bomb, control characters, cut short)."""
    study = draw(st.one_of(valid_studies(), mutated_studies()))
    text_mutation = draw(st.sampled_from(["none", "none", "twice", "deep", "bomb", "digits",
                                          "char", "cut", "anchor"]))
    raw = None
    if text_mutation in ("deep", "bomb", "digits"):
        path = draw(st.sampled_from(_paths(study) or [("name",)]))
        _set(study, path, SENTINEL)
        if text_mutation == "deep":
            raw = _deep(draw, draw(st.sampled_from([50, 200, 999, 1001, 1500, 5000])))
        elif text_mutation == "digits":  # past Python's 4,300 digits for int("...")
            raw = draw(st.sampled_from(["9" * 4301, "-" + "9" * 5000, "0x" + "f" * 4000,
                                        "1" + "0" * 400 + ".5", "0b" + "1" * 20000]))
        else:
            # bounded: at most 9**5 leaves of 1,000 characters, ~450 MB when expanded
            raw = alias_bomb(draw(st.integers(2, 5)), draw(st.integers(2, 9)),
                             draw(st.sampled_from([1, 100, 1000])))
    text = yaml.safe_dump(study, sort_keys=False, allow_unicode=draw(st.booleans()),
                          default_flow_style=draw(st.sampled_from([False, None])))
    if raw is not None:
        text = text.replace(f"'{SENTINEL}'", raw)
    if text_mutation == "twice":
        text += f"{draw(st.sampled_from([k for k in study if isinstance(k, str)] or ['name']))}" \
                ": again\n"
    elif text_mutation == "char":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["\x00", "\x07", "\x1b", "\t", "\r", "\ufeff",
                                                 "\u2028", "\x85", "\ud800", "%", "&", "*",
                                                 "!", "|", ">", "? "])) + text[at:]
    elif text_mutation == "cut":
        text = text[:draw(st.integers(0, len(text)))]
    elif text_mutation == "anchor":
        # the whole study merged from an anchor, with a tag or two
        text = ("defaults: &d\n" + textwrap.indent(text, "  ") + "<<: *d\n"
                + draw(st.sampled_from(["", "name: !!binary aGk=\n", "seed: !!float 1\n",
                                        "target: !!python/object:os.system ls\n"])))
    return text


@FUZZ
@given(text=study_texts())
def test_study_files(seeded_store, text):
    with new_case(seeded_store) as case:
        case.check(["run", case.write("study.yaml", text), "--storage", str(case.store)])


# --- generators: command lines ------------------------------------------------------------

study_names = st.sampled_from([SEEDED, SEEDED, "nope", "SEEDED"]) | _argv_text()
COLUMNS = ["status", "tops", "k_ct", "m_ct", "n_ct", "k_mt", "shape", "dtype", "number",
           "reason", "latency_s", "l1_bytes", "bound", "evaluator", "b_layout", "nope", "_",
           "tops.x"]


@st.composite
def command_lines(draw, store: str, study: str) -> list[str]:
    """One of dse's commands with generated, often mutated, options (``store``: the seeded
    store's path; ``study``: a valid study file)."""
    number = _number_texts()
    storage = ["--storage", store]
    command = draw(st.sampled_from(["studies", "best", "trials", "run", "evaluate", "search",
                                    "balance", "fidelity", "targets", "help", "unknown"]))
    if command == "studies":
        return ["studies", *storage, *draw(st.sampled_from([[], ["--json"]]))]
    if command == "best":
        return ["best", draw(study_names), *storage, "--top", draw(number),
                *draw(st.sampled_from([[], ["--json"]]))]
    if command == "trials":
        argv = ["trials", draw(study_names), *storage]
        if draw(st.booleans()):
            argv += ["--where", draw(filters())]
        if draw(st.booleans()):
            argv += [f"--sort={draw(st.sampled_from(COLUMNS) | _argv_text())}"]
        for option in ("--limit", "--offset"):
            if draw(st.booleans()):
                argv += [option, draw(number)]
        if draw(st.booleans()):
            argv += ["--desc"]
        if draw(st.booleans()):
            argv += ["--format", draw(st.sampled_from(["table", "csv", "json", "parquet",
                                                       "xml", ""]))]
        if draw(st.booleans()):
            argv += ["--out", draw(st.sampled_from(["t.out", "a", ".", "a/b/c.csv", store,
                                                    store + "-wal", "../t.csv"]))]
        return argv
    if command == "run":
        argv = ["run", draw(st.sampled_from([study, "missing.yaml", ".", ""])), *storage]
        if draw(st.booleans()):
            argv += ["--trials", draw(number)]
        if draw(st.booleans()):
            # a valid count would start Ray for an evaluator that is not vectorised; the
            # analytical model runs in-process whatever --workers says
            argv += ["--workers", draw(number)]
        return argv
    if command in ("evaluate", "search"):
        target = draw(st.sampled_from(["xdna2", "xdna", "tpu-v1", "cpu", "nope", "../x.toml"]))
        dims = draw(st.lists(st.sampled_from(["256", "512"]) | number, min_size=3,
                             max_size=4))
        argv = [command, "--target", target, "--dtype",
                draw(st.sampled_from(["int8-int8", "bf16", "int8-int32", "fp32-fp32", "int4"])
                     | _argv_text()),
                "--shape", draw(st.sampled_from(["x", "X", ","])).join(dims)]
        if command == "evaluate":
            for param in ("m_ct", "k_ct", "n_ct", "k_mt", "t_m", "buf_a_l1"):
                if draw(st.booleans()):
                    argv += ["--param", f"{param}={draw(number)}"]
            if draw(st.booleans()):
                argv += ["--option", f"{draw(_argv_text())}={draw(number)}"]
        else:
            argv += ["--strategy", draw(st.sampled_from(["exhaustive", "paper"]))]
            for option in ("--top", "--k-mt", "--patience"):
                if draw(st.booleans()):
                    argv += [option, draw(number)]
            if draw(st.booleans()):
                argv += ["--fix", f"{draw(st.sampled_from(['m_ct', 'k_ct', 'x']))}="
                                  f"{draw(number)}"]
            if draw(st.booleans()):
                argv += ["--start", "x".join(draw(st.lists(number, min_size=3, max_size=3)))]
        return argv
    if command in ("balance", "fidelity"):
        return [command, draw(study_names), *storage]
    if command == "targets":
        return ["targets", *draw(st.sampled_from([[], ["--json"]]))]
    if command == "help":
        return [*draw(st.sampled_from([[], ["run"], ["trials"], ["nope"]])), "--help"]
    return [draw(_argv_text()), *draw(st.lists(_argv_text(), max_size=3))]


@FUZZ
@given(data=st.data())
def test_command_lines(seeded_store, data):
    with new_case(seeded_store) as case:
        study = case.write("study.yaml", yaml.safe_dump({**SEEDED_STUDY, "name": "cli",
                                                         "budget": {"trials": 3}}), shown=False)
        argv = data.draw(command_lines(str(case.store), study), label="argv")
        case.check(argv, may_exit_1=argv[0] in ("evaluate", "search"))


# --- generators: filters ------------------------------------------------------------------

literals = st.one_of(
    st.integers(-10, 300).map(str), evil_ints.map(str),
    st.sampled_from(["1e308", "1e999", "-1e999", "0.5", "-0", "1.", ".5", "1e", "0x10", "٥",
                     "'ok'", "'infeasible'", "'256x256x256'", "''", '""', "'it''s'", "'",
                     "'; DROP TABLE dse_trials; --'", '"; DELETE FROM dse_trials; --"',
                     "'%'", "'_'", "'\\'", "NULL", "null", "true", "nan", "inf"]),
    st.text(max_size=10).map(lambda s: "'" + s.replace("'", "") + "'"))
OPERATORS = ["==", "!=", "<", "<=", ">", ">=", "=", "in", "like", "is", "<>", "==="]


def filters(depth: int = 3) -> st.SearchStrategy[str]:
    """``--where`` expressions from the filter grammar (plus what it lacks: ``in``, ``like``),
    sometimes mutated."""
    operand = st.sampled_from(COLUMNS) | literals
    comparison = st.builds(lambda a, op, b: f"{a} {op} {b}", operand, st.sampled_from(OPERATORS),
                           operand)
    expression = st.recursive(
        comparison,
        lambda inner: st.one_of(
            st.builds(lambda a, b: f"{a} and {b}", inner, inner),
            st.builds(lambda a, b: f"{a} or {b}", inner, inner),
            st.builds(lambda a: f"not {a}", inner),
            st.builds(lambda a: f"({a})", inner),
            st.builds(lambda a, b: f"{a} in ({b})", st.sampled_from(COLUMNS),
                      st.lists(literals, min_size=0, max_size=3).map(", ".join))),
        max_leaves=6)

    def mutate(args: tuple[str, str, int, int]) -> str:
        text, kind, at, count = args
        at = at % (len(text) + 1)
        if kind == "paren":
            return "(" * count + text + ")" * count
        if kind == "not":
            return "not " * count + text
        if kind == "long":  # within what one argument of a command line may hold (128 KiB)
            return " and ".join([text] * min(count, ARG_CHARS // (len(text) + 5)))
        if kind == "cut":
            return text[:at]
        if kind == "case":
            return text.upper()
        return text[:at] + kind + text[at:]

    mutated = st.tuples(expression, st.sampled_from(
        ["paren", "not", "long", "cut", "case", "'", '"', "(", ")", ";", "\\", "\t", "\u00a0",
         "\udcff", "--", "/*", " or 1=1", "٥"]),
        st.integers(0, 10_000), st.sampled_from([1, 49, 50, 51, 200, 1000, 100_000]),
    ).map(mutate)
    return st.one_of(expression, expression, mutated, st.just(""), st.just(" "))


def _rows(outcome: Outcome) -> list[int] | None:
    try:
        return sorted(r["number"] for r in json.loads(outcome.out))
    except (ValueError, TypeError, KeyError):
        return None


@FUZZ
@given(where=filters())
def test_filters(seeded_store, where):
    """The filter over the whole study (pandas) and over one page cut in SQL: the property
    for both, the same outcome (both refuse, or both run), and when both run, the same
    trials."""
    with new_case(seeded_store) as case:
        query = ["trials", SEEDED, "--storage", str(case.store), "--where", where,
                 "--format", "json"]
        whole = case.check(query)
        page = case.check([*query, "--limit", "1000"])
        assert whole.code == page.code, (f"--where {where!r}: pandas exits {whole.code}, SQL "
                                         f"{page.code}: {_message(whole.err + page.err)}")
        if whole.code == page.code == 0:
            assert _rows(whole) == _rows(page), f"--where {where!r}: pandas and SQL disagree"


# --- generators: storage URLs -------------------------------------------------------------

STORAGE = ["", " ", "foo://::::", "foo://", "://", ":", "::::", "postgresql://u@127.0.0.1:abc/db",
           "postgresql://u@127.0.0.1:99999/db", "postgresql://u@127.0.0.1:-1/db",
           "postgresql://u@127.0.0.1:1/db", "postgresql://:@127.0.0.1:1/", "postgresql://",
           "postgresql+nodriver://u@127.0.0.1/db", "postgres://u@127.0.0.1:1/db",
           "postgresql://u@127.0.0.1:1/db?connect_timeout=abc",
           "postgresql://u@127.0.0.1:1/db?sslmode=bogus", "postgresql://u@[::1:1/db",
           "mysql://me@127.0.0.1/test", "sqlite://", "sqlite:///", "sqlite:///:memory:",
           "sqlite:////nonexistent/dir/x.db", "sqlite:///file:x.db?mode=ro&uri=true",
           "sqlite:///file:x.db?mode=bogus&uri=true", "sqlite+nodriver:///x.db",
           "sqlite:///x.db?timeout=abc", "sqlite:///a/", "a/", ".", "..", "a", "x.db",
           "x" * 5000 + ".db", "%00", "x.db\udcff", "٥.db", "?", "#", "x.db;drop table x",
           "file:///x.db", "http://127.0.0.1:1/", "\\\\server\\share\\x.db"]


def _safe_storage(url: str) -> bool:
    """A generated URL may create a SQLite file: keep it inside the case's folder and off the
    network (no absolute path, no '..', no host but this one)."""
    if url in STORAGE:
        return True
    if "\x00" in url or url.startswith(("/", "~", "sqlite:////")) or ".." in url:
        return False
    return "://" not in url or url.startswith(("sqlite:///", "foo://"))


storage_urls = st.one_of(
    st.sampled_from(STORAGE),
    st.builds(lambda scheme, rest: scheme + rest,
              st.sampled_from(["", "sqlite:///", "foo://", "sqlite:", "sqlite:/"]),
              _argv_text()),
    st.builds(lambda user, port, db: f"postgresql://{user}@127.0.0.1:{port}/{db}",
              st.sampled_from(["u", "", ":", "u:p@q", "%zz"]),
              st.sampled_from(["1", "9", "abc", "", "-1", "65536", "2" * 30, "٥"]),
              st.sampled_from(["db", "", "d/b", "d?x=1"])),
    st.binary(max_size=20).map(lambda b: b.decode("utf-8", "surrogateescape")),
).filter(_safe_storage)


@FUZZ
@given(url=storage_urls, command=st.sampled_from(["studies", "run", "best", "trials"]))
def test_storage_urls(seeded_store, url, command):
    with new_case(seeded_store) as case:
        study = case.write("study.yaml", yaml.safe_dump({**SEEDED_STUDY, "name": "url",
                                                         "budget": {"trials": 2}}), shown=False)
        argv = {"studies": ["studies"], "run": ["run", study], "best": ["best", SEEDED],
                "trials": ["trials", SEEDED, "--limit", "3"]}[command]
        case.check([*argv, "--storage", url])


# --- generators: ingest files -------------------------------------------------------------

# the seeded study's configs measured by IRON (any evaluator that measures xdna2 configs
# offline would do): records that ingest stores, for the mutations to spoil
INGESTED_BY = {"name": "iron", "options": {"mlir_aie_dir": "/nonexistent", "flow": "jit"}}
LONG_TEXTS = [199, 200, 201, 10_000, 100_000, 100_001, 1_000_000]
measured_values = st.one_of(
    evil_floats, evil_floats, st.sampled_from([float("nan"), float("inf"), float("-inf")]),
    evil_ints, evil_text, st.booleans(), st.none(),
    st.sampled_from(LONG_TEXTS).map(lambda n: "x" * n),
    st.lists(evil_floats, max_size=4), st.dictionaries(st.text(max_size=8), evil_floats,
                                                       max_size=3),
    st.integers(1, 80).map(lambda depth: [[]] if depth < 2 else
                           json.loads("[" * depth + "]" * depth)))


@pytest.fixture(scope="module")
def measured_records(seeded_store) -> list[dict[str, Any]]:
    """Results of the seeded study's first configs, as the offline runner writes them."""
    con = sqlite3.connect(f"file:{seeded_store}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT w.body, c.params FROM dse_trials t JOIN dse_workloads w ON w.id = "
            "t.workload_id JOIN dse_configs c ON c.id = t.config_id ORDER BY t.number "
            "LIMIT 3").fetchall()
    finally:
        con.close()
    records = []
    for body, params in rows:
        workload = {k: v for k, v in json.loads(body).items() if k != "space"}
        records.append({"workload": workload, "params": json.loads(params), "status": "ok",
                        "elapsed_s": 1.5, "metrics": {"latency_s": 1e-3, "times_s": [1e-3]}})
    return records


@st.composite
def ingest_files(draw, records: list[dict[str, Any]]) -> dict[str, Any]:
    """A results file of the seeded study with a few of its values spoiled: non-finite,
    negative, huge, long, nested or of another type, in a record or its provenance."""
    data = {"format": "dse-results/1", "study": SEEDED, "evaluator": INGESTED_BY,
            "provenance": {"host": "bench", "python": "3.11"},
            "results": copy.deepcopy(records)}
    for _ in range(draw(st.integers(1, 3))):
        value = draw(measured_values, label="value")
        where = draw(st.sampled_from(["elapsed_s", "reason", "metric", "new metric", "status",
                                      "host", "provenance"]), label="where")
        record = data["results"][draw(st.integers(0, len(records) - 1))]
        if where == "metric":
            record["metrics"][draw(st.sampled_from(["latency_s", "tops", "times_s"]))] = value
        elif where == "new metric":
            record["metrics"][draw(st.sampled_from(["spread", "repeats", "x" * 300, ""]))] = value
        elif where == "status":
            record.update(status="failed", reason=value, metrics={})
        elif where in ("host", "provenance"):
            data["provenance"]["host" if where == "host" else "note"] = value
        else:
            record[where] = value
    return data


def _non_finite(token: str) -> float:
    raise ValueError(f"{token} stored")


def _non_finite_stored(store: Path) -> list[str]:
    """Every evaluation's time and documents as the store holds them: finite numbers only."""
    con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    found = []
    try:
        for elapsed, *documents in con.execute(
                "SELECT elapsed_s, metrics, versions FROM dse_evaluations"):
            if elapsed is None or elapsed != elapsed or abs(elapsed) == float("inf"):
                found.append(f"elapsed_s stored as {elapsed!r}")
            for text in documents:
                try:
                    json.loads(text, parse_constant=_non_finite)
                except ValueError as exc:
                    found.append(f"a document stored with {exc}: {_short(text)}")
    finally:
        con.close()
    return found


@settings(FUZZ, max_examples=max(10, EXAMPLES // 3))
@given(data=st.data())
def test_ingest_files(seeded_store, measured_records, data):
    """An ingest file with NaN, infinities, huge or long values: stored (exit 0) only with
    finite numbers, else refused (exit 2) with the store unchanged, never a traceback."""
    with new_case(seeded_store) as case:
        results = data.draw(ingest_files(measured_records), label="results")
        path = case.write("results.json", json.dumps(results))
        outcome = case.check(["ingest", path, "--storage", str(case.store)])
        if outcome.code == 0:
            assert not _non_finite_stored(case.store), case.written[:2000]


# --- concurrency: readers while a writer runs ---------------------------------------------

# each example starts a writer, a dashboard and a reader process per command: seconds each
CONCURRENT_EXAMPLES = max(2, EXAMPLES // 100)
GROWING = "growing"
WRITER_STUDY = {"name": GROWING, "target": "xdna2",
                "workload": {"shape": "256x256x256", "dtype": "int8-int8"},
                "evaluator": {"name": "synthetic", "options": {"work_s": 0.02}},
                "sampler": "random", "budget": {"trials": 320}, "seed": 3}
DSE = [sys.executable, "-m", "dse.cli"]


@st.composite
def reader_commands(draw, store: str) -> list[str]:
    """A command that only reads, of the seeded study or of the one being written."""
    study = draw(st.sampled_from([SEEDED, GROWING]))
    kind = draw(st.sampled_from(["trials", "paged", "best", "studies"]))
    if kind == "studies":
        return ["studies", "--storage", store]
    if kind == "best":
        return ["best", study, "--storage", store]
    argv = ["trials", study, "--storage", store, "--format", "json", "--where",
            draw(filters(depth=2))]
    return [*argv, "--limit", "20"] if kind == "paged" else argv


def _fetch_pages(base: str, pages: list[str], answers: list[tuple[str, int | str]]) -> None:
    for page in pages:
        try:
            with urllib.request.urlopen(base + page, timeout=120) as response:
                response.read()
                answers.append((page, response.status))
        except urllib.error.HTTPError as exc:
            answers.append((page, exc.code))
        except OSError as exc:  # the server went away
            answers.append((page, type(exc).__name__))


@settings(FUZZ, max_examples=CONCURRENT_EXAMPLES)
@given(data=st.data())
def test_readers_while_a_writer_runs(seeded_store, data):
    """``dse run`` writes a study while reader processes query the store and a dashboard's
    pages are fetched by several threads: every reader has the property (exit 0, or 2 with a
    message), every page is answered (200, or 400/404 for a bad filter or a study not yet
    there), the dashboard stays up without a traceback, and the writer stores every trial."""
    with new_case(seeded_store) as case:
        store = str(case.store)
        readers = data.draw(st.lists(reader_commands(store), min_size=2, max_size=4),
                            label="readers")
        where = data.draw(filters(depth=2), label="dashboard filter")
        study = case.write("growing.yaml", yaml.safe_dump(WRITER_STUDY), shown=False)
        env = {**os.environ, "PYTHONPATH": str(Path.cwd())}
        writer = subprocess.Popen([*DSE, "run", study, "--storage", store], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        answers: list[tuple[str, int | str]] = []
        # the readers start with the writer (its study takes some 6 s of evaluations)
        started = [(argv, subprocess.Popen(
            [*DSE, *argv], env=env, cwd=case.root / "cwd", stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)) for argv in readers]
        with dashboard_process(store) as (base, dashboard):
            query = urllib.parse.urlencode({"where": where})
            pages = ["/", f"/study/{GROWING}", f"/trials/{GROWING}?{query}",
                     f"/trials/{SEEDED}?{query}", f"/config/3/{SEEDED}", f"/state/{GROWING}"]
            fetchers = [threading.Thread(target=_fetch_pages, args=(base, pages * 2, answers))
                        for _ in range(3)]
            for fetcher in fetchers:
                fetcher.start()
            outcomes = []
            for argv, process in started:
                out, err = process.communicate(timeout=300)
                # a reader's time includes starting Python beside the others: not checked
                outcomes.append(Outcome(argv, process.returncode, out, err, 0.0, 0.0))
            for fetcher in fetchers:
                fetcher.join()
            alive = dashboard.poll() is None
        served = dashboard.stderr.read()
        _, written = writer.communicate(timeout=300)
        for outcome in outcomes:
            assert_property(outcome, context=f"while dse run wrote {GROWING}")
        wrong = [(page, code) for page, code in answers if code not in (200, 400, 404)]
        assert not wrong, f"pages not served: {wrong[:5]}\n{served[-3000:]}"
        assert alive and "Traceback" not in served, served[-3000:]
        assert writer.returncode == 0, written[-3000:]
        con = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
        try:
            stored = con.execute("SELECT count(*) FROM dse_trials t JOIN dse_studies s ON "
                                 "s.id = t.study_id WHERE s.name = ?", (GROWING,)).fetchone()
        finally:
            con.close()
        assert stored == (WRITER_STUDY["budget"]["trials"],)


# --- the regression corpus ----------------------------------------------------------------

_DIRECTIVE = re.compile(r"^# (expect|expand|note): (.*)$", re.MULTILINE)
_EXPAND = re.compile(r"^(\S+) = \"(.*)\" \* (\d+)$")


def _corpus_cases() -> list[Any]:
    cases = []
    for path in sorted(CORPUS.glob("*.yaml")):
        cases.append(pytest.param("study", path.name, id=path.stem))
    for item in json.loads((CORPUS / "argv.json").read_text(encoding="utf-8")):
        cases.append(pytest.param("argv", item, id=item["id"]))
    return cases


def _study_file(path: Path) -> tuple[str, str]:
    """A corpus study file's text (its ``# expand: TOKEN = "TEXT" * N`` lines applied: a
    100,000-character value need not be stored as such) and its ``# expect:``."""
    text = path.read_text(encoding="utf-8")
    expect = "any"
    for directive, value in _DIRECTIVE.findall(text):
        if directive == "expect":
            expect = value.strip()
        elif directive == "expand":
            token, chunk, count = _EXPAND.match(value.strip()).groups()
            chunk = chunk.encode().decode("unicode_escape")
            text = text.replace(token, chunk * int(count))
    return text, expect


def _fill(item: dict[str, Any], case: Case, study: str) -> list[str]:
    """A corpus command line: ``{store}`` and ``{study}`` filled in, and each ``expand`` token
    (``"@LONG@": ["x", 100000]``) replaced by its text repeated."""
    argv = [a.replace("{store}", str(case.store)).replace("{study}", study)
            for a in item["argv"]]
    for token, (chunk, count) in item.get("expand", {}).items():
        argv = [a.replace(token, chunk * count) for a in argv]
    return argv


@pytest.mark.parametrize(("kind", "item"), _corpus_cases())
def test_corpus(seeded_store, kind, item):
    """Every failure the fuzzer found, and the ones known before, with the outcome it must
    have (``refused``: exit 2; ``any``: the property)."""
    with new_case(seeded_store) as case:
        if kind == "study":
            text, expect = _study_file(CORPUS / item)
            case.check(["run", case.write("study.yaml", text), "--storage", str(case.store)],
                       expect=expect)
            return
        study = case.write("study.yaml", yaml.safe_dump({**SEEDED_STUDY, "name": "cli",
                                                         "budget": {"trials": 3}}), shown=False)
        argv = _fill(item, case, study)
        case.check(argv, expect=item.get("expect", "any"),
                   may_exit_1=argv[0] in ("evaluate", "search"))
