"""The schedule cache: from the structure of a tensor graph to what kernelize made of it, so running the same shaped
computation again (`(a + 1).realize()` in a loop, a training step) skips cleanup, fusion and building kernel ASTs.

The key is the graph with its identities abstracted: every BUFFER, every kernel output not run yet (ASSIGN(BUFFER, KERNEL))
and every UNIQUE becomes a numbered slot (numbered in walk order, so `a + a` and `a + b` differ), everything else is kept
as it is (ops, dtypes, shapes, constants, bound variable values). Two graphs with one key are the same graph up to which
buffers they name, and the scheduler's decisions depend on nothing else, so one result serves both: it is stored with its
inputs and the buffers it made for kernel outputs as placeholders, and replayed by putting the new graph's inputs and new
output buffers in their place. A graph whose schedule depends on other live tensors (an assign some pending tensor reads
the old value of) is never cached.

Op chains (OpChain, at the end) give the key of a graph built by number ops from one realized buffer without walking it:
tensor/tensor.py extends the operand's chain with each op, and a chain learns its key from the first walk of its form.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Callable, NamedTuple
from runtime.dtype import DType, dtypes
from runtime.helpers import LRU
from runtime.ops import Ops
from runtime.rewrite import graph_rewrite
from runtime.uop import UOp, uop
from rules.substitute import substitute
from tensor.engine.storage import base_buffer

class GraphShape(NamedTuple):  # a NamedTuple: made on every realize, and a frozen dataclass takes a microsecond to build
  """A graph's cache key, its nodes in walk order (the keys of a result are positions in it), its slot nodes, and whether it
  assigns (an assign not kernelized yet: pending readers of its target may join the schedule)."""
  key: tuple
  topo: list[UOp]
  slots: list[UOp]
  assigns: bool
  pending: bool  # a kernel output not run yet is among the slots
  form: tuple = ()  # the key without the values of the tensor constants
  consts: tuple[UOp, ...] = ()  # the tensor constants (CONST on a DEVICE), in walk order
  roots: tuple[UOp, ...] = ()  # the graph's roots (the SINK's sources)

def graph_shape(sink: UOp, extra_key: tuple = ()) -> GraphShape:
  """The key of `sink`'s graph (a SINK of the roots), walked as the scheduler walks it (not into stored data). `extra_key`
  adds settings the scheduler's decisions depend on."""
  return roots_shape(sink.src, extra_key)

