"""Each concept in one room, held mechanically (issue 48).

* Checkpoint file names are built only in ``ltx_pipeline/checkpoints/``: a string literal or f-string that
  spells one (``lora_weights_step_``, ``training_state_step_``, ``step_*.safetensors``, ...) anywhere else in
  the shipped code fails. Prose that mentions a name (a message, a docstring: text with spaces) is fine; the
  toy trainer (``reference_trainer/``), a separate program that writes its own files, is left out.
* Phases and the training room read the trainer config through typed records (``ltx.trainer_config.view``),
  never through nested ``.get()`` chains: ``x.get(a).get(b)``, ``(x.get(a) or {}).get(b)``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NAME_HOME = REPO / "ltx_pipeline" / "checkpoints"
OWN_FILES = REPO / "ltx_pipeline" / "reference_trainer"  # the toy trainer writes its own checkpoints
# What a checkpoint file name (or a glob or pattern for one) holds: the trainer's three name stems, and
# the glob it searches a load_checkpoint folder with.
NAME_PATTERN = re.compile(r"weights_step_|training_state_step_|step_\*\.safetensors")
GET_CHAIN_ROOMS = (REPO / "phases", REPO / "ltx_pipeline" / "training")


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string literal and f-string as written (an f-string's fields as ``{}``), with its line."""
    inside_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            text = "".join(str(part.value) if isinstance(part, ast.Constant) else "{}" for part in node.values)
            found.append((node.lineno, text))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in inside_fstrings:
            found.append((node.lineno, node.value))
    return found


def checkpoint_names_built(source: str) -> list[tuple[int, str]]:
    """The strings in ``source`` that build (or match) a checkpoint file name: a name stem in text with no
    whitespace (a name, a glob, a pattern); prose that only mentions one has spaces."""
    return [(line, text) for line, text in _strings(ast.parse(source))
            if NAME_PATTERN.search(text) and not any(c.isspace() for c in text)]


def nested_get_chains(source: str) -> list[int]:
    """Lines of ``.get(...)`` called on another ``.get(...)``: directly, or through ``(... or {})``."""
    def get_receiver(node: ast.AST) -> ast.expr | None:
        """What ``.get`` is called on, when ``node`` is a ``.get(...)`` call."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
            return node.func.value
        return None

    lines = []
    for node in ast.walk(ast.parse(source)):
        receiver = get_receiver(node)
        if isinstance(receiver, ast.BoolOp):  # (x.get(a) or {}).get(b)
            receiver = receiver.values[0]
        if receiver is not None and get_receiver(receiver) is not None:
            lines.append(getattr(node, "lineno", 0))
    return lines


def _shipped(*roots: Path) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def test_checkpoint_file_names_are_built_only_in_the_checkpoints_room() -> None:
    outside = [p for p in _shipped(REPO / "ltx_pipeline", REPO / "phases")
               if NAME_HOME not in p.parents and OWN_FILES not in p.parents]
    built = {f"{p.relative_to(REPO)}:{line}": text for p in outside
             for line, text in checkpoint_names_built(p.read_text(encoding="utf-8"))}
    assert built == {}, "build checkpoint names with ltx_pipeline.checkpoints (files, discovery)"


def test_the_checkpoint_name_check_sees_names_and_lets_prose_pass() -> None:
    # The forms the old code used (training/resume.py, ltx/launch_checks.py, the simulated trainer).
    assert checkpoint_names_built('state = folder / f"training_state_step_{match.group(2)}.pt"')
    assert checkpoint_names_built('found = path.rglob("*step_*.safetensors")')
    assert checkpoint_names_built('name = f"{prefix}_weights_step_{step:05d}.safetensors"')
    assert checkpoint_names_built('GLOB = "*_weights_step_*.safetensors"')
    assert checkpoint_names_built('x = "lora_weights_step_" + str(step)')
    assert not checkpoint_names_built('fix = "point it at a lora_weights_step_*.safetensors file"')
    assert not checkpoint_names_built('msg = f"{weights} has no training_state_step_*.pt beside it"')
    assert not checkpoint_names_built('samples = folder.glob("step_*_*.mp4")')  # validation videos, not checkpoints


def test_the_checkpoints_room_does_build_them() -> None:
    # The check is not vacuous: the names it looks for are where they belong.
    assert any(checkpoint_names_built(p.read_text(encoding="utf-8")) for p in _shipped(NAME_HOME))


def test_phases_and_the_training_room_read_no_nested_get_chains() -> None:
    chains = {str(p.relative_to(REPO)): lines for p in _shipped(*GET_CHAIN_ROOMS)
              if (lines := nested_get_chains(p.read_text(encoding="utf-8")))}
    assert chains == {}, "read the trainer config through ltx.trainer_config.view (TrainerConfigView)"


def test_the_get_chain_check_sees_both_forms() -> None:
    assert nested_get_chains('v = (values.get("optimization") or {}).get("steps", 0)') == [1]
    assert nested_get_chains('v = values.get("model").get("training_mode")') == [1]
    assert nested_get_chains('v = (values.get("a") or {}).get("b")\nw = x.get("c")') == [1]
    assert nested_get_chains('v = config.validation.interval\nw = record.get("exit_code")') == []
