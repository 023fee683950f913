"""Backend ``ltx``: the official trainer in the user's LTX-2 checkout, driven through ``uv``.

The checkout is read-only to the engine: templates are read from
``packages/ltx-trainer/configs/`` and run configs always live in the workspace. Validation runs the
trainer's own ``LtxTrainerConfig`` inside the checkout's environment when it is synced (the source
of truth), and falls back to the project's mirror of the schema when it is not.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ltx_pipeline.backends.base import Distributed, LaunchSpec
from ltx_pipeline.backends.launch import (
    LOG_ENV,
    accelerate_args,
    accelerate_config_name,
    check_processes,
    preprocess_args,
)
from ltx_pipeline.errors import BadInput
from ltx_pipeline.ltx.trainer_config import ConfigFinding, load_trainer_config_file, validate_trainer_config

__all__ = ["LtxBackend"]

TRAINER_DIR = Path("packages") / "ltx-trainer"
# Run inside the trainer's environment: build its config class from the YAML and print the errors as
# JSON. Written for this project; it only uses the trainer's public config class.
_VALIDATOR = """
import json, sys
import yaml
from pydantic import ValidationError
from ltx_trainer.config import LtxTrainerConfig
with open(sys.argv[1], encoding="utf-8") as handle:
    data = yaml.safe_load(handle)
try:
    LtxTrainerConfig(**data)
    errors = []
except ValidationError as exc:
    errors = [{"loc": ".".join(str(p) for p in e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
print("LTX_PIPELINE_VALIDATION " + json.dumps(errors))
"""
_MARK = "LTX_PIPELINE_VALIDATION "


class LtxBackend:
    """The official ltx-trainer."""

    name = "ltx"
    heavy_prerequisites = ("uv", "LTX checkpoint", "Gemma text encoder", "LTX-2 trainer checkout", "Operating system")

    def __init__(self, root: Path | None, uv: str | None = None) -> None:
        self._root = root.expanduser().resolve() if root is not None else None
        self.uv = uv or shutil.which("uv") or "uv"

    @property
    def root(self) -> Path:
        if self._root is None:
            raise BadInput("No LTX-2 trainer checkout was given", where="--trainer-root",
                           fix="clone https://github.com/Lightricks/LTX-2, run `uv sync` at its root, then pass "
                               "--trainer-root PATH or set LTX2_ROOT")
        return self._root

    @property
    def trainer_dir(self) -> Path:
        return self.root / TRAINER_DIR

    @property
    def synced(self) -> bool:
        """The checkout's environment exists (``uv sync`` ran), so the trainer's validator can run."""
        if self._root is None:
            return False
        return ((self._root / "uv.lock").is_file() and (self._root / ".venv").is_dir()
                and shutil.which(self.uv) is not None)

    def template(self, config_name: str) -> Path:
        path = self.trainer_dir / "configs" / config_name
        if not path.is_file():
            raise BadInput(f"The trainer checkout has no template {config_name}", where=str(path.parent),
                           fix="update the LTX-2 checkout (git pull) or point --trainer-root at a complete one")
        return path

    def accelerate_config(self, distributed: Distributed) -> Path | None:
        name = accelerate_config_name(distributed)
        return self.trainer_dir / "configs" / "accelerate" / name if name else None

    def _uv_run(self, *args: str) -> list[str]:
        return [self.uv, "run", "--directory", str(self.trainer_dir), *args]

    def train_command(self, config_path: Path, *, num_processes: int = 1,
                      distributed: Distributed = "none") -> LaunchSpec:
        check_processes(num_processes, distributed)
        config = str(config_path.resolve())  # `uv run --directory` changes the working directory
        if distributed == "none":
            argv = self._uv_run("python", "scripts/train.py", config, "--disable-progress-bars")
        else:
            preset = self.accelerate_config(distributed)
            argv = self._uv_run("accelerate", *accelerate_args(num_processes, str(preset)), "scripts/train.py", config,
                                "--disable-progress-bars")
        return LaunchSpec(tuple(argv), self.trainer_dir, dict(LOG_ENV))

    def preprocess_command(self, dataset: Path, buckets: str, output_dir: Path, *, model_path: str,
                           text_encoder_path: str, trigger: str | None = None,
                           extra_flags: Sequence[str] = ()) -> LaunchSpec:
        argv = self._uv_run("python", "scripts/process_dataset.py",
                            *preprocess_args(dataset, buckets, output_dir, model_path=model_path,
                                             text_encoder_path=text_encoder_path, trigger=trigger,
                                             extra_flags=extra_flags))
        return LaunchSpec(tuple(argv), self.trainer_dir, dict(LOG_ENV))

    def validate(self, config_path: Path, *, relaxed_paths: bool = False) -> list[ConfigFinding]:
        """The trainer's own validator when synced and strict; else the mirror.

        Relaxed validation (placeholders) always uses the mirror: the trainer checks paths exist.
        """
        data = load_trainer_config_file(config_path)
        if relaxed_paths or not self.synced:
            return validate_trainer_config(data, relaxed_paths=relaxed_paths, cwd=config_path.resolve().parent)
        done = subprocess.run(self._uv_run("python", "-c", _VALIDATOR, str(config_path.resolve())),  # noqa: S603
                              capture_output=True, text=True, timeout=300, cwd=self.trainer_dir, check=False)
        line = next((ln for ln in done.stdout.splitlines() if ln.startswith(_MARK)), None)
        if line is None:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise BadInput(f"The trainer's config validator did not run: {tail[0]}", where=str(self.trainer_dir),
                           fix="run `uv sync` at the LTX-2 checkout's root")
        return [ConfigFinding(path=e["loc"], message=e["msg"], code=e["type"])
                for e in json.loads(line[len(_MARK):])]
