"""The runner executes generators only inside a sandbox and names every failure (both backends)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from clawloop.generators.candidates import parse_meta
from clawloop.generators.contract import ContractError
from clawloop.generators.runner import GeneratorError, run_build, run_builds
from clawloop.harness.sandbox.base import SandboxConfig

FIXTURES = Path(__file__).parents[1] / "fixtures" / "generators"

BACKENDS = [
    pytest.param(
        "bwrap", marks=pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bwrap")
    ),
    pytest.param("docker", marks=pytest.mark.docker),
]


def fixture(name: str) -> str:
    return (FIXTURES / f"{name}.py").read_text()


@pytest.fixture(params=BACKENDS)
def sandbox(request: pytest.FixtureRequest) -> SandboxConfig:
    return SandboxConfig(backend=request.param)


def test_parse_meta_reads_literal_without_running() -> None:
    gen = parse_meta(fixture("good"))
    assert gen.meta.capability == "domain_calculation"
    assert gen.title.startswith("Total the honey")
    # Code that would crash or do harm if executed still parses: the host never runs it.
    hostile = 'import os\nos.system("touch /tmp/pwned")\nGENERATOR = {"capability": "x", "domain": "y"}\ndef build(s): ...\ndef solve(w): ...\n'
    assert parse_meta(hostile).meta.domain == "y"


@pytest.mark.parametrize(
    "code, needle",
    [
        ("def build(s): ...\ndef solve(w): ...\n", "no GENERATOR"),
        ('GENERATOR = dict(capability="x")\ndef build(s): ...\ndef solve(w): ...\n', "literal"),
        ('GENERATOR = {"capability": "x", "domain": "y"}\ndef build(s): ...\n', "solve"),
        ("def (:\n", "not valid Python"),
    ],
)
def test_parse_meta_rejects_bad_metadata(code: str, needle: str) -> None:
    with pytest.raises(ContractError, match=needle):
        parse_meta(code)


def test_good_generator_builds_deterministically(sandbox: SandboxConfig) -> None:
    results, _ = run_builds(fixture("good"), 7, sandbox, timeout=20, times=2)
    assert results[0].digest() == results[1].digest()
    assert "harvest.csv" in results[0].files
    assert set(results[0].answer) == {"output/totals.json"}
    other = run_build(fixture("good"), 8, sandbox, timeout=20)
    assert other.digest() != results[0].digest()


def test_nondeterministic_generator_gives_two_digests(sandbox: SandboxConfig) -> None:
    results, _ = run_builds(fixture("nondeterministic"), 7, sandbox, timeout=20, times=2)
    assert results[0].digest() != results[1].digest()


@pytest.mark.parametrize(
    "name, kind, needle",
    [
        ("wrong_shape", "contract", "missing key(s): answer"),
        ("loops_forever", "timeout", "still running after"),
        ("writes_gigabytes", "crash", "File too large"),
        ("network", "crash", "network unreachable"),
        ("fork_bomb", "crash", "Resource temporarily unavailable"),
    ],
)
def test_hostile_generator_gets_a_clear_error(
    sandbox: SandboxConfig, name: str, kind: str, needle: str
) -> None:
    with pytest.raises(GeneratorError) as info:
        run_build(fixture(name), 3, sandbox, timeout=3)
    err = info.value
    assert err.kind == kind, err.message
    assert needle in err.message
    # The message names the generator (title + sha) and the seed.
    assert "Planted:" in err.message and "sha256" in err.message and "seed 3" in err.message


def test_host_files_are_invisible(sandbox: SandboxConfig, tmp_path: Path) -> None:
    secret = tmp_path / "host-secret.txt"
    secret.write_text("s3cr3t-on-the-host")
    code = fixture("reads_host").replace(
        'HOST_PATHS = ("/work", "/home", "/root/.ssh", "/var/lib/docker")',
        f"HOST_PATHS = ({str(secret)!r}, {str(tmp_path)!r}, {str(Path.cwd())!r})",
    )
    assert str(secret) in code
    with pytest.raises(GeneratorError) as info:
        run_build(code, 1, sandbox, timeout=10)
    assert info.value.kind == "crash"
    assert "no host files visible" in info.value.message


def test_fork_bomb_leaves_no_processes(tmp_path: Path) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("no bwrap")
    seed = 424242  # in the driver's argv: tells this test's processes from anyone else's
    with pytest.raises(GeneratorError):
        run_build(fixture("fork_bomb"), seed, SandboxConfig(backend="bwrap"), timeout=5)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert f"generator.py {seed} " not in ps


def test_generator_output_is_not_run_on_host(tmp_path: Path) -> None:
    """build() runs in the sandbox: a file it writes under the host's tmp_path never appears."""
    if shutil.which("bwrap") is None:
        pytest.skip("no bwrap")
    marker = tmp_path / "ran-on-host"
    code = fixture("good").replace(
        "def build(seed):\n", f"def build(seed):\n    open({str(marker)!r}, 'w').close()\n", 1
    )
    with pytest.raises(GeneratorError):
        run_build(code, 1, SandboxConfig(backend="bwrap"), timeout=10)
    assert not os.path.exists(marker)


