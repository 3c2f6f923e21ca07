"""Training test data: the tool schemas, multi-turn tool conversations, their sampled texts,
TRAJECTORIES-shaped episode rows and band frames (`from doubles.episodes import ...`)."""

from __future__ import annotations

import json

import pandas as pd

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command in /workspace.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]


def tool_messages(variant: int = 0) -> list[dict]:
    """system, user, assistant+tool_call, tool output, assistant+tool_call, tool, assistant text."""
    call = lambda cid, cmd: {  # noqa: E731
        "id": cid,
        "type": "function",
        "function": {"name": "bash", "arguments": json.dumps({"command": cmd})},
    }
    return [
        {"role": "system", "content": "You are a careful agent."},
        {
            "role": "user",
            "content": f"Sum the weights in data/hives.csv into output/total.json ({variant}).",
        },
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [call("c1", "cat data/hives.csv")],
        },
        {"role": "tool", "tool_call_id": "c1", "content": f"hive,weight\nA,{10 + variant}\nB,32\n"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [call("c2", "echo '{\"total\": 42}' > output/total.json")],
        },
        {"role": "tool", "tool_call_id": "c2", "content": ""},
        {"role": "assistant", "content": f"Done: total is {42 + variant}."},
    ]


def sampled_texts(messages: list[dict]) -> list[str]:
    """What a model writing hermes tool calls in its text sampled for each assistant message (the
    agent keeps the prose as content and the calls as tool_calls; the record keeps this text)."""
    out = []
    for m in messages:
        if m["role"] != "assistant":
            continue
        blocks = [
            f'<tool_call>\n{{"name": "{c["function"]["name"]}", '
            f'"arguments": {c["function"]["arguments"]}}}\n</tool_call>'
            for c in m.get("tool_calls") or []
        ]
        out.append("\n".join(([m["content"]] if m["content"] else []) + blocks))
    return out


def text_turns(messages: list[dict], **extra) -> list[dict]:
    """Turn records as the agent writes them for a server without token ids (transformers
    serve) whose tool calls the agent parsed out of the text."""
    return [
        {
            "prompt_token_ids": None,
            "completion_token_ids": None,
            "logprobs": None,
            "needs_retokenize": True,
            "finish_reason": "stop",
            "tool_calls_from_text": "<tool_call>" in text,
            "raw_content": text,
            "reasoning_content": None,
            "tool_calls_native": False,
            **extra,
        }
        for text in sampled_texts(messages)
    ]


def episode_row(task_id: str, attempt: int, reward: float, variant: int = 0, **extra) -> dict:
    row = {
        "episode_id": f"{task_id}-{attempt}",
        "task_id": task_id,
        "capability": "reconciliation",
        "split": "train",
        "attempt": attempt,
        "policy_id": "tiny",
        "messages_json": json.dumps(tool_messages(variant)),
        "tools_json": json.dumps(TOOLS),
        "turns_json": json.dumps(text_turns(tool_messages(variant))),
        "reward": reward,
        "passed": reward >= 1.0,
        "checks_json": "{}",
        "end_reason": "finished",
        "n_turns": 3,
        "n_tool_calls": 2,
        "duration_s": 1.0,
        "error": "",
    }
    row.update(extra)
    return row


def band_frame(task_ids: list[str], kept: list[bool]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "task_id": task_ids,
            "capability": ["reconciliation"] * len(task_ids),
            "n": [4] * len(task_ids),
            "passes": [2] * len(task_ids),
            "kept": kept,
            "reason": ["in band" if k else "out of band" for k in kept],
        }
    )
