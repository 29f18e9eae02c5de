"""The contract between dse and its target families: the only part of dse a family imports.

``from dse.core import SearchSpace, Evaluator, Family, ...`` gives everything a family needs:
the interfaces (:class:`Target`, :class:`SearchSpace`, :class:`Evaluator` with its
:class:`Capabilities`), the data they exchange (config batches, :class:`EvalContext`,
:class:`EvalResult`, workloads, dtypes), the registry and the helpers for target files and
command groups. Names are imported on first use, so ``dse --help`` does not load NumPy.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

# name -> submodule of dse.core that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("DseError", "TargetFileError", "UsageError", "read_json", "read_text"),
                    "errors"),
    **dict.fromkeys(("EvalResult", "Status", "metrics_row"), "results"),
    **dict.fromkeys(("DTYPE_PAIRS", "ELEMENT_BYTES", "DtypePair"), "dtypes"),
    **dict.fromkeys(("BatchedGemmWorkload", "GemmWorkload", "Workload"), "workload"),
    **dict.fromkeys(("ChoiceParam", "ConfigBatch", "Feasibility", "INT_LIMIT", "IntParam",
                     "Param", "Rule", "batch_concat", "batch_from_dicts", "batch_len",
                     "batch_take", "batch_to_dicts"), "params"),
    **dict.fromkeys(("COMMON_TIME_PARTS", "Breakdown", "Calibratable", "OptunaEncoding",
                     "SearchSpace", "require_dtype"), "space"),
    **dict.fromkeys(("ZERO_OK", "Target", "TargetConstants", "build_section", "check_dtypes",
                     "check_keys", "digest_of", "dotted_value", "family_sections",
                     "rewrite_toml", "scalar", "with_dotted"), "target"),
    **dict.fromkeys(("Capabilities", "EvalContext", "EvaluationFailed",
                     "Evaluator", "EvaluatorError", "failed_results", "require_fits",
                     "run_feasible", "score_batch"), "evaluator"),
    **dict.fromkeys(("Candidate", "SearchOutcome"), "outcome"),
    **dict.fromkeys(("Nodes", "ProductTree", "SearchTree", "cross", "product"), "tree"),
    **dict.fromkeys(("BalanceProcedure", "Family", "Model", "ProcedureOption"),
                    "family_record"),
    "Strategy": "strategy_record",
    "Fidelity": "fidelity",
    **dict.fromkeys(("PageData", "StudyPage"), "page"),
    **dict.fromkeys(("available_targets", "build_context", "build_evaluator", "evaluator_class",
                     "evaluator_names", "families", "family", "fidelity_ranks", "load_target",
                     "register", "registered", "search_space_class", "shipped_targets",
                     "strategy", "study_pages", "target_path", "unregister", "workload_class",
                     "workload_from_dict"),
                    "registry"),
    **dict.fromkeys(("fmt", "key_values", "table"), "formatting"),
    **dict.fromkeys(("ResultSink", "add_storage_option", "name_values", "positive_int"),
                    "commands"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'dse.core' has no attribute {name!r}")
    value = getattr(import_module(f"dse.core.{module}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


if TYPE_CHECKING:  # what static tools see: the same names, imported eagerly
    from dse.core.commands import ResultSink, add_storage_option, name_values, positive_int
    from dse.core.dtypes import DTYPE_PAIRS, ELEMENT_BYTES, DtypePair
    from dse.core.errors import DseError, TargetFileError, UsageError, read_json, read_text
    from dse.core.evaluator import (
        Capabilities,
        EvalContext,
        EvaluationFailed,
        Evaluator,
        EvaluatorError,
        failed_results,
        require_fits,
        run_feasible,
        score_batch,
    )
    from dse.core.family_record import BalanceProcedure, Family, Model, ProcedureOption
    from dse.core.fidelity import Fidelity
    from dse.core.formatting import fmt, key_values, table
    from dse.core.outcome import Candidate, SearchOutcome
    from dse.core.page import PageData, StudyPage
    from dse.core.params import (
        INT_LIMIT,
        ChoiceParam,
        ConfigBatch,
        Feasibility,
        IntParam,
        Param,
        Rule,
        batch_concat,
        batch_from_dicts,
        batch_len,
        batch_take,
        batch_to_dicts,
    )
    from dse.core.registry import (
        available_targets,
        build_context,
        build_evaluator,
        evaluator_class,
        evaluator_names,
        families,
        family,
        fidelity_ranks,
        load_target,
        register,
        registered,
        search_space_class,
        shipped_targets,
        strategy,
        study_pages,
        target_path,
        unregister,
        workload_class,
        workload_from_dict,
    )
    from dse.core.results import EvalResult, Status, metrics_row
    from dse.core.space import (
        COMMON_TIME_PARTS,
        Breakdown,
        Calibratable,
        OptunaEncoding,
        SearchSpace,
        require_dtype,
    )
    from dse.core.strategy_record import Strategy
    from dse.core.target import (
        ZERO_OK,
        Target,
        TargetConstants,
        build_section,
        check_dtypes,
        check_keys,
        digest_of,
        dotted_value,
        family_sections,
        rewrite_toml,
        scalar,
        with_dotted,
    )
    from dse.core.tree import Nodes, ProductTree, SearchTree, cross, product
    from dse.core.workload import BatchedGemmWorkload, GemmWorkload, Workload
