"""Issue 8's goal for the renderer's and the lowering's rule files: at most 2 lines of Python helpers per rule line
(bench/helper_lines.py counts them), and no rule of render_c.rules builds C text with an f-string or reads ctx's text."""
import os
import pytest
from bench.helper_lines import ROOT, count

@pytest.mark.parametrize("path", ["rules/render_c.rules", "rules/lower.rules"])
def test_at_most_two_helper_lines_per_rule_line(path):
  rules, helpers, names = count(path)
  assert rules > 0 and helpers <= 2 * rules, (path, rules, helpers, names)

def test_helper_lines_counts_what_a_rule_file_imports():
  # lower.rules imports scope through unused_loops: counted, with the helpers' docstrings left out
  _, helpers, names = count("rules/lower.rules")
  assert "scope" in names and "unused_loops" in names and 10 < helpers < 40

def test_render_c_results_are_pieces():
  with open(os.path.join(ROOT, "rules", "render_c.rules")) as f: text = f.read()
  assert '{f"' not in text and "ctx[" not in text
