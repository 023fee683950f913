"""Holdout loss per checkpoint (#45): the trainer's own loss on held-out rows at fixed noise, measured, never judged.

The protocol (``protocol``: fixed sigmas and seeds, the job file), the held-out rows' latents (``rows``), the
measurement through the backend's script (``measure``), its plot (``plot``) and run-summary section (``summary``).
The scripts that measure live with their trainers: ``trainer_side/holdout_loss.py`` (the official trainer) and
``reference_trainer/holdout_loss.py`` (the toy), which imports ``protocol`` only: this door re-exports nothing,
so importing the protocol loads nothing else.
"""

__all__: list[str] = []
