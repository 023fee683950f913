"""Build a tiny, randomly initialised LTX-2 checkpoint and Gemma 3 folder that the real trainer loads.

Usage (with the *trainer's* interpreter)::

    TRAINER_PYTHON build_tiny_model.py --out DIR [--seed 0]

It owns two outputs under ``DIR``:

* ``ltx2-tiny.safetensors``: one unified checkpoint (audio+video transformer, text connectors and feature
  extractor, conv video VAE, audio VAE, vocoder) with the architecture in ``__metadata__["config"]``, the way
  ltx-core's ``SingleGPUModelBuilder`` reads it;
* ``gemma/``: a tiny Gemma 3 (text + SigLIP vision tower) in the original Gemma 3 key layout, with a byte-level
  BPE tokenizer trained here and the processor sidecars ltx-core requires.

It prints one JSON object on stdout (``checkpoint``, ``text_encoder``, ``transformer_layers``, ``parameters``
(elements in the unified checkpoint), ``ltx_core_version``, ``seconds``). On failure it exits 1 with one line
on stderr.

Why it is standalone: it must import the *installed* ltx-core / transformers of the user's trainer (so every
part is built by that version's own configurators and always matches it), which live in the trainer's venv,
not in ltx_pipeline's. So it imports nothing from ltx_pipeline and talks to it only through argv and stdout.

Why it checks itself: the loader builds modules on the meta device and loads with ``strict=False``, so a
parameter or persistent buffer missing from the file silently stays on meta until the first forward. Before
anything is renamed into place, every part's state dict is pushed through the loader's own key map and must
come out complete, with the right shapes.

The work is split over private sibling modules, imported from this script's folder (``sys.path[0]``):
``_gemma_folder`` (the Gemma 3 folder and tokenizer), ``_ltx_checkpoint`` (the LTX parts and their metadata),
``_key_map_checks`` (the round-trip checks), ``_seeded_init`` (deterministic construction), ``_output_files``
(safetensors/JSON writing and atomic staging) and ``_step_errors`` (the one-line failure messages). This
file owns the argument parsing, the order of the steps, the JSON on stdout and the error line on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, NoReturn

from _gemma_folder import build_gemma_folder
from _key_map_checks import check_gemma_folder, check_ltx_checkpoint
from _ltx_checkpoint import build_ltx_parts, checkpoint_metadata, ltx_file_state_dict
from _output_files import save_safetensors, staged
from _step_errors import BuildError, step

CHECKPOINT_NAME = "ltx2-tiny.safetensors"
GEMMA_DIR_NAME = "gemma"


def quiet_libraries() -> None:
    """Keep stdout for the JSON and stderr for the one failure line: silence library notices."""
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()


def build(out: Path, seed: int) -> dict[str, Any]:
    """Build both outputs into ``out`` and describe them."""
    with step("importing torch and ltx-core from this interpreter"):
        import importlib.metadata

        import ltx_core  # noqa: F401 - fail early, with a clear message, outside the trainer's venv
        import torch

        quiet_libraries()
        ltx_core_version = importlib.metadata.version("ltx-core")

    torch.manual_seed(seed)
    metadata = checkpoint_metadata()
    gemma_final = out / GEMMA_DIR_NAME
    checkpoint_final = out / CHECKPOINT_NAME
    with step(f"creating {out}"):
        out.mkdir(parents=True, exist_ok=True)

    with staged(gemma_final) as gemma_temp:
        with step("building the Gemma 3 folder"):
            gemma_model = build_gemma_folder(gemma_temp)
        with step("checking the Gemma 3 folder against ltx-core's loader"):
            check_gemma_folder(gemma_temp, gemma_model)
        # The embeddings processor sizes its feature extractor from the Gemma config, so it reads this folder.
        parts = build_ltx_parts(metadata, gemma_temp)
        with step("checking the checkpoint against ltx-core's key maps"):
            tensors = ltx_file_state_dict(parts)
            check_ltx_checkpoint(parts, tensors)
        with step("writing the checkpoint"), staged(checkpoint_final) as checkpoint_temp:
            save_safetensors(tensors, checkpoint_temp, {"config": json.dumps(metadata["config"])})

    return {
        "checkpoint": str(checkpoint_final.resolve()),
        "text_encoder": str(gemma_final.resolve()),
        "transformer_layers": metadata["config"]["transformer"]["num_layers"],
        "parameters": sum(value.numel() for value in tensors.values()),
        "ltx_core_version": ltx_core_version,
    }


class _ArgumentParser(argparse.ArgumentParser):
    """Report bad arguments like any other failure (one stderr line, exit 1) instead of usage + exit 2."""

    def error(self, message: str) -> NoReturn:
        raise ValueError(f"bad arguments: {message}")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = _ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, type=Path, help="folder to write the checkpoint and gemma/ into")
    parser.add_argument("--seed", type=int, default=0, help="torch seed; the same seed gives identical files")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    stdout = sys.stdout
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        # Anything a library prints must not corrupt the JSON on stdout.
        with contextlib.redirect_stdout(sys.stderr):
            result = build(args.out, args.seed)
    except BuildError as error:
        print(f"build_tiny_model: {error}", file=sys.stderr)
        return 1
    except Exception as error:  # anything else: still one line for the caller instead of a traceback
        print(f"build_tiny_model: {type(error).__name__}: {' '.join(str(error).split())}", file=sys.stderr)
        return 1
    result["seconds"] = round(time.monotonic() - started, 3)
    print(json.dumps(result), file=stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
