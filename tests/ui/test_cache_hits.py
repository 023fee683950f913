"""A run's cache hits in ``status`` (table and ``--json``) and on the dashboard's run page (#44).

Two runs of one workspace preprocess the same data (the reference toy's scripts, in-process; the journal
counts the processes they would start): the first encodes every file, the second none. What status and the
run page show per stage is compared with what happened.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from starlette.testclient import TestClient

from ltx_pipeline.cli import main
from ltx_pipeline.ltx.buckets import parse_buckets
from ltx_pipeline.ltx.modes import get_mode
from ltx_pipeline.preprocessing.run import preprocess
from ltx_pipeline.store import Store
from ltx_pipeline.ui.app import create_app
from ltx_pipeline.workspace import Workspace
from tests.reference_trainer.conftest import PreprocessContext, write_dataset

pytest.importorskip("torch")


def _preprocess(ws: Workspace, name: str, dataset: Path, base: Path) -> PreprocessContext:
    ctx = PreprocessContext(workspace=ws.root, paths=ws.run(name), request=SimpleNamespace(trigger=None))
    preprocess(ctx, mode=get_mode("t2v"), metadata_file=dataset, buckets=parse_buckets("64x64x17"),
               output_dir=ctx.paths.dataset / ".precomputed", stage=1, model_path=str(base),
               text_encoder_path=str(base), extra_flags=[])
    return ctx


def test_status_and_the_run_page_show_each_runs_hits_as_they_happened(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ltx_pipeline.reference_trainer import make_base

    base = tmp_path / "base.safetensors"
    assert make_base.main([str(base), "--layers", "1", "--text-len", "10", "--text-dim", "16"]) == 0
    dataset = write_dataset(tmp_path / "data", [("a.mp4", 17, True), ("b.mp4", 17, True)])
    ws = Workspace.at(tmp_path / "ws")
    ws.create()
    store = Store.open(ws.store)
    for name in ("first", "second"):
        store.create_run(name, {})
    first = _preprocess(ws, "first", dataset, base)
    second = _preprocess(ws, "second", dataset, base)
    assert (len(first.journal.started), len(second.journal.started)) == (1, 0)
    root = str(ws.root / "cache" / "latents")

    capsys.readouterr()
    assert main(["status", "--workspace", str(ws.root), "--json"]) == 0
    shown = {run["name"]: run["cache_hits"] for run in json.loads(capsys.readouterr().out)["runs"]}
    assert {name: [(h["stage"], h["wanted"], h["hits"], h["encoded"], h["missing"], h["cache"]) for h in hits]
            for name, hits in shown.items()} == {"first": [(1, 6, 0, 6, 0, root)], "second": [(1, 6, 6, 0, 0, root)]}

    assert main(["status", "--workspace", str(ws.root), "--run", "second"]) == 0
    assert "  latent cache: stage 1: 6 of 6 file(s) from the cache, 0 encoded" in capsys.readouterr().out.splitlines()

    page = TestClient(create_app(ws, None), base_url="http://127.0.0.1:8188").get("/runs/second")
    assert page.status_code == 200
    assert f"<tr><td>stage 1</td><td>6</td><td>0</td><td>0</td><td>6</td><td><code>{root}</code></td></tr>" in page.text
