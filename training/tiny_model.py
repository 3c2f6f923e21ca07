"""A tiny Qwen3-architecture chat model built offline, for tests and the local CPU profile.

No weights can be downloaded on the machines this project runs on, yet every stage that touches a
policy (serving, rollout, SFT, GRPO) must run end to end. This module makes such a policy from
nothing: a byte-level BPE tokenizer trained with `tokenizers` on a small embedded corpus of shell
commands, JSON and tool-call text; TRL's copy of the Qwen3 chat template (renders tools, tool calls
and tool responses); a randomly initialised 2-layer Qwen3 config. The folder loads with
`AutoModelForCausalLM` / `AutoTokenizer` and serves with `transformers serve` (tool calls are parsed
by model type `qwen3`).

The build is deterministic in its recipe (corpus, sizes, template, seed), and cached by a hash of
that recipe, so `ensure_tiny_model()` costs a directory lookup after the first call. The cache is
$CLAWLOOP_CACHE/models (default ~/.cache/clawloop/models; see `default_cache_dir`).

    python -m training.tiny_model OUT_DIR        # build (or reuse) and print the folder
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

RECIPE_VERSION = 1  # bump when the build code changes in a way the recipe fields do not show
RECIPE_FILE = "clawloop_recipe.json"

# Special tokens are never split and are stripped by `skip_special_tokens`; the Qwen3 tool tags are
# plain added tokens (as in Qwen3) so a decoded completion still shows them to the tool-call parser.
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED_TOKENS = [
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
    "<tools>",
    "</tools>",
]


@dataclass(frozen=True)
class TinyRecipe:
    """Everything that decides the built folder's bytes; its hash names the cache entry."""

    vocab_size: int = 2048
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    num_key_value_heads: int = 1
    head_dim: int = 64  # vLLM rejects head_dim 16; 64 is the smallest size every backend accepts
    max_position_embeddings: int = 8192
    seed: int = 0
    version: int = RECIPE_VERSION


class TinyModelError(RuntimeError):
    """The tiny model could not be built (missing chat template, unwritable folder)."""


def chat_template_text() -> str:
    """TRL's copy of the Qwen3 chat template, read from the installed `trl` package."""
    import trl

    path = Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja"
    if not path.is_file():
        raise TinyModelError(
            f"chat template not found at {path}: install a trl version that ships "
            "trl/chat_templates/qwen3.jinja (trl>=0.23)"
        )
    return path.read_text()


# The corpus's vocabulary: names and words from task data, shell commands, the agent's tools.
_WORDS = [
    "hive", "weight", "apiary", "log", "trail", "segment", "contact", "callsign", "report",
    "output", "input", "data", "csv", "json", "total", "count", "mean", "sum", "date", "id",
    "name", "status", "value", "unit", "kg", "lb", "km", "mile", "retired", "active", "error",
    "workspace", "file", "line", "column", "row", "key", "field", "record", "index", "detail",
    "source", "merge", "audit", "check", "the", "a", "of", "to", "and", "in", "is", "for",
    "with", "on", "that", "this", "from", "by", "are", "be", "or", "as", "at",
]  # fmt: skip
_DIRS = ["data", "logs", "input", "/workspace", "sources", "output"]
_COMMANDS = [
    "ls -la {d}",
    "cat {d}/{f}.csv",
    "head -n {n} {d}/{f}.json",
    "grep -rn '{w}' {d}",
    "wc -l {d}/{f}.csv",
    "mkdir -p output && python3 -c 'import json; print({n})'",
    "python3 solve.py --input {d}/{f}.csv --output output/{f}.json",
    "find {d} -name '*.csv' | sort",
    "sed -n '1,{n}p' {d}/{f}.txt",
    "awk -F, '{{s+=${n}}} END {{print s}}' {d}/{f}.csv",
    "jq '.{w}' {d}/{f}.json",
    "echo '{w},{n}' >> output/{f}.csv",
]
_TOOLS = ["bash", "read_file", "write_file", "list_dir", "submit"]
_CORPUS_ROUNDS = 600
# The chat-template framing the tokenizer must see whole.
_CHAT_TEXTS = [
    "<|im_start|>system\nYou are a careful agent.<|im_end|>\n",
    "<|im_start|>user\nWrite output/report.csv.<|im_end|>\n<|im_start|>assistant\n",
    "<think>\n\n</think>\n\n",
]


def _corpus_round(rng: random.Random) -> list[str]:
    """One round of the corpus: a command, a JSON record, a tool call and its response, prose
    and CSV lines, all drawn from the same few random choices."""
    d = rng.choice(_DIRS)
    f = rng.choice(_WORDS)
    w = rng.choice(_WORDS)
    n = rng.randint(0, 500)
    cmd = rng.choice(_COMMANDS).format(d=d, f=f, w=w, n=n)
    record = {rng.choice(_WORDS): rng.choice([n, w, n / 7.0, True, None]) for _ in range(3)}
    name = rng.choice(_TOOLS)
    args = json.dumps({"command": cmd} if name == "bash" else {"path": f"{d}/{f}.csv"})
    return [
        cmd,
        json.dumps(record),
        f'<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>',
        f"<tool_response>\n{w},{n}\n{f},{n + 1}\n</tool_response>",
        " ".join(rng.choice(_WORDS) for _ in range(12)) + ".",
        f"{f},{w},{n}\n{w},{f},{n * 2}",
    ]


