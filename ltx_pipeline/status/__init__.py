"""What ``status`` shows: read-only views over the store, above the engine.

``report.status_report`` builds every run's entry (phases, approval, findings, autotune, next
command) and ``live.live_training`` the training now (step, speed, checkpoints, GPUs). Both read
phase outputs as their typed models (``ltx_pipeline.outputs``), which the engine below may not
know; neither takes a lock or writes, so ``status`` works while a driver runs.
"""
