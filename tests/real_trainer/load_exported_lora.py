"""Run with the trainer's python: load an exported LoRA with the trainer's own loader and with ltx-core's.

``python load_exported_lora.py FOLDER WEIGHTS_NAME`` (the export's folder; its training_config.yaml names the
base model). 1) The trainer's path: the transformer from ``ltx_trainer.model_loader.load_transformer``, LoRA
layers added by ``LtxvTrainer._setup_lora`` and the file loaded by ``LtxvTrainer._load_lora_checkpoint``, the
trainer's own methods on a holder of the two attributes they use; every LoRA parameter must then equal the
file's tensor. 2) ltx-core's ``SingleGPUModelBuilder.lora`` with ``LTXV_LORA_COMFY_RENAMING_MAP`` (what the model
card shows): the weights of every adapted module must differ from the base's. Prints one JSON line.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import torch
import yaml
from ltx_core.loader import LTXV_LORA_COMFY_RENAMING_MAP, SingleGPUModelBuilder
from ltx_core.model.transformer.model_configurator import LTXV_MODEL_COMFY_RENAMING_MAP, LTXModelConfigurator
from ltx_trainer.config import LtxTrainerConfig
from ltx_trainer.model_loader import load_transformer
from ltx_trainer.trainer import LtxvTrainer
from peft import get_peft_model_state_dict
from safetensors.torch import load_file


def main(folder: Path, name: str) -> dict[str, object]:
    config = LtxTrainerConfig(**yaml.unsafe_load((folder / "training_config.yaml").read_text()))
    weights = folder / name
    saved = load_file(str(weights))
    holder = types.SimpleNamespace(_config=config, _transformer=load_transformer(config.model.model_path,
                                                                                 dtype=torch.float32))
    LtxvTrainer._setup_lora(holder)  # type: ignore[arg-type]
    LtxvTrainer._load_lora_checkpoint(holder, weights)  # type: ignore[arg-type]
    loaded = get_peft_model_state_dict(holder._transformer)
    loaded = {f"diffusion_model.{k.replace('base_model.model.', '', 1)}": v for k, v in loaded.items()}
    assert loaded.keys() == saved.keys(), sorted(set(loaded) ^ set(saved))[:5]
    equal = sum(torch.equal(loaded[k].to(saved[k].dtype), saved[k]) for k in saved)

    builder = SingleGPUModelBuilder(model_path=config.model.model_path, model_class_configurator=LTXModelConfigurator,
                                    model_sd_ops=LTXV_MODEL_COMFY_RENAMING_MAP)
    # bf16, the dtype ltx-core fuses in: a weight no LoRA touches comes out bit for bit as the base's.
    base = builder.build(device=torch.device("cpu"), dtype=torch.bfloat16).state_dict()
    fused = builder.lora(str(weights), 1.0, LTXV_LORA_COMFY_RENAMING_MAP).build(device=torch.device("cpu"),
                                                                               dtype=torch.bfloat16).state_dict()
    modules = {k[len("diffusion_model."):-len(".lora_A.weight")] for k in saved if k.endswith(".lora_A.weight")}
    changed = sum(not torch.equal(base[f"{m}.weight"], fused[f"{m}.weight"]) for m in modules)
    others = sum(not torch.equal(base[k], fused[k]) for k in base if k[: -len(".weight")] not in modules)
    return {"tensors": len(saved), "equal_after_trainer_load": equal, "modules": len(modules),
            "changed_by_ltx_core": changed, "others_changed": others}


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]), sys.argv[2])))