def roots_shape(roots: tuple[UOp, ...], extra_key: tuple = ()) -> GraphShape:
  """graph_shape of SINK(roots), without the SINK node: topo ends with the roots' nodes, the key with the roots' places."""
  # on every realize, cache hit or not: one inlined walk (sources before users, not into a BUFFER or a pending kernel output).
  # index[u] is -1 while u's sources are walked (a node is met again only when they are done: the graph has no cycles)
  topo: list[UOp] = []
  index: dict[UOp, int] = {}
  slot_of: dict[UOp, int] = {}
  slots: list[UOp] = []
  key: list = [extra_key]
  assigns = pending = False
  consts: list[UOp] = []
  const_at: dict[UOp, int] = {}
  stack: list = list(reversed(roots))
  get = index.get
  while stack:
    u = stack.pop()
    if (i := get(u)) is not None and i >= 0: continue
    op = u.op
    if i is None:  # first met
      if (op is EXPAND or op is RESHAPE) and (atom := _known_atom(u) or _atom(u)) is not None:
        # a number broadcast (x + 1): one entry from its memo, its constant numbered among the graph's constants
        index[u] = len(topo)
        topo.append(u)
        fragment, c = atom
        if c is not None and (j := const_at.get(c)) is None: j = const_at[c] = len(consts); consts.append(c)  # noqa: E702
        key.append((fragment, None if c is None else j))
        continue
      if op is not BUFFER and u.src and not (op is ASSIGN and u.src[1].op is KERNEL):
        index[u] = -1
        stack.append(u)
        stack.extend(reversed(u.src))  # a source walked already is passed over when popped
        continue
    index[u] = len(topo)
    topo.append(u)
    if op is BUFFER:
      if (s := slot_of.get(u)) is None: s = slot_of[u] = len(slots); slots.append(u)  # noqa: E702
      key.append((BUFFER, u.dtype, u.arg, u.src[1].arg, s))
    elif op is ASSIGN and u.src[1].op is KERNEL:  # a kernel output not run yet: its buffer and the value it will hold
      b, pending = u.src[0], True
      if (sb := slot_of.get(b)) is None: sb = slot_of[b] = len(slots); slots.append(b)  # noqa: E702
      su = slot_of[u] = len(slots)
      slots.append(u)
      key.append((KERNEL, u.dtype, b.dtype, b.arg, b.src[1].arg, sb, su))
    elif op is UNIQUE:
      if (s := slot_of.get(u)) is None: s = slot_of[u] = len(slots); slots.append(u)  # noqa: E702
      key.append((UNIQUE, s))
    elif op is CONST and u.src and (u.dtype in _NUMBERS):  # hash-consed: one node per (dtype, value, device), so equal values share
      if (j := const_at.get(u)) is None: j = const_at[u] = len(consts); consts.append(u)  # noqa: E702
      key.append((CONST, u.dtype, index[u.src[0]], j))
    else:
      if op is ASSIGN: assigns = True
      src = u.src
      key.append((op, u.dtype, u._key[3], u.tag, (index[src[0]],) if len(src) == 1 else tuple(map(index.__getitem__, src))))
  key.append((SINK, tuple(map(index.__getitem__, roots))))
  form = tuple(key)
  # tuple.__new__: a NamedTuple's own constructor takes four times as long
  key_ = (form, *[c._key[3] for c in consts]) if consts else (form,)
  return _new_shape(GraphShape, (key_, topo, slots, assigns, pending, form, tuple(consts), roots))

_new_shape = tuple.__new__

# as module names: `Ops.X` costs about 0.3 us in Python 3.11, and the walk runs on every realize
BUFFER, ASSIGN, KERNEL, UNIQUE, CONST, SINK = Ops.BUFFER, Ops.ASSIGN, Ops.KERNEL, Ops.UNIQUE, Ops.CONST, Ops.SINK
EXPAND, RESHAPE = Ops.EXPAND, Ops.RESHAPE

# ---- op chains: the key of a graph built op by op from one realized tensor, found without walking it ----

class OpChain:
  """The form of every graph one chain of ops builds from a realized tensor (`x * 1.0001 + 0.5` for any buffer x of that
  dtype, size and device): tensor/tensor.py gives each op's result the chain of its operand extended by the op, interned by
  (the operand's chain, what the op adds), so graphs of one form share one OpChain. Its walk key is the one roots_shape
  gives, found by walking the first graph of the form that is realized (`known`); every later one is looked up by it
  without a walk. The only slot is the realized tensor's BUFFER (`leaf` of the trace, tensor/tensor.py)."""
  __slots__ = ("key", "form", "consts", "known", "ready")
  def __init__(self):
    self.key, self.form, self.consts, self.known = (), (), (), False
    # (schedule cache, its version, helpers.FLAG_CHANGES, MAX_KERNEL_DEPTH, Prepared): the prepared launches a realize of this
    # form ran last, valid while the cache is unchanged and no flag was set since (tensor/engine/realize.py then runs them at once)
    self.ready: tuple | None = None

