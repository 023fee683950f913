"""``sitecustomize.py`` hooks that hold a process at a known point, so a test can kill it there.

``HOLD``, for engine subprocesses: hold the engine inside a named phase.

Write ``HOLD`` as ``sitecustomize.py`` into a folder on the engine's ``PYTHONPATH`` and set
``HOLD_IN_PHASE`` (the phase) and ``HOLD_MARKER`` (a file written once the engine is held there): the
engine then sleeps for two minutes right after that phase's attempt is recorded (or, with ``HOLD_WHILE``
naming a file, for as long as that file exists), so a test can kill it, or contend with it, at a known point.
"""

HOLD = '''
import importlib.abc, importlib.util, os, pathlib, sys, time


def _patch(store):
    begin = store.Store.begin_phase

    def hold(self, run_id, phase, **kwargs):
        row = begin(self, run_id, phase, **kwargs)
        if phase == os.environ.get("HOLD_IN_PHASE"):
            pathlib.Path(os.environ["HOLD_MARKER"]).write_text(phase)
            gate = os.environ.get("HOLD_WHILE")
            if gate:  # held while that file exists: the test lets it go by removing it
                while pathlib.Path(gate).exists():
                    time.sleep(0.05)
            else:
                time.sleep(120)
        return row

    store.Store.begin_phase = hold


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Patch the store when a process first imports it: the engine's children that never open the store
    (supervisors, trainers) start without importing it (about 0.6 s of CPU each)."""

    def find_spec(self, name, path, target=None):
        if name != "ltx_pipeline.store.store":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _PatchOnImport())
'''

HOLD_HOLDOUT_RESULTS = '''
import os, pathlib, time

_replace = os.replace


def _hold_after_first_result(src, dst, *args, **kwargs):
    """After the holdout-loss script writes its results file the first time (one checkpoint measured), write this
    process's pid to HOLD_HOLDOUT_MARKER and sleep: the test kills it mid-measurement, at a known point."""
    _replace(src, dst, *args, **kwargs)
    marker = os.environ.get("HOLD_HOLDOUT_MARKER")
    path = pathlib.Path(os.fsdecode(dst))
    if marker and path.name == "results.json" and path.parent.name == "holdout" and not os.path.exists(marker):
        pathlib.Path(marker).write_text(str(os.getpid()))
        time.sleep(300)


os.replace = _hold_after_first_result
'''
"""A ``sitecustomize.py`` for the trainer's interpreter: hold the holdout-loss script right after its first
measured checkpoint is written (``HOLD_HOLDOUT_MARKER`` names the file that receives its pid)."""
