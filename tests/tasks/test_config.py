"""Run configuration: embedded defaults, profiles, and errors that name the field and the fix."""

from __future__ import annotations

import fnmatch
import os
import tomllib
from pathlib import Path

import pytest
import yaml

from clawloop.harness.rollout import RolloutConfig
from clawloop.tasks.config import (
    ConfigError,
    RunConfig,
    lay_under,
    load_config,
    parse_config,
    profile_path,
)

CONFIGS = Path(__file__).resolve().parents[2] / "tasks" / "profiles"
REPO = CONFIGS.parents[1]
STAGES = ("synthesize", "forge", "verify", "rollout", "train", "diagnose")


def test_no_file_gives_the_local_profile():
    cfg = load_config(None)
    assert cfg.profile == "local" and cfg.iterations == 2 and cfg.storage.root == "runs"
    assert load_config(None, iterations=3).iterations == 3


def test_shipped_profiles_parse():
    local = load_config(CONFIGS / "local.yaml")
    cluster = load_config(CONFIGS / "cluster.yaml")
    assert local.profile == "local" and local == load_config(None) == parse_config({})
    assert cluster.profile == "cluster" and cluster.llm.base_url and cluster.train.deepspeed
    # a profile's name is a --config value: the file shipped in the package
    assert load_config("cluster") == cluster and load_config("local") == local
    assert profile_path("learning-cpu").resolve() == (CONFIGS / "learning-cpu.yaml").resolve()
    with pytest.raises(ConfigError, match=r"does not exist: .*cluster, demo, learning-cpu, local"):
        load_config("clustr")
    # `make run`'s profile: the real small model on the managed vLLM, row base, one call a reply
    demo = load_config("demo")
    assert demo.llm.server == "vllm" and demo.train.lora and demo.train.merge_lora
    assert demo.diagnose.baseline and demo.synthesize.fixed_eval
    assert demo.rollout.tool_choice == "one" and demo.rollout.band == (1, 3)
    assert (REPO / demo.synthesize.generator_paths[0]).is_dir()  # from the repo root


def test_the_local_profile_is_the_one_home_of_the_run_configs_own_defaults(tmp_path):
    """Where the run config's defaults differ from the stage libraries' (the CPU demo's small
    rollouts) they are written once, in tasks/profiles/local.yaml, which lies under every file:
    a file says only what differs, a nested section merges key by key."""
    written = yaml.safe_load((CONFIGS / "local.yaml").read_text())
    assert {"n": 2, "band": [1, 1], "max_turns": 3}.items() <= written["rollout"].items()
    assert (RolloutConfig().n, RolloutConfig().max_turns) == (8, 30)  # the library's own
    mine = tmp_path / "mine.yaml"
    mine.write_text("rollout: {max_turns: 7}\nsynthesize: {domain: {builtin: false}}\n")
    cfg = load_config(mine)
    assert (cfg.rollout.n, cfg.rollout.band, cfg.rollout.max_turns) == (2, (1, 1), 7)
    assert cfg.synthesize.domain.builtin is False and cfg.synthesize.domain.share == 0.25
    assert lay_under({"a": {"b": 1, "c": [1]}}, {"a": {"c": [2]}, "d": 3}) == {
        "a": {"b": 1, "c": [2]},
        "d": 3,
    }
    # a section that is not a mapping still gets its own error, not a merge
    with pytest.raises(ConfigError, match=r"rollout"):
        parse_config({"rollout": "fast"})


def test_unknown_field_suggests_the_right_name():
    with pytest.raises(
        ConfigError, match=r"synthesize\.n_trian: unknown field; did you mean 'n_train'"
    ):
        parse_config({"synthesize": {"n_trian": 4}})


def test_wrong_value_names_the_field_and_what_was_given():
    with pytest.raises(ConfigError) as err:
        parse_config({"forge": {"workers": 0}, "sandbox": {"backend": "podman"}})
    text = str(err.value)
    assert "forge.workers" in text and "greater than or equal to 1" in text
    assert "sandbox.backend" in text and "'podman'" in text


