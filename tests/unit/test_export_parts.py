"""``ltx_pipeline.export``'s parts on real files: the weights' key layout, the checkpoint choice, the trainer's
config dump, the folder written all at once, and the model card's figures."""

from __future__ import annotations

import enum
import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from safetensors.numpy import save_file

from ltx_pipeline.errors import BadInput, BadRequest
from ltx_pipeline.export import (
    Candidate,
    CardFacts,
    Identity,
    Measured,
    choose,
    inspect_weights,
    model_card,
    parse_step,
    read_holdout,
    read_trainer_config,
    write_folder,
)

MODULES = ("transformer_blocks.0.attn1.to_k", "transformer_blocks.0.attn1.to_q")


def lora_file(path: Path, keys: list[str] | None = None, metadata: dict[str, str] | None = None,
              rank: int = 4) -> Path:
    """A LoRA as the trainer saves it: ``diffusion_model.<module>.lora_A/B.weight``, bf16-sized tensors."""
    names = keys if keys is not None else [f"diffusion_model.{m}.lora_{s}.weight" for m in MODULES for s in "AB"]
    tensors = {k: np.ones((rank, 8) if ".lora_A." in k else (8, rank), dtype=np.float16) for k in names}
    save_file(tensors, str(path), metadata=metadata)
    return path


def test_the_trainers_layout_is_recognised_with_its_rank_and_ic_lora_metadata(tmp_path) -> None:
    facts = inspect_weights(lora_file(tmp_path / "w.safetensors", metadata={"reference_downscale_factor": "2"}))
    assert facts.problem is None
    assert facts.modules == MODULES and facts.rank == 4 and facts.dtypes == ("F16",)
    assert facts.metadata == {"reference_downscale_factor": "2"}


@pytest.mark.parametrize(("keys", "problem"), [
    (["transformer_blocks.0.to_k.lora_A.weight", "transformer_blocks.0.to_k.lora_B.weight"],
     "2 key(s) lack the 'diffusion_model.' prefix, e.g. 'transformer_blocks.0.to_k.lora_A.weight'"),
    (["diffusion_model.simulated"], "1 key(s) are not LoRA factors (lora_A/lora_B), e.g. 'diffusion_model.simulated'"),
    (["diffusion_model.a.lora_A.weight"],
     "1 module(s) have lora_A without lora_B or the reverse, e.g. 'diffusion_model.a'"),
])
def test_other_layouts_are_named_with_what_is_wrong(tmp_path, keys, problem) -> None:
    assert inspect_weights(lora_file(tmp_path / "w.safetensors", keys)).problem == problem


def test_a_file_that_is_not_safetensors_is_bad_input(tmp_path) -> None:
    bogus = tmp_path / "w.safetensors"
    bogus.write_bytes(b"\xff" * 64)
    with pytest.raises(BadInput, match="cannot be read as a safetensors file"):
        inspect_weights(bogus)


CANDIDATES = [Candidate(2, Path("w2")), Candidate(4, Path("w4")), Candidate(6, Path("w6"))]


def figures_file(path: Path, totals: dict[int, float]) -> Path:
    rows = [{"step": s, "checkpoint": f"w{s}", "holdout": {"video": t / 2, "audio": None, "total": t},
             "train": {"video": 1.0, "audio": None, "total": 1.0}} for s, t in totals.items()]
    path.write_text(json.dumps(rows))
    return path


def test_last_and_a_step_and_best_choose_their_checkpoint(tmp_path) -> None:
    figures = read_holdout(figures_file(tmp_path / "h.json", {0: 0.1, 2: 0.5, 4: 0.3, 6: 0.3}))
    assert choose(CANDIDATES, "last", figures, tmp_path / "h.json").step == 6
    chosen = choose(CANDIDATES, 2, figures, tmp_path / "h.json")
    assert chosen.figure is not None and chosen.figure.holdout.total == 0.5
    assert (chosen.step, chosen.weights, chosen.chosen_by) == (2, Path("w2"), "--step 2")
    best = choose(CANDIDATES, "best", figures, tmp_path / "h.json")
    # Step 0 (the base, no weights) is left out; of the equal 0.3 the earlier step.
    assert (best.step, best.chosen_by, best.figure.holdout.video) == (4, "best", 0.15)


def test_best_without_figures_and_an_absent_step_are_refused_in_one_line(tmp_path) -> None:
    absent = tmp_path / "holdout-loss.json"
    with pytest.raises(BadRequest) as refused:
        choose(CANDIDATES, "best", read_holdout(absent), absent)
    assert refused.value.line() == (
        f"--step best needs the holdout loss per checkpoint, and {absent} does not exist (--step best). Fix: "
        "measure it (a run with a holdout measures it in its evaluate phase), or pass --step last or a step number.")
    with pytest.raises(BadRequest) as refused:
        choose(CANDIDATES, 3, None, absent)
    assert refused.value.line() == ("The run has no checkpoint at step 3 (--step). Fix: pass one of its checkpoints' "
                                    "steps: 2, 4, 6 (or last, or best).")
    with pytest.raises(BadRequest, match="None of the checkpoints measured"):
        choose(CANDIDATES, "best", read_holdout(figures_file(absent, {0: 0.1})), absent)


