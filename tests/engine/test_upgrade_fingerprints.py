"""Fingerprints mean what the user changed, not what the code learned (#49).

On main, a store written before ``trainer_python`` existed re-ran the probe on `resume` ("run request.trainer_python
added: None"), which re-planned, voided the approval and ran a second autotune sweep. ``rerun_reasons`` compares
parts like with like; the second half drives a stored run with a request model that gained a field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ltx_pipeline.engine.fingerprint import FINGERPRINT_SCHEMA, SCHEMA_KEY, rerun_reasons
from ltx_pipeline.request import RunRequest

DEFAULTS = {"trainer_python": None, "audio": "auto", "slurm_args": []}


def _parts(request: dict[str, Any], schema: int | None = FINGERPRINT_SCHEMA, **more: Any) -> dict[str, Any]:
    parts: dict[str, Any] = {"run request": request, "probe": "sha256:aa", **more}
    if schema is not None:
        parts[SCHEMA_KEY] = schema
    return parts


@pytest.mark.parametrize("schema", [None, 1, FINGERPRINT_SCHEMA])
def test_a_request_field_added_at_its_default_is_no_change_under_any_schema(schema: int | None) -> None:
    old = _parts({"steps": 20}, schema)
    assert rerun_reasons(old, _parts({"steps": 20, "trainer_python": None, "audio": "auto"}), defaults=DEFAULTS) == []


@pytest.mark.parametrize("schema", [None, FINGERPRINT_SCHEMA])
def test_a_request_field_added_away_from_its_default_is_the_users_change(schema: int | None) -> None:
    reasons = rerun_reasons(_parts({"steps": 20}, schema), _parts({"steps": 20, "audio": "off"}), defaults=DEFAULTS)
    assert len(reasons) == 1 and "run request.audio" in reasons[0] and "off" in reasons[0]


def test_what_both_versions_record_must_still_be_equal() -> None:
    reasons = rerun_reasons(_parts({"steps": 20}, None), _parts({"steps": 40}), defaults=DEFAULTS)
    assert reasons == ["run request.steps: 20 -> 40"]
    assert rerun_reasons(_parts({}, None, clips="sha256:1"), _parts({}, clips="sha256:2")) == ["clips changed"]


def test_a_part_only_one_version_records_is_no_change_across_schemas_but_is_within_one() -> None:
    newer = _parts({"steps": 20}, **{"model files": "sha256:bb"})
    assert rerun_reasons(_parts({"steps": 20}, None), newer) == []  # a part this version added
    assert rerun_reasons(_parts({"steps": 20}, None, gone="x"), _parts({"steps": 20})) == []  # one it dropped
    # Within one schema a part that comes and goes is the user's situation (plan's "autotune cannot run here").
    assert rerun_reasons(_parts({"steps": 20}), newer) == ["model files added: sha256:bb"]
    assert rerun_reasons(_parts({"steps": 20}, autotune="cannot run here"), _parts({"steps": 20})) == [
        "autotune removed"]


def test_no_stored_parts_must_run() -> None:
    assert rerun_reasons(None, _parts({})) == ["inputs changed"] and rerun_reasons({}, _parts({}))


def test_the_request_models_defaults_are_what_a_request_that_sets_nothing_dumps() -> None:
    """As the fingerprints hold them: a resolved default (vllm_url, captioner) dumps as None, "not given". The
    upgrade test from 30fca33 found vllm_url compared against its resolved URL, re-planning every run."""
    defaults = RunRequest.field_defaults()
    assert "dataset" not in defaults  # required: never defaulted
    dumped = RunRequest.model_validate({"dataset": "/data/clips"}).model_dump(mode="json")
    assert {key: value for key, value in dumped.items() if key != "dataset"} == defaults
    assert defaults["vllm_url"] is None and defaults["audio"] == "auto" and defaults["slurm_args"] == []


# -- a stored run, driven by a request model that gained a field --------------------------------------------------


def test_a_request_field_added_with_a_default_invalidates_nothing(workspace: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A finished run; then a copy of the request model with one more field, read by every phase that dumps the
    request (plan's slice) and added to the probe's: a resume skips every phase. Set away from its default, the
    same field re-plans, saying so."""
    from pydantic import create_model

    import ltx_pipeline.request as request_module
    import phases.probe as probe_phase
    from ltx_pipeline.cli import main
    from tests.phases.test_audio_from_data import clip_folder
    from tests.phases.train_helpers import simulated_args, store_of

    folder = clip_folder(tmp_path / "clips", [True, True])
    assert main(simulated_args(workspace, folder, "--steps", "4", "--skip-eval", "--autotune", "off",
                               "--buckets", "64x64x17")) == 0
    store, run = store_of(workspace)
    rows_before = {name: row.id for name, row in store.latest_phase_runs(run.id).items()}

    grown = create_model("RunRequest", __base__=RunRequest, new_knob=(int, 3))
    monkeypatch.setattr(request_module, "RunRequest", grown)
    monkeypatch.setattr(probe_phase, "_REQUEST_INPUTS", (*probe_phase._REQUEST_INPUTS, "new_knob"))
    capsys.readouterr()
    assert main(["resume", "--workspace", str(workspace), "--run", "r1"]) == 0
    said = capsys.readouterr().out
    store, run = store_of(workspace)
    rows_after = {name: row.id for name, row in store.latest_phase_runs(run.id).items()}
    assert rows_after == rows_before, said  # no phase ran again: no new row anywhere
    assert " runs: " not in said

    (workspace / "r1" / "run.yaml").write_text((workspace / "r1" / "run.yaml").read_text() + "new_knob: 5\n")
    main(["resume", "--workspace", str(workspace), "--run", "r1"])
    assert "probe runs: run request.new_knob added: 5" in capsys.readouterr().out

