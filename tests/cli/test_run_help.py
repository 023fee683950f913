"""The CLI's manners (#43 point 9): `run --help` shows each option's choices and its true default, grouped in
panels, and every problem line on stderr is spelled one way (``error:``, ``warning:``).

The help reads its lists and defaults from ``cli.run_help`` (light, for a fast ``--help``); these tests parse
the help as printed and hold each figure against its source: ``RunRequest``, ``request.BACKENDS``, the
modes and the planner's constants.
"""

from __future__ import annotations

import ast
import re
import typing
from pathlib import Path

import pytest

import ltx_pipeline.cli
from ltx_pipeline.cli import main


@pytest.fixture(scope="module")
def options() -> dict[str, tuple[str, str, str]]:
    """Each option of `run --help`: (metavar, help text with its wrapping undone, panel)."""
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["run", "--help"]) == 0
    found: dict[str, tuple[str, str, str]] = {}
    panel, current = "", ""
    for line in buffer.getvalue().splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            panel = line[:-1]
        elif line.startswith("  -"):
            parts = line.strip().split(None, 1)
            names = [parts[0]] if not parts[0].endswith(",") else line.strip().split(", ")[1].split()[:1]
            rest = line.strip()[line.strip().index(names[0]) + len(names[0]):].strip()
            metavar = rest.split("  ", 1)[0] if rest.startswith(("[", "<")) else ""
            current = names[0]
            found[current] = (metavar, rest[len(metavar):].strip(), panel)
        elif line.startswith("      ") and current:
            metavar, text, where = found[current]
            joiner = "" if text.endswith("-") else " "
            found[current] = (metavar, (text + joiner + line.strip()).strip(), where)
    return found


def _literal(field: str) -> tuple[str, ...]:
    from ltx_pipeline.request import RunRequest

    return tuple(typing.get_args(RunRequest.model_fields[field].annotation))


def _choices(metavar: str) -> tuple[str, ...]:
    assert metavar.startswith("[") and metavar.endswith("]"), metavar
    return tuple(metavar[1:-1].split("|"))


def test_choices_are_shown_and_are_the_requests(options: dict[str, tuple[str, str, str]]) -> None:
    from ltx_pipeline.ltx.modes import MODES
    from ltx_pipeline.ltx.preparation import CaptionerName
    from ltx_pipeline.ltx.validation_sources import CHOICES
    from ltx_pipeline.request import BACKENDS

    expected = {"--backend": BACKENDS, "--training-mode": _literal("training_mode"),
                "--strategy": _literal("strategy"), "--autotune": _literal("autotune"), "--audio": _literal("audio"),
                "--validation-media": CHOICES, "--captioner": typing.get_args(CaptionerName)}
    assert CHOICES == _literal("validation_media")
    for option, values in expected.items():
        assert _choices(options[option][0]) == tuple(values), option
    mode_help = options["--mode"][1]
    assert all(re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", mode_help) for name in MODES), mode_help


def _default(options: dict[str, tuple[str, str, str]], option: str) -> str:
    match = re.search(r"\[default: (.*)\]$", options[option][1])
    assert match, (option, options[option])
    return match.group(1)


def test_defaults_are_shown_and_true(options: dict[str, tuple[str, str, str]]) -> None:
    from ltx_pipeline.backends.base import DEFAULT_MAIN_PORT
    from ltx_pipeline.ltx import recipe
    from ltx_pipeline.ltx.buckets import CHAINED_DEFAULT
    from ltx_pipeline.ltx.modes import MODES
    from ltx_pipeline.ltx.preparation import DEFAULT_VLLM_URL, default_captioner
    from ltx_pipeline.request import DEFAULT_MIXED_BUCKETS, DEFAULT_SINGLE_BUCKET, RunRequest

    for field in ("mode", "training_mode", "strategy", "effective_batch", "backend", "headroom", "autotune",
                  "audio", "validation_media", "nodes"):
        option = "--" + field.replace("_", "-")
        assert _default(options, option) == str(RunRequest.model_fields[field].default), option
    assert _default(options, "--checkpoint-interval") == str(recipe.CHECKPOINT_INTERVAL)
    assert _default(options, "--validation-interval") == str(recipe.VALIDATION_INTERVAL)
    assert _default(options, "--main-port") == str(DEFAULT_MAIN_PORT)
    assert _default(options, "--vllm-url") == DEFAULT_VLLM_URL
    assert _default(options, "--trainer-root") == "$LTX2_ROOT"
    steps = _default(options, "--steps")
    assert steps.startswith("from the plan: the mode's template: ")
    for mode in MODES.values():  # each mode's steps, said next to it
        assert re.search(rf"{mode.steps} for [^;]*(?<![\w-]){re.escape(mode.name)}(?![\w-])", steps), mode.name
        assert re.search(rf"{mode.learning_rate:g} for [^;]*(?<![\w-]){re.escape(mode.name)}(?![\w-])",
                         _default(options, "--learning-rate")), mode.name
    rank = _default(options, "--rank")
    assert f"{recipe._STANDARD['rank']} on a standard tier" in rank and f"{recipe._LOW_VRAM['rank']} on a low" in rank
    buckets = _default(options, "--buckets")
    chained = ", ".join(str(bucket) for bucket, _ in CHAINED_DEFAULT)
    assert f"{DEFAULT_SINGLE_BUCKET} for single" in buckets and f"{DEFAULT_MIXED_BUCKETS} for mixed" in buckets
    assert f"{chained} (one per stage) for chain" in buckets
    captioner = _default(options, "--captioner")
    assert f"{default_captioner(None, 'ltx')} on the ltx backend" in captioner
    assert f"{default_captioner(None, 'reference')} on reference and simulated" in captioner
    assert default_captioner(None, "simulated") == default_captioner(None, "reference")


def test_options_are_grouped_in_panels(options: dict[str, tuple[str, str, str]]) -> None:
    panels = {option: panel for option, (_, _, panel) in options.items()}
    assert {panels[o] for o in ("--dataset", "--captioner", "--holdout")} == {"Data and captions"}
    assert {panels[o] for o in ("--mode", "--steps", "--rank", "--learning-rate")} == {"Training"}
    assert {panels[o] for o in ("--backend", "--nodes", "--slurm")} == {"Trainer, GPUs and launch"}
    assert {panels[o] for o in ("--autotune", "--headroom")} == {"Autotune"}
    assert {panels[o] for o in ("--eval-prompt", "--skip-eval")} == {"Evaluation"}
    assert {panels[o] for o in ("--workspace", "--approve", "--help")} == {"Options"}


def _printed_literals() -> list[str]:
    """Every string literal in the CLI's modules that starts a printed problem line."""
    found = []
    for path in sorted(Path(ltx_pipeline.cli.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    re.match(r"\s*(error|warning)s?:", node.value, re.IGNORECASE):
                found.append(f"{path.name}:{node.lineno}: {node.value[:40]!r}")
    return found


def test_problem_lines_are_spelled_one_way(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """``error:`` and ``warning:``, lower case, as cli.main writes them; never ``Error:`` nor ``Warning:``."""
    spelled = _printed_literals()
    assert spelled and all(re.search(r": '\s*(error|warning): ", line) for line in spelled), spelled
    assert main(["run", "--workspace", str(tmp_path / "ws"), "--split-over", "30", "--min-scene", "1"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(":", 1)[0] for line in lines] == ["warning", "warning", "error"], lines
