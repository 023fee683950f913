"""The values ``--eval-checkpoints`` takes, as one rule the request and the evaluation share.

``last``, ``best``, ``all`` or a number of checkpoints (1 to 9999); None (left out) is the default, the last and
the lowest-holdout checkpoint. ``evaluation.checkpoints_choice`` turns a value into checkpoints.
"""

from __future__ import annotations

import re

__all__ = ["CHOICES", "NUMBER", "check_choice"]

CHOICES = ("last", "best", "all")  # or a number of checkpoints, evenly spaced
NUMBER = re.compile(r"^[1-9][0-9]{0,3}$")


def check_choice(value: str) -> str:
    """``value`` when it is ``last``, ``best``, ``all`` or a number from 1 to 9999.

    Raises:
        ValueError: anything else, naming the accepted values.
    """
    if value in CHOICES or NUMBER.match(value):
        return value
    raise ValueError(f"eval_checkpoints {value!r} is not one of last, best, all or a number of checkpoints "
                     "(1 to 9999)")
