"""``RunRequest``, the pydantic model of a run's request: its fields, their checks and the defaults resolved here.

Each field is checked through the LTX rules in ``ltx/`` (modes, buckets); the package door
(``ltx_pipeline.request``) builds it from options or ``run.yaml`` and turns its errors into one line each.

Defaults that depend on other fields are resolved here, once (``_RESOLVED_FIELDS``): the attribute holds
the value every phase uses, while the request's stored form (``run.yaml``, the store, fingerprints) keeps
what was asked, None for "the default", as before these defaults were resolved here; so an existing run's
fingerprints do not change, and editing ``backend`` in run.yaml still changes the default captioner.

The walk of ``--captioner``: the CLI option (``cli/workflow.py``) goes into the request values as
``captioner``; ``RunRequest.captioner`` is the captioner asked for, else the backend's default
(``ltx.preparation.default_captioner``: qwen_omni on ltx, offline on the toy backends), and
``vllm_url`` qwen_omni's server (``ltx.preparation.DEFAULT_VLLM_URL`` unless ``--vllm-url``). The probe
checks that this captioner can run here (its "Captioner" finding); the plan states it as
``PreparationPlan.captioner`` (plan.md's Data preparation) and blocks approval with the fix when the
finding is missing; the prepare phase builds that captioner once (``captioning.make_captioner``), writes
the captions into ``<run>/dataset/dataset.json`` and records ``PrepareOutputs.captioner``. The trainer config
never names the captioner: its captions reach training through that metadata file, which data_check plans
preprocessing from and config_patch's ``data.preprocessed_data_root`` points at once preprocessed.

The walk of ``--effective-batch`` (samples per optimizer step over every process, everywhere; a value for one
process says ``per_gpu`` in its name): the CLI option (``cli/workflow.py``) becomes
``RunRequest.effective_batch``. The plan computes the launch once (``ltx.launch_plan.launch_shape``, stored as
``PlanOutputs.launch``: processes per node x nodes) and ``ltx.recipe.build_recipe`` splits the effective
batch over its processes: ``Recipe.knobs`` gets ``batch_size`` 1 and ``gradient_accumulation_steps`` =
effective batch / processes (the per-GPU batch), ``Recipe.effective_batch`` the total it makes (rounded to a
multiple of the processes, with a warning). Validate launches that many processes (``ValidateOutputs.
num_processes``, read from the plan's launch). Autotune keeps the per-GPU batch E = batch x accumulation fixed
(``ltx.autotune.search_space(..., per_gpu_batch)``, ``SweepPlanner(per_gpu_batch=...)``) and trades batch size
against accumulation, each config b x E/b x processes = the effective batch; it stores ``AutotuneOutputs.
per_gpu_batch``, ``processes`` and ``effective_batch`` (their product). Config_patch and autotune's winner write
the knobs into every stage config as the trainer's ``optimization.batch_size`` and
``optimization.gradient_accumulation_steps`` (``ltx.config_patch.KNOB_PATHS``); the process count is the
launch's ``accelerate launch --num_processes``: the trainer's samples per optimizer step are their product.
"""

from __future__ import annotations

import io
import re
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ltx_pipeline.errors import BadInput, BadRequest
from ltx_pipeline.ltx.buckets import CHAINED_DEFAULT, Bucket, format_buckets, parse_buckets
from ltx_pipeline.ltx.eval_checkpoints import check_choice
from ltx_pipeline.ltx.modes import MODES
from ltx_pipeline.ltx.preparation import DEFAULT_VLLM_URL, CaptionerName, default_captioner

__all__ = ["BACKENDS", "DEFAULT_MIXED_BUCKETS", "DEFAULT_SINGLE_BUCKET", "EVAL_ONLY_FIELDS", "RENDEZVOUS_FIELDS",
           "URL", "RunRequest"]

