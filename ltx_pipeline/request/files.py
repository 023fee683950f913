"""Reading ``run.yaml``: its raw fields as a mapping, with relative paths resolved against the file's folder.

Validation is ``ltx_pipeline.request.load_request``'s; here a file that cannot be read, is not YAML or
is not a mapping is one ``BadRequest`` naming the file and the fix.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from ltx_pipeline.errors import BadRequest
from ltx_pipeline.request.model import URL
from ltx_pipeline.yaml_io import load_yaml

__all__ = ["PATH_FIELDS", "read_request_file"]

PATH_FIELDS = ("dataset", "trainer_root", "trainer_python", "model_path", "text_encoder_path", "nvidia_smi", "surface",
                "holdout_file")


def read_request_file(path: Path) -> dict[str, Any]:
    """The raw fields of a request file, with relative paths resolved against the file's folder.

    Raises:
        BadRequest: missing, unparsable or not a mapping.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadRequest(f"Cannot read the run request: {exc.strerror}", where=str(path),
                         fix="restore run.yaml or start the run again with `ltx-pipeline run`") from None
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        raise BadRequest(f"The run request is not valid YAML{line}", where=str(path),
                         fix="correct the YAML syntax") from None
    if not isinstance(data, dict):
        raise BadRequest("A run request must be a mapping of request fields", where=str(path),
                         fix="see workspaces/examples/ for the format")
    for key in PATH_FIELDS:
        value = data.get(key)
        if isinstance(value, str) and value and not URL.match(value) and not Path(value).expanduser().is_absolute():
            joined = path.parent / value
            # A venv's python is a symlink to the base interpreter: resolving it would leave the venv.
            data[key] = os.path.normpath(joined.absolute()) if key == "trainer_python" else str(joined.resolve())
    return data
