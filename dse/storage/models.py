"""Tables of the results database (all prefixed ``dse_`` so Optuna or others can share the DB).

One row per target (content-hashed), workload, config and evaluation; an evaluation's identity is
(target, workload, config, evaluator name, evaluator version), so re-running never re-evaluates
and never duplicates. Studies own trials, which point at evaluations; Optuna's own state lives in
``dse_optuna_journal`` (see :mod:`dse.storage.journal`).

The two tables a study fills by the hundred thousand, ``dse_evaluations`` and ``dse_trials``,
carry no index beyond their identities (each query by study, or by target and workload, reads a
prefix of those) and no foreign-key constraint (schema version 4): PostgreSQL checks a foreign
key with a trigger per row, which doubled the time to store an exhaustive study, and the store
writes only ids it read or drew in the same transaction. Every other table keeps its references.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

SCHEMA_VERSION = 5


class Base(DeclarativeBase):
    """The declarative base of every ``dse_`` table."""


class Meta(Base):
    """A setting of the database itself, by key (``schema_version``)."""

    __tablename__ = "dse_meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class TargetRow(Base):
    """A target's constants, identified by their digest (an edited target file is a new row)."""

    __tablename__ = "dse_targets"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    body: Mapped[dict] = mapped_column(JSON)


class WorkloadRow(Base):
    """A workload (its ``to_dict`` body), identified by the body's canonical key."""

    __tablename__ = "dse_workloads"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    body: Mapped[dict] = mapped_column(JSON)


class ConfigRow(Base):
    """A config of a search space (its parameter values), identified by its canonical key."""

    __tablename__ = "dse_configs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    space: Mapped[str] = mapped_column(String(100))
    params: Mapped[dict] = mapped_column(JSON)


class EvaluationRow(Base):
    """One evaluator version's result for a config of a workload on a target, with its metrics and
    provenance; unique, so nothing is evaluated twice."""

    __tablename__ = "dse_evaluations"
    __table_args__ = (UniqueConstraint("target_id", "workload_id", "config_id", "evaluator",
                                       "version", name="uq_dse_evaluation_identity"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    target_id: Mapped[int] = mapped_column(Integer)  # dse_targets.id
    workload_id: Mapped[int] = mapped_column(Integer)  # dse_workloads.id
    config_id: Mapped[int] = mapped_column(Integer)  # dse_configs.id
    evaluator: Mapped[str] = mapped_column(String(100))
    version: Mapped[str] = mapped_column(String(50))
    fidelity: Mapped[str] = mapped_column(String(50))
    status: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    metrics: Mapped[dict] = mapped_column(JSON)
    tops: Mapped[float | None] = mapped_column(Float, nullable=True)
    elapsed_s: Mapped[float] = mapped_column(Float)
    host: Mapped[str] = mapped_column(String(200))
    versions: Mapped[dict] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class StudyRow(Base):
    """A study: its spec, its status and the lease of the process that runs it."""

    __tablename__ = "dse_studies"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    spec: Mapped[dict] = mapped_column(JSON)
    target_id: Mapped[int] = mapped_column(ForeignKey("dse_targets.id"))
    status: Mapped[str] = mapped_column(String(20))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    updated_at: Mapped[datetime] = mapped_column(DateTime)
    # Which process drives the study, until when (a killed runner's lease simply expires).
    owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    lease_until: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


class TrialRow(Base):
    """A study's ``number``-th trial: the config it asked for, the evaluation that answered it and
    whether that came from the store (``cached``)."""

    __tablename__ = "dse_trials"
    __table_args__ = (UniqueConstraint("study_id", "number", name="uq_dse_trial_number"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(Integer)  # dse_studies.id
    number: Mapped[int] = mapped_column(Integer)
    workload_id: Mapped[int] = mapped_column(Integer)  # dse_workloads.id
    config_id: Mapped[int] = mapped_column(Integer)  # dse_configs.id
    evaluation_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    status: Mapped[str] = mapped_column(String(20))
    cached: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class JournalRow(Base):
    """One line (``seq``) of a study's Optuna journal (see :mod:`dse.storage.journal`)."""

    __tablename__ = "dse_optuna_journal"
    __table_args__ = (UniqueConstraint("study_id", "seq", name="uq_dse_journal_seq"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("dse_studies.id"), index=True)
    seq: Mapped[int] = mapped_column(Integer)
    log: Mapped[dict] = mapped_column(JSON)


class FidelityRow(Base):
    """How well one ladder rung ranked the configs the next rung scored (schema version 2)."""

    __tablename__ = "dse_fidelity"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("dse_studies.id"), index=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("dse_workloads.id"))
    rung: Mapped[int] = mapped_column(Integer)  # the dearer rung of the pair
    cheaper: Mapped[str] = mapped_column(String(100))
    dearer: Mapped[str] = mapped_column(String(100))
    n: Mapped[int] = mapped_column(Integer)
    spearman: Mapped[float | None] = mapped_column(Float, nullable=True)
    kendall: Mapped[float | None] = mapped_column(Float, nullable=True)
    top_k: Mapped[int] = mapped_column(Integer)
    top_k_overlap: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class FaultRow(Base):
    """A fault of the machinery while a study ran (a lost Ray worker or node): never a result,
    so nothing of it is cached; the evaluations it cost were done again or not stored
    (schema version 3)."""

    __tablename__ = "dse_faults"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("dse_studies.id"), index=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("dse_workloads.id"))
    kind: Mapped[str] = mapped_column(String(100))  # the exception's class, WorkerCrashedError
    message: Mapped[str] = mapped_column(Text)
    attempt: Mapped[int] = mapped_column(Integer)  # of the batch of configs it cost
    configs: Mapped[int] = mapped_column(Integer)  # how many configs that batch held
    retried: Mapped[int] = mapped_column(Integer)  # 1: tried again; 0: the study stopped
    host: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime)


class FrameSnapshotRow(Base):
    """A study's whole frame as one Arrow document, valid while the study has ``trials`` trials
    numbered up to ``last_number`` (see :mod:`dse.storage.snapshots`; schema version 5)."""

    __tablename__ = "dse_frame_snapshots"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("dse_studies.id"), unique=True)
    trials: Mapped[int] = mapped_column(Integer)
    last_number: Mapped[int] = mapped_column(Integer)
    format: Mapped[str] = mapped_column(String(200))  # the encoding and the libraries behind it
    body: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime] = mapped_column(DateTime)