class Chains(LRU):
  """The engine's op chains, interned: (dtype, size, device) of a buffer -> its chain; (operand's chain, op, reverse, out dtype,
  number node) -> the result's chain. An LRU of the `size` used last (a chain given to a tensor stays valid when evicted: its
  key is a plain walk key, and what it kept of a schedule cache is checked against that cache's version)."""
  # both run on every `x + number` op: they read the table with dict.get, which does not refresh an entry (helpers.LRU)
  def of_buffer(self, b: UOp) -> OpChain:
    """The chain of a realized buffer itself."""
    if (c := _dict_get(self, key := (b.dtype, b.arg, b.src[1].arg))) is None: c = self[key] = OpChain()
    return c

  def step(self, parent: OpChain, op: Ops, reverse: bool, out, number: UOp) -> OpChain:
    """The chain of op(operand, number broadcast) (or of op(number, operand) when reversed) from the operand's chain."""
    if (c := _dict_get(self, key := (parent, op, reverse, out, number))) is None: c = self[key] = OpChain()
    return c

_dict_get = dict.get

def chain_shape(chain: OpChain, root: UOp, leaf: UOp, extra_key: tuple) -> GraphShape | None:
  """The GraphShape of SINK(root), a graph of the chain's form whose slot is `leaf`, without its walk (topo is None: the
  paths that need it walk then). None when the chain's key is not known yet: the caller walks, and teaches it the key."""
  if not chain.known or chain.key[0][0] != extra_key: return None
  return _new_shape(GraphShape, (chain.key, None, [leaf], False, False, chain.form, chain.consts, (root,)))

def walked(shape: GraphShape) -> GraphShape:
  """shape with its walk (topo): itself, or for a shape found by an op chain, its roots walked with the same extra key."""
  return shape if shape.topo is not None else roots_shape(shape.roots, shape.key[0][0])

def learn_chain(chain: OpChain, shape: GraphShape, leaf: UOp) -> None:
  """Keep the key of a walked graph of the chain's form, when the walk agrees that `leaf` is its one slot."""
  if shape.slots == [leaf] and not shape.assigns and not shape.pending:
    chain.key, chain.form, chain.consts, chain.known = shape.key, shape.form, shape.consts, True
# broadcast numbers seen (tensor/tensor.py keeps the nodes of `x + 1` for the next one): node -> (key fragment, its CONST or
# None when the value is in the fragment). An interning table of pure values (the fragment is a function of the hash-consed
# node alone), so one for the process; the 4096 used last are kept
_atoms: LRU = LRU(4096)

def _known_atom(u: UOp) -> tuple | None:
  """_atoms' entry for u, read with dict.get (no Python frame, no refresh: helpers.LRU): the walk asks for every broadcast it meets."""
  return _dict_get(_atoms, u)

def _atom(u: UOp) -> tuple | None:
  """A chain of RESHAPE/EXPAND over a CONST on a DEVICE (a Python number broadcast to a tensor's shape): its key fragment
  (the chain's ops, dtypes, args and tags, the constant's dtype and device, and its value unless it is abstracted as the
  graph walk abstracts constants), remembered; None for anything else. Its inner nodes get no places of their own in the
  walk: the scheduler never makes one a kernel unless it is a root, and then the walk meets it as an atom of its own."""
  chain, n = [], u
  while n.op is EXPAND or n.op is RESHAPE:
    if len(n.src) != 1: return None
    chain.append((n.op, n.dtype, n._key[3], n.tag))
    n = n.src[0]
  if n.op is not Ops.CONST or len(n.src) != 1 or n.src[0].op is not Ops.DEVICE or n.tag is not None or n.src[0].tag is not None: return None
  abstract = n.dtype in _NUMBERS
  fragment = (EXPAND, tuple(chain), n.dtype, n.src[0].arg, None if abstract else n._key[3])
  atom = _atoms[u] = (fragment, n if abstract else None)
  return atom

_NUMBERS = frozenset(t for t in vars(dtypes).values() if isinstance(t, DType) and t.count == 1 and (dtypes.is_float(t) or dtypes.is_int(t)))

