"""Every flag a message names exists where the message says it does (#43 point 3).

A fix line such as ``... or have preprocessing read --caption-column text`` sends the user to an option that
``ltx-pipeline run`` does not have. This test reads every prose string in the package (AST string constants
and f-string parts holding a space: messages, fixes, narration; docstrings and argv lists are not prose to
the user) and resolves each ``--flag`` in it:

- after ``ltx-pipeline CMD`` in the same string, it must be an option of that command (read from the typer
  app itself, so a renamed option fails here);
- otherwise it must be an option of some ``ltx-pipeline`` command, or belong to a program the same string
  names (``sbatch``, ``pip``, ``process_dataset.py``...), whose flags are listed below with their source; the
  trainer scripts' flags are checked against the trainer's source when ../shared/ltx2-src is present.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import typer.main

from ltx_pipeline.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
TRAINER = ROOT.parent / "shared" / "ltx2-src" / "packages" / "ltx-trainer"
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]")
COMMAND = re.compile(r"ltx-pipeline ((?:[a-z][a-z-]*)(?: [a-z][a-z-]*)?)")

# Flags of other programs that messages may name, only in a string that names the program (the key's
# words). Sources: SLURM's sbatch/srun man pages, pip's and uv's --help, nvidia-smi --help-query-gpu,
# docker run --help, accelerate launch --help, huggingface-cli download --help, and the toy trainer's CLI.
OTHER_PROGRAMS: dict[tuple[str, ...], frozenset[str]] = {
    ("sbatch", "srun", "#SBATCH", "SLURM", "squeue", "scontrol"): frozenset({
        "--nodes", "--ntasks", "--ntasks-per-node", "--gpus-per-node", "--cpus-per-task", "--time", "--partition",
        "--job-name", "--output", "--error", "--open-mode", "--requeue", "--no-requeue", "--parsable", "--wrap",
        "--export", "--kill-on-bad-exit", "--mem", "--me", "--name"}),
    ("pip ", "pip install", "uv ", "uv sync", "uv pip"): frozenset({
        "--index-url", "--force-reinstall", "--no-cache-dir", "--reinstall-package", "--directory"}),
    # A refusal that names the trainer's flag it will not pass.
    ("never passes",): frozenset({"--overwrite"}),
    ("nvidia-smi",): frozenset({"--query-gpu", "--format"}),
    ("docker",): frozenset({"--shm-size", "--memory"}),
    ("accelerate",): frozenset({"--num-processes", "--multi", "--machine", "--main", "--cpu", "--num"}),
    ("huggingface-cli", "hf download"): frozenset({"--local-dir"}),
    ("reference_trainer",): frozenset({"--reference-memory-scale", "--seed", "--disable-progress-bars"}),
}
# The trainer's scripts: a flag in a string naming the script must be one of the script's options.
TRAINER_SCRIPTS = ("process_dataset.py", "process_videos.py", "process_captions.py", "caption_videos.py",
                   "train.py", "split_scenes.py")


def _cli_options() -> dict[str, set[str]]:
    """Each command path (``run``, ``bench autotune``) -> its option names, read from the typer app."""
    options: dict[str, set[str]] = {}

    def walk(command: object, path: str) -> None:
        names = options.setdefault(path, set())
        for param in getattr(command, "params", ()):
            names.update(param.opts, param.secondary_opts)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    for names in options.values():
        names.update({"--help", "-h"})  # click adds the help option to every command, outside params
    return options


def _docstrings(tree: ast.AST) -> set[int]:
    ids: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _prose(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of each string the user may read: f-strings whole (their literal parts joined)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr):
            parts = [part.value for part in node.values if isinstance(part, ast.Constant)]
            skip.update(id(part) for part in node.values)
            text = " X ".join(str(part) for part in parts)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value
        else:
            continue
        if " " in text.strip() and FLAG.search(text):
            yield node.lineno, text


def _sources() -> list[Path]:
    files = sorted((ROOT / "ltx_pipeline").rglob("*.py")) + sorted((ROOT / "phases").rglob("*.py"))
    # The toy trainer and the trainer-side scripts are other programs: their own argparse names their flags.
    return [p for p in files if not {"reference_trainer", "trainer_side"} & set(p.parts)]


def _script_flags(script: str) -> set[str] | None:
    found = list(TRAINER.glob(f"**/{script}"))
    if not found:
        return None
    text = found[0].read_text(encoding="utf-8")
    # typer options: a parameter named foo_bar is --foo-bar; argparse: add_argument("--foo-bar").
    typer_names = {"--" + name.replace("_", "-") for name in re.findall(r"^\s+(\w+): [^=]+= typer\.Option", text, re.M)}
    return typer_names | set(re.findall(r"add_argument\(\s*\"(--[\w-]+)\"", text))


def _unresolved(text: str, options: dict[str, set[str]]) -> list[str]:
    every_cli = set().union(*options.values())
    problems: list[str] = []
    spans = [(m.end(), m.group(1)) for m in COMMAND.finditer(text)]
    for match in FLAG.finditer(text):
        flag = match.group(0)
        # The nearest `ltx-pipeline CMD` before the flag, in the same sentence, owns it.
        before = [(end, cmd) for end, cmd in spans if end <= match.start()
                  and not re.search(r"[.;`]\s|\) |, then |; ", text[end:match.start()])]
        if before:
            command = before[-1][1]
            known = options.get(command) or options.get(command.split()[0])
            if known is not None:
                if flag not in known | options[""]:
                    problems.append(f"`ltx-pipeline {command}` has no {flag}")
                continue
        if flag in every_cli:
            continue
        if text[:match.start()].endswith("--slurm-arg="):  # handed to sbatch as it is
            text_owner = "sbatch"
        else:
            text_owner = text
        scripts = [s for s in TRAINER_SCRIPTS if s in text]
        if scripts:
            for script in scripts:
                flags = _script_flags(script)
                if flags is not None and flag not in flags:
                    problems.append(f"the trainer's {script} has no {flag}")
            continue
        owners = [words for words, flags in OTHER_PROGRAMS.items()
                  if flag in flags and any(w.lower() in text_owner.lower() for w in words)]
        if not owners:
            problems.append(f"{flag} is no ltx-pipeline option, and the message names no program that has it")
    return problems


def test_the_cli_options_are_read() -> None:
    options = _cli_options()
    assert "--dataset" in options["run"] and "--json" in options["status"] and "--workspace" in options["resume"]


def test_the_check_catches_the_reported_fix() -> None:
    """The fix of #43 point 3, as it read on main, is caught; a true one passes."""
    options = _cli_options()
    assert _unresolved("rename column `text` to `caption`, or have preprocessing read --caption-column text",
                       options)
    assert _unresolved("run `ltx-pipeline status --frobnicate`", options) == ["`ltx-pipeline status` has no "
                                                                               "--frobnicate"]
    assert not _unresolved("run `ltx-pipeline resume --workspace W`", options)
    assert not _unresolved("pass --shm-size=16g to docker run", options)


def test_every_flag_a_message_names_exists() -> None:
    options = _cli_options()
    problems = [f"{path.relative_to(ROOT)}:{line}: {problem}: {text[:120]!r}"
                for path in _sources() for line, text in _prose(path) for problem in _unresolved(text, options)]
    assert not problems, "\n".join(problems)


@pytest.mark.skipif(not TRAINER.is_dir(), reason="../shared/ltx2-src is absent: the trainer scripts' flags "
                                                   "cannot be read")
def test_the_trainer_script_reader_sees_real_flags() -> None:
    flags = _script_flags("process_dataset.py")
    assert flags is not None and {"--caption-column", "--resolution-buckets", "--lora-trigger"} <= flags
