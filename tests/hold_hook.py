"""A ``sitecustomize.py`` for engine subprocesses: hold the engine inside a named phase.

Write ``HOLD`` as ``sitecustomize.py`` into a folder on the engine's ``PYTHONPATH`` and set
``HOLD_IN_PHASE`` (the phase) and ``HOLD_MARKER`` (a file written once the engine is held there): the
engine then sleeps for two minutes right after that phase's attempt is recorded, so a test can kill it,
or contend with it, at a known point.
"""

HOLD = '''
import os, pathlib, time
from ltx_pipeline.store import store as _store

_begin = _store.Store.begin_phase


def _hold(self, run_id, phase, **kwargs):
    row = _begin(self, run_id, phase, **kwargs)
    if phase == os.environ.get("HOLD_IN_PHASE"):
        pathlib.Path(os.environ["HOLD_MARKER"]).write_text(phase)
        time.sleep(120)
    return row


_store.Store.begin_phase = _hold
'''
