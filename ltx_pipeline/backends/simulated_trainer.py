"""The simulated trainer: ``python -m ltx_pipeline.backends.simulated_trainer CONFIG --surface FILE``.

It honours ltx-trainer's contract in shape, driven by a cost surface instead of a model: it reads
the same config schema (through the mirror), prints the trainer's log lines with the surface's step
times, writes checkpoints under the trainer's names, resumes from ``model.load_checkpoint``, and
exits as the trainer would, out-of-memory failures (training or validation) included. It is not
LTX-2 and says so. ``LTX_SIMULATED_TIME_SCALE`` (default 0) makes it sleep that fraction of the
simulated seconds; ``LTX_SIMULATED_STEP_LOG_EVERY`` (default 20, the real trainer's interval) sets how
often a Step line is logged; ``<output_dir>/simulated_cost.json`` records the simulated GPU seconds spent.
Checkpoint files are placeholders: weights are a one-tensor safetensors file, the state file JSON.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

from ltx_pipeline.backends.surface import CostSurface, SurfacePoint, load_surface
from ltx_pipeline.checkpoints.discovery import load_target
from ltx_pipeline.checkpoints.files import (
    state_beside,
    state_file_name,
    weights_file_name,
    weights_prefix,
)
from ltx_pipeline.env_names import SIMULATED_STEP_LOG_EVERY_ENV, SIMULATED_TIME_SCALE_ENV
from ltx_pipeline.errors import LtxPipelineError

_STATE_KEYS = ("optimizer_type", "scheduler_type", "training_mode", "lora_rank")


def log(message: str, level: str = "INFO") -> None:
    """Print as Rich's handler does: level padded to 8, continuation lines indented by 9 spaces."""
    first, *rest = message.split("\n")
    print("\n".join([f"{level:<8} {first}", *(" " * 9 + line for line in rest)]), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="simulated_trainer")
    parser.add_argument("config")
    parser.add_argument("--surface", required=True)
    parser.add_argument("--disable-progress-bars", action="store_true")
    args = parser.parse_args(argv)
    config_path = Path(args.config)
    if not config_path.exists():
        print(f"Error: Configuration file {config_path} does not exist.")
        return 1
    try:
        surface = load_surface(Path(args.surface))
        cfg = _load_config(config_path)
    except LtxPipelineError as exc:
        print(f"Error: Invalid configuration data: {exc.line()}")
        return 1
    return Simulation(cfg, surface).run()


def _load_config(path: Path) -> Any:
    from ltx_pipeline.ltx.trainer_config import load_trainer_config_file, parse_trainer_config

    return parse_trainer_config(load_trainer_config_file(path), relaxed_paths=True, cwd=path.parent)


