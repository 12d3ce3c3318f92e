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

  Step k replaces node `before` by `after` in the graph after step k-1. graph_rewrite also takes nodes it finished earlier
  from its memo, with no rule firing: when a step's `before` is not in the graph, or after the last step, every node an
  earlier step rewrote is first replaced by its latest form (following each node's chain of steps)."""
  def __init__(self, rec: Recording, index: int):
    self.rec, self.rw = rec, rec.rewrites[index]
    self.roots: list[int] = [self.rw["input"]]
    self.done: dict[int, int] = {}  # every step applied so far: before -> after

  def latest(self, n: int) -> int:
    seen = {n}
    while (m := self.done.get(n)) is not None and m not in seen:
      seen.add(m)
      n = m
    return n

  def catch_up(self, root: int) -> int:
    return replace_nodes(self.rec, root, {n: self.latest(n) for n in self.done}) if self.done else root

  def root(self, step: int) -> int:
    steps = self.rw["steps"]
    step = max(0, min(step, len(steps)))
    while len(self.roots) <= step:
      _, before, after = steps[len(self.roots) - 1]
      root = self.roots[-1]
      new = replace_nodes(self.rec, root, {before: after})
      if new == root and before != after:  # `before` is not in the graph: the engine got there through its memo
        root = self.catch_up(root)
        new = replace_nodes(self.rec, root, {before: after})
      self.done[before] = after
      if new == root and before != after:
        # still not there: a bottom-up rewrite replaced `before` whole, where an earlier step rebuilt it from the inside
        # (rules/substitute.rules with one key inside another): every step so far, on the input, each key matched first
        new = self.catch_up(self.roots[0])
      if len(self.roots) == len(steps): new = self.catch_up(new)
      self.roots.append(new)
    return self.roots[step]

def replace_nodes(rec: Recording, root: int, mapping: dict[int, int]) -> int:
  """The graph under `root` with each node that is a key of `mapping` replaced by its value (nodes above rebuilt, hash-consed)."""
  memo: dict[int, int] = dict(mapping)
  nodes = rec.nodes
  stack = [root]
  while stack:
    n = stack[-1]
    if n in memo:
      stack.pop()
      continue
    head, src = nodes[n]
    missing = [s for s in src if s not in memo]
    if missing:
      stack.extend(missing)
      continue
    stack.pop()
    nsrc = tuple(memo[s] for s in src)
    memo[n] = n if nsrc == src else rec.intern_node(head, nsrc)
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
