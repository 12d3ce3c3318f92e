"""A .rules file of N generated rules (varied nested patterns, mostly unconditional), for timing `dslc check` at scale and
for tests/dslc/test_check.py, which checks the shadowing check stays near linear.

  python tests/dslc/many_rules.py 6000 > /tmp/r6000.rules && time python -m dslc check /tmp/r6000.rules
"""
import random, sys

OPS1 = ["NEG", "SQRT", "EXP2", "LOG2", "SIN", "RECIPROCAL", "TRUNC"]
OPS2 = ["ADD", "MUL", "SUB", "MAX", "IDIV", "MOD", "AND", "OR", "XOR", "CMPLT", "CMPNE", "SHL", "SHR"]

def _pattern(r: random.Random, depth: int, leaf_ok: bool = True) -> str:
  if depth > 2 or leaf_ok and r.random() < 0.4: return r.choice(["x", "y", "z", "_", str(r.randint(0, 50))])
  if r.random() < 0.3: return f"({r.choice(OPS1)} {_pattern(r, depth + 1)})"
  return f"({r.choice(OPS2)} {_pattern(r, depth + 1)} {_pattern(r, depth + 1)})"

def many_rules(n: int, seed: int = 0) -> str:
  """n distinct rules in one rule set; about one in three reads x in a guard."""
  r = random.Random(seed)
  out, seen = ["ruleset big"], set()
  while len(seen) < n:
    p = f"({r.choice(OPS2)} {_pattern(r, 1, False)} {_pattern(r, 1, False)})"
    if p in seen: continue
    seen.add(p)
    names = [v for v in "xyz" if f" {v}" in p or f"({v}" in p]
    guard = " if x.vmin >= 0" if "x" in names and r.random() < 0.3 else ""
    out.append(f"{p}{guard} -> {names[0] if names else '0'}")
  return "\n".join(out) + "\n"

if __name__ == "__main__": sys.stdout.write(many_rules(int(sys.argv[1]) if len(sys.argv) > 1 else 6000))
