"""The VIZ explorer's graphs: each step of a recorded graph_rewrite rebuilt from the steps (runtime/trace.py records only
the node each rule changed), laid out in layers and drawn as SVG on the server, so the page needs no graph library.

Layout: the root on top, every node one layer below its lowest user (longest path from the root), nodes in a layer
ordered by where their users are (one barycenter sweep), each node's edges leaving it left to right in source order.
"""
from __future__ import annotations
from html import escape
from runtime.graph import op_class
from runtime.trace import Recording

NODE_H, LAYER_GAP, NODE_GAP, CHAR_W, MIN_W = 30, 40, 12, 6.6, 44
LABELS_INLINE = 1500  # bigger graphs get their text drawn by the page, only where the view is zoomed in

class Replay:
  """The root node id of a recorded rewrite's graph after each of its steps (computed on demand, remembered).

  The graph after step k is the input rewritten as graph_rewrite rewrites it (sources first, or with bottom_up each node
  before its sources and again once they changed), with the first k steps as its rules: a node a step rewrote becomes
  what that step made of it (its latest step). So the graph after the last step is the recorded output, whatever the
  engine took from its memo in between: a node reached again already rewritten, a rule fired again on a node an earlier
  step rewrote (the engine remembers the node it met and the final one, not the ones rebuilt in between), a bottom-up
  key inside another key. A step may change nothing: its node was rewritten the same way before."""
  def __init__(self, rec: Recording, index: int):
    self.rec, self.rw = rec, rec.rewrites[index]
    self.roots: dict[int, int] = {0: self.rw["input"]}

  def root(self, step: int) -> int:
    steps = self.rw["steps"]
    step = max(0, min(step, len(steps)))
    if step not in self.roots:
      table = {before: after for _, before, after in steps[:step] if before != after}
      rewrite = rewrite_bottom_up if self.rw["bottom_up"] else rewrite_sources_first
      self.roots[step] = rewrite(self.rec, self.rw["input"], table)
    return self.roots[step]

def _rebuilt(rec: Recording, n: int, memo: dict[int, int]) -> int:
  head, src = rec.nodes[n]
  nsrc = tuple(memo[s] for s in src)
  return n if nsrc == src else rec.intern_node(head, nsrc)

def rewrite_sources_first(rec: Recording, root: int, table: dict[int, int]) -> int:
  """`root` rewritten by the rules `table` (node -> node) as graph_rewrite does: each node's sources first, then the node
  rebuilt from them is replaced while it is a key, and what replaced it is rewritten the same way. Iterative; a table
  that cycles (a recording of a rewrite that failed) ends where it comes back."""
  memo: dict[int, int] = {}
  pending: set[int] = set()  # nodes waiting for what they became
  stack: list = [root]
  while stack:
    e = stack.pop()
    if e.__class__ is tuple:  # (node, what it became): the node is final once that is
      u, target = e
      memo[u] = memo[target]
      pending.discard(u)
      continue
    if e in memo: continue
    missing = [s for s in rec.nodes[e][1] if s not in memo and s not in pending]
    if missing:
      stack.append(e)
      stack.extend(missing)
      continue
    if e in pending:  # reached again while waiting on what it became: a cycle, it stays as it is
      memo[e] = e
      continue
    for s in rec.nodes[e][1]: memo.setdefault(s, s)  # a source in a cycle
    n = _rebuilt(rec, e, memo)
    if (target := table.get(n)) is None:
      memo[e] = memo[n] = n
    elif target in memo: memo[e] = memo[target]
    else:
      pending.add(e)
      stack.append((e, target))
      stack.append(target)
  return memo[root]

def rewrite_bottom_up(rec: Recording, root: int, table: dict[int, int]) -> int:
  """`root` rewritten by the rules `table` as graph_rewrite(bottom_up=True) does: a node is replaced while it is a key
  before its sources are visited, then rebuilt from their results, and a rebuilt node is visited again as a new one."""
  memo: dict[int, int] = {}
  waiting: set[int] = set()  # nodes whose sources, or whose rebuilt form, are being rewritten: met again, a cycle
  stack: list = [root]
  while stack:
    e = stack.pop()
    if e.__class__ is tuple:
      u, n, rebuilt = e
      if rebuilt:  # u became what its rebuilt form became
        memo[u] = memo[n]
        waiting.discard(u)
        continue
      for s in rec.nodes[n][1]: memo.setdefault(s, s)  # a source in a cycle
      n2 = _rebuilt(rec, n, memo)
      if n2 == n: memo[u] = memo[n] = n
      elif n2 in memo: memo[u] = memo[n2]
      else:
        stack.append((u, n2, True))
        stack.append(n2)
        continue
      waiting.discard(u)
      continue
    if e in memo: continue
    if e in waiting:  # reached again while its sources or its rebuilt form are rewritten: a cycle, it stays as it is
      memo[e] = e
      continue
    n, seen = e, {e}
    while (m := table.get(n)) is not None and m not in seen:
      seen.add(m)
      n = m
    if n != e and n in memo:
      memo[e] = memo[n]
      continue
    waiting.add(e)
    stack.append((e, n, False))
    stack.extend(s for s in reversed(rec.nodes[n][1]) if s not in memo)
  return memo[root]