@dataclass(frozen=True)
class Build:
  """A small program building nodes from a value list that starts with the graph's slots and the outputs' new buffers:
  then come the nodes that depend on neither (kept as they are), then one node per step from earlier values.
  positions[i] (a place in the graph's walk) becomes values[results[i]]."""
  fixed: tuple[UOp, ...]
  steps: tuple[tuple, ...]  # (op, dtype, source value numbers, arg, tag)
  positions: tuple[int, ...]
  results: tuple[int, ...]

  def run(self, start: list, topo: list[UOp]) -> dict[UOp, UOp]:
    return dict(zip([topo[p] for p in self.positions], self.results_of(start)))

  def results_of(self, start: list) -> list:
    """What each position becomes (in positions' order), from the value list's start."""
    values = [*start, *self.fixed]
    for op, dtype, srcs, arg, tag in self.steps: values.append(uop(op, dtype, tuple([values[i] for i in srcs]), arg, tag))
    return [values[r] for r in self.results]

@dataclass(frozen=True)
class Recipe:
  """A cached result: the (dtype, size, device) of each output buffer to make, the kernelize result as a Build, and when
  the graph has no kernels of its own pending, what realize needs without building the kernel nodes: each kernel to launch
  as (AST, value numbers of its buffers), in order, and what each node is once they have run (`after`: their buffers).
  `planned` are the outputs no root holds (value numbers), which the memory planner places in shared blocks; `after`
  leaves out the nodes that become them, `watch` has their places in the walk: when a live tensor is one of those nodes,
  it must get that buffer, and realize takes the full path (tensor/engine/prepared.py)."""
  outputs: tuple[tuple[DType, int, str], ...]
  kernelized: Build
  launches: tuple[tuple[UOp, tuple[int, ...]], ...] | None = None
  after: Build | None = None
  planned: tuple[int, ...] = ()
  watch: tuple[int, ...] = ()
  prepared: dict = field(default_factory=dict, compare=False, repr=False)  # program variant -> its launches made ready (prepared.py)

def _build(shape: GraphShape, number: dict[UOp, int], becomes: dict[UOp, UOp], at: dict[UOp, int]) -> Build | None:
  positions = tuple(at[k] for k in becomes if k in at)
  if not positions: return None
  number = dict(number)
  roots = uop(Ops.SINK, dtypes.void, tuple(becomes[shape.topo[i]] for i in positions))
  depends: set[UOp] = set(number)
  order = list(roots.toposort(gate=lambda u: u not in number))
  for u in order:
    if u not in number and any(s in depends for s in u.src): depends.add(u)
  fixed: list[UOp] = []
  later: list[UOp] = []
  for u in order:
    if u in number or u is roots: continue
    if u not in depends:
      # an identity of the original graph left in would be shared by every replay
      if u.op in (Ops.BUFFER, Ops.UNIQUE) or (u.op is Ops.ASSIGN and u.src[1].op is Ops.KERNEL): return None
      fixed.append(u)
    else: later.append(u)
  used = {s for u in later for s in u.src} | set(roots.src)
  fixed = [u for u in fixed if u in used]
  base = len(number)
  for j, u in enumerate(fixed): number[u] = base + j
  steps: list[tuple] = []
  for u in later:
    steps.append((u.op, u.dtype, tuple(number[s] for s in u.src), u.arg, u.tag))
    number[u] = len(number)
  return Build(tuple(fixed), tuple(steps), positions, tuple(number[r] for r in roots.src))

