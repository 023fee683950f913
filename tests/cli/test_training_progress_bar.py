"""The live training bar: it shows each report at once and runs no timer thread of its own."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from ltx_pipeline.cli.training import TrainingProgressBar
from ltx_pipeline.training.follow import Snapshot, TrainingFollower


def _snapshot(step: int | None, loss: float | None, *, alive: bool = True, finished: bool = False) -> Snapshot:
    return Snapshot(stage=1, stages=1, step=step, total=200, percent=None, loss=loss, last_losses=[],
                    step_time_s=3.0 if step else None, eta_s=(200 - step) * 3.0 if step else None,
                    latest_checkpoint=None, latest_sample=None, wandb_url=None, alive=alive, finished=finished)


def test_the_bar_redraws_on_each_report_without_a_refresh_thread() -> None:
    screen = io.StringIO()
    bar = TrainingProgressBar(Console(file=screen, force_terminal=True, width=140, color_system=None))
    threads = threading.active_count()
    bar(_snapshot(None, None))
    assert "0/200" in screen.getvalue() and "measuring step time..." in screen.getvalue()
    assert threading.active_count() == threads  # no Rich refresh thread waking the engine every 0.5 s
    bar(_snapshot(20, 0.5))
    assert "20/200" in screen.getvalue() and "loss 0.5000 | 3.00 s/step | ETA 9m 00s" in screen.getvalue()
    bar(_snapshot(180, 0.25, alive=False, finished=True))
    bar.close()
    assert "200/200" in screen.getvalue() and "finished" in screen.getvalue()


def test_a_training_shorter_than_its_log_interval_ends_on_a_full_bar_not_0_of_unknown(tmp_path: Path) -> None:
    """No ``Step N/M`` line was logged (8 steps, a line every 20): the total is the config's, and the trainer's
    statistics block says every step ran, so the bar ends 8/8, finished, with no loss it never logged."""
    log = tmp_path / "train.log"
    log.write_text("INFO     🚀 Starting training...    trainer.py:238\n"
                   "INFO     💾 Lora weights for step 8 saved in checkpoints/lora_weights_step_00008.safetensors\n"
                   "INFO     📊 Training Statistics:    loop.py:177\n"
                   "          - Total time: 0.0 minutes\n"
                   "          - Training speed: 5.12 steps/second\n"
                   "          - Samples/second: 5.12\n"
                   "          - Peak GPU memory: 0.00 GB\n"
                   "DEBUG    Peak device memory measured by the reference trainer: {'training': 1119828} bytes\n")
    handle = SimpleNamespace(log_path=log, log_offset=0, pid=1, alive=lambda: False, pause=lambda seconds: None)
    journal = SimpleNamespace(add_metrics=lambda *a: None, set_offset=lambda *a: None, add_checkpoint=lambda *a: None)
    screen = io.StringIO()
    bar = TrainingProgressBar(Console(file=screen, force_terminal=True, width=140, color_system=None))
    follower = TrainingFollower(journal, handle, stage=1, stages=1, output_dir=tmp_path,  # type: ignore[arg-type]
                                total_steps=8, on_progress=bar)
    follower.follow()
    bar.close()
    assert "8/8" in screen.getvalue() and "finished" in screen.getvalue() and "0/?" not in screen.getvalue()