def reachable(rec: Recording, root: int) -> list[int]:
  """Every node under root, each after all of its users (root first)."""
  nodes = rec.nodes
  order: list[int] = []  # postorder: sources before users
  seen = {root}
  stack = [(root, 0)]
  while stack:
    n, i = stack.pop()
    src = nodes[n][1]
    if i < len(src):
      stack.append((n, i + 1))
      s = src[i]
      if s not in seen:
        seen.add(s)
        stack.append((s, 0))
    else: order.append(n)
  order.reverse()
  return order

def label(rec: Recording, n: int) -> tuple[str, str]:
  """The two lines drawn in a node: the op (and a short arg), the dtype."""
  op, dtype, arg = rec.heads[rec.nodes[n][0]]
  if arg: op = f"{op} {arg if len(arg) <= 24 else arg[:21] + '...'}"
  return op, dtype.removeprefix("dtypes.")

def layout(rec: Recording, root: int) -> tuple[dict[int, tuple[float, float, float]], list[int]]:
  """Node id -> (x centre, y centre, width), and the nodes root first."""
  nodes = rec.nodes
  order = reachable(rec, root)
  layer = {root: 0}
  for n in order:  # users come first: a node's layer is final before its sources read it
    d = layer[n] + 1
    for s in nodes[n][1]:
      if layer.get(s, -1) < d: layer[s] = d
  layers: list[list[int]] = [[] for _ in range(max(layer.values()) + 1)]
  for n in order: layers[layer[n]].append(n)
  pos: dict[int, tuple[float, float, float]] = {}
  want: dict[int, list[float]] = {}  # where the users of a node would like it: under the edge that leaves them for it
  for depth, row in enumerate(layers):
    if depth: row.sort(key=lambda n: sum(want[n]) / len(want[n]))
    widths = [max(MIN_W, CHAR_W * max(len(t) for t in label(rec, n)) + 12) for n in row]
    x = -(sum(widths) + NODE_GAP * (len(row) - 1)) / 2
    y = depth * (NODE_H + LAYER_GAP)
    for n, w in zip(row, widths):
      pos[n] = (x + w / 2, y, w)
      x += w + NODE_GAP
      src = nodes[n][1]
      for k, s in enumerate(src): want.setdefault(s, []).append(pos[n][0] - w / 2 + w * (k + 1) / (len(src) + 1))
  return pos, order

def svg(rec: Recording, root: int, highlight: int | None = None) -> tuple[str, list[tuple[str, str]] | None, int]:
  """The graph under root as an SVG document; the node `highlight` (the one a rule just made) gets the class `changed`.

  A graph of more than LABELS_INLINE nodes comes without text (most of the browser's time goes to laying out text, and
  a whole big graph is too small to read): its labels are returned, in the order of the nodes in the SVG, for the page
  to draw where the view is zoomed in. Returns (svg, labels or None, node count)."""
  pos, order = layout(rec, root)
  nodes = rec.nodes
  xs = [x - w / 2 for x, _, w in pos.values()] + [x + w / 2 for x, _, w in pos.values()]
  ys = [y for _, y, _ in pos.values()]
  x0, x1, y0, y1 = min(xs) - 20, max(xs) + 20, -NODE_H, max(ys) + NODE_H
  inline = len(order) <= LABELS_INLINE
  edges: list[str] = []  # one path of every edge: the browser parses and paints one element instead of thousands
  boxes: list[str] = []
  labels: list[tuple[str, str]] = []
  half = NODE_H / 2
  for n in order:
    x, y, w = pos[n]
    src = nodes[n][1]
    for k, s in enumerate(src):
      sx, sy, _ = pos[s]
      ex = x - w / 2 + w * (k + 1) / (len(src) + 1)  # edges leave the user left to right in source order
      my = (y + half + sy - half) / 2
      edges.append(f"M{ex:.0f} {y + half:.0f}C{ex:.0f} {my:.0f} {sx:.0f} {my:.0f} {sx:.0f} {sy - half:.0f}")
    top, bottom = label(rec, n)
    cls = f"n {op_class(rec.heads[nodes[n][0]][0])}" + (" changed" if n == highlight else "")
    text = f'<text y="-3">{escape(top)}</text><text class="dt" y="10">{escape(bottom)}</text>' if inline else ""
    if not inline: labels.append((top, bottom))
    boxes.append(f'<g class="{cls}" data-id="{n}" transform="translate({x:.0f} {y:.0f})"><rect x="{-w / 2:.0f}" y="{-half:.0f}" width="{w:.0f}" '
                 f'height="{NODE_H}" rx="4"/>{text}</g>')
  doc = (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="{x0:.0f} {y0:.0f} {x1 - x0:.0f} {y1 - y0:.0f}" data-nodes="{len(order)}">'
         f'<path class="edges" d="{"".join(edges)}"/><g class="nodes">{"".join(boxes)}</g></svg>')
  return doc, None if inline else labels, len(order)
