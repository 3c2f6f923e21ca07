"""The tool-call parser on the forms real models write: hermes tags, fenced JSON, bare objects,
lists; arguments as objects or JSON strings; Python-quoted content; junk rejected clearly, and
data objects (a file's JSON a model shows) never read as calls."""

from __future__ import annotations

import json

import pytest

from clawloop.harness.toolcalls import (
    CALL_FORMAT,
    FORMAT_HINT,
    balanced_end,
    is_call_shaped,
    native_tool_call,
    parse_tool_calls,
)

ECHO = {"path": "output/answer.json", "content": '{"word": "violet"}'}
ECHO_JSON = json.dumps({"name": "write_file", "arguments": ECHO})


def _calls(text: str) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in parse_tool_calls(text).calls]


# -- hermes tags (what the agent read before) ---------------------------------------------------
def test_hermes_blocks_are_read_and_bad_ones_reported():
    text = (
        'thinking\n<tool_call>\n{"name": "run_shell", "arguments": {"command": "ls"}}\n</tool_call>\n'
        '<tool_call>{"name": "finish", "arguments": {}</tool_call>\n'
        '<tool_call>{"arguments": {}}</tool_call>\n'
        '<tool_call>{"name": "read_file", "arguments": {"path": "a.txt"}}'  # cut at max_tokens
    )
    parsed = parse_tool_calls(text)
    assert _calls(text) == [("run_shell", {"command": "ls"}), ("read_file", {"path": "a.txt"})]
    assert len(parsed.errors) == 2
    assert "not valid JSON" in parsed.errors[0] and "'name'" in parsed.errors[1]
    assert parsed.content == "thinking" and parsed.forms == ("hermes",)


def test_hermes_body_may_hold_a_fence_a_list_or_string_arguments():
    text = (
        '<tool_call>\n```json\n{"name": "list_dir", "arguments": {}}\n```\n</tool_call>'
        '<tool_call>[{"name": "read_file", "arguments": "{\\"path\\": \\"a\\"}"}, '
        '{"name": "finish", "parameters": {"summary": "x"}}]</tool_call>'
    )
    assert _calls(text) == [
        ("list_dir", {}),
        ("read_file", {"path": "a"}),
        ("finish", {"summary": "x"}),
    ]


def test_tags_win_over_other_forms_so_prose_is_never_run():
    text = (
        'Example: {"name": "run_shell", "arguments": {"command": "rm -rf x"}}\n'
        '<tool_call>{"name": "list_dir", "arguments": {}}</tool_call>'
    )
    assert _calls(text) == [("list_dir", {})]


# -- markdown code fences (Qwen2.5-Coder's form) --------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [
        f"```json\n{ECHO_JSON}\n```",
        f"```\n{ECHO_JSON}\n```",
        f"```{ECHO_JSON}```",  # one line, as environment.md shows it
        f"```json {ECHO_JSON}```",
        f"To write the answer I will use write_file:\n\n```json\n{ECHO_JSON}\n```\n\nThen finish.",
        f"```json\n{json.dumps({'name': 'write_file', 'arguments': json.dumps(ECHO)})}\n```",
    ],
)
def test_a_fenced_call_is_read(text):
    parsed = parse_tool_calls(text)
    assert [(c.name, c.arguments) for c in parsed.calls] == [("write_file", ECHO)]
    assert parsed.errors == () and parsed.forms == ("fenced",)
    assert "```" not in parsed.content and 'write_file"' not in parsed.content


def test_fenced_calls_in_several_blocks_and_a_list_keep_their_order_and_the_prose():
    text = (
        "First the answer.\n```json\n" + ECHO_JSON + "\n```\nNow I am done.\n"
        '```json\n[{"name": "read_file", "arguments": {"path": "output/answer.json"}},\n'
        ' {"name": "finish", "arguments": {"summary": "wrote violet"}}]\n```'
    )
    parsed = parse_tool_calls(text)
    assert [c.name for c in parsed.calls] == ["write_file", "read_file", "finish"]
    assert [c.id for c in parsed.calls] == ["call_text_0", "call_text_1", "call_text_2"]
    assert parsed.content == "First the answer.\n\nNow I am done."


def test_a_code_block_that_is_data_or_code_is_prose_not_a_call():
    text = (
        'The file should hold:\n```json\n{"word": "violet"}\n```\n'
        '```python\nimport json\nprint(json.dumps({"name": "x", "age": 3}))\n```'
    )
    parsed = parse_tool_calls(text)
    assert parsed.calls == () and parsed.errors == ()
    assert parsed.content == text.strip()


# -- bare objects --------------------------------------------------------------------------------
def test_bare_objects_and_lists_in_prose_are_read():
    text = (
        'I will list the files. {"name": "list_dir", "arguments": {"path": "."}} and then '
        '[{"name": "finish", "arguments": {"summary": "done {ok}"}}]'
    )
    parsed = parse_tool_calls(text)
    assert _calls(text) == [("list_dir", {"path": "."}), ("finish", {"summary": "done {ok}"})]
    assert parsed.forms == ("bare",) and parsed.content == "I will list the files.  and then"


def test_the_openai_wrapper_shape_is_unwrapped():
    text = json.dumps(
        {"type": "function", "function": {"name": "finish", "arguments": '{"summary": "s"}'}}
    )
    assert _calls(text) == [("finish", {"summary": "s"})]


def test_a_stray_bracket_does_not_hide_a_later_call():
    text = 'Use ${HOME or { as you like.\n{"name": "finish", "arguments": {}}'
    assert _calls(text) == [("finish", {})]


