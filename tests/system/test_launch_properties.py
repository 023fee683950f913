"""Property (issue 19): whatever the GPUs, dataset size, effective batch and buckets, every config autotune
tries or picks passes validation for the launch it stands for, and every trainer launched ran the exact
config that was validated last (its digest travels with the launch record)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ltx_pipeline.cli import main
from ltx_pipeline.engine.journal import config_sha256
from ltx_pipeline.ltx.buckets import parse_buckets
from ltx_pipeline.ltx.launch_checks import launch_checks
from ltx_pipeline.store import Store
from tests.phases.train_helpers import clips


def _surface(path: Path, gpus: int) -> Path:
    """An H100 card where every standard-tier knob combination fits: nothing but the data limits a batch."""
    points = [{"knobs": {"quantization": None, "optimizer_type": "adamw", "batch_size": b,
                         "enable_gradient_checkpointing": ckpt},
               "step_time_s": round(b ** 0.8 * (1.25 if ckpt else 1.0), 3),
               "peak_vram_gb": 40.0 + b * (2.0 if ckpt else 4.0)}
              for b in range(1, 9) for ckpt in (True, False)]
    surface = {"gpu": {"name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "count": gpus},
               "load_time_s": 10, "validation_time_s": 5, "points": points}
    path.write_text(yaml.safe_dump(surface))
    return path


@pytest.mark.long  # 27 s on 2 cores (2026-12-06): in the opt-in long suite, `-m long`
@pytest.mark.slow
@pytest.mark.timeout(600)
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(gpus=st.integers(1, 4), samples=st.integers(1, 8), effective=st.sampled_from([1, 2, 4, 6, 8]),
       buckets=st.sampled_from(["96x64x25", "96x64x25;64x64x17"]))
def test_every_trial_and_launch_is_a_validated_config(tmp_path_factory, gpus, samples, effective, buckets) -> None:
    root = tmp_path_factory.mktemp("prop")
    workspace = root / "ws"
    dataset = clips(root / "data", n=samples)
    strategy = ["--strategy", "mixed"] if ";" in buckets else []
    code = main(["run", "--workspace", str(workspace), "--run", "r1", "--dataset", str(dataset), *strategy, "--backend",
                 "simulated", "--surface", str(_surface(root / "surface.yaml", gpus)), "--effective-batch",
                 str(effective), "--buckets", buckets, "--steps", "20", "--checkpoint-interval", "10", "--approve"])
    store = Store.open(workspace / "ltx-pipeline.db")
    run = store.get_run("r1")
    launches = store.processes(run.id, "train")
    if code != 0:
        # Only a refusal before any launch: the dataset cannot feed even batch 1 on every process.
        assert code == 2 and launches == [] and samples < gpus
        return
    validate = store.latest_phase_runs(run.id)["validate"].outputs
    processes = validate["num_processes"]
    for trial_config in sorted((workspace / "r1" / "overfit").glob("trial-*/config.yaml")):
        knobs = yaml.safe_load(trial_config.read_text())["optimization"]
        # The trial's knobs in the real launch: batch x processes never exceeds the dataset.
        real = yaml.safe_load((workspace / "r1" / "config.yaml").read_text())
        real["optimization"].update(batch_size=knobs["batch_size"],
                                    gradient_accumulation_steps=knobs["gradient_accumulation_steps"])
        errors = [c.line() for c in launch_checks(real, num_processes=processes, dataset_samples=samples,
                                                  buckets=list(parse_buckets(buckets)))
                  if c.severity == "error" and c.path != "model.load_checkpoint"]
        assert errors == [], (trial_config, errors)
    validated = [e.message.split()[2].rstrip("…") for e in store.events(run.id) if e.message.startswith("validated ")]
    assert len(launches) >= 1 and len(validated) >= len(launches)
    for launch in launches:
        assert launch.config_sha256 is not None
    assert launches[-1].config_sha256 == config_sha256(workspace / "r1" / "config.yaml")
    assert launches[-1].config_sha256.startswith(validated[-1])
    assert json.loads(json.dumps(validate["stages"]))[0]["validator"]