class Simulation:
    """One simulated training process."""

    def __init__(self, cfg: Any, surface: CostSurface) -> None:
        self.cfg = cfg
        self.surface = surface
        self.scale = float(os.environ.get(SIMULATED_TIME_SCALE_ENV, "0") or 0)
        self.log_every = max(1, int(os.environ.get(SIMULATED_STEP_LOG_EVERY_ENV, "20") or 20))
        self.output_dir = Path(cfg.output_dir)
        self.spent = 0.0
        opt, acc = cfg.optimization, cfg.acceleration
        self.knobs = {"quantization": acc.quantization, "optimizer_type": opt.optimizer_type,
                      "batch_size": opt.batch_size, "enable_gradient_checkpointing": opt.enable_gradient_checkpointing}
        self.fingerprint = {"optimizer_type": opt.optimizer_type, "scheduler_type": opt.scheduler_type,
                            "training_mode": cfg.model.training_mode,
                            "lora_rank": cfg.lora.rank if cfg.lora else None}

    def charge(self, seconds: float) -> None:
        self.spent += seconds
        if self.scale > 0:
            time.sleep(seconds * self.scale)

    def run(self) -> int:
        log("Simulated trainer (a cost surface, not LTX-2): step times and memory come from the surface.")
        self.charge(self.surface.load_time_s)
        point = self.surface.lookup(self.knobs)
        start = self._resume_step()
        steps = self.cfg.optimization.steps
        if steps - start <= 0:
            return self._fail("ValueError", f"No remaining training steps: initial_step={start} >= "
                              f"target_steps={steps}. Nothing to train.")
        self.output_dir.mkdir(parents=True, exist_ok=True)
        log("💾 Training configuration saved to: training_config.yaml")
        log(f"🚀 Resuming training from step {start} → {steps}" if start else "🚀 Starting training...")
        validation = self.cfg.validation
        interval = validation.interval
        if interval and not validation.skip_initial_validation and (code := self._validate(point, start)) is not None:
            return code
        if point is None:
            return self._oom("training step", self.surface.capacity_gb + 1)
        if point.crash:
            return self._fail("RuntimeError", point.crash)
        if self.surface.small_shm and self.cfg.data.num_dataloader_workers > 0:
            return self._bus_error()
        return self._loop(point, start, steps)

    def _bus_error(self) -> int:
        """What PyTorch prints when a DataLoader worker dies of a full /dev/shm (then SIGBUS's exit code)."""
        print("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared "
              "memory (shm).", file=sys.stderr, flush=True)
        self._fail("RuntimeError", "DataLoader worker (pid(s) 4242) exited unexpectedly")
        return 128 + 7  # SIGBUS

    def _loop(self, point: SurfacePoint, start: int, steps: int) -> int:
        accumulation = self.cfg.optimization.gradient_accumulation_steps
        step_time = point.step_time_s * accumulation
        ckpt_interval = self.cfg.checkpoints.interval
        loop_start = self.spent
        for step in range(start + 1, steps + 1):
            self.charge(step_time)
            elapsed = step_time
            if self.cfg.validation.interval and step % self.cfg.validation.interval == 0:
                if (code := self._validate(point, step)) is not None:
                    return code
                elapsed += self.surface.validation_time_s
            if ckpt_interval and step % ckpt_interval == 0:
                self._checkpoint(step)
            if step % self.log_every == 0:
                loss = "nan" if point.loss_nan else f"{0.9 * math.exp(-step / 400) + 0.1:.4f}"
                estimate = _hm(self.spent - loop_start, step - start, steps - step)
                log(f"Step {step}/{steps} - Loss: {loss}, LR: {self.cfg.optimization.learning_rate:.2e}, "
                    f"Time/Step: {elapsed:.2f}s, Total Time: {estimate}")
        self._checkpoint(steps)
        total = self.spent - loop_start
        peak = max(point.peak_vram_gb, point.validation_peak_vram_gb or 0)
        speed = (steps - start) / total
        samples = speed * self.cfg.optimization.batch_size
        log(f"📊 Training Statistics:\n - Total time: {total / 60:.1f} minutes\n - Training speed: {speed:.2f} "
            f"steps/second\n - Samples/second: {samples:.2f}\n - Peak GPU memory: {peak:.2f} GB")
        self._write_cost(point)
        return 0

    def _validate(self, point: SurfacePoint | None, step: int) -> int | None:
        self.charge(self.surface.validation_time_s)
        # An unlisted combination fails at its first training step (the surface's rule), so its step-0
        # validation passes.
        peak = (point.validation_peak_vram_gb or point.peak_vram_gb) if point else 0.0
        if point is not None and point.validation_peak_vram_gb and point.validation_dims:
            scale = _latent_tokens(self.cfg.validation.video_dims) / _latent_tokens(point.validation_dims)
            peak = point.peak_vram_gb + max(point.validation_peak_vram_gb - point.peak_vram_gb, 0) * scale
        if peak > self.surface.capacity_gb:
            return self._oom("validation", peak)
        log(f"🎥 Validation samples for step {step} saved in samples")
        return None

    def _checkpoint(self, step: int) -> None:
        folder = self.output_dir / "checkpoints"
        folder.mkdir(parents=True, exist_ok=True)
        prefix = weights_prefix(self.cfg.model.training_mode)
        weights = folder / weights_file_name(self.cfg.model.training_mode, step)
        _write_placeholder_weights(weights, step)
        state = folder / state_file_name(step)
        tmp = state.with_suffix(".pt.tmp")
        tmp.write_text(json.dumps({"global_step": step, "config_fingerprint": self.fingerprint}))
        os.replace(tmp, state)
        log(f"💾 {prefix.capitalize()} weights for step {step} saved in checkpoints/{weights.name}")

    def _resume_step(self) -> int:
        target = self.cfg.model.load_checkpoint
        if not target:
            return 0
        path = Path(target)
        if path.is_dir():
            found = load_target(path)
            if found is None:
                log(f"⚠️ Could not find checkpoint at {path}", "WARNING")
                return 0
            path = found
        log(f"📥 Loading checkpoint from {path}")
        if self.cfg.checkpoints.no_resume:
            return 0
        state = state_beside(path)
        if state is None:  # no step in the name: no training state to restore, as the trainer rules
            return 0
        try:
            saved = json.loads(state.read_text())
        except (OSError, ValueError):
            return 0
        mismatch = [f"{k}: {saved['config_fingerprint'].get(k)} → {self.fingerprint.get(k)}" for k in _STATE_KEYS
                    if saved["config_fingerprint"].get(k) != self.fingerprint.get(k)]
        if mismatch:
            log(f"⚠️ Training state config mismatch ({', '.join(mismatch)}). Starting from step 0. "
                "Set checkpoints.no_resume=true to silence this warning.", "WARNING")
            return 0
        log(f"📌 Resuming from step {saved['global_step']}")
        return int(saved["global_step"])

    def _oom(self, where: str, needed_gb: float) -> int:
        capacity = self.surface.capacity_gb
        frame = "validation_runner.py" if where == "validation" else "trainer.py"
        print(f'Traceback (most recent call last):\n  File "{frame}", line 1, in simulated\n'
              f"torch.OutOfMemoryError: CUDA out of memory during {where}. Tried to allocate "
              f"{max(needed_gb - capacity, 0.5):.2f} GiB. GPU 0 has a total capacity of {capacity:.2f} GiB",
              file=sys.stderr, flush=True)
        self._write_cost(None)
        return 1

    def _fail(self, kind: str, message: str) -> int:
        print(f'Traceback (most recent call last):\n  File "trainer.py", line 1, in simulated\n{kind}: {message}',
              file=sys.stderr, flush=True)
        self._write_cost(None)
        return 1

    def _write_cost(self, point: SurfacePoint | None) -> None:
        self.output_dir.mkdir(parents=True, exist_ok=True)
        record = {"gpu_seconds": round(self.spent, 3), "knobs": self.knobs,
                  "peak_vram_gb": point.peak_vram_gb if point else None,
                  "validation_peak_vram_gb": (point.validation_peak_vram_gb if point else None)}
        (self.output_dir / "simulated_cost.json").write_text(json.dumps(record))


def _latent_tokens(dims: Any) -> int:
    """LTX-2's latent grid size for (W, H, F): W/32 x H/32 x ((F-1)/8 + 1)."""
    width, height, frames = (int(d) for d in dims)
    return max(1, width // 32) * max(1, height // 32) * ((frames - 1) // 8 + 1)


def _write_placeholder_weights(path: Path, step: int) -> None:
    import numpy as np
    from safetensors.numpy import save_file

    tmp = path.with_name(path.name + ".tmp")
    save_file({"diffusion_model.simulated": np.zeros(1, dtype=np.float32)}, str(tmp),
              metadata={"simulated": "true", "step": str(step)})
    os.replace(tmp, path)


def _hm(elapsed: float, done: int, remaining: int) -> str:
    if done <= 0:
        return "calculating..."
    estimate = elapsed / done * (done + remaining)
    return f"{estimate // 3600:.0f}h {(estimate % 3600) // 60:.0f}m"


if __name__ == "__main__":
    sys.exit(main())
