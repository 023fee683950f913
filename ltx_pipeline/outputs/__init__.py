"""Every phase's typed outputs: one frozen, versioned pydantic model per phase (``engine.PhaseOutputs``).

A model lives here, one module per phase, so that its producer (``phases/<name>.py``) and every
consumer (later phases, the rooms below them, the CLI) import the same class; a consumer reads typed fields
(``ctx.output(PlanOutputs).recipe``), never dict keys. A name means one thing everywhere: a value
per GPU says so in its name, the effective batch is over all processes.
"""
