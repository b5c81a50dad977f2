"""The demo's Markdown summary (what README.md shows) and the CI check that README.md shows it."""

import sys
from pathlib import Path

from nemo_act.run.demo import FREE_PARTS, SUMMARY_NOTE, summary_markdown

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from check_readme_demo import BEGIN, END, check, cpu_vendor, readme_blocks  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def _sel(count: int, n: int = 200) -> dict:
    return {"value": count / n, "stderr": 0.01, "count": count, "n": n}


def _result(free: tuple[int, int, int, int], forced: int, n: int = 200) -> dict:
    """A checkpoint's selection result in the shape `PipelineRunner.selection` writes: the shares the table shows
    and what it does not (`free_selection`'s per-order accuracies on half the pairs, both results' `chance`)."""
    shown = {k: _sel(c, n) for k, c in zip(FREE_PARTS, free, strict=True)}
    order = {"accuracy_expert_first": _sel(free[0] // 2, n // 2), "accuracy_expert_second": _sel(0, n - n // 2)}
    return {"checkpoint": "ckpt", "free": {**shown, **order, "chance": 0.5},
            "forced": {"accuracy": _sel(forced, n), "picked_first": _sel(n // 2, n), "chance": 0.5}}  # fmt: skip


RUNS = [
    {
        "pipeline": "act_il_rl",
        "eval": {"test": {"benchmark": "scienceworld", "benchmark_title": "ScienceWorld", "split": "test",
                          "score_mean": 28.5, "score_std": 0.0, "completion_mean": 0.0, "completion_std": 0.0}},
        "selection": {"init": _result((44, 15, 140, 1), 120), "01_act": _result((80, 17, 103, 0), 130)},
    },
]  # fmt: skip


def test_the_summary_is_markdown_tables_of_the_results_and_the_selection():
    text = summary_markdown(RUNS)
    lines = text.splitlines()
    assert lines[0] == SUMMARY_NOTE
    assert "| pipeline | ScienceWorld test score | ScienceWorld test completion % | held-out selection acc % |" in lines
    assert "| act_il_rl | 28.50 ± 0.00 | 0.00 ± 0.00 | 40.0 ± 1.0 |" in lines
    assert "Held-out ACT selection (200 pairs from held-out variations; % ± standard error (count)):" in lines
    assert "| initial policy (warm-up) | 22.0 ± 1.0 (44) | 7.5 ± 1.0 (15) | 70.0 ± 1.0 (140) | 0.5 ± 1.0 (1) | " \
           "60.0 ± 1.0 (120) |" in lines  # fmt: skip
    assert max(map(len, lines)) <= 120  # README's width


def test_checkpoints_on_different_pair_counts_keep_each_cells_count_and_n():
    runs = [dict(RUNS[0], selection=dict(RUNS[0]["selection"], init=_result((44, 15, 139, 1), 120, 199)))]
    lines = summary_markdown(runs).splitlines()
    assert "Held-out ACT selection (pairs from held-out variations; % ± standard error (count)):" in lines
    assert any(line.startswith("| initial policy (warm-up) | 22.1 ± 1.0 (44/199) |") for line in lines)
    assert any(line.startswith("| act_il_rl: 01_act | 40.0 ± 1.0 (80/200) |") for line in lines)


def test_the_readme_check_compares_the_block_of_the_cpus_vendor_and_names_a_difference(tmp_path):
    summary = tmp_path / "summary.md"
    summary.write_text(summary_markdown(RUNS))
    other = summary.read_text().replace("28.50", "27.25")
    readme = tmp_path / "README.md"
    intel, amd = BEGIN.format(cpu="GenuineIntel"), BEGIN.format(cpu="AuthenticAMD")
    readme.write_text(f"# x\n\n{amd}\n{other}{END}\n\n{intel}\n{summary.read_text()}{END}\n\nmore\n")
    assert check(readme, summary, "GenuineIntel")[0] == 0
    code, message = check(readme, summary, "AuthenticAMD")
    assert code == 1 and "-| act_il_rl | 27.25" in message and "+| act_il_rl | 28.50" in message
    code, message = check(readme, summary, "aarch64")
    assert code == 2 and "no demo block for this CPU's vendor aarch64 (blocks: AuthenticAMD, GenuineIntel)" in message
    assert check(readme, tmp_path / "none.md", "GenuineIntel")[0] == 2
    readme.write_text("no block\n")
    assert check(readme, summary, "GenuineIntel")[0] == 2


def test_the_cpu_vendor_is_the_kernels_vendor_id(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n\nprocessor\t: 1\nvendor_id\t: AuthenticAMD\n"
    )
    assert cpu_vendor(info) == "AuthenticAMD"
    assert cpu_vendor(tmp_path / "none")  # no /proc/cpuinfo: the architecture's name


def test_the_readme_has_a_demo_block_per_vendor_each_written_by_the_demo():
    text = (REPO / "README.md").read_text()
    blocks = readme_blocks(text)
    assert sorted(blocks) == ["AuthenticAMD", "GenuineIntel"] and text.count(END) == len(blocks)
    for block in blocks.values():
        lines = block.splitlines()
        assert lines[0] == SUMMARY_NOTE and lines[2].startswith("| pipeline |")