# ---- the host's piecewise compile (runner.compiled): the module, not an approximation of it ----

TRICKY = '''"""Module docstring."""
from __future__ import annotations

import functools

TEXT = "def not_a_function(): pass"


def deco(f):
    return functools.wraps(f)(lambda *a: ("decorated", f(*a)))


@deco
def decorated(x: Undefined) -> int:
    return x + 1


class Thing:
    def boom(self):
        raise ValueError("line 20")


def annotations_are_strings():
    return decorated.__wrapped__.__annotations__
'''


def _run(pieces) -> dict:
    from clawloop.generators.runner import run_pieces

    ns: dict = {"__name__": "generator"}
    run_pieces(pieces, ns)
    return ns


def test_compiled_pieces_run_as_the_whole_module() -> None:
    import traceback

    from clawloop.generators.candidates import source_pieces
    from clawloop.generators.runner import GENERATOR_FILE, compiled

    pieces = compiled(TRICKY.encode())
    # The head, then `def deco`, the decorator with the def it decorates, `class`, a def.
    assert pieces is not None and len(pieces) == 5 == len(source_pieces(TRICKY.encode()))
    ns = _run(pieces)
    assert ns["__doc__"] == "Module docstring."
    assert ns["TEXT"].startswith("def") and "not_a_function" not in ns
    assert ns["decorated"](1) == ("decorated", 2)
    # `from __future__ import annotations` in the head holds in every piece.
    assert ns["annotations_are_strings"]() == {"x": "Undefined", "return": "int"}
    with pytest.raises(ValueError) as err:
        ns["Thing"]().boom()
    frame = traceback.extract_tb(err.value.__traceback__)[-1]
    assert (frame.filename, frame.lineno) == (GENERATOR_FILE, 20)
    assert TRICKY.splitlines()[19].strip() == 'raise ValueError("line 20")'


def test_a_split_inside_a_string_or_brackets_compiles_the_whole_source() -> None:
    from clawloop.generators.runner import compiled

    # A line opening with "def" inside a string: that piece does not compile, the whole does.
    assert (
        len(compiled(b'X = """\ndef inside():\n    pass\n"""\n\n\ndef f():\n    return X\n')) == 1
    )
    for src in (
        'X = """\ndef inside():\n    pass\n"""\n',
        "X = [\n1,\n]\nY = (\n\ndef\n)\n",  # not Python at all: None, compiled nowhere
        "CALL = dict(\na=1,\n)\n\n\ndef f():\n    return CALL\n",
    ):
        pieces = compiled(src.encode())
        if "def\n)" in src:
            assert pieces is None
            continue
        assert pieces is not None
        ns = _run(pieces)
        assert ("X" in ns) or ns["f"]() == {"a": 1}


def test_every_builtin_generator_compiles_piecewise_to_the_same_tasks() -> None:
    from clawloop.generators.runner import compiled
    from clawloop.synthesis.library import capabilities, render_generator

    for cap in capabilities():
        src = render_generator(cap, "bird_banding", 3, 3, "json")
        pieces = compiled(src.encode())
        assert pieces is not None and len(pieces) > 20
        whole: dict = {"__name__": "generator"}
        exec(compile(src, "generator.py", "exec"), whole)
        assert _run(pieces)["build"](5) == whole["build"](5), cap


def test_parse_meta_piece_by_piece_reads_what_the_whole_parse_reads() -> None:
    from clawloop.generators.candidates import _module

    src = fixture("good")
    assert [type(n).__name__ for n in _module(src).body] == [
        type(n).__name__ for n in ast.parse(src).body
    ]
    # `def build` only inside a string: that piece does not parse alone, the whole source is
    # parsed, and the generator still lacks build().
    hidden = src.replace("def build(seed):", 'DOC = """\ndef build(seed):\n"""\n\n\ndef _b(seed):')
    with pytest.raises(ContractError, match=r"does not define build\(\)"):
        parse_meta(hidden)
    with pytest.raises(ContractError, match="not valid Python"):
        parse_meta(src + "\ndef broken(:\n")
