"""The built-in generator library: renders one self-contained stdlib generator file per
(capability, domain, multihop, dirtiness, output format).

A generator must be a single file (the contract in generators/contract.py), so rendering is
concatenation: a header (title docstring, the GENERATOR literal, the domain vocabulary literal V),
the shared helpers (synthesis/builtin/_prelude.py, then _outputs.py) and the capability skeleton
(synthesis/builtin/<capability>.py), each taken from below its marker line.

    from clawloop.synthesis.library import render_generator
    src = render_generator("reconciliation", "apiculture", multihop=2, dirtiness=1, output_format="csv")
"""

from __future__ import annotations

import functools
import itertools
import pprint
from pathlib import Path

from clawloop.generators.meta import OUTPUT_FORMATS

# The source parts, imported (they only define functions) so that the stage cache keys, which follow
# imports, see an edit to any of them; their code runs only inside rendered generators.
from clawloop.synthesis.builtin import (
    _outputs,
    _prelude,
    anomaly_flagging,
    cross_source_audit,
    domain_calculation,
    entity_resolution,
    multi_document_merge,
    reconciliation,
    time_window_aggregation,
    unit_schema_normalisation,
)
from clawloop.synthesis.catalog import CAPABILITIES, get_capability
from clawloop.synthesis.vocabularies import DOMAINS, get_domain

SOURCES: dict[str, Path] = {
    f"{m.__name__.rpartition('.')[2]}.py": Path(str(m.__file__))
    for m in (
        _outputs,
        _prelude,
        anomaly_flagging,
        cross_source_audit,
        domain_calculation,
        entity_resolution,
        multi_document_merge,
        reconciliation,
        time_window_aggregation,
        unit_schema_normalisation,
    )
}
PRELUDE_MARKER = "# --- prelude ---"
SKELETON_MARKER = "# --- skeleton ---"


class RenderError(ValueError):
    """Bad knobs for render_generator, or a builtin source file without its marker."""


@functools.cache
def _part(filename: str, marker: str) -> str:
    if filename not in SOURCES:
        raise RenderError(
            f"synthesis/builtin/{filename} is not among the source parts synthesis/library.py "
            "imports: add it to the import list and SOURCES there"
        )
    text = SOURCES[filename].read_text(encoding="utf-8")
    head, sep, body = text.partition(marker + "\n")
    if not sep:
        raise RenderError(
            f"synthesis/builtin/{filename} has no '{marker}' line; the renderer needs it"
        )
    return body.strip("\n") + "\n"


def generator_title(capability: str, domain: str) -> str:
    cap, dom = get_capability(capability), get_domain(domain)
    return cap.title.format(
        entities=dom.entities.replace("_", " "),
        measure=dom.measure.replace("_", " "),
        domain=dom.title,
    )


def render_generator(
    capability: str, domain: str, multihop: int = 0, dirtiness: int = 0, output_format: str = "json"
) -> str:
    """Source of one generator file satisfying the generator contract (docs/architecture.md)."""
    get_capability(capability)
    dom = get_domain(domain)
    if not (
        isinstance(multihop, int)
        and 0 <= multihop <= 3
        and isinstance(dirtiness, int)
        and 0 <= dirtiness <= 3
    ):
        raise RenderError(
            f"multihop and dirtiness must be integers 0..3, got {multihop!r}, {dirtiness!r}"
        )
    if output_format not in OUTPUT_FORMATS:
        raise RenderError(f"output_format must be one of {OUTPUT_FORMATS}, got {output_format!r}")
    meta = {
        "capability": capability,
        "domain": domain,
        "multihop": multihop,
        "dirtiness": dirtiness,
        "output_format": output_format,
    }
    # Neighbouring domains read different sentence templates of one skeleton, so two domains
    # of a capability are not one text with the nouns swapped.
    vocab = dict(
        dom.vocabulary(),
        phrasing=(_index(DOMAINS, domain) + _index(CAPABILITIES, capability)) % PHRASINGS,
    )
    header = (
        f'"""{generator_title(capability, domain)}."""\n\n'
        "# Rendered by clawloop generators/library.py: header, shared prelude, capability skeleton.\n"
        f"GENERATOR = {pprint.pformat(meta, sort_dicts=False, width=100)}\n\n"
        "# The domain vocabulary the skeleton reads (phrasing: which sentence templates).\n"
        f"V = {pprint.pformat(vocab, sort_dicts=False, width=100)}\n"
    )
    helpers = [_part("_prelude.py", PRELUDE_MARKER), _part("_outputs.py", PRELUDE_MARKER)]
    return "\n".join([header, *helpers, _part(f"{capability}.py", SKELETON_MARKER)])


PHRASINGS = 3  # sentence templates per skeleton (each skeleton's intro has this many)


def _index(names: dict, name: str) -> int:
    return list(names).index(name)


def capabilities() -> list[str]:
    return list(CAPABILITIES)


def domains() -> list[str]:
    return list(DOMAINS)


def list_builtin() -> list[tuple[str, str]]:
    """Every (capability, domain) pair the library can render, in a stable order."""
    return list(itertools.product(CAPABILITIES, DOMAINS))
