"""The harness prompts: the system prompt (workspace, tools, how to work) and the task message.

In the OpenClaw spirit the agent is told where it is (a sandbox, cwd /workspace, no network), what
it may use (the tools), and how an episode ends (call `finish`). The task's own text — instruction
plus answer contract, as written to instruction.md by the forge — goes in the first user message
unchanged, so the contract the verifier grades against is exactly what the agent read.
"""

from __future__ import annotations

SYSTEM_PROMPT = """\
You are an agent working inside a sandboxed Linux machine with a shell and a file system.

Environment
- Your working directory is /workspace. The task's input files are there; write your outputs there,
  at exactly the paths the task's contract names.
- There is no network. Python 3 and the usual command-line tools are available.
- Nobody will answer questions: decide from the task text and the files.

Tools
- run_shell(command, timeout?): run a bash command in /workspace.
- read_file(path), write_file(path, content), edit_file(path, old_string, new_string),
  list_dir(path?): work with files; relative paths are under /workspace.
- finish(summary): call once the outputs are written. The episode ends and your outputs are graded.

How to work
- Look at the files before you write code. Follow every rule in the contract (filters, rounding,
  tie-breaks, column names and order, output format) exactly.
- Check your outputs (open them, count rows) before calling finish.
- Call exactly the tools you need; one step at a time is fine.
"""


def system_prompt() -> str:
    return SYSTEM_PROMPT


def task_message(instruction: str) -> str:
    """The first user message: the task's instruction.md (instruction + contract) as is."""
    text = instruction.strip()
    if not text:
        raise ValueError("empty instruction: the task folder's instruction.md has no text")
    return f"{text}\n\nWhen the outputs are written, call finish."


def initial_messages(instruction: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": system_prompt()},
        {"role": "user", "content": task_message(instruction)},
    ]
