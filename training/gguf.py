"""A GGUF file (or a folder holding one) as a model folder: converted once into a cached HF folder.

`train.base_model` and the local policy may name a `.gguf` file, or a folder with no config.json
that holds exactly one. `model_folder(path)` converts it, once, with transformers' GGUF loader
(needs the `gguf` package): the weights are de-quantised to float32 and saved as safetensors
with the tokenizer and the chat template the file carries. A GGUF-loaded model cannot be
`save_pretrained`-ed as is, so a plain model is built from its config (the GGUF quantisation
entry removed) and given its state dict. The folder is cached under
$CLAWLOOP_CACHE/models/gguf-<sha256 of the file> (default ~/.cache/clawloop), written in a temp
folder and renamed into place, so a killed conversion leaves nothing that looks complete; any
other path is returned as it is.

    python -m clawloop.training.gguf FILE.gguf        # convert (or reuse) and print the folder
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

DONE = "clawloop_gguf.txt"  # written last: the source file and its digest
_DIGESTS: dict[tuple[str, int, int], str] = {}


class GGUFError(RuntimeError):
    """The path names a GGUF model that cannot be converted (ambiguous folder, no `gguf`)."""


def gguf_file(path: str | Path) -> Path | None:
    """The GGUF file `path` names (itself, or the one file in a folder without config.json)."""
    p = Path(path).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        return p
    if p.is_dir() and not (p / "config.json").is_file():
        found = sorted(p.glob("*.gguf"))
        if len(found) > 1:
            raise GGUFError(
                f"{p} holds {len(found)} GGUF files ({', '.join(f.name for f in found)}): name "
                "the one to use as the model path"
            )
        return found[0] if found else None
    return None


def _digest(path: Path) -> str:
    st = path.stat()
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        h = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _DIGESTS[key] = h.hexdigest()
    return _DIGESTS[key]


def model_folder(path: str | Path, cache_dir: Path | None = None) -> Path:
    """A loadable model folder for `path`: the converted folder of a GGUF model, else `path`."""
    src = gguf_file(path)
    if src is None:
        return Path(path).expanduser()
    from clawloop.training.tiny_model import default_cache_dir

    digest = _digest(src)
    out = Path(cache_dir or default_cache_dir() / "models") / f"gguf-{digest[:16]}"
    if (out / DONE).is_file():
        return out
    try:
        import gguf  # noqa: F401  (transformers' GGUF loader needs it)
    except ImportError as exc:
        raise GGUFError(f"{src} is a GGUF model: pip install gguf to convert it") from exc
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out.name + ".", dir=out.parent))
    try:
        _convert(src, tmp)
        (tmp / DONE).write_text(f"{src}\nsha256 {digest}\n")
        try:
            os.rename(tmp, out)
        except OSError:  # another process finished first
            if not (out / DONE).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def _convert(src: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(src.parent), src.name
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the weights below are de-quantised
    config._name_or_path = str(src)
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict(), strict=True)
    if getattr(config, "tie_word_embeddings", False):
        plain.tie_weights()
    plain.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))


if __name__ == "__main__":
    print(model_folder(sys.argv[1]))
