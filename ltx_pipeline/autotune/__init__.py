"""The autotune phase's heavy parts: the room's one door.

``study`` keeps the sweep in an Optuna study (open, ask, tell, orphans); ``run_trial`` launches and
measures one short trial (``trial_settings``, ``write_trial_config``); ``write_reports`` writes
autotune.log/.md/.png (``write_off_reports``: the log and Markdown of autotune off) and ``trial_line``
formats one trial; ``sweep.Sweep`` is the whole sweep (planner, study, trials), which the phase runs and
``shared_sweep`` shares between hosts through its public methods. Inside: ``_trial`` (with ``_peaks``, its memory
figures) and ``_report``; nothing outside this package imports them.
"""

from ltx_pipeline.autotune import study
from ltx_pipeline.autotune._peaks import MemoryFigure
from ltx_pipeline.autotune._report import trial_line, write_off_reports, write_reports
from ltx_pipeline.autotune._trial import (
    TrialOutcome,
    TrialSettings,
    run_trial,
    trial_settings,
    write_trial_config,
)

__all__ = ["MemoryFigure", "TrialOutcome", "TrialSettings", "run_trial", "study", "trial_line", "trial_settings",
           "write_off_reports", "write_reports", "write_trial_config"]
