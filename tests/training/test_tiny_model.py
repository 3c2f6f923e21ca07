"""The tiny offline model: loadable by transformers, renders tool calls, cached by recipe."""

from __future__ import annotations

import json

from clawloop.training.tiny_model import TinyRecipe, build_tiny_model, recipe_hash


def test_tiny_model_loads_and_renders_tools(tiny_model_dir, tiny_tokenizer):
    from doubles.episodes import TOOLS, tool_messages
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


def test_cache_dir_follows_clawloop_cache(monkeypatch, tmp_path):
    from clawloop.training.tiny_model import default_cache_dir

    monkeypatch.setenv("CLAWLOOP_CACHE", str(tmp_path / "c"))
    assert default_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("CLAWLOOP_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "clawloop"


def _fake_writer(monkeypatch, hook=None):
    """Replace the (seconds-long) model write with one file naming the writing thread."""
    import threading

    import clawloop.training.tiny_model as tm

    def write(dest, recipe):
        (dest / "who.txt").write_text(threading.current_thread().name)
        if hook is not None:
            hook(dest)

    monkeypatch.setattr(tm, "_write_model", write)
    return tm


def test_concurrent_builds_agree_on_one_folder(monkeypatch, tmp_path):
    import threading

    barrier = threading.Barrier(2)
    # Both builds finish writing before either renames: one rename wins, the other must use it.
    tm = _fake_writer(monkeypatch, hook=lambda dest: barrier.wait(timeout=30))
    out = tmp_path / "models" / "tiny"
    got: list = []
    threads = [
        threading.Thread(target=lambda: got.append(tm.build_tiny_model(out)), name=f"b{i}")
        for i in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == [out, out]
    assert (out / "who.txt").read_text() in ("b0", "b1")
    assert json.loads((out / tm.RECIPE_FILE).read_text())["sha256"] == recipe_hash(TinyRecipe())
    assert [p.name for p in out.parent.iterdir()] == ["tiny"]  # the loser's build is gone


def test_a_folder_built_by_another_process_meanwhile_is_used_not_replaced(monkeypatch, tmp_path):
    out = tmp_path / "tiny"

    def other_process_wins(dest):
        out.mkdir()
        (out / "who.txt").write_text("other")
        digest = recipe_hash(TinyRecipe())
        (out / "clawloop_recipe.json").write_text(json.dumps({"sha256": digest}))

    tm = _fake_writer(monkeypatch, hook=other_process_wins)
    assert tm.build_tiny_model(out) == out
    assert (out / "who.txt").read_text() == "other"
    assert [p.name for p in tmp_path.iterdir()] == ["tiny"]


def test_a_foreign_target_is_refused_and_left_alone(monkeypatch, tmp_path):
    import pytest

    tm = _fake_writer(monkeypatch)
    out = tmp_path / "tiny"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="remove it"):
        tm.build_tiny_model(out)
    assert (out / "keep.txt").read_text() == "mine"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert tm.build_tiny_model(empty) == empty and (empty / "who.txt").is_file()
