"""A study's frame kept whole, as one Arrow document, for the reads that need every trial.

A study of a hundred thousand trials holds as many JSON documents of metrics: however its frame
is read from them, parsing them takes about a second. But trials are only ever added, and a
stored workload, config or evaluation never changes, so a study's frame is fixed by which trials
it has: their count and their last number. When a run that added trials ends, the runner keeps
the study's frame with those two numbers, encoded by Arrow (zstd-compressed: about 11 MB for
139,279 trials); :func:`read_snapshot` returns it while both still match. A trial added since (a
later run, results ingested) makes it stale, and the frame is read from the documents again.

A snapshot is decoded and compared with its frame before it is kept, and kept only if equal. One
that cannot be decoded when read (damaged, or written by other versions of dse, pandas or
pyarrow, which its format names) is passed over, never trusted.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
from sqlalchemy import delete, func, inspect, select
from sqlalchemy.orm import Session

from dse.storage import models as m
from dse.version import __version__

FORMAT = f"arrow-ipc-zstd/1 dse {__version__} pandas {pd.__version__} pyarrow {pa.__version__}"
# Studies smaller than this read their documents in a fraction of a second: none is kept.
MIN_TRIALS = 10_000
# The frame's own attributes that a snapshot holds (a study's objectives are read from its
# spec each time).
ATTRS = ("params", "space")


def trial_extent(s: Session, study_id: int) -> tuple[int, int | None]:
    """How many trials the study has, and the last one's number (None without any)."""
    t = m.TrialRow
    count, last = s.execute(select(func.count(), func.max(t.number))
                            .where(t.study_id == study_id)).one()
    return int(count), None if last is None else int(last)


def encode(frame: pd.DataFrame) -> bytes:
    """The frame as an Arrow IPC stream, zstd-compressed, its :data:`ATTRS` in the schema's
    metadata. A column of Python objects (a metric only some results have, such as a
    measurement's provenance, or of several types) goes as the JSON text of each value, a
    missing one (NaN) as null: Arrow would make a column of one type of it."""
    bare = frame.copy(deep=False)
    bare.attrs = {}  # pyarrow would keep them all; only ATTRS are the frame's own
    objects = [name for name in bare.columns if pd.api.types.is_object_dtype(bare[name])]
    for name in objects:
        bare[name] = pd.Series([None if _missing(value) else json.dumps(value)
                                for value in bare[name]], dtype=object, index=bare.index)
    table = pa.Table.from_pandas(bare, preserve_index=False)
    attrs = json.dumps({**{name: frame.attrs.get(name) for name in ATTRS}, "json": objects})
    table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                           b"dse": attrs.encode()})
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _missing(value: Any) -> bool:
    """Whether a value of an object column is pandas' mark of a missing one (a float NaN)."""
    return isinstance(value, float) and math.isnan(value)


def decode(body: bytes) -> pd.DataFrame:
    """The frame :func:`encode` wrote.

    Raises:
        ValueError: the body is not such a stream (``pyarrow.ArrowInvalid`` is one).
    """
    table = pa.ipc.open_stream(body).read_all()
    try:
        attrs = json.loads((table.schema.metadata or {})[b"dse"])
        objects = list(attrs["json"])
    except (KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"no frame attributes: {exc}") from None
    frame = table.to_pandas()
    for name in objects:
        frame[name] = _objects(table.column(name))
    frame.attrs = {name: attrs.get(name) for name in ATTRS}
    return frame


def _objects(texts: pa.ChunkedArray) -> pd.Series:
    """A column of Python objects from the JSON text of each value (null: NaN, missing). Each
    distinct text is decoded once where all are plain values (a reason, a host: a few texts
    in a hundred thousand rows); a list or a mapping is decoded row by row, so that no two rows
    share one object."""
    encoded = texts.combine_chunks().dictionary_encode()
    distinct = [json.loads(text) for text in encoded.dictionary.to_pylist()]
    if any(isinstance(value, (list, dict)) for value in distinct):
        return pd.Series([math.nan if text is None else json.loads(text)
                          for text in texts.to_pylist()], dtype=object)
    values = np.empty(len(distinct) + 1, dtype=object)
    for i, value in enumerate(distinct):  # one by one: a sequence would be spread over rows
        values[i] = value
    values[-1] = math.nan
    return pd.Series(values[encoded.indices.fill_null(len(distinct)).to_numpy()], dtype=object)


def has_snapshots(s: Session) -> bool:
    """Whether the database has the snapshots' table (a file of schema 4 or older, opened only
    to read, has not)."""
    return inspect(s.connection()).has_table(m.FrameSnapshotRow.__tablename__)


def read_snapshot(s: Session, study: m.StudyRow) -> pd.DataFrame | None:
    """The study's kept frame (its :data:`ATTRS` only), if its trials are still those it was
    kept with; None where there is none, it is stale, or it cannot be decoded."""
    if not has_snapshots(s):
        return None
    snap = m.FrameSnapshotRow
    row = s.execute(select(snap.id, snap.trials, snap.last_number, snap.format)
                    .where(snap.study_id == study.id)).first()
    if row is None or row.format != FORMAT \
            or (row.trials, row.last_number) != trial_extent(s, study.id):
        return None  # its body (megabytes) is not read: a running study is loaded often
    try:
        return decode(bytes(s.scalar(select(snap.body).where(snap.id == row.id))))
    except (ValueError, pa.ArrowException):  # damaged: the documents are read instead
        return None


def same_frame(frame: pd.DataFrame, other: pd.DataFrame) -> bool:
    """Whether two frames hold the same columns, types and values, and the same :data:`ATTRS`
    (pandas' block-wise ``equals``, a hundredth of ``assert_frame_equal``'s time; a column of
    Python objects compared value by value as well, where ``equals`` takes None for NaN)."""
    if list(frame.columns) != list(other.columns) or not frame.dtypes.equals(other.dtypes) \
            or not frame.equals(other):
        return False
    for name in [name for name in frame.columns if pd.api.types.is_object_dtype(frame[name])]:
        try:
            pd.testing.assert_series_equal(frame[name], other[name], check_exact=True)
        except AssertionError:
            return False
    return all(frame.attrs.get(name) == other.attrs.get(name) for name in ATTRS)


def keep_snapshot(s: Session, study_id: int, frame: pd.DataFrame, extent: tuple[int, int],
                  created: datetime) -> int | None:
    """Keep ``frame`` as the study's snapshot for ``extent`` (its trials' count and last
    number), replacing the one before; returns its size in bytes, or None (nothing kept) when
    Arrow cannot hold the frame exactly (a column of lists, of mixed types)."""
    try:
        body = encode(frame)
        exact = same_frame(decode(body), frame)
    except (ValueError, TypeError, pa.ArrowException):
        exact = False
    snap = m.FrameSnapshotRow
    s.execute(delete(snap).where(snap.study_id == study_id))
    if not exact:
        return None
    values: dict[str, Any] = {"study_id": study_id, "trials": extent[0],
                              "last_number": extent[1], "format": FORMAT, "body": body,
                              "created_at": created}
    s.execute(snap.__table__.insert(), [values])
    return len(body)
