"""benchmarks/bench_campaign.py counts what the engine recorded, and reports it without estimating.

The benchmark itself takes minutes (ten reference runs); these tests give its counting a fabricated store
and log: only the run's ``preprocess`` records count, seconds come from each record's start and end, rows
and files from the script's own ``Wrote`` line matched by output folder (in order when one folder is
written twice), and anything unmeasured stays unmeasured in the totals and ratios.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import ModuleType

import pytest

from ltx_pipeline.store import Store
from ltx_pipeline.store.models import Process

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_campaign.py"
T0 = datetime(2026, 12, 6, 12, 0, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_campaign", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def _process(run_id: int, log: Path, module: str, out: str | None, start_s: float, seconds: float | None,
             kind: str = "preprocess", phase: str = "train", stage: int = 1) -> Process:
    argv = ["python", "-m", f"ltx_pipeline.reference_trainer.{module}", "meta.json", "--resolution-buckets",
            "96x64x25", *(["--output-dir", out] if out else [])]
    started = T0 + timedelta(seconds=start_s)
    return Process(run_id=run_id, phase=phase, kind=kind, stage=stage, pid=100, create_time=1.0, host="h", argv=argv,
                   cwd="/", printable=" ".join(argv), log_path=str(log), started_at=started,
                   ended_at=None if seconds is None else started + timedelta(seconds=seconds))


def test_a_runs_preprocessing_is_counted_from_its_records_and_its_scripts_lines(
        bench: ModuleType, tmp_path: Path) -> None:
    store = Store.open(tmp_path / "ltx-pipeline.db")
    run, other = store.create_run("c1", {}), store.create_run("c2", {})
    assert run.id is not None and other.id is not None
    log = tmp_path / "preprocess.log"
    log.write_text("Reference preprocessing (toy encoders ...): 1 media files, buckets 96x64x25 -> /s/a\n"
                   "✅ Wrote 1 latents, 1 conditions, 1 audio latents to /s/a; kept 0 existing files; skipped 0\n"
                   "✅ Wrote 2 latents, 2 audio latents to /s/b; kept 0 existing files; skipped 1 media files\n"
                   "✅ Wrote 1 conditions to /s/c/; kept 0 existing files\n"
                   "✅ Wrote 3 latents, 3 conditions, 0 audio latents to /s/a; kept 0 existing files; skipped 0\n")
    for process in (_process(run.id, log, "preprocess", "/s/a", 0, 2.5, phase="autotune", stage=0),
                    _process(run.id, log, "trainer", None, 3, 7.0, kind="trial", phase="autotune"),
                    _process(run.id, log, "process_videos", "/s/b", 11, 1.25),
                    _process(run.id, log, "process_captions", "/s/c", 13, 0.5),
                    _process(run.id, log, "preprocess", "/s/a", 14, 3.0),
                    _process(run.id, log, "preprocess", "/s/d", 18, None),  # killed: no end, no line
                    _process(other.id, log, "preprocess", "/s/a", 20, 9.0)):
        store.add_process(process)
    store.close()

    figures = bench.preprocess_figures(tmp_path, "c1")

    P = bench.Preprocess
    assert figures == [P("autotune", 0, "dataset", 2.5, 1, 3), P("train", 1, "videos", 1.25, 2, 4),
                       P("train", 1, "captions", 0.5, 1, 1), P("train", 1, "dataset", 3.0, 3, 6),
                       P("train", 1, "dataset", None, None, None)]
    assert bench.preprocess_figures(tmp_path, "no-such-run") == []


def test_totals_and_ratios_are_sums_and_quotients_of_what_was_measured(bench: ModuleType) -> None:
    P, R = bench.Preprocess, bench.RunFigures
    cache = [R("c1", "baseline", 30.0, [P("autotune", 0, "dataset", 2.0, 1, 3), P("train", 1, "dataset", 4.0, 3, 9)]),
             R("c2", "another learning rate", 20.0, [])]
    off = [R("c1", "baseline", 33.0, [P("autotune", 0, "dataset", 2.0, 1, 3), P("train", 1, "dataset", 5.0, 4, 12)]),
           R("c2", "another learning rate", 27.0, [P("autotune", 0, "dataset", 3.0, 1, 3),
                                                   P("train", 1, "dataset", 4.0, 4, 12)])]
    result = bench.report({"cache": cache, "off": off}, {"cores": 2, "runs": 2, "steps": 4, "clips": 4,
                                                         "source": "ltx-pipeline 0.1.0 (source abc)"})

    on = result["modes"]["cache"]
    assert on["runs"][0] == {"run": "c1", "change": "baseline", "processes": 2, "process_s": 6.0, "rows": 4,
                             "files": 12, "wall_s": 30.0, "scripts": ["sanity dataset 1", "stage 1 dataset 3"]}
    assert on["runs"][1]["processes"] == 0 and on["runs"][1]["process_s"] == 0
    assert on["total"] == {"processes": 2, "process_s": 6.0, "rows": 4, "files": 12, "wall_s": 50.0}
    assert result["modes"]["off"]["total"] == {"processes": 4, "process_s": 14.0, "rows": 10, "files": 30,
                                               "wall_s": 60.0}
    assert result["ratios"] == {"processes": 2.0, "process_s": 14.0 / 6.0, "rows": 2.5, "files": 2.5, "wall_s": 1.2}
    json.dumps(result)  # --json prints this very dict
    text = "\n".join(bench.text_lines(result))
    assert "all  total" in text and "processes 2.00x, process_s 2.33x, rows 2.50x, files 2.50x, wall_s 1.20x" in text


def test_an_unmeasured_part_leaves_its_totals_and_ratios_unmeasured(bench: ModuleType) -> None:
    P, R = bench.Preprocess, bench.RunFigures
    killed = [R("c1", "baseline", 10.0, [P("train", 1, "dataset", None, None, None)])]
    nothing = [R("c1", "baseline", 8.0, [])]
    result = bench.report({"cache": nothing, "off": killed}, {"cores": 2, "runs": 1, "steps": 4, "clips": 4,
                                                              "source": "s", "source_changed": True})
    assert result["modes"]["off"]["total"] == {"processes": 1, "process_s": None, "rows": None, "files": None,
                                               "wall_s": 10.0}
    # nothing was encoded with the cache: no quotient is made up
    assert result["ratios"] == {"processes": None, "process_s": None, "rows": None, "files": None, "wall_s": 1.25}
    text = "\n".join(bench.text_lines(result))
    assert "WARNING: ltx-pipeline's source changed during the campaign" in text
    assert "processes n/a, process_s n/a" in text


def test_the_dataset_has_silent_clips_and_its_edits_change_one_caption_and_add_one_clip_with_sound(
        bench: ModuleType, tmp_path: Path) -> None:
    from ltx_pipeline.ltx.media import read_media_info

    dataset = bench.write_dataset(tmp_path, 3)
    rows = json.loads(dataset.read_text())
    assert [read_media_info(tmp_path / row["video"]).has_audio for row in rows] == [True, True, False]
    bench.edit_caption(dataset)
    bench.add_clip(dataset)
    edited = json.loads(dataset.read_text())
    assert [row["caption"] != before["caption"] for row, before in zip(edited, rows, strict=False)] == [
        False, True, False]
    assert len(edited) == 4 and read_media_info(tmp_path / edited[3]["video"]).has_audio
    assert edited[3]["video"] not in {row["video"] for row in rows}
