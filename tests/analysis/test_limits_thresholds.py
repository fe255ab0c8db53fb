"""The README's table of the verdicts' rules is the code's one table (analysis/limits.py: THRESHOLDS), row for row."""
from helpers.paths import ROOT
from sbprof.analysis.limits import THRESHOLDS


def test_the_readme_lists_every_rule_with_its_threshold_and_reason_as_the_code_has_them():
    text = (ROOT / "README.md").read_text()
    section = text.split("## What limits this", 1)[1].split("\n## ", 1)[0]
    rows = [line.strip("|").split(" | ") for line in section.splitlines() if line.startswith("| ")][1:]
    documented = {name.strip(): (when.strip(), why.strip()) for name, when, why in rows}
    assert documented == {name: (t.text, t.reason) for name, t in THRESHOLDS.items()}
