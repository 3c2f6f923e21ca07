"""The tiny offline model: loadable by transformers, renders tool calls, cached by recipe."""

from __future__ import annotations

import json

from training.tiny_model import TinyRecipe, build_tiny_model, recipe_hash


def test_tiny_model_loads_and_renders_tools(tiny_model_dir, tiny_tokenizer):
    from conftest import TOOLS, tool_messages
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_dir))
    cfg = model.config
    assert cfg.model_type == "qwen3" and cfg.head_dim == 64 and cfg.num_hidden_layers == 2
    assert cfg.vocab_size == len(tiny_tokenizer)
    assert tiny_tokenizer.eos_token == "<|im_end|>"
    for tok in ("<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>"):
        assert len(tiny_tokenizer(tok, add_special_tokens=False)["input_ids"]) == 1, tok
    text = tiny_tokenizer.apply_chat_template(tool_messages(), tools=TOOLS, tokenize=False)
    assert (
        '<tool_call>\n{"name": "bash", "arguments": {"command": "cat data/hives.csv"}}\n</tool_call>'
        in text
    )
    assert (
        "<tool_response>\nhive,weight" in text and '"name": "bash"' in text.split("\n</tools>")[0]
    )
    ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tiny_tokenizer.decode(ids) == text  # byte-level BPE round-trips exactly
    gen = json.loads((tiny_model_dir / "generation_config.json").read_text())
    assert tiny_tokenizer.convert_tokens_to_ids("<|im_end|>") in gen["eos_token_id"]


def test_build_is_cached_by_recipe(tiny_model_dir):
    weights = tiny_model_dir / "model.safetensors"
    before = weights.stat().st_mtime_ns
    assert build_tiny_model(tiny_model_dir) == tiny_model_dir
    assert weights.stat().st_mtime_ns == before  # reused, not rebuilt
    assert recipe_hash(TinyRecipe(seed=0)) != recipe_hash(TinyRecipe(seed=1))
