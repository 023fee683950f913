"""The optimizer-step loop of a reference training run, and what happens at each step.

Owns micro-steps with gradient accumulation (DDP gradient sync only on the last micro-step),
autocast for ``mixed_precision_mode``, clipping at ``max_grad_norm``, the scheduler step, the
``Step N/M - Loss ...`` line (every ``LTX_REFERENCE_LOG_EVERY`` optimizer steps, default 20,
tested inside the micro-step loop as the trainer does, so accumulation repeats it), validation
and checkpoint cadence, retention, and the final statistics block.
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import nullcontext
from pathlib import Path

import torch

from ltx_pipeline.env_names import REFERENCE_LOG_EVERY_ENV
from ltx_pipeline.reference_trainer import checkpoints as ckpt
from ltx_pipeline.reference_trainer.flow import prepare_step, step_loss
from ltx_pipeline.reference_trainer.logs import get_logger, is_main_process, is_writer
from ltx_pipeline.reference_trainer.memory import GIB
from ltx_pipeline.reference_trainer.validation import generate_samples

__all__ = ["StepLoop"]

_AUTOCAST = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return getattr(model, "module", model)


class StepLoop:
    """Runs optimizer steps from ``initial_step`` to ``optimization.steps``."""

    def __init__(self, config, model, optimizer, scheduler, memory, accelerator, modalities, device,  # noqa: ANN001
                 arch, salt: str, output_dir: Path, initial_step: int, started: float,
                 disable_progress_bars: bool) -> None:
        self.config, self.model, self.optimizer, self.scheduler = config, model, optimizer, scheduler
        self.memory, self.accelerator, self.modalities, self.device = memory, accelerator, modalities, device
        self.arch, self.salt, self.output_dir = arch, salt, output_dir
        self.initial_step = self.global_step = initial_step
        self.started, self.quiet_bar = started, disable_progress_bars
        self.main = is_main_process()  # logs (each node's local rank 0)
        self.writer = is_writer()  # writes samples and checkpoints (global rank 0 only)
        self.logger = get_logger()
        self.retention = ckpt.Retention(config.checkpoints.keep_last_n)
        self.log_every = int(os.environ.get(REFERENCE_LOG_EVERY_ENV, "20") or 20)
        self.last_loss = float("nan")
        self.elapsed = 0.0
        self.autocast_dtype = _AUTOCAST.get(config.acceleration.mixed_precision_mode or "no")

    def _autocast(self):  # noqa: ANN202
        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def run(self, batches) -> None:  # noqa: ANN001
        """Train until ``optimization.steps`` optimizer steps are done."""
        o = self.config.optimization
        accumulation = max(1, o.gradient_accumulation_steps)
        params = [p for p in self.model.parameters() if p.requires_grad]
        fm = self.config.flow_matching
        micro = 0
        # SIGINT ends the run at the next step boundary, as a KeyboardInterrupt (exit 130 through the
        # supervisor). Python's own handler can raise it inside a finaliser, where it is swallowed and
        # the training runs on; a flag checked here makes `ltx-pipeline stop` certain.
        interrupted: list[int] = []
        signal.signal(signal.SIGINT, lambda signum, _frame: interrupted.append(signum))
        while self.global_step < o.steps:
            if interrupted:
                raise KeyboardInterrupt
            batch = next(batches)
            start = time.time()
            micro += 1
            last_micro = micro % accumulation == 0
            sync = nullcontext() if last_micro or self.accelerator.num_processes == 1 else self.model.no_sync()
            with sync:
                inputs = prepare_step(batch, self.modalities, fm.timestep_sampling_mode,
                                      fm.timestep_sampling_params, self.device)
                with self._autocast():
                    loss = step_loss(self.model, inputs)
                (loss / accumulation).backward()
            if last_micro:
                if o.max_grad_norm > 0:
                    torch.nn.utils.clip_grad_norm_(params, o.max_grad_norm)
                self.optimizer.step()
                if self.scheduler is not None:
                    self.scheduler.step()
                self.optimizer.zero_grad(set_to_none=True)
                self.global_step += 1
                self._after_optimizer_step()
            self.last_loss = loss.detach().item()
            step_time = (time.time() - start) * accumulation
            if self.main and self.quiet_bar and self.global_step % self.log_every == 0:
                self._log_step(step_time)
        self.elapsed = time.time() - self.started
        if self.main and not self.quiet_bar:
            lr = self.optimizer.param_groups[0]["lr"]
            done = self.global_step - self.initial_step
            print(f"Training {done}/{o.steps - self.initial_step} ━━━━━━━━━━ Loss: {self.last_loss:.4f} | "
                  f"LR: {lr:.2e} | {self.elapsed / max(done, 1):.2f}s/step 0:00:00 ETA: 00:00", flush=True)

    def _log_step(self, step_time: float) -> None:
        steps = self.config.optimization.steps
        done = self.global_step - self.initial_step
        if done <= 0:
            total = "calculating..."
        else:
            estimate = (time.time() - self.started) / done * (steps - self.initial_step)
            total = f"{estimate // 3600:.0f}h {(estimate % 3600) // 60:.0f}m"
        lr = self.optimizer.param_groups[0]["lr"]
        self.logger.info(f"Step {self.global_step}/{steps} - Loss: {self.last_loss:.4f}, LR: {lr:.2e}, "
                         f"Time/Step: {step_time:.2f}s, Total Time: {total}")

    def _after_optimizer_step(self) -> None:
        interval = self.config.validation.interval
        if interval and self.global_step % interval == 0:
            self.validate(self.global_step)
        every = self.config.checkpoints.interval
        if every and self.global_step % every == 0 and self.global_step < self.config.optimization.steps:
            self.save_checkpoint()

    def validate(self, step: int) -> None:
        """Generate the validation samples for ``step`` (the writing process; others wait)."""
        if self.config.validation.samples and self.writer:
            generate_audio = self.config.validation.generate_audio and any(
                m.kind == "audio" and m.generated for m in self.modalities)
            with self.memory.during("validation"), self._autocast():
                generate_samples(_unwrap(self.model), self.config, self.arch, step, self.output_dir,
                                 generate_audio, self.device, self.salt)
            self.logger.info(f"🎥 Validation samples for step {step} saved in samples")
        self.accelerator.wait_for_everyone()

    def save_checkpoint(self, final: bool = False) -> None:
        """Write weights (and the training state) for the current step on the writing process."""
        del final  # the final save is the same as any other; retention never deletes the newest
        if self.writer:
            c = self.config.checkpoints
            folder = self.output_dir / "checkpoints"
            mode = self.config.model.training_mode
            path = ckpt.save_weights(_unwrap(self.model), mode, self.global_step, folder, c.precision)
            prefix = "lora" if mode == "lora" else "model"
            self.logger.info(f"💾 {prefix.capitalize()} weights for step {self.global_step} saved in "
                             f"checkpoints/{path.name}")
            files = [path]
            if c.save_training_state != "off":
                files.append(ckpt.save_state(folder, self.global_step, self._state(c.save_training_state)))
                self.logger.debug(f"Training state saved to checkpoints/{files[-1].name}")
            self.retention.saved(self.global_step, files)
        self.accelerator.wait_for_everyone()

    def _state(self, kind: str) -> dict:
        return {
            "global_step": self.global_step,
            "config_fingerprint": ckpt.fingerprint(self.config),
            "rng_states": ckpt.rng_states(),
            "lr_scheduler_state_dict": None if self.scheduler is None else self.scheduler.state_dict(),
            "optimizer_state_dict": self.optimizer.state_dict() if kind == "full" else None,
        }

    def report(self) -> None:
        """The trainer's ``📊 Training Statistics`` block (main process)."""
        o = self.config.optimization
        nproc = self.accelerator.num_processes
        total = max(self.elapsed, 1e-9)
        steps_per_s = (o.steps - self.initial_step) / total
        lines = ["📊 Training Statistics:", f" - Total time: {total / 60:.1f} minutes",
                 f" - Training speed: {steps_per_s:.2f} steps/second",
                 f" - Samples/second: {steps_per_s * nproc * o.batch_size:.2f}",
                 f" - Peak GPU memory: {self.memory.peak / GIB:.2f} GB"]
        if nproc > 1:
            lines += [f" - Number of processes: {nproc}", f" - Global batch size: {o.batch_size * nproc}"]
        self.logger.info("\n".join(lines))
        self.logger.debug(f"Peak device memory measured by the reference trainer: {self.memory.peaks} bytes")
