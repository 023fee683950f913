"""The run page's checkpoint grid: its data from ``grid.json`` (a row per checkpoint, a playable render per
prompt), and the page drawing one table row per checkpoint with a "Play row" button."""

from __future__ import annotations

import json
from pathlib import Path

from jinja2 import Environment, FileSystemLoader

from ltx_pipeline.outputs.evaluate import EvaluateOutputs
from ltx_pipeline.ui.grid import checkpoint_grid

TEMPLATES = Path(__file__).parents[2] / "ltx_pipeline" / "ui" / "templates"


def _grid(tmp_path: Path) -> tuple[Path, EvaluateOutputs]:
    root = tmp_path / "ws"
    eval_root = root / "r1" / "outputs" / "eval"
    files = {step: [eval_root / "checkpoints" / f"step_{step:05d}" / "in_distribution" / "01.mp4",
                    eval_root / "checkpoints" / f"step_{step:05d}" / "out_of_distribution" / "01.png"]
             for step in (30, 60)}
    for path in [p for pair in files.values() for p in pair]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    (eval_root / "grid.png").write_bytes(b"png")
    rows = [{"step": 30, "weights": "/w/30", "holdout": 0.25, "why": "lowest holdout",
             "renders": [str(p) for p in files[30]]},
            {"step": 60, "weights": "/w/60", "holdout": None, "why": "last",
             "renders": [str(files[60][0]), None]}]
    (eval_root / "grid.json").write_text(json.dumps({
        "choice": "default", "note": None, "rows": rows,
        "prompts": [{"prompt": "fxclp a red square", "category": "in_distribution"},
                    {"prompt": "fxclp a lighthouse", "category": "out_of_distribution"}]}))
    return root.resolve(), EvaluateOutputs(skipped=False, grid=str(eval_root / "grid.png"))


def test_the_grid_data_has_a_row_per_checkpoint_with_a_url_per_render(tmp_path: Path) -> None:
    root, outputs = _grid(tmp_path)
    grid = checkpoint_grid(root, outputs)
    assert grid is not None
    assert grid["picture"] == "/files/r1/outputs/eval/grid.png"
    assert grid["prompts"] == ["fxclp a red square", "fxclp a lighthouse"]
    assert [(r["step"], r["holdout"], r["why"]) for r in grid["rows"]] == [(30, 0.25, "lowest holdout"),
                                                                           (60, None, "last")]
    assert [[(i["url"], i["kind"]) for i in r["items"]] for r in grid["rows"]] == [
        [("/files/r1/outputs/eval/checkpoints/step_00030/in_distribution/01.mp4", "video"),
         ("/files/r1/outputs/eval/checkpoints/step_00030/out_of_distribution/01.png", "image")],
        [("/files/r1/outputs/eval/checkpoints/step_00060/in_distribution/01.mp4", "video"), (None, None)]]
    assert checkpoint_grid(root, EvaluateOutputs(skipped=False)) is None  # no grid drawn
    (Path(outputs.grid or "").with_name("grid.json")).write_text("{")
    assert checkpoint_grid(root, outputs) is None  # unreadable: no grid, no error


def test_the_run_page_plays_each_checkpoint_row_side_by_side(tmp_path: Path) -> None:
    root, outputs = _grid(tmp_path)
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True)
    section = env.from_string(_evaluation_section()).render(data={"evaluation": None,
                                                                  "grid": checkpoint_grid(root, outputs)})
    assert section.count('<tr data-step="') == 2 and section.count('class="play-row"') == 2
    assert section.count("<video muted") == 2 and section.count("<img ") == 1
    assert "holdout 0.25" in section and "no file in the workspace" in section
    assert section.index("fxclp a red square") < section.index('data-step="30"')  # prompts head the columns


def _evaluation_section() -> str:
    text = (TEMPLATES / "run.html").read_text(encoding="utf-8")
    start = text.index('<section id="evaluation">')
    return text[start: text.index("</section>", start) + len("</section>")]
