"""Validate a trainer config with the trainer's own ``LtxTrainerConfig``; run with the trainer's python.

Usage: ``python validate_config.py CONFIG.yaml``. Prints one line ``LTX_PIPELINE_VALIDATION <json list>`` of
pydantic errors (empty when the config is accepted). Standalone: it imports nothing from ltx_pipeline,
which is not installed in the trainer's environment.
"""

from __future__ import annotations

import json
import sys

import yaml
from ltx_trainer.config import LtxTrainerConfig
from pydantic import ValidationError


def main(path: str) -> None:
    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle) or {}
    try:
        LtxTrainerConfig(**data)
        errors: list[dict[str, str]] = []
    except ValidationError as exc:
        errors = [{"loc": ".".join(str(p) for p in e["loc"]), "msg": e["msg"], "type": e["type"]}
                  for e in exc.errors()]
    print("LTX_PIPELINE_VALIDATION " + json.dumps(errors))


if __name__ == "__main__":
    main(sys.argv[1])