def _after_run(shape: GraphShape, number: dict[UOp, int], becomes: dict[UOp, UOp], made: list[UOp], at: dict[UOp, int]) -> tuple:
  """(launches, after, planned, watch) for a graph whose kernels all come from this kernelize, or (None, None, (), ())."""
  nothing: tuple = (None, None, (), ())
  if shape.pending: return nothing
  roots = [becomes.get(r, r) for r in shape.roots]
  kernels = [u for u in uop(Ops.SINK, dtypes.void, tuple(roots)).toposort(gate=lambda n: n.op is not Ops.BUFFER) if u.op is Ops.KERNEL]
  targets = {base_buffer(r) for r in roots}
  intermediates = {b for b in made if b not in targets}  # the memory planner places them
  launches = []
  for k in kernels:
    bufs = kernel_buffers(k)
    if any(b not in number for b in bufs): return nothing
    launches.append((k.arg.ast, tuple(number[b] for b in bufs)))
  done: dict[UOp, UOp] = {}
  for u in uop(Ops.SINK, dtypes.void, tuple(roots)).toposort(gate=lambda n: n.op is not Ops.BUFFER):
    if u.op is Ops.ASSIGN and u.src[1].op is Ops.KERNEL: done[u] = u.src[0]
  ran = resolved(becomes, done)
  # the nodes that become an intermediate are watched instead of rebuilt: a run that finds a live tensor holding one takes
  # the full path, which leaves that buffer out of the plan
  watched = {k for k, v in ran.items() if intermediates and any(n in intermediates for n in v.toposort())}
  after = _build(shape, number, {k: v for k, v in ran.items() if k not in watched}, at)
  if after is None: return nothing
  return tuple(launches), after, tuple(sorted(number[b] for b in intermediates)), tuple(sorted(at[k] for k in watched if k in at))

def kernel_buffers(k: UOp) -> list[UOp]:
  """The BUFFER nodes a KERNEL runs on, output first (its other sources are kernels it only waits for)."""
  return [base_buffer(s) for s in k.src[:k.arg.nbufs]]  # type: ignore[misc]

def resolved(becomes: dict[UOp, UOp], done: dict[UOp, UOp]) -> dict[UOp, UOp]:
  """`becomes` with the nodes in `done` (kernel outputs that ran: their buffers) replaced in its values, by one rewrite of
  all the values together (rules/substitute.rules)."""
  if not done or not becomes: return dict(becomes)
  values = uop(Ops.SINK, dtypes.void, tuple(becomes.values()))
  return dict(zip(becomes, graph_rewrite(values, substitute, done, bottom_up=True, name="substitute").src))

def record(shape: GraphShape, becomes: dict[UOp, UOp], made: list[UOp]) -> Recipe | None:
  """The recipe of `becomes` (a kernelize result of shape's graph, whose kernels write the new buffers `made`), or None
  when it names a node the slots don't cover (then it can't be replayed for another graph)."""
  number = {u: i for i, u in enumerate(shape.slots)}
  number.update((b, len(shape.slots) + j) for j, b in enumerate(made))
  if len(number) != len(shape.slots) + len(made): return None  # an output buffer that is also an input: not this scheduler's
  at = {u: i for i, u in enumerate(shape.topo)}
  if (kernelized := _build(shape, number, becomes, at)) is None: return None
  return Recipe(tuple((b.dtype, b.arg, b.src[1].arg) for b in made), kernelized, *_after_run(shape, number, becomes, made, at))

def new_buffers(recipe: Recipe, shape: GraphShape, new_buffer: Callable[[DType, int, str], UOp]) -> list:
  """The start of a replay's values: shape's slots, then a new buffer for each output."""
  return [*shape.slots, *(new_buffer(*spec) for spec in recipe.outputs)]

def replay(recipe: Recipe, shape: GraphShape, new_buffer: Callable[[DType, int, str], UOp]) -> dict[UOp, UOp]:
  """The kernelize result for shape's graph from a recipe recorded for a graph with the same key; new_buffer makes each
  output buffer."""
  return recipe.kernelized.run(new_buffers(recipe, shape, new_buffer), shape.topo)

@dataclass(frozen=True)
class Launcher:
  """What realize needs for a graph form with any values of its tensor constants (`t * float(i)` in a loop): each kernel as
  (its AST with the constants as parameters, its buffers' value numbers, where each parameter comes from: the form's
  constant number j, or (value,) for one the scheduler made, the bound Variables' values), then outputs and after as in a
  Recipe. COPY kernels have no parameters: (AST, buffers, None, None)."""
  outputs: tuple[tuple[DType, int, str], ...]
  launches: tuple[tuple, ...]
  after: Build
  planned: tuple[int, ...] = ()  # as a Recipe's
  watch: tuple[int, ...] = ()
  prepared: dict = field(default_factory=dict, compare=False, repr=False)

