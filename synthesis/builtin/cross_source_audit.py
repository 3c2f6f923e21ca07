"""Cross-source audit skeleton: observed peaks per entity against limits declared in another source.

Rendered after the prelude (synthesis/library.py); the import below is for linters only.
"""

from clawloop.synthesis.builtin._outputs import *  # noqa: F403
from clawloop.synthesis.builtin._prelude import *  # noqa: F403

# ruff: noqa: F405  (the prelude names; the renderer pastes the prelude above this skeleton)

# --- skeleton ---


def _obs_path():
    return f"data/{V['event']}_observations.csv"


def _limits_path():
    return "data/declared_limits.csv"


def _spec():
    ic, gc, cc = id_col(), group_col(), V["category"]
    return result_spec(
        "audit_findings",
        "findings",
        [ic, gc, cc, "observed_peak", "declared_max", "excess"],
        {
            ic: "string",
            gc: "string",
            cc: "string",
            "observed_peak": "number",
            "declared_max": "number",
            "excess": "number",
        },
        [ic],
        {"entities_audited": "integer", "findings": "integer", "total_excess": "number"},
        f"Audit of {words(V['measure'])} against declared limits",
    )


def _compute(reg, obs, limits):
    ic, m, scope = id_col(), V["measure"], in_scope(reg)
    peaks = {}
    for r in obs:
        if r[ic] in scope and r[m] is not None:
            peaks[r[ic]] = max(peaks.get(r[ic], r[m]), r[m])
    declared = {r[ic]: r["declared_max"] for r in limits if r[ic] in scope}
    rows = []
    for k in sorted(peaks):
        if k in declared and peaks[k] > declared[k]:
            rows.append(
                {
                    ic: k,
                    group_col(): scope[k]["group"],
                    V["category"]: scope[k]["category"],
                    "observed_peak": rnd(peaks[k], 2),
                    "declared_max": rnd(declared[k], 2),
                    "excess": rnd(peaks[k] - declared[k], 2),
                }
            )
    summary = {
        "entities_audited": len(peaks),
        "findings": len(rows),
        "total_excess": rnd(sum(peaks[r[ic]] - declared[r[ic]] for r in rows), 2),
    }
    return rows, summary


INTROS = (
    "These are {title} files. {obs} lists every {event} with the observed {measure} in {unit}; "
    "{limits} holds the maximum {measure} each {ent} declared. Audit the observations against the "
    "declarations and list every {ent} that exceeded its declared maximum, with its {group} and "
    "{category}{summary}.",
    "Every {ent} in these {title} files declared a ceiling for its {measure} ({limits}). Hold "
    "what was observed, {event} by {event} in {obs} ({unit}), against those ceilings and list the "
    "{ent}s that went over, each with its {group} and {category}{summary}.",
    "Did any {ent} go past the {measure} it declared? {obs} has the observed values ({unit}) of "
    "each {event}, {limits} the declared maxima ({title}). Report each {ent} over its limit, "
    "giving its {group} and {category}{summary}.",
)


def draw(seed):
    rng = rng_for(seed)
    world = make_world(rng)
    ic, m = id_col(), V["measure"]
    obs = make_events(rng, world, rng.choice([2022, 2023, 2024]))
    blank_some(rng, obs, m, ic)
    peaks = {}
    for r in obs:
        if r[m] is not None:
            peaks[r[ic]] = max(peaks.get(r[ic], r[m]), r[m])
    ids = sorted(peaks)
    step = 10 ** -V["decimals"]
    over = set(rng.sample(ids, max(3, len(ids) // 3)))
    limits = []
    for k in ids:
        gap = max(step, rnd(peaks[k] * rng.uniform(0.05, 0.3), V["decimals"]))
        limits.append(
            {
                ic: k,
                "declared_max": rnd(peaks[k] - gap if k in over else peaks[k] + gap, V["decimals"]),
            }
        )
    files = registry_files(rng, world)
    files.update(emit_table(rng, _obs_path(), obs, event_columns(), [m], ids))
    files.update(
        emit_table(rng, _limits_path(), limits, [ic, "declared_max"], ["declared_max"], ids)
    )
    rows, summary = _compute(world_registry(world), obs, limits)
    intro = INTROS[phrasing()].format(
        title=V["title"],
        obs=_obs_path(),
        limits=_limits_path(),
        event=words(V["event"]),
        measure=words(m),
        unit=V["unit"],
        ent=ent_noun(),
        group=words(group_col()),
        category=words(V["category"]),
        summary=plus_summary(", plus a summary"),
    )
    decisions = (
        registry_decisions()
        + table_decisions(_obs_path(), event_columns(), [m], V["event"])
        + table_decisions(
            _limits_path(), [ic, "declared_max"], ["declared_max"], "declaration", missing=False
        )
        + [
            f"observed_peak is the largest {m} among the {ent_noun()}'s usable {words(V['event'])} rows.",
            f"A finding is an in-scope {ent_noun()} whose observed_peak is strictly greater than its declared_max; "
            "excess = observed_peak - declared_max. List findings only, one row per "
            f"{ent_noun()}, keyed by {ic}.",
            summary_rule(
                f"entities_audited counts in-scope {ent_noun(True)} with at least one usable "
                f"{words(V['event'])} row; findings counts the rows listed; total_excess is the sum of "
                "their excess."
            ),
        ]
    )
    naive = _compute(all_in_scope(world_registry(world)), obs, limits)
    return finish(intro, files, _spec(), rows, summary, decisions, naive)


def blanks_matter():
    """A blank read as zero never raises a peak: blanks would be no difficulty here."""
    return False


def injections():
    return table_injections()


def solve(workspace, skip=None):
    set_skip(skip)
    ic = id_col()
    reg = load_registry(workspace)
    obs = read_table(workspace, _obs_path(), event_columns(), [V["measure"]])
    limits = read_table(workspace, _limits_path(), [ic, "declared_max"], ["declared_max"])
    rows, summary = _compute(reg, obs, limits)
    write_result(workspace, _spec(), rows, summary)
