"""Phases ask a backend what it can do (``Capabilities``, ``checkout_root``, ``description``), never who it is (#48).

An AST scan of every phase module fails on a comparison with a backend's name (``backend.name == "ltx"``,
``request.backend != "simulated"``, ``in ("ltx", ...)``, ``case "reference":``), a table keyed by one, a
private attribute read on anything but ``self`` (``backend._root``) and ``getattr`` of a private name or of
anything on a backend (a member the protocol does not declare). Then each backend's declared answers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from ltx_pipeline.backends import BACKEND_NAMES, make_backend
from ltx_pipeline.backends.base import Capabilities, TrainerBackend
from ltx_pipeline.backends.ltx import LtxBackend
from ltx_pipeline.backends.reference import ReferenceBackend
from ltx_pipeline.backends.simulated import SimulatedBackend

PHASES = Path(__file__).resolve().parents[2] / "phases"


def _names_a_backend(node: ast.AST) -> bool:
    """A backend name as a string constant, or a tuple/list/set literal holding one."""
    if isinstance(node, ast.Constant):
        return node.value in BACKEND_NAMES
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return any(_names_a_backend(e) for e in node.elts)
    return False


def _mentions_backend(node: ast.AST) -> bool:
    """``backend``, ``ctx.backend``, ``self.backend``...: an expression that is a backend object."""
    return (isinstance(node, ast.Name) and "backend" in node.id) or \
        (isinstance(node, ast.Attribute) and "backend" in node.attr)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def identity_reads(source: str) -> list[str]:
    """``line N: what`` for each place ``source`` asks a backend who it is, or reads past its protocol."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(_names_a_backend(n) for n in (node.left, *node.comparators)):
            found.append(f"line {node.lineno}: compares with a backend name")
        elif isinstance(node, ast.MatchValue) and _names_a_backend(node.value):
            found.append(f"line {node.lineno}: matches a backend name")
        elif isinstance(node, ast.Dict) and any(k is not None and _names_a_backend(k) for k in node.keys):
            found.append(f"line {node.lineno}: a table keyed by backend name")
        elif isinstance(node, ast.Attribute) and _private(node.attr) and not (
                isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            found.append(f"line {node.lineno}: reads private attribute {node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr") \
                and len(node.args) >= 2:
            target, attribute = node.args[0], node.args[1]
            if isinstance(attribute, ast.Constant) and isinstance(attribute.value, str) and _private(attribute.value):
                found.append(f"line {node.lineno}: {node.func.id} of private attribute {attribute.value}")
            elif _mentions_backend(target):
                found.append(f"line {node.lineno}: {node.func.id} on a backend (a member its protocol lacks)")
    return found


@pytest.mark.parametrize("module", sorted(p.name for p in PHASES.glob("*.py")))
def test_no_phase_asks_a_backend_who_it_is(module: str) -> None:
    found = identity_reads((PHASES / module).read_text(encoding="utf-8"))
    assert found == [], (f"phases/{module} asks a backend its identity: {found}; ask `ctx.backend.capabilities`, "
                         "`checkout_root` or `description` (add a Capabilities field that states the reason)")


@pytest.mark.parametrize("line", [
    'backend.name == "ltx"',  # what plan.py and validate.py did
    'ctx.request.backend != "simulated" and x',  # train.py
    '"reference" == backend.name',
    'request.backend in ("ltx", "reference")',
    'getattr(backend, "_root", None)',  # plan.py, three times
    'ctx.backend._root',
    'getattr(ctx.backend, "config_knobs", None)',  # config_patch.py: a member no backend declares
    '{"ltx": 1, "simulated": 2}[request.backend]',
])
def test_the_scan_finds_each_way_of_asking_who(line: str) -> None:
    assert identity_reads(f"x = {line}\n") != []


def test_the_scan_finds_a_match_on_backend_names() -> None:
    assert identity_reads('match request.backend:\n    case "ltx":\n        pass\n') != []


@pytest.mark.parametrize("line", [
    "ctx.backend.capabilities.runs_real_trainer", "self._built", "ctx.backend.checkout_root",
    'request.mode == "t2v"', 'getattr(request, "nodes", None)', "backend.description",
])
def test_the_scan_lets_capability_questions_pass(line: str) -> None:
    assert identity_reads(f"x = {line}\n") == []


def _surface(tmp_path: Path) -> Path:
    path = tmp_path / "surface.yaml"
    knobs = {"quantization": None, "optimizer_type": "adamw", "batch_size": 1, "enable_gradient_checkpointing": True}
    point = {"knobs": knobs, "step_time_s": 1.0, "peak_vram_gb": 20.0}
    path.write_text(yaml.safe_dump({"gpu": {"name": "NVIDIA RTX A6000", "memory_mib": 49140, "count": 2},
                                    "load_time_s": 1, "validation_time_s": 1, "points": [point]}))
    return path


def test_the_official_trainer_needs_a_gpu_real_files_and_its_checkout(tmp_path: Path) -> None:
    backend = LtxBackend(tmp_path / "LTX-2" / ".." / "LTX-2")
    assert backend.capabilities == Capabilities(runs_real_trainer=True, needs_gpu=True, uses_real_files=True,
                                                simulated_gpu=None, shards_preprocessing=True)
    assert backend.checkout_root == (tmp_path / "LTX-2").resolve()
    assert backend.description == f"ltx (the official ltx-trainer at {(tmp_path / 'LTX-2').resolve()})"
    without = LtxBackend(None)
    assert without.checkout_root is None
    assert without.description == "ltx (the official ltx-trainer)"


def test_the_toy_trainer_trains_real_files_on_whatever_device_it_has() -> None:
    backend = ReferenceBackend()
    assert backend.capabilities == Capabilities(runs_real_trainer=False, needs_gpu=False, uses_real_files=True,
                                                simulated_gpu=None)
    assert backend.checkout_root is None
    assert backend.description == "reference (the built-in toy trainer: real training at toy scale, not LTX-2)"


def test_the_simulated_trainer_stands_in_for_its_surface_gpu(tmp_path: Path) -> None:
    backend = SimulatedBackend(_surface(tmp_path))
    assert backend.capabilities == Capabilities(runs_real_trainer=False, needs_gpu=False, uses_real_files=False,
                                                simulated_gpu="NVIDIA RTX A6000,49140,2")
    assert backend.checkout_root is None
    assert backend.description == "simulated (a cost surface stands in for the trainer; nothing is trained)"


@pytest.mark.parametrize("name", BACKEND_NAMES)
def test_every_backend_answers_every_capability_question(name: str, tmp_path: Path) -> None:
    backend: TrainerBackend = make_backend(name, trainer_root=str(tmp_path), surface=str(_surface(tmp_path)),
                                           assume_gpu="NVIDIA H100 80GB HBM3,81559")
    assert isinstance(backend.capabilities, Capabilities)
    assert isinstance(backend.description, str) and backend.description.startswith(f"{name} (")
    assert backend.checkout_root == (tmp_path.resolve() if name == "ltx" else None)
    # Only a real trainer needs one; only a simulated one has a stand-in GPU, and it reads no files.
    assert backend.capabilities.needs_gpu == backend.capabilities.runs_real_trainer
    assert (backend.capabilities.simulated_gpu is not None) == (not backend.capabilities.uses_real_files)