@pytest.mark.parametrize(
    "text",
    [
        "I think the task is done.",
        'The answer file holds {"word": "violet"}.',
        '{"name": "Ann", "age": 3}',  # data with a name field
        '[{"name": "Ann", "age": 3}]',
        "See [1] and [docs](x) and {x}.",
        "",
    ],
)
def test_prose_and_data_are_no_call_and_no_error(text):
    parsed = parse_tool_calls(text)
    assert parsed.calls == () and parsed.errors == ()


# -- what small models get wrong -------------------------------------------------------------------
def test_python_quoted_content_is_read_as_a_literal_and_marked_repaired():
    # the 1.5B model's write_file in environment.md: the file's JSON quoted Python-style
    text = (
        "```json\n"
        '{"name": "write_file", "arguments": {"path": "output/answer.json", '
        '"content": \'{"word": "violet"}\'}}\n```'
    )
    parsed = parse_tool_calls(text)
    assert [(c.name, c.arguments) for c in parsed.calls] == [("write_file", ECHO)]
    assert parsed.calls[0].repaired and parsed.errors == ()


def test_an_unreadable_call_is_an_error_naming_what_is_wrong():
    text = '```json\n{"name": "write_file", "arguments": {"path": "a", "content": "x" + y}}\n```'
    parsed = parse_tool_calls(text)
    assert parsed.calls == ()
    assert len(parsed.errors) == 1 and "not valid JSON" in parsed.errors[0]
    assert "code block #1" in parsed.errors[0] and '"write_file"' in parsed.errors[0]


def test_a_call_cut_at_max_tokens_is_an_error():
    text = '```json\n{"name": "write_file", "arguments": {"path": "a", "content": "lo'
    parsed = parse_tool_calls(text)
    assert parsed.calls == () and len(parsed.errors) == 1
    assert "never closed" in parsed.errors[0]


@pytest.mark.parametrize(
    "args,msg",
    [('"not json"', "not a JSON object"), ("[1, 2]", "must be an object"), ("3", "must be")],
)
def test_bad_arguments_are_errors(args, msg):
    text = f'{{"name": "finish", "arguments": {args}}}'
    parsed = parse_tool_calls(text)
    assert parsed.calls == () and len(parsed.errors) == 1 and msg in parsed.errors[0]


# -- pieces ------------------------------------------------------------------------------------------
def test_balanced_end_skips_brackets_inside_both_quote_styles():
    text = """{"a": "}", 'b': '{', "c": [1, {"d": "\\"}"}]} tail"""
    assert text[: balanced_end(text, 0)].endswith("]}")
    assert balanced_end('{"a": [1}', 0) is None and balanced_end('{"a": "x', 0) is None


def test_call_shape_needs_a_name_and_arguments_or_only_call_keys():
    assert is_call_shaped({"name": "finish"})
    assert is_call_shaped({"name": "x", "arguments": {}, "thought": "why"})
    assert not is_call_shaped({"name": "Ann", "age": 3})
    assert not is_call_shaped({"name": "", "arguments": {}})
    assert not is_call_shaped({"arguments": {}})


def test_native_shape_and_the_format_hint_round_trip():
    call = parse_tool_calls(CALL_FORMAT).calls[0]
    native = native_tool_call(call, "c1")
    assert native["function"]["name"] == "write_file"
    assert json.loads(native["function"]["arguments"]) == call.arguments
    assert CALL_FORMAT in FORMAT_HINT


# -- replies Qwen2.5-Coder-0.5B-Instruct really sampled on the echo task (local server, T=1) ------
QWEN_05B_BROKEN = (
    '```json\n{\n"name": "write_file",\n"arguments": {\n"path": "/workspace/output/answer.json",\n'
    '"content": "violet\\n violet\\n"wonderful\\nviolet"\n}\n}\nfinish({\n"summary": "Violet is '
    'written to the correct path."\n})\n```'
)


def test_qwen_05b_broken_fenced_call_is_one_clear_error_and_nothing_runs():
    parsed = parse_tool_calls(QWEN_05B_BROKEN)
    assert parsed.calls == ()  # neither the broken write_file nor the Python-style finish(...)
    assert len(parsed.errors) == 1
    assert "code block #1" in parsed.errors[0] and "not valid JSON" in parsed.errors[0]


def test_qwen_05b_three_objects_in_one_fence_are_three_calls_in_order():
    text = (
        '```json\n{\n  "name": "read_file",\n  "arguments": {\n    "path": '
        '"/workspace/output/answer.json"\n  }\n}\n{"name": "write_file",\n  "arguments": {\n    '
        '"path": "/workspace/output/answer.json",\n    "content": "Violet"\n  }\n}\n{"name": '
        '"finish",\n  "arguments": {\n    "summary": "Violet was written to the file."\n  }\n}\n```'
    )
    parsed = parse_tool_calls(text)
    assert [c.name for c in parsed.calls] == ["read_file", "write_file", "finish"]
    assert parsed.errors == () and parsed.content == ""


def test_qwen_05b_bare_call_then_python_style_finish_runs_the_call_keeps_the_rest_as_prose():
    text = (
        '{\n"name": "write_file",\n"arguments": {\n"path": "/workspace/output/answer.json",\n'
        '"content": "Violet"\n}}\nfinish({"word": "violet"})'
    )
    parsed = parse_tool_calls(text)
    assert [(c.name, c.form) for c in parsed.calls] == [("write_file", "bare")]
    assert parsed.errors == () and parsed.content == 'finish({"word": "violet"})'