BACKENDS = ("ltx", "reference", "simulated")
URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)
DEFAULT_SINGLE_BUCKET = "960x544x49"  # the skill's per-mode default proposal
DEFAULT_MIXED_BUCKETS = "960x544x121;1280x704x81"  # seed 002's mixed example: motion + detail
#: Request fields only the evaluate phase reads (the plan's fingerprint leaves them out).
EVAL_ONLY_FIELDS = ("eval_prompts", "skip_eval", "holdout_loss", "eval_checkpoints")
#: Where the nodes meet: read by validate (the launch), not by the plan (changing the port needs no new approval).
RENDEZVOUS_FIELDS = ("main_ip", "main_port")
#: Fields whose default is resolved here from other fields: stored as asked (None when not given, see the docstring).
_RESOLVED_FIELDS = ("captioner", "vllm_url")


class RunRequest(BaseModel):
    """A run's request. Unset optional fields are filled by the plan from the tier and mode."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    dataset: str
    mode: str = "t2v"
    training_mode: Literal["lora", "full"] = "lora"
    strategy: Literal["single", "mixed", "chain"] = "single"
    buckets: str | None = None
    rank: int | None = Field(default=None, ge=2, le=1024)
    steps: int | None = Field(default=None, ge=1, le=10_000_000)
    # Written by the engine, not by hand: the step counts at which a finished training was continued
    # (``run --steps`` raised past them); each is one warm-started stage from the final weights (ltx.recipe).
    continued_from: list[int] = Field(default_factory=list, max_length=1000)
    learning_rate: float | None = Field(default=None, gt=0, le=1.0)
    effective_batch: int = Field(default=1, ge=1, le=4096)
    processes: int | None = Field(default=None, ge=1, le=64)  # training processes per node; default one per GPU
    # Multi-node training: machines, each running `processes`; rank 0 (this machine) hosts the rendezvous
    # at main_ip:main_port, which every other node must reach.
    nodes: int = Field(default=1, ge=1, le=1024)
    main_ip: str | None = None
    main_port: int | None = Field(default=None, ge=1, le=65535)  # default 29500, accelerate's
    checkpoint_interval: int | None = Field(default=None, ge=1)
    validation_interval: int | None = Field(default=None, ge=1)
    trigger: str | None = None
    trainer_root: str | None = None
    # The interpreter of an environment where ltx-trainer is installed (a venv or conda env): the trainer's
    # scripts start with it instead of `uv run`, and uv is then no prerequisite.
    trainer_python: str | None = None
    # off: train with the plan's baseline config as is, no sweep (said in plan.md and autotune.md).
    autotune: Literal["on", "off"] = "on"
    # Autotune trials at once on this machine, each on its own GPU(s) (autotune.slots): 1 one after another,
    # "auto" one per free GPU (capped by the sweep's width).
    autotune_parallel: int | Literal["auto"] = 1
    # Modes that train audio beside video: auto decides from the clips' sound (ltx.audio_choice), on/off force it.
    audio: Literal["auto", "on", "off"] = "auto"
    validation_media: Literal["auto", "without", "none"] = "auto"  # see ltx.validation_sources.CHOICES
    model_path: str | None = None
    text_encoder_path: str | None = None
    backend: str = "ltx"
    surface: str | None = None
    assume_gpu: str | None = None
    nvidia_smi: str | None = None
    accept_risk: bool = False
    # Reference backend only: factor from the toy's measured bytes to GPU-sized figures, so an assumed
    # GPU's capacity applies to it (the demo sets it; see the README).
    reference_memory_scale: float | None = Field(default=None, gt=0)
    headroom: float = Field(default=0.05, ge=0.0, lt=0.5)  # autotune keeps peak VRAM under capacity x (1 - headroom)
    fresh_preprocess: bool = False  # ignore an existing .precomputed and preprocess into the run's own folder
    # Preprocessing ranks under accelerate launch (ltx; preprocessing.processes): None = one per visible GPU (one
    # with no GPU here); a number caps it, or on a CPU starts that many CPU ranks (tests, development).
    preprocess_processes: int | None = Field(default=None, ge=1, le=64)
    # Prepare phase (a folder of clips, one long video, or metadata with captions missing):
    # The captioner asked for, else the backend's (ltx.preparation.default_captioner): resolved here, once, by
    # _resolve_defaults (so never missing, though it may be left out of the values).
    captioner: CaptionerName
    vllm_url: str = DEFAULT_VLLM_URL  # qwen_omni's server (the trainer's documented default unless given)
    holdout: int | None = Field(default=None, ge=0, le=10_000)  # samples held out; default ~10 % from 8 up
    holdout_file: str | None = None  # the user's own holdout rows, used as they are
    # Deprecated and ignored (every video is looked at for cuts; scenes shorter than the smallest bucket are
    # dropped): kept so that run.yaml files naming them still load.
    split_over_s: float = Field(default=30.0, gt=0, le=86_400)
    min_scene_s: float = Field(default=1.0, gt=0, le=3_600)
    # Evaluate phase: out-of-distribution prompts (default: 3 generic ones with the trigger word), or none at all.
    eval_prompts: list[str] = Field(default_factory=list, max_length=20)
    skip_eval: bool = False
    # The trainer's loss on the held-out rows per checkpoint, measured before the renders (where a holdout exists).
    holdout_loss: Literal["on", "off"] = "on"
    # Which checkpoints the evaluation renders (last, best, all or a number; None: the last and the lowest-holdout one).
    eval_checkpoints: str | None = None
    # The Hub repo (owner/name) the trainer uploads the final weights to (ltx.hub); the token stays in the environment.
    push_to_hub: str | None = None
    # Training on a SLURM cluster: the train phase writes <run>/slurm/*.sbatch and submits it (sbatch),
    # with the user's own #SBATCH options (partition, account, time...) passed through verbatim.
    slurm: bool = False
    slurm_args: list[str] = Field(default_factory=list, max_length=50)
    # Your own trainer-config values (run --set KEY=VALUE), applied after the plan's patches (ltx.user_settings).
    config_set: dict[str, Any] = Field(default_factory=dict, max_length=200)

    @field_validator("mode")
    @classmethod
    def _known_mode(cls, value: str) -> str:
        if value not in MODES:
            raise ValueError(f"unknown mode {value!r}; choose one of {', '.join(MODES)}")
        return value

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str) -> str:
        if value not in BACKENDS:
            raise ValueError(f"unknown backend {value!r}; available: {', '.join(BACKENDS)}")
        return value

    @field_validator("model_path", "text_encoder_path", "trainer_root", "trainer_python", "dataset", "surface",
                     "holdout_file")
    @classmethod
    def _local_path(cls, value: str | None) -> str | None:
        if value is not None and URL.match(value.strip()):
            raise ValueError(f"{value!r} is a URL; model and data paths must be local files or folders")
        return value

    @field_validator("buckets")
    @classmethod
    def _buckets_not_blank(cls, value: str | None) -> str | None:
        # An empty --buckets would silently mean "the default": say so instead.
        if value is not None and not value.strip():
            raise ValueError("buckets is empty; leave the option out for the default, or give buckets")
        if value is not None:
            try:  # here, not in the model validator: a bucket error is collected with the other fields'
                parse_buckets(value)
            except BadRequest as exc:
                raise PydanticCustomError("bad_buckets", exc.what.replace("{", "(").replace("}", ")"),
                                          {"fix": exc.fix or ""}) from None
        return value

    @field_validator("trigger")
    @classmethod
    def _clean_trigger(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        if not value or "\n" in value:
            raise ValueError("trigger must be a non-empty single line")
        return value

    @field_validator("eval_checkpoints")
    @classmethod
    def _known_checkpoints(cls, value: str | None) -> str | None:
        return None if value is None else check_choice(value.strip().lower())

    @field_validator("autotune_parallel", mode="before")
    @classmethod
    def _trials_at_once(cls, value: Any) -> int | str:
        text = str(value).strip().lower()
        if text == "auto":
            return "auto"
        if not text.isdigit() or int(text) < 1:
            raise PydanticCustomError("autotune_parallel", "must be auto or a number of trials from 1 up",
                                      {"fix": "give --autotune-parallel auto, or a whole number such as 2"})
        return int(text)

    @field_validator("push_to_hub")
    @classmethod
    def _hub_repo(cls, value: str | None) -> str | None:
        from ltx_pipeline.ltx.hub import repo_id_problem

        if value is None:
            return None
        problem = repo_id_problem(value.strip())
        if problem:
            raise PydanticCustomError("hub_repo", problem.replace("{", "(").replace("}", ")"),
                                      {"fix": "give the repo as owner/name, e.g. your-name/my-ltx2-lora"})
        return value.strip()

    @field_validator("eval_prompts")
    @classmethod
    def _clean_prompts(cls, value: list[str]) -> list[str]:
        cleaned = [" ".join(text.split()) for text in value]
        if any(not text for text in cleaned):
            raise ValueError("an evaluation prompt is empty")
        return cleaned

    @field_validator("slurm_args")
    @classmethod
    def _sbatch_options(cls, value: list[str]) -> list[str]:
        for option in value:
            name = option.split("=", 1)[0]
            if not option.startswith("--") or len(option) < 3 or any(c in option for c in "\n\r\0"):
                raise ValueError(f"{option!r} is not a long #SBATCH option: write it as --name=value "
                                 "(e.g. --partition=gpu), one per --slurm-arg")
            if name in _OWNED_SBATCH:
                raise ValueError(f"{name} is set by ltx-pipeline in the job script ({_OWNED_SBATCH[name]}); "
                                 "leave it out of --slurm-arg")
        return value

    @field_validator("config_set")
    @classmethod
    def _own_settings(cls, value: dict[str, Any]) -> dict[str, Any]:
        from ltx_pipeline.ltx.user_settings import checked_settings

        try:
            return checked_settings(value)
        except BadInput as exc:
            raise PydanticCustomError("config_set", exc.what.replace("{", "(").replace("}", ")"),
                                      {"fix": exc.fix or ""}) from None

    @model_validator(mode="wrap")
    @classmethod
    def _resolve_defaults(cls, data: Any, handler: ModelWrapValidatorHandler[RunRequest]) -> RunRequest:
        """Fill the defaults that depend on other fields; they stay "not given" (``model_fields_set``)."""
        if not isinstance(data, dict):
            return handler(data)
        # `captioner: null` (a hand-edited run.yaml) means the default, exactly as leaving it out does.
        given = {key: value for key, value in data.items() if not (key in _RESOLVED_FIELDS and value is None)}
        backend = given.get("backend", "ltx")
        request = handler({"captioner": default_captioner(None, backend if isinstance(backend, str) else "ltx"),
                           **given})
        request.__pydantic_fields_set__.difference_update(key for key in _RESOLVED_FIELDS if key not in given)
        return request

    @model_serializer(mode="wrap")
    def _as_asked(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        # A resolved default is stored as "not given" (None): run.yaml, the store and the fingerprints keep
        # what they held before it was resolved here, and a re-validated dump resolves it again.
        data: dict[str, Any] = handler(self)
        for key in _RESOLVED_FIELDS:
            if key in data and key not in self.model_fields_set:
                if info.exclude_none:
                    del data[key]
                else:
                    data[key] = None
        return data

    @model_validator(mode="after")
    def _continued_below_steps(self) -> RunRequest:
        points = self.continued_from
        if points and (self.steps is None or any(b <= a for a, b in zip([0, *points], [*points, self.steps],
                                                                          strict=True))):
            raise ValueError(f"continued_from {points} must rise and stay under steps ({self.steps}): it records "
                             "where a finished training was continued; raise steps, or delete continued_from and "
                             f"set steps back to {points[0]} to drop the continuation")
        return self

    @model_validator(mode="after")
    def _audio_applies(self) -> RunRequest:
        from ltx_pipeline.ltx.audio_choice import audio_option_problem

        problem = audio_option_problem(self.mode, self.audio)
        if problem:
            raise PydanticCustomError("audio_mode", problem, {"fix": "leave --audio out (auto) for this mode"})
        return self

    @model_validator(mode="after")
    def _slurm_args_need_slurm(self) -> RunRequest:
        if self.slurm_args and not self.slurm:
            raise ValueError("--slurm-arg applies only with --slurm (slurm: true in run.yaml)")
        return self

    @model_validator(mode="after")
    def _surface_for_simulated(self) -> RunRequest:
        if self.backend == "simulated" and not self.surface:
            raise ValueError("backend 'simulated' needs --surface FILE (a cost surface)")
        if self.surface and self.backend != "simulated":
            raise ValueError("--surface applies only to --backend simulated")
        return self

    @model_validator(mode="after")
    def _nodes_meet(self) -> RunRequest:
        if self.nodes > 1 and self.backend == "simulated":
            raise ValueError("backend 'simulated' runs on one machine; --nodes needs --backend reference or ltx")
        # Under SLURM the job finds its first node itself (scontrol) and passes it to every node-launch.
        if self.nodes > 1 and not self.slurm and not (self.main_ip or "").strip():
            raise PydanticCustomError("main_ip_missing", f"--nodes {self.nodes} needs --main-ip, the address of this "
                                      "(rank-0) machine that the other nodes reach", {"fix": "pass --main-ip IP"})
        return self

    @model_validator(mode="after")
    def _buckets_fit_strategy(self) -> RunRequest:
        stages = self.stages()
        if self.strategy == "single" and len(stages[0]) != 1:
            raise ValueError("strategy 'single' takes exactly one bucket; use --strategy mixed for several")
        if self.strategy == "mixed" and len(stages[0]) < 2:
            raise ValueError("strategy 'mixed' needs at least two buckets; use --strategy single for one")
        if self.strategy == "chain" and len(stages) < 2:
            raise ValueError("strategy 'chain' needs at least two buckets, one per stage")
        return self

    @classmethod
    def field_defaults(cls) -> dict[str, Any]:
        """Each field as a request setting only its dataset dumps it: what an added field reads as (#49)."""
        return {k: v for k, v in cls.model_validate({"dataset": "."}).model_dump(mode="json").items() if k != "dataset"}

    def stages(self) -> list[tuple[Bucket, ...]]:
        """Buckets per training stage: one stage for single/mixed, one bucket per stage for chain."""
        if self.strategy == "chain":
            buckets = parse_buckets(self.buckets) if self.buckets else tuple(b for b, _ in CHAINED_DEFAULT)
            return [(b,) for b in buckets]
        default = DEFAULT_SINGLE_BUCKET if self.strategy == "single" else DEFAULT_MIXED_BUCKETS
        return [parse_buckets(self.buckets or default)]

    def bucket_text(self) -> str:
        return format_buckets([b for stage in self.stages() for b in stage])

    def to_yaml(self) -> str:
        data = self.model_dump(mode="json", exclude_none=True)
        stream = io.StringIO()
        stream.write("# ltx-pipeline run request. Edit and run `ltx-pipeline resume` to change the run.\n")
        yaml.safe_dump(data, stream, sort_keys=False)
        return stream.getvalue()


#: #SBATCH options the job script sets itself, and why (a user's own would break the one-task-per-node launch).
_OWNED_SBATCH = {
    "--nodes": "the run's node count", "--ntasks": "one task per node", "--ntasks-per-node": "one task per node",
    "--output": "the run's slurm/ folder", "--error": "the run's slurm/ folder", "--open-mode": "append, for requeues",
    "--no-requeue": "a requeued job resumes from its checkpoint", "--parsable": "the job id is read from it",
    "--wrap": "the script is the job", "--gpus-per-node": "the plan's processes per node",
}