def _parametrized(recipe: Recipe) -> list[tuple]:
  from rules.kernelize import parametrize
  from rules.kernelize_helpers import Params
  out = []
  for ast, at in recipe.launches or ():
    if ast.op is Ops.COPY:
      out.append((ast, at, None, None))
      continue
    params = Params()
    out.append((graph_rewrite(ast, parametrize, params, name="parametrize"), at, tuple(params.values), params.bound))
  return out

def _param_dtypes(template: UOp) -> dict[int, DType]:
  from rules.kernelize_helpers import param_index
  return {i: u.dtype for u in template.toposort() if u.op is Ops.DEFINE_VAR and (i := param_index(u)) is not None}

def _launcher(first: tuple, second: tuple) -> Launcher | None:
  """The launcher two kernelized samples of one form agree on, or None: each parameter of the first is the one constant of
  its dtype and value in the graph, and the second's is that constant's new value (or both are the same value the
  scheduler made)."""
  (k1, after1, out1, consts1, plan1), (k2, after2, out2, consts2, plan2) = first, second
  if after1 != after2 or out1 != out2 or plan1 != plan2 or len(k1) != len(k2): return None
  launches = []
  for (t1, at1, v1, b1), (t2, at2, v2, b2) in zip(k1, k2):
    if t1 is not t2 or at1 != at2 or b1 != b2: return None
    if v1 is None:
      launches.append((t1, at1, None, None))
      continue
    dtype_of, sources = _param_dtypes(t1), []
    for i, (a, b) in enumerate(zip(v1, v2)):
      at = [j for j, c in enumerate(consts1) if c.dtype is dtype_of.get(i) and repr(c.arg) == repr(a)]
      if len(at) == 1 and repr(consts2[at[0]].arg) == repr(b): sources.append(at[0])
      elif not at and repr(a) == repr(b): sources.append((a,))
      else: return None
    launches.append((t1, at1, tuple(sources), b1))
  return Launcher(out1, tuple(launches), after1, *plan1)

class ScheduleCache:
  """Recipes by graph key and launchers by graph form, the `size` used last kept; hits and misses counted (tests and DEBUG
  read them). A form gets a launcher after two kernelized graphs with other constant values agree on one."""
  def __init__(self, size: int):
    self.recipes: LRU = LRU(size)
    self.forms: LRU = LRU(size)  # form -> the first sample, a Launcher, or False (its constants are not all parameters)
    self.hits = self.misses = 0
    self.version = 0  # changes with every put and clear: what an OpChain kept of this cache is valid while it is the same
  def get(self, shape: GraphShape) -> Recipe | Launcher | None:
    recipes = self.recipes
    if (r := dict.get(recipes, shape.key)) is not None: recipes.move_to_end(shape.key)  # LRU.get's work with one lookup
    if r is None and shape.consts and (f := self.forms.get(shape.form)).__class__ is Launcher: r = f
    if r is None: self.misses += 1
    else: self.hits += 1
    return r
  def put(self, shape: GraphShape, recipe: Recipe | None) -> None:
    if recipe is None: return
    self.version += 1
    self.recipes[shape.key] = recipe
    if not shape.consts or recipe.launches is None or recipe.after is None: return
    if (first := self.forms.get(shape.form)) is False or first.__class__ is Launcher: return
    sample = (_parametrized(recipe), recipe.after, recipe.outputs, shape.consts, (recipe.planned, recipe.watch))
    self.forms[shape.form] = sample if first is None else (_launcher(first, sample) or False)
  def clear(self) -> None:
    self.version += 1
    self.recipes.clear()
    self.forms.clear()
    self.hits = self.misses = 0
__all__ = ["ScheduleCache", "GraphShape", "Recipe", "Build", "Launcher", "graph_shape", "roots_shape", "record", "replay", "new_buffers", "resolved",
           "kernel_buffers", "OpChain", "Chains", "chain_shape", "learn_chain", "walked"]
