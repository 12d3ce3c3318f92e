"""bench/codegen_corpus.py: the same code renders a corpus to the same programs, and a changed program is reported."""
from __future__ import annotations
import gzip, json, pickle
from bench import codegen_corpus
from tensor import Tensor
from tensor.engine.realize import schedule_of

def asts():
  out = []
  for t in (Tensor.ones(8, 16).contiguous().sum(1), Tensor.arange(64).reshape(8, 8).float() * 2 + 1):
    t.kernelize()
    out += [k.arg.ast for k in schedule_of([t.uop.src[0] if t.uop.op.name == "RESHAPE" else t.uop]) if k.arg.ast.op.name == "SINK"]
  return out

def test_same_code_same_programs_and_a_change_is_found(tmp_path, capsys):
  corpus = [(codegen_corpus.digest(a), a, codegen_corpus.random_lists(a, 2)) for a in asts()]
  assert len(corpus) >= 2 and all(lists for _, _, lists in corpus)
  with open(tmp_path / "c.pkl", "wb") as f: pickle.dump(corpus, f)
  a, b = str(tmp_path / "a.json.gz"), str(tmp_path / "b.json.gz")
  codegen_corpus.render_all(str(tmp_path / "c.pkl"), a)
  codegen_corpus.render_all(str(tmp_path / "c.pkl"), b)
  assert codegen_corpus.compare(a, b) == 0
  with gzip.open(b, "rt") as f: got = json.load(f)
  progs = got[corpus[0][0]]
  assert set(progs) >= {"heuristic t1", "heuristic t2", "NOOPT=1", "PYTHON"} and "void k(" in progs["NOOPT=1"]
  progs["NOOPT=1"] = progs["NOOPT=1"].replace("+", "-")
  with gzip.open(b, "wt") as f: json.dump(got, f)
  assert codegen_corpus.compare(a, b) == 1
  assert "1 differ" in capsys.readouterr().out
