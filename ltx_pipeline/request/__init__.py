"""The run request: ``RunRequest`` validated once, here, through the LTX rules in ``ltx/`` (modes, buckets), so
every phase can trust it; the room's door.

``run.yaml`` is the source of truth for a run's request: editing it is a supported way to change a run, and
the next ``resume`` re-reads it. ``model`` holds the pydantic model (its fields, checks and the defaults
resolved from other fields, with the walks of ``--captioner`` and ``--effective-batch``); ``problems`` turns
each error into one line with its fix; ``files`` reads ``run.yaml``. Here: building and checking a request
(every problem found at once, before anything of the run is written), loading and saving ``run.yaml``, and
a new run's default name.
"""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ltx_pipeline.errors import BadDataset, BadInputs, BadRequest, LtxPipelineError
from ltx_pipeline.ltx.modes import MODES
from ltx_pipeline.request.files import read_request_file
from ltx_pipeline.request.model import (
    BACKENDS,
    DEFAULT_MIXED_BUCKETS,
    DEFAULT_SINGLE_BUCKET,
    EVAL_ONLY_FIELDS,
    RENDEZVOUS_FIELDS,
    RunRequest,
)
from ltx_pipeline.request.problems import refuse_unusable_metadata, request_problem
from ltx_pipeline.workspace import atomic_write, validate_run_name

__all__ = ["BACKENDS", "DEFAULT_MIXED_BUCKETS", "DEFAULT_SINGLE_BUCKET", "EVAL_ONLY_FIELDS", "RENDEZVOUS_FIELDS",
           "RunRequest", "build_request", "check_request", "default_run_name", "load_request", "read_request_file",
           "save_request"]


def build_request(values: dict[str, Any], where: str = "options") -> RunRequest:
    """Validate raw values into a ``RunRequest``, each problem as one clear line.

    Raises:
        BadRequest: one problem, with the offending field, what is wrong and how to fix it.
        BadInputs: several problems, each such a line.
    """
    try:
        return RunRequest(**values)
    except ValidationError as exc:
        problems = [request_problem(err, where, RunRequest.model_fields) for err in exc.errors()]
    raise problems[0] if len(problems) == 1 else BadInputs(problems, where)


def check_request(run_name: str | None, values: dict[str, Any], where: str = "options") -> RunRequest:
    """Every problem of a run's request found at once, before anything of the run is written or changed.

    Used for a new run's options, for options given to an existing run, and for ``run.yaml``.

    The run name, each option (or ``run.yaml`` field), and the shape of the metadata file for the
    mode asked for are all checked; one problem raises its own error, several raise ``BadInputs``.
    """
    problems: list[LtxPipelineError] = []
    if run_name is not None:
        try:
            validate_run_name(run_name)  # "" and reserved names are refused, not replaced by a default
        except LtxPipelineError as exc:
            problems.append(exc)
    request: RunRequest | None = None
    try:
        request = build_request(values, where)
    except BadInputs as exc:
        problems += exc.problems
    except BadRequest as exc:
        problems.append(exc)
    mode = values.get("mode", "t2v")
    if values.get("dataset") and mode in MODES:  # the dataset's shape is checked even when options are wrong
        try:
            refuse_unusable_metadata(str(values["dataset"]), str(mode))
        except BadDataset as exc:
            problems.append(exc)
    if len(problems) > 1:
        raise BadInputs(problems, where)
    if problems:
        raise problems[0]
    assert request is not None  # no problem means the request was built
    return request


def default_run_name(request: RunRequest, now: datetime | None = None) -> str:
    """``<mode>-<dataset-name>-<YYYYMMDD-HHMM>``, as the official skill names runs."""
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M")
    dataset = Path(request.dataset)
    stem = dataset.stem if dataset.suffix else dataset.name
    if stem in ("", ".precomputed", "dataset"):
        stem = dataset.parent.name or "dataset"
    safe = re.sub(r"[^A-Za-z0-9_-]+", "-", stem).strip("-_")[:40] or "dataset"
    return validate_run_name(f"{request.mode}-{safe}-{stamp}")


def save_request(path: Path, request: RunRequest, root: Path) -> None:
    atomic_write(path, request.to_yaml(), root=root)


def load_request(path: Path) -> RunRequest:
    """Read and validate ``run.yaml``.

    Every problem is reported together: each invalid field, and the metadata file's shape for the
    mode (a user may edit ``dataset`` or ``mode`` there before ``resume``).

    Raises:
        BadRequest: missing, unparsable or invalid file, naming the field.
        BadInputs: several problems, one line each.
    """
    return check_request(None, read_request_file(path), where=str(path))
