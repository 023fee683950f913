"""The workflow's phases, in order. ``PHASES`` is an explicit tuple: no discovery, and phases not
built yet are simply absent. Each module exports one ``PHASE`` satisfying ``engine.Phase`` and is
named as the phase is in the database and the CLI output.
"""

from phases.plan import PHASE as PLAN
from phases.probe import PHASE as PROBE

PHASES = (PROBE, PLAN)

__all__ = ["PHASES"]
