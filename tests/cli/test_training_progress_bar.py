"""The live training bar: it shows each report at once and runs no timer thread of its own."""

from __future__ import annotations

import io
import threading

from rich.console import Console

from ltx_pipeline.cli.training import TrainingProgressBar
from ltx_pipeline.training.follow import Snapshot


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