def test_cluster_profile_needs_an_endpoint():
    with pytest.raises(ConfigError, match="llm.base_url"):
        parse_config({"profile": "cluster"})
    ok = parse_config({"profile": "cluster", "llm": {"base_url": "http://gpu:8000/v1"}})
    assert isinstance(ok, RunConfig)


def test_bad_yaml_and_missing_file_are_one_clear_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("synthesize: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.yaml")


def test_sandbox_settings_map_to_the_sandbox_interface():
    box = parse_config(
        {"sandbox": {"backend": "bwrap", "memory_mb": 512}}
    ).sandbox.to_sandbox_config()
    assert box.backend == "bwrap" and box.limits.memory_mb == 512


def test_a_configured_docker_host_reaches_the_sandbox_backends(monkeypatch):
    from clawloop.flows.runs import apply_environment

    # setenv first, so monkeypatch restores (or removes) DOCKER_HOST for the tests after this one.
    monkeypatch.setenv("DOCKER_HOST", "unset")
    monkeypatch.delenv("DOCKER_HOST")
    apply_environment(parse_config({"sandbox": {"docker_host": "tcp://sandbox-host:2376"}}))
    assert os.environ["DOCKER_HOST"] == "tcp://sandbox-host:2376"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            {"rollout": {"max_turn": 5}},
            r"rollout\.max_turn: unknown field; did you mean 'max_turns'\?",
        ),
        (
            {"rollout": {"temperatur": 0.5}},
            r"rollout\.temperatur: unknown field; did you mean 'temperature'\?",
        ),
        ({"train": {"lora_rank": 8}}, r"train\.lora_rank: unknown field; did you mean 'lora_r'\?"),
        (
            {"diagnose": {"embeder": "hashed"}},
            r"diagnose\.embeder: unknown field; did you mean 'embedder'\?",
        ),
    ],
)
def test_typos_in_stage_sections_fail_at_load_with_a_suggestion(data, expected):
    with pytest.raises(ConfigError, match=expected):
        parse_config(data)


def test_bad_values_in_stage_sections_fail_at_load_naming_the_field():
    with pytest.raises(ConfigError) as err:
        parse_config(
            {
                "rollout": {"temperature": "hot"},
                "train": {"phases": "rl"},
                "diagnose": {"embedder": "bert", "mastery_threshold": 2},
            }
        )
    text = str(err.value)
    assert "rollout.temperature: " in text and "'hot'" in text
    assert "train: " in text and "phases='rl'" in text
    assert "diagnose.embedder: " in text and "diagnose.mastery_threshold: " in text
    assert "ValidationError" not in text and "(top level)" not in text


def test_diagnose_start_levels_follow_synthesize():
    cfg = parse_config({"synthesize": {"multihop": 2, "dirtiness": 1}, "diagnose": {"workers": 3}})
    from clawloop.diagnosis.diagnose import DiagnoseConfig
    from clawloop.tasks.diagnose import start_levels

    assert start_levels(cfg) == (2, 1)
    # the diagnose: section is the stage's own config class; where guidance starts is synthesize's
    assert type(cfg.diagnose) is DiagnoseConfig and cfg.diagnose.workers == 3
    with pytest.raises(ConfigError, match=r"diagnose\.start_multihop: unknown field"):
        parse_config({"diagnose": {"start_multihop": 1}})


def test_stage_configs_come_from_their_sections():
    cfg = parse_config(
        {
            "rollout": {"n": 4, "band": [1, 3], "workers": 5, "temperature": 0.7},
            # a tempered sampler is for SFT only: GRPO refuses temperature != 1
            "train": {"lora": True, "base_model": "/models/x", "phases": "sft"},
            "diagnose": {"eval_n": 3},
        }
    )
    from clawloop.tasks.diagnose import eval_rollout_config

    r = cfg.rollout
    assert (r.n, r.band_lo, r.band_hi, r.concurrency, r.temperature) == (4, 1, 3, 5, 0.7)
    e = eval_rollout_config(cfg)
    assert (e.n, e.band_lo, e.band_hi, e.temperature) == (3, 0, 3, 0.7)
    assert cfg.train.lora is True


