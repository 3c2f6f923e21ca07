"""`clawloop train ... --explain N`: the first N training sequences with the trained spans decoded,
built as the train stage builds them; nothing is trained."""

from __future__ import annotations

import pandas as pd
from doubles.episodes import band_frame, episode_row, sampled_texts, tool_messages

from clawloop.flows.cli.train import main


def test_explain_prints_the_trained_spans_and_trains_nothing(tiny_model_dir, tmp_path, capsys):
    rows = [episode_row("t1", i, r, variant=i) for i, r in enumerate([1.0, 0.0])]
    traj, band = tmp_path / "t.parquet", tmp_path / "b.parquet"
    pd.DataFrame(rows).to_parquet(traj)
    band_frame(["t1"], [True]).to_parquet(band)
    out = tmp_path / "out"
    argv = ["train", "--trajectories", str(traj), "--band", str(band)]
    argv += ["--base-model", str(tiny_model_dir), "--out", str(out), "--explain", "2"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.count("== sft sample") == 1 and text.count("== grpo sample") == 1
    for sampled in sampled_texts(tool_messages()):
        # every trained span is printed verbatim, right under its header
        assert "(from text, " in text and f"---\n{sampled}<|im_end|>\n---" in text
    assert "advantage +0.707" in text
    assert (
        "sft: turns from ids 0, from text 3, from the template 0, dropped 0; 1 sequence(s)" in text
    )
    assert (
        "grpo: turns from ids 0, from text 6, from the template 0, dropped 0; 2 sequence(s)" in text
    )
    assert not (out / "sft").exists() and not (out / "grpo").exists()
