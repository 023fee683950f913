"""``python -m ltx_pipeline.reference_trainer CONFIG [--disable-progress-bars]``: the train.py contract.

Same flow and exit codes as ltx-trainer's ``scripts/train.py`` (facts §3.1): a missing config file
prints ``Error: Configuration file X does not exist.`` and exits 1; the YAML is read with
``load_yaml`` (PyYAML's safe loader; a syntax error is a traceback, exit 1); the config is built as
``LtxTrainerConfig(**data)`` through the project's schema mirror, and any error prints
``Error: Invalid configuration data: <error>`` on stdout, exit 1; then training runs, exit 0, or a
traceback on stderr and exit 1 (out of memory included).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ltx_pipeline.yaml_io import load_yaml

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the reference trainer; returns the process exit code."""
    parser = argparse.ArgumentParser(prog="python -m ltx_pipeline.reference_trainer",
                                     description="Reference trainer (toy model, NOT LTX-2) with ltx-trainer's CLI.")
    parser.add_argument("config_path", type=Path)
    parser.add_argument("--disable-progress-bars", action="store_true")
    args = parser.parse_args(argv)
    if not args.config_path.exists():
        print(f"Error: Configuration file {args.config_path} does not exist.")
        return 1

    with open(args.config_path, encoding="utf-8") as handle:
        data = load_yaml(handle)
    from ltx_pipeline.ltx.trainer_config import LtxTrainerConfig

    try:
        config = LtxTrainerConfig(**data)
    except Exception as error:  # noqa: BLE001 - train.py prints every config error the same way
        print(f"Error: Invalid configuration data: {error}")
        return 1
    from ltx_pipeline.reference_trainer.trainer import train

    train(config, disable_progress_bars=args.disable_progress_bars)
    return 0


if __name__ == "__main__":
    sys.exit(main())
