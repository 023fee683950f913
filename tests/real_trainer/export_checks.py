"""An export of a real-trainer run, loaded back with the trainer's own LoRA loader (``load_exported_lora.py``).

Called from a test that already trained a run (tests/real_trainer/test_full_run.py), so it costs one export and
one load of the tiny model, not another training run.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.real_trainer.conftest import cli
from tests.real_trainer.environment import TrainerEnvironment

LOADER = Path(__file__).resolve().parent / "load_exported_lora.py"


def check_export_loads(workspace: Path, run: str, trainer_env: TrainerEnvironment, folder: Path) -> None:
    """Export ``run``'s last checkpoint to ``folder``, then load it in the trainer's python both ways."""
    done = cli("export", run, "--workspace", str(workspace), "--to", str(folder), "--json")
    assert done.returncode == 0, done.stderr
    exported = json.loads(done.stdout)
    weights = Path(exported["weights"])
    assert (folder / weights.name).read_bytes() == weights.read_bytes()
    card = (folder / "README.md").read_text()
    assert "- Trained by: ltx" in card and "not the LTX-2 trainer" not in card
    loaded = subprocess.run([str(trainer_env.python), str(LOADER), str(folder), weights.name], capture_output=True,
                            text=True, timeout=600, check=False)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    figures = json.loads(loaded.stdout.strip().splitlines()[-1])
    assert figures["tensors"] > 0 and figures["equal_after_trainer_load"] == figures["tensors"], figures
    assert figures["modules"] * 2 == figures["tensors"] and figures["changed_by_ltx_core"] > 0, figures
    assert figures["others_changed"] == 0, figures  # ltx-core's renaming map matched only the adapted modules
