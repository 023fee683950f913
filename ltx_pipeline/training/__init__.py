"""The training room: what the train phase does for each stage, and what its trainer leaves behind.

``supervise`` drives one stage (skip it when finished, re-attach or ``launch``, follow, ``judge``); ``stage``
is the record they share; ``relaunch`` (resume, restart, continuation, ``--apply-fix``) and ``recheck`` run
before a launch, over the rules of ``resume`` and ``fixes``; ``validation`` is the gate every launch passes;
``follow`` reads a running trainer's log; ``nodes`` is a multi-node launch's other ranks; ``samples_used`` and
``readers`` serve monitor and ``status``. Checkpoint names and discovery are ``ltx_pipeline.checkpoints``'.
"""
