"""Backend ``simulated``: a cost surface stands in for the trainer, for benchmarks and exact tests.

Its trainer is ``python -m ltx_pipeline.backends.simulated_trainer`` (same argv shape and log lines
as the real one, driven by the surface); its GPU is the surface's ``gpu``; its templates are the
reference backend's, since no trainer checkout is involved.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from ltx_pipeline.backends.base import (
    MIRROR_VALIDATOR,
    Capabilities,
    Distributed,
    LaunchSpec,
    Nodes,
    PreprocessScript,
)
from ltx_pipeline.backends.launch import LOG_ENV, check_processes
from ltx_pipeline.backends.surface import CostSurface, load_surface
from ltx_pipeline.errors import BadInput
from ltx_pipeline.ltx.trainer_config import ConfigFinding, load_trainer_config_file, validate_trainer_config

__all__ = ["SimulatedBackend"]

TEMPLATES = Path(__file__).resolve().parent / "reference_configs"


class SimulatedBackend:
    """The cost-surface trainer."""

    name = "simulated"
    checkout_root: Path | None = None
    description = "simulated (a cost surface stands in for the trainer; nothing is trained)"
    heavy_prerequisites: tuple[str, ...] = ()

    def __init__(self, surface_path: Path) -> None:
        self.surface_path = surface_path.expanduser().resolve()
        self.surface: CostSurface = load_surface(self.surface_path)
        gpu = self.surface.gpu
        self.capabilities = Capabilities(runs_real_trainer=False, needs_gpu=False, uses_real_files=False,
                                         simulated_gpu=f"{gpu.name},{gpu.memory_mib},{gpu.count}")

    def template(self, config_name: str) -> Path:
        path = TEMPLATES / config_name
        if not path.is_file():
            raise BadInput(f"The simulated backend has no template {config_name}", where=str(TEMPLATES),
                           fix="use a mode the reference templates cover (see the README's backends section)")
        return path

    def base_weights(self, folder: Path) -> Path:
        """A placeholder path: the simulated trainer loads no weights (configs are checked relaxed)."""
        return folder / "simulated-base.safetensors"

    def validator(self, *, relaxed_paths: bool = False) -> str:
        """Always the mirror: this backend has no trainer checkout of its own."""
        return MIRROR_VALIDATOR

    def validate(self, config_path: Path, *, relaxed_paths: bool = False) -> list[ConfigFinding]:
        return validate_trainer_config(load_trainer_config_file(config_path), relaxed_paths=relaxed_paths,
                                       cwd=config_path.parent)

    def train_command(self, config_path: Path, *, num_processes: int = 1, distributed: Distributed = "none",
                      nodes: Nodes | None = None) -> LaunchSpec:
        check_processes(num_processes, distributed, nodes)
        if nodes is not None and nodes.count > 1:
            # Its cost surface is one machine's measurements: there is nothing to rendezvous with.
            raise BadInput("The simulated backend runs on one machine", where="--nodes",
                           fix="use --nodes 1, or --backend reference (real DDP over several nodes) or ltx")
        argv = (sys.executable, "-m", "ltx_pipeline.backends.simulated_trainer", str(config_path.resolve()),
                "--surface", str(self.surface_path), "--disable-progress-bars")
        return LaunchSpec(argv, config_path.resolve().parent, dict(LOG_ENV))

    def preprocess_command(self, dataset: Path, buckets: str, output_dir: Path, *, model_path: str,
                           text_encoder_path: str, trigger: str | None = None,
                           extra_flags: Sequence[str] = (), script: PreprocessScript = "dataset",
                           num_processes: int = 1) -> LaunchSpec:
        """Refused, whichever script and however many processes: the simulated trainer reads no data."""
        raise BadInput("The simulated backend has no preprocessing", where="--backend simulated",
                       fix="use --backend reference to preprocess toy data, or ltx for real data")