def test_serve_schedules_nightly_with_the_configured_cron(tmp_path, monkeypatch):
    import argparse
    from contextlib import contextmanager

    from clawloop.flows.cli.run import _cmd_serve

    path = tmp_path / "c.yaml"
    path.write_text('prefect:\n  nightly_cron: "15 3 * * 1"\n')
    served: list[tuple] = []

    @contextmanager
    def fake_server(**kw):
        yield "http://127.0.0.1:1/api"

    monkeypatch.setattr("clawloop.flows.server.local_server", fake_server)
    monkeypatch.setattr("clawloop.flows.server.serve_deployments", lambda *a: served.append(a))
    monkeypatch.setenv("PREFECT_API_URL", "unset")
    args = argparse.Namespace(config=str(path), port=1, root=str(tmp_path))
    assert _cmd_serve(args) == 0
    assert served == [("15 3 * * 1", str(path), str(tmp_path))]
    with pytest.raises(ConfigError, match=r"prefect\.work_pool: unknown field"):
        parse_config({"prefect": {"work_pool": "clawloop-process"}})


def test_an_unmerged_lora_policy_needs_a_server_that_serves_adapters():
    unmerged = {"train": {"lora": True, "merge_lora": False}}
    with pytest.raises(ConfigError, match=r"train\.merge_lora: false .* cannot serve"):
        parse_config(unmerged)
    ok = parse_config({**unmerged, "llm": {"base_url": "http://gpu:8000/v1", "reload": "lora"}})
    assert ok.train.merge_lora is False


def test_each_stage_section_is_its_cores_config_class():

    from clawloop.diagnosis.diagnose import DiagnoseConfig
    from clawloop.generators.forge import ForgeConfig
    from clawloop.generators.verify import VerifyConfig
    from clawloop.synthesis.config import SynthesizeConfig
    from clawloop.training.config import TrainConfig

    # every stage's section is its core's config class, defined once beside the core
    cores = (
        SynthesizeConfig,
        ForgeConfig,
        VerifyConfig,
        RolloutConfig,
        TrainConfig,
        DiagnoseConfig,
    )
    for name, core in zip(STAGES, cores, strict=True):
        assert RunConfig.model_fields[name].annotation is core, name
    assert parse_config({"forge": {"retries": 1}}).forge == ForgeConfig(retries=1)
    # the rollout: section is the harness's RolloutConfig itself; the run config's CPU-demo
    # defaults (tasks/profiles/local.yaml) lie under the file, the library keeps the paper's
    assert RunConfig.model_fields["rollout"].annotation is RolloutConfig
    demo = parse_config({"rollout": {"temperature": 0.5}, "train": {"phases": "sft"}}).rollout
    assert type(demo) is RolloutConfig and demo.temperature == 0.5
    assert (demo.n, demo.band, demo.workers, demo.max_turns, demo.max_tokens) == (
        2,
        (1, 1),
        2,
        3,
        64,
    )
    assert (RolloutConfig().n, RolloutConfig().max_turns) == (8, 30)
    assert parse_config({"rollout": {"max_turns": 7}}).rollout.max_tokens == 64  # others kept
    # so is train: (base_model, the pipeline's start, is one of TrainConfig's fields)
    assert RunConfig.model_fields["train"].annotation is TrainConfig
    train = parse_config({"train": {"lora_r": 8, "base_model": "/models/x"}}).train
    assert type(train) is TrainConfig and (train.lora_r, train.base_model) == (8, "/models/x")
    assert parse_config({}).train == TrainConfig()  # one set of defaults: the class's
    diagnose = RunConfig.model_fields["diagnose"].annotation.model_fields
    assert diagnose["embedder"].description == DiagnoseConfig.model_fields["embedder"].description
    with pytest.raises(ConfigError, match=r"rollout\.concurrency: set by rollout\.workers;"):
        parse_config({"rollout": {"concurrency": 3}})
    with pytest.raises(ConfigError, match=r"rollout\.band_lo: set by rollout\.band: \[low, high\]"):
        parse_config({"rollout": {"band_lo": 0}})
    with pytest.raises(ConfigError, match=r"rollout\.band: .*at most 2 items"):
        parse_config({"rollout": {"band": [1, 2, 3]}})
    with pytest.raises(ConfigError, match=r"rollout: RolloutConfig\.n must be >= 1, got 0"):
        parse_config({"rollout": {"n": 0}})