def _corpus(seed: int) -> list[str]:
    """Shell, JSON and tool-call text in the shapes the agent reads and writes."""
    rng = random.Random(seed)
    texts: list[str] = []
    for _ in range(_CORPUS_ROUNDS):
        texts += _corpus_round(rng)
    return texts + list(_CHAT_TEXTS)


def _train_tokenizer(recipe: TinyRecipe):
    """A byte-level BPE `tokenizers.Tokenizer` trained on the embedded corpus."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=recipe.vocab_size - len(SPECIAL_TOKENS) - len(ADDED_TOKENS),
        min_frequency=2,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
        special_tokens=[],
    )
    tok.train_from_iterator(_corpus(recipe.seed), trainer=trainer)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in ADDED_TOKENS])
    return tok


def recipe_hash(recipe: TinyRecipe) -> str:
    """sha256 over the recipe fields, the corpus and the chat template: the cache key."""
    h = hashlib.sha256()
    h.update(json.dumps(asdict(recipe), sort_keys=True).encode())
    h.update("\n".join(_corpus(recipe.seed)).encode())
    h.update(chat_template_text().encode())
    return h.hexdigest()


def _is_built(out_dir: Path, digest: str) -> bool:
    marker = out_dir / RECIPE_FILE
    if not marker.is_file():
        return False
    try:
        return json.loads(marker.read_text()).get("sha256") == digest
    except (OSError, json.JSONDecodeError):
        return False


def _write_model(dest: Path, recipe: TinyRecipe) -> None:
    import torch
    from transformers import (
        GenerationConfig,
        PreTrainedTokenizerFast,
        Qwen3Config,
        Qwen3ForCausalLM,
    )

    raw = _train_tokenizer(recipe)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=raw,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        bos_token=None,
        unk_token=None,
        model_max_length=recipe.max_position_embeddings,
        clean_up_tokenization_spaces=False,
    )
    tokenizer.chat_template = chat_template_text()
    vocab = len(tokenizer)
    config = Qwen3Config(
        vocab_size=vocab,
        hidden_size=recipe.hidden_size,
        intermediate_size=recipe.intermediate_size,
        num_hidden_layers=recipe.num_hidden_layers,
        num_attention_heads=recipe.num_attention_heads,
        num_key_value_heads=recipe.num_key_value_heads,
        head_dim=recipe.head_dim,
        max_position_embeddings=recipe.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|endoftext|>"),
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(recipe.seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=config.bos_token_id,
        eos_token_id=[config.eos_token_id, tokenizer.pad_token_id],
        pad_token_id=tokenizer.pad_token_id,
        do_sample=True,
        temperature=1.0,
    )
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)


def default_cache_dir() -> Path:
    """Where clawloop caches what it builds: $CLAWLOOP_CACHE, else ~/.cache/clawloop."""
    env = os.environ.get("CLAWLOOP_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "clawloop"


def _foreign(out_dir: Path, digest: str) -> FileExistsError:
    return FileExistsError(
        f"{out_dir} holds something other than this tiny model (recipe {digest[:12]}); "
        "remove it or build into another folder"
    )


def build_tiny_model(out_dir: Path, seed: int = 0) -> Path:
    """Build the tiny model into `out_dir` (reused as is when its recipe hash matches).

    Safe when several processes build at once: each builds beside the target and renames its
    folder into place; a process that finds the target taken by then uses it and discards its
    own. A target holding anything else is never deleted (another process may be using it):
    FileExistsError says so."""
    out_dir = Path(out_dir)
    recipe = TinyRecipe(seed=seed)
    digest = recipe_hash(recipe)
    if _is_built(out_dir, digest):
        return out_dir
    if out_dir.is_dir() and any(out_dir.iterdir()):
        raise _foreign(out_dir, digest)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    # Build beside the target and rename: a killed build never leaves a folder that looks complete.
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        _write_model(tmp, recipe)
        (tmp / RECIPE_FILE).write_text(
            json.dumps({"sha256": digest, "recipe": asdict(recipe)}, indent=2)
        )
        tmp.chmod(0o755)  # mkdtemp makes it owner-only; servers may run as another user
        try:
            # Atomic, and refused when the target is a non-empty folder (another build won).
            os.rename(tmp, out_dir)
        except OSError:
            if _is_built(out_dir, digest):
                return out_dir
            raise _foreign(out_dir, digest) from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def ensure_tiny_model(cache_dir: Path | None = None, seed: int = 0) -> Path:
    """The tiny model's folder under `cache_dir` (default: default_cache_dir()/models), named
    by its recipe hash; built on first use."""
    digest = recipe_hash(TinyRecipe(seed=seed))
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir() / "models"
    return build_tiny_model(cache / f"tiny-qwen3-{digest[:12]}", seed=seed)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python -m training.tiny_model OUT_DIR", file=sys.stderr)
        sys.exit(2)
    print(build_tiny_model(Path(sys.argv[1])))
