"""The training curves are as fresh as the trainer's log: stored steps, then the log's lines past the stored offset.

The driver's follower stores step metrics a poll at a time, with the log offset it reached; what the log
holds past that offset (a poll in flight, a trainer running on with no driver) is parsed by the dashboard,
so the curve never waits for the follower, and nothing is counted twice.
"""

from __future__ import annotations

import os
from pathlib import Path

from ltx_pipeline.store import Process, Store
from ltx_pipeline.store.reader import StoreReader
from ltx_pipeline.ui.series import training_series


def step_line(step: int, loss: float) -> str:
    return f"INFO     Step {step}/100 - Loss: {loss:.4f}, LR: 1.00e-04, Time/Step: 0.50s, Total Time: 0h 1m\n"


def test_steps_past_the_stored_offset_are_read_from_the_log(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    stored = "".join(step_line(s, 1.0 / s) for s in (2, 4, 6))
    log.write_text(stored + step_line(6, 0.1) + step_line(8, 0.125) + step_line(10, 0.1) + "INFO     Step 12/10")
    store = Store.open(tmp_path / "ltx-pipeline.db")
    run = store.create_run("r1", {})
    assert run.id is not None
    store.add_process(Process(run_id=run.id, phase="train", kind="train", stage=1, pid=os.getpid(), create_time=0.0,
                              host="h", argv=[], cwd=str(tmp_path), env={}, printable="x", log_path=str(log),
                              log_offset=len(stored.encode())))
    store.add_metrics(run.id, 1, [{"step": s, "loss": 1.0 / s, "step_time_s": 0.5, "clean": s != 4}
                                  for s in (2, 4, 6)])
    store.close()
    reader = StoreReader.open(tmp_path / "ltx-pipeline.db")
    assert reader is not None
    record = reader.get_run("r1")
    [series] = training_series(reader, record)
    # 6 is stored (the log's repeat of it does not replace it); 8 and 10 come from the log; the half-written
    # line at the end is not read yet; step 4's time included a save, so it is no point of the step-time curve.
    assert series["steps"] == [2, 4, 6, 8, 10]
    assert series["loss"] == [0.5, 0.25, 1 / 6, 0.125, 0.1]
    assert series["step_time_s"] == [0.5, None, 0.5, 0.5, 0.5]