def test_a_generator_path_that_does_not_exist_is_a_config_error_naming_the_field(tmp_path, capsys):
    from clawloop.flows.cli import main

    path = tmp_path / "run.yaml"
    path.write_text("synthesize:\n  generator_paths: [my_generators/]\n")
    assert main(["run", "--config", str(path), "--no-prefect"]) == 2
    err = capsys.readouterr().err
    assert "synthesize.generator_paths" in err and "my_generators/" in err
    assert not (tmp_path / "runs").exists()


def test_lora_reload_is_refused_at_load_unless_train_writes_unmerged_adapters():
    llm = {"base_url": "http://vllm:8000/v1", "reload": "lora"}
    with pytest.raises(ConfigError, match="train.lora is false"):
        parse_config({"llm": llm})
    with pytest.raises(ConfigError, match="set train.merge_lora: false"):
        parse_config({"llm": llm, "train": {"lora": True}})  # merge_lora defaults to true
    ok = parse_config({"llm": llm, "train": {"lora": True, "merge_lora": False}})
    assert ok.train.lora and not ok.train.merge_lora


def test_the_old_flat_synthesize_keys_are_refused_with_their_new_names():
    with pytest.raises(ConfigError) as err:
        parse_config(
            {"synthesize": {"domain_share": 0, "skills_dirs": [], "llm_workers": 4, "llm_share": 1}}
        )
    text = str(err.value)
    for line in (
        "synthesize.domain_share: moved to synthesize.domain.share",
        "synthesize.skills_dirs: moved to synthesize.skills.dirs",
        "synthesize.llm_workers: moved to synthesize.writer.workers",
        "synthesize.llm_share: moved to synthesize.llm.share",
    ):
        assert line in text, text
    # the old `llm:` was the writer's endpoint
    with pytest.raises(
        ConfigError,
        match=r"synthesize\.llm\.base_url: moved to synthesize\.writer\.endpoint\.base_url",
    ):
        parse_config({"synthesize": {"llm": {"base_url": "http://x/v1", "model": "m"}}})
    with pytest.raises(ConfigError, match=r"moved to synthesize\.writer\.endpoint"):
        parse_config({"synthesize": {"llm": None}})
    # a typo in a source's section still gets the nearest name
    with pytest.raises(
        ConfigError, match=r"synthesize\.domain\.shares: unknown field; did you mean 'share'"
    ):
        parse_config({"synthesize": {"domain": {"shares": 0}}})


def test_each_synthesis_source_reads_its_own_section():
    cfg = parse_config(
        {"synthesize": {"domain": {"share": 0.5, "max_nodes": 4}, "writer": {"workers": 3}}}
    )
    s = cfg.synthesize
    assert (s.domain.share, s.domain.max_nodes, s.domain.builtin) == (0.5, 4, True)
    assert (s.writer.workers, s.writer.endpoint, s.llm.share, s.skills.share) == (
        3,
        None,
        0.0,
        0.25,
    )


def test_the_profiles_ship_as_package_data():
    pyproject = tomllib.loads((CONFIGS.parents[1] / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["clawloop.tasks"]
    shipped = sorted(CONFIGS.glob("*.yaml"))
    assert shipped, "no profiles found"
    for path in shipped:
        rel = path.relative_to(CONFIGS.parent).as_posix()
        assert any(fnmatch.fnmatch(rel, pat) for pat in patterns), f"{rel} is not package data"


def test_rollouts_sample_with_the_run_seed_unless_rollout_seed_is_set():
    assert parse_config({"seed": 3}).rollout.seed == 3
    assert parse_config({}).rollout.seed == 0  # the local profile's run seed
    assert parse_config({"seed": 3, "rollout": {"seed": 9}}).rollout.seed == 9
    assert parse_config({"rollout": {"seed": None}}).rollout.seed is None  # none sent