def test_step_text_and_a_malformed_figures_file(tmp_path) -> None:
    assert (parse_step("Last"), parse_step("best"), parse_step("250")) == ("last", "best", 250)
    with pytest.raises(BadRequest, match="neither a step number, last nor best"):
        parse_step("-1")
    bad = tmp_path / "h.json"
    bad.write_text('[{"step": 2}]')
    with pytest.raises(BadInput, match="holds a row that is not a checkpoint's figures"):
        read_holdout(bad)


class _Mode(enum.Enum):
    LORA = "lora"


def test_the_trainers_config_dump_reads_as_plain_data(tmp_path) -> None:
    # What the trainer's yaml.dump(config.model_dump()) writes: python tags for tuples and enums.
    dump = tmp_path / "training_config.yaml"
    dump.write_text(yaml.dump({"lora": {"rank": 8, "alpha": 8, "target_modules": ("to_k",), "dims": (64, 64, 17)},
                               "model": {"training_mode": _Mode.LORA}}))
    assert "!!python/tuple" in dump.read_text()
    assert read_trainer_config(dump) == {"lora": {"rank": 8, "alpha": 8, "target_modules": ["to_k"],
                                                  "dims": [64, 64, 17]}, "model": {"training_mode": "lora"}}


def _leftovers(parent: Path, keep: str) -> list[str]:
    """What ``parent`` holds besides ``keep``: a temporary folder left over would show here."""
    return sorted(p.name for p in parent.iterdir() if p.name != keep)


def test_the_folder_appears_complete_is_never_overwritten_unasked_and_force_replaces_it(tmp_path) -> None:
    weights = lora_file(tmp_path / "w.safetensors")
    exports = tmp_path / "exports"
    target = exports / "out"
    write_folder(target, {"w.safetensors": weights}, {"README.md": "one\n"}, force=False)
    assert (target / "w.safetensors").read_bytes() == weights.read_bytes()
    assert (target / "README.md").read_text() == "one\n" and _leftovers(exports, "out") == []
    with pytest.raises(BadRequest) as refused:
        write_folder(target, {}, {"README.md": "two\n"}, force=False)
    assert refused.value.line() == (f"{target} already exists (--to). Fix: choose a new folder, or pass --force to "
                                    "replace it.")
    assert (target / "README.md").read_text() == "one\n"
    write_folder(target, {}, {"README.md": "two\n"}, force=True)
    assert sorted(p.name for p in target.iterdir()) == ["README.md"] and _leftovers(exports, "out") == []


def test_a_failed_export_leaves_nothing_behind(tmp_path) -> None:
    exports = tmp_path / "exports"
    exports.mkdir()
    with pytest.raises(BadInput, match="Could not copy"):
        write_folder(exports / "out", {"w.safetensors": tmp_path / "absent"}, {"README.md": "x"}, force=False)
    assert _leftovers(exports, "") == []


def _facts(**changes: object) -> CardFacts:
    base = dict(run="r1", weights_file="lora_weights_step_00004.safetensors", weights_sha256="ab" * 32,
                weights_size=2048, step=4, chosen_by="best", stage_final_step=6, backend="ltx", backend_is_ltx=True,
                base_model=Identity("/m/ltx-2.safetensors", "safetensors", 10, "sha256:11"), text_encoder=None,
                trigger="fxclp", mode="v2v", training_mode="lora", rank=16, alpha=16, target_modules=("to_k",),
                adapted_modules=2, dtypes=("BF16",), samples_trained=7, samples_total=8,
                measured=Measured(None, 0.5, 30.25, "the trainer's own peak GPU memory statistic", None),
                holdout=None, lowest_holdout=None, metadata={"reference_downscale_factor": "2"})
    return CardFacts(**{**base, **changes})  # type: ignore[arg-type]


def test_the_model_card_states_the_facts_it_is_given_and_not_measured_where_nothing_was() -> None:
    card = model_card(_facts())
    for line in ("- Run: `r1`; checkpoint at step 4 of 6 (chosen by best)",
                 "- Base model: `/m/ltx-2.safetensors` (safetensors, 10 bytes, content digest `sha256:11`)",
                 "- Trigger word: `fxclp`", "- Mode: v2v (lora)",
                 "- LoRA rank 16, alpha 16; target modules: `to_k`; 2 adapted layer(s), stored as BF16",
                 "- Dataset: 7 of 8 sample(s) trained on",
                 "- Step time (steady-state median of the trainer's Time/Step): not measured",
                 "- Trainer's overall speed: 0.50 steps/s",
                 "- Peak memory: 30.25 GB (the trainer's own peak GPU memory statistic)",
                 "- Holdout loss at step 4: not measured",
                 'transformer = builder.lora("lora_weights_step_00004.safetensors", 1.0, LTXV_LORA_COMFY_RENAMING_MAP)'
                 ".build(device=DEVICE)"):
        assert line in card.splitlines(), line
    assert "the reference scale factors an IC-LoRA's inference needs): `reference_downscale_factor` = `2`" in card
    assert "- Text encoder: not recorded" in card and "not the LTX-2 trainer" not in card
