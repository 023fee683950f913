"""The workflow's phases, in order. ``PHASES`` is an explicit tuple: no discovery, and phases not
built yet are simply absent. Each module exports one ``PHASE`` satisfying ``engine.Phase`` and is
named as the phase is in the database and the CLI output.
"""

from phases.autotune import PHASE as AUTOTUNE
from phases.config_patch import PHASE as CONFIG_PATCH
from phases.data_check import PHASE as DATA_CHECK
from phases.evaluate import PHASE as EVALUATE
from phases.monitor import PHASE as MONITOR
from phases.plan import PHASE as PLAN
from phases.prepare import PHASE as PREPARE
from phases.probe import PHASE as PROBE
from phases.train import PHASE as TRAIN
from phases.validate import PHASE as VALIDATE

PHASES = (PROBE, PLAN, PREPARE, DATA_CHECK, CONFIG_PATCH, VALIDATE, AUTOTUNE, TRAIN, MONITOR, EVALUATE)

__all__ = ["PHASES"]
