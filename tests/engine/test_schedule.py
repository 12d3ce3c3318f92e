"""The scheduler (tensor/engine/schedule.py, rules/kernelize.rules): how many kernels each kind of program becomes, that
values stay right when they fuse, the kernelize graph the seeds show, and assign ordering."""
from __future__ import annotations
import numpy as np
import pytest
from runtime.ops import Ops
from runtime.uop import UOp, uop
from tensor import GlobalCounters, Tensor
from tensor.engine.schedule import ScheduleError

RNG = np.random.default_rng(0)

def rand(*shape) -> np.ndarray: return RNG.standard_normal(shape).astype(np.float32)

def kernels_of(u: UOp) -> list[UOp]:
  return [n for n in u.toposort(gate=lambda n: n.op is not Ops.BUFFER) if n.op is Ops.KERNEL]

def count(*ts: Tensor) -> int:
  """The compute kernels (not copies) scheduled for these tensors, which are then realized."""
  ts[0].kernelize(*ts[1:])
  ks = {k for t in ts for k in kernels_of(t.uop)}
  n = sum(1 for k in ks if k.arg.ast.op is Ops.SINK)
  Tensor.realize(*ts)
  return n

def inputs(*arrays: np.ndarray, device: str = "CPU") -> list[Tensor]:
  return [Tensor(a, device=device).realize() for a in arrays]

def close(t: Tensor, want) -> None: np.testing.assert_allclose(t.numpy(), want, rtol=1e-5, atol=1e-5)

def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
  e = np.exp(x - x.max(axis, keepdims=True))
  return e / e.sum(axis, keepdims=True)

# ---- fusion: kernel counts ----

def test_elementwise_chain_is_one_kernel():
  a, b, c = rand(4, 8), rand(4, 8), rand(4, 8)
  A, B, C = inputs(a, b, c)
  out = (((A + 1) * B - C).exp2() + 2).sqrt().relu()
  assert count(out) == 1
  close(out, np.maximum(np.sqrt(np.exp2((a + 1) * b - c) + 2), 0))

def test_mul_add_sum_is_one_kernel():
  a, b, c = rand(4, 8), rand(4, 8), rand(4, 8)
  A, B, C = inputs(a, b, c)
  out = (A * B + C).sum()
  assert count(out) == 1
  close(out, (a * b + c).sum())

def test_a_very_long_chain_is_cut_into_kernels_of_bounded_depth(monkeypatch):
  # 100,000 dependent ops in one kernel made gcc crash (and 10,000 took it 7 s): the chain is cut every MAX_KERNEL_DEPTH ops
  import tensor.engine.schedule as schedule
  from tensor.engine import realize
  monkeypatch.setattr(schedule, "MAX_KERNEL_DEPTH", 50)
  a = rand(4, 8)
  t = A = inputs(a)[0]
  for _ in range(1000): t = t * 1.0001 + 0.5
  t.kernelize()
  ks = [k for k in kernels_of(t.uop) if k.arg.ast.op is Ops.SINK]
  assert len(ks) == 40  # 2,000 ops, 50 per kernel
  # the pieces of a repeated step are one kernel: the same AST, compiled once
  assert len({k.arg.ast for k in ks}) <= 2
  want = a.copy()
  for _ in range(1000): want = want * np.float32(1.0001) + np.float32(0.5)
  np.testing.assert_allclose(t.numpy(), want, rtol=1e-4)
  assert all(len(realize.kernel_buffers(k)) == 2 for k in ks) and A.numpy() is not None

def test_two_reductions_of_one_input_are_one_kernel():
  a = rand(5, 7)
  A, = inputs(a)
  out = A.sum(1) + A.max(1)
  assert count(out) == 1
  close(out, a.sum(1) + a.max(1))

def test_reduce_then_elementwise_is_one_kernel():
  a = rand(5, 7)
  A, = inputs(a)
  out = (A.sum(1) * 2 + 1).exp2()
  assert count(out) == 1
  close(out, np.exp2(a.sum(1) * 2 + 1))

def test_elementwise_reduce_elementwise_is_one_kernel():
  a, b = rand(6, 4), rand(6, 1)
  A, B = inputs(a, b)
  out = ((A * 3).max(1, keepdim=True) + B).relu()
  assert count(out) == 1
  close(out, np.maximum((a * 3).max(1, keepdims=True) + b, 0))

def test_softmax_is_one_kernel():
  # max, sum of exp and the division in one kernel: per row, three loops over the row
  a = rand(6, 10)
  A, = inputs(a)
  out = A.softmax()
  assert count(out) == 1
  close(out, softmax(a))

def test_log_softmax_and_layernorm_are_one_kernel():
  a = rand(6, 10)
  A, = inputs(a)
  out = A.log_softmax()
  assert count(out) == 1
  close(out, np.log(softmax(a)))
  ln = (A - A.mean(1, keepdim=True)) / (A.var(1, keepdim=True) + 1e-5).sqrt()
  assert count(ln) == 1
  close(ln, (a - a.mean(1, keepdims=True)) / np.sqrt(a.var(1, ddof=1, keepdims=True) + 1e-5))

def test_softmax_over_outer_axis_is_not_fused():
  # the max over axis 0 is broadcast along the outer loop: fused, it would be recomputed for every row
  a = rand(6, 10)
  A, = inputs(a)
  out = A.softmax(0)
  assert count(out) == 3
  close(out, softmax(a, 0))

def test_matmul_is_one_kernel():
  a, b, bias = rand(5, 8), rand(8, 3), rand(3)
  A, B, BIAS = inputs(a, b, bias)
  out = A @ B
  assert count(out) == 1
  close(out, a @ b)
  out = (A @ B + BIAS).relu()
  assert count(out) == 1
  close(out, np.maximum(a @ b + bias, 0))

def test_matmul_then_softmax_keeps_the_matmul_apart():
  # the matmul feeds three loops of the softmax: fusing it would compute it three times
  a, b = rand(5, 8), rand(8, 3)
  A, B = inputs(a, b)
  out = (A @ B).softmax()
  assert count(out) == 2
  close(out, softmax(a @ b))

def test_reduction_inside_reduction_fuses_when_computed_once():
  a, c = rand(6, 8), rand(6, 8)
  A, C = inputs(a, c)
  var = (A - A.mean(1, keepdim=True)).square().sum(1)  # the mean depends only on the row
  assert count(var) == 1
  close(var, ((a - a.mean(1, keepdims=True)) ** 2).sum(1))
  # the column sum would be recomputed for every row of the outer sum: its own kernel
  out = (A.sum(0, keepdim=True) * C).sum(1)
  assert count(out) == 2
  close(out, (a.sum(0, keepdims=True) * c).sum(1))

def test_reduction_read_by_several_kernels_is_computed_once():
  a = rand(6, 8)
  A, = inputs(a)
  s = A.sum(1)
  x, y = s + 1, (s * 2).exp2()
  x.kernelize(y)
  ks = {k for t in (x, y) for k in kernels_of(t.uop)}
  reductions = [k for k in ks if any(n.op is Ops.REDUCE_AXIS for n in k.arg.ast.toposort())]
  assert len(ks) == 3 and len(reductions) == 1
  close(x, a.sum(1) + 1)
  close(y, np.exp2(a.sum(1) * 2))

def test_reduction_read_at_two_indices_is_computed_once():
  a = rand(6, 8)
  A, = inputs(a)
  s = A.sum(1)
  out = s + s.flip(0)  # row i needs the sums of rows i and 5-i: fused, each would be summed twice
  assert count(out) == 2
  close(out, a.sum(1) + a.sum(1)[::-1])

def test_reduction_over_size_one_axes_is_no_loop_and_fuses():
  a = rand(5, 1)
  A, = inputs(a)
  s = (A.flip(0) * A).sum(1, keepdim=True)
  out = s.flip(1) * s  # read at two index expressions of the same place, but there is no loop to run twice
  assert count(out) == 1
  close(out, (a[::-1] * a) ** 2)

def test_conv_batchnorm_relu():
  from tensor import nn
  a = rand(4, 8, 16, 16)
  X, = inputs(a)
  # eval: the running statistics' 1/sqrt(var + eps) (a kernel of 16 values), the input's padded copy, then one; training: the
  # padded copy, the conv, its mean, variance, 1/sqrt, the output
  for training, most in ((False, 3), (True, 6)):
    conv, bn = nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm(16)
    for p in nn.state.get_parameters([conv, bn]): p.realize()
    with Tensor.train(training):
      out = bn(conv(X)).relu()
      assert count(out) <= most
      if training: Tensor.realize(bn.running_mean, bn.running_var)
    ref = torch_conv_bn_relu(a, conv, bn, training)
    if ref is not None: np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)

def torch_conv_bn_relu(a, conv, bn, training):
  try: import torch
  except ImportError: return None
  c = torch.nn.functional.conv2d(torch.tensor(a), torch.tensor(conv.weight.numpy()), torch.tensor(conv.bias.numpy()), padding=1)
  if training: mean, var = c.mean((0, 2, 3)), c.var((0, 2, 3), unbiased=False)
  else: mean, var = torch.zeros(16), torch.ones(16)
  shape = (1, 16, 1, 1)
  y = (c - mean.reshape(shape)) / torch.sqrt(var.reshape(shape) + bn.eps) * torch.tensor(bn.weight.numpy()).reshape(shape)
  return torch.relu(y + torch.tensor(bn.bias.numpy()).reshape(shape)).numpy()

def test_copied_input_read_by_several_kernels_is_copied_once():
  a = rand(4, 4)
  X = Tensor(a)  # a COPY from the host, not run yet
  x, y = X + 1, X.sum(0)
  x.kernelize(y)
  ks = {k for t in (x, y) for k in kernels_of(t.uop)}
  assert sum(1 for k in ks if k.arg.ast.op is Ops.COPY) == 1
  assert sum(1 for k in ks if k.arg.ast.op is Ops.SINK) == 2
  close(x, a + 1)
  close(y, a.sum(0))

def test_realized_buffer_is_read_not_recomputed():
  a = rand(8)
  A, = inputs(a)
  B = (A * 2).realize()
  GlobalCounters.reset()
  out = B + 1
  assert count(out) == 1
  close(out, a * 2 + 1)
  assert GlobalCounters.kernel_count == 1

def test_shared_subexpression_of_two_outputs_fuses_into_each():
  a = rand(8)
  A, = inputs(a)
  c = (A + 1).exp2()
  assert count(c * 2, c + 3) == 2

def test_contiguous_is_a_kernel_boundary():
  a = rand(16)
  A, = inputs(a)
  y = A
  for _ in range(5): y = (y + 1).contiguous()
  assert count(y) == 5
  close(y, a + 5)

def test_contiguous_of_data_in_memory_is_free():
  a = rand(3, 4)
  A, = inputs(a)
  assert count(A.contiguous()) == 0
  assert count(A.sum(1).contiguous()) == 1
  close(A.contiguous(), a)

@pytest.mark.parametrize("n", [64, 256])  # 256: a packed matmul (its panels' copies and movement ops cleanup rewrites)
def test_a_realized_contiguous_of_a_matmul_is_read_not_recomputed(n):
  # issue 27: b's kernel ran in the first realize; the second reads its buffer (one kernel: b * 3), every time the form repeats
  for _ in range(2):
    a, w = rand(n, n), rand(n, n)
    A, W = inputs(a, w)
    b = (A @ W + A).contiguous()
    assert count(b.sum(1)) >= 2
    assert b.uop.op is not Ops.CONTIGUOUS  # b holds the buffer its kernel wrote
    assert count(b * 3) == 1
    np.testing.assert_allclose((b * 3).numpy(), 3 * (a @ w + a), rtol=1e-4, atol=1e-3)

def test_a_held_kernel_output_above_a_realized_contiguous_is_read_not_recomputed():
  # GPT-2's decode: a layernorm (a kernel's output: 512 values broadcast into the projection) of a contiguous() of a matmul
  # (whose form cleanup rewrites) computed in the same realize, held by a tensor; the realize of one half of the projection
  # computes it, the other half reads it
  x, w1, w = rand(1, 512), rand(512, 512), rand(512, 64)
  X, W1, W = inputs(x, w1, w)
  h = (X @ W1 + X).contiguous()
  ln = h.layernorm()
  proj = ln @ W
  assert count(proj[:, :32] + 1) >= 3  # h, the layernorm, the projection
  assert h.uop.op is not Ops.CONTIGUOUS and ln.uop.op is Ops.RESHAPE  # both hold the buffers their kernels wrote
  assert count(proj[:, 32:] * 3) == 1  # the projection alone
  hn = x @ w1 + x
  y = (hn - hn.mean()) / np.sqrt(hn.var() + 1e-5)
  np.testing.assert_allclose((proj[:, 32:] * 3).numpy(), 3 * (y @ w)[:, 32:], rtol=1e-4, atol=1e-3)

@pytest.mark.parametrize("contiguous", [False, True])
def test_a_held_reshape_of_a_kernel_output_is_read_not_recomputed(contiguous):
  # y is a reshape of the sum a kernel of c's realize wrote (a reduction broadcast into c is its own kernel): y * 5 reads
  # that buffer, with or without a realize point below it
  a = rand(64, 64)
  A, = inputs(a)
  x = (A + 1).contiguous() if contiguous else A + 1
  y = (x * x).sum(1)
  c = (y.reshape(64, 1) * A).sum(0)
  assert count(c) >= 2
  assert count(y * 5) == 1 and not any(u.op is Ops.REDUCE_AXIS for u in y.uop.toposort())
  np.testing.assert_allclose((y * 5).numpy(), 5 * ((a + 1) ** 2).sum(1), rtol=1e-5)

@pytest.mark.parametrize("rows", [1, 4])
def test_an_expensive_value_broadcast_into_a_sum_is_computed_once(rows):
  # GPT-2's MLP: GELU's values (exps) broadcast over the 96 outputs of the down-projection are a kernel of their own, where
  # fused each output computed all of them again; values as numpy's
  x, w = rand(rows, 512), rand(96, 512)
  X, W = inputs(x, w)
  out = X.gelu() @ W.T
  assert count(out) == 2
  want = 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))
  np.testing.assert_allclose(out.numpy(), want @ w.T, rtol=1e-4, atol=1e-3)

def test_a_long_elementwise_value_broadcast_into_a_sum_is_computed_once():
  # the MLP's weight gradient: ReLU's gradient (two loads, an add, compares, selects: BROADCAST_MIN_OPS or more ALU ops) is
  # a kernel of its own, where fused each of the 96 columns of x.T @ g computed it again; values as numpy's
  x, h, g = rand(64, 96), rand(64, 32), rand(64, 32)  # g's values broadcast over 96 >= BROADCAST_LONG_TIMES columns
  X, H, G, B = *inputs(x, h, g), Tensor(rand(32)).realize()
  b = B.numpy()
  out = ((H + B) * 0.5 > 0).where(G * 2, 0.0).T @ X  # 5 ALU ops
  assert count(out) == 2
  np.testing.assert_allclose(out.numpy(), np.where((h + b) * 0.5 > 0, g * 2, 0).T @ x, rtol=1e-4, atol=1e-3)
  assert count(((H + B) > 0).where(G, 0.0).T @ X) == 1  # 3 ALU ops: fused

def test_cheap_or_small_broadcast_values_stay_fused():
  # no transcendental: (x + 1) costs less than a kernel and a buffer; fewer than BROADCAST_MIN_SIZE values (a row's
  # statistics), or broadcast fewer than BROADCAST_MIN_TIMES times: fused as before
  from tensor.engine.schedule import BROADCAST_MIN_SIZE, BROADCAST_MIN_TIMES
  x, w = rand(1, 512), rand(96, 512)
  X, W = inputs(x, w)
  assert count((X + 1) @ W.T) == 1
  n = BROADCAST_MIN_SIZE // 2
  Xs, Ws = inputs(rand(1, n), rand(96, n))
  assert count(Xs.exp() @ Ws.T) == 1
  Xf, Wf = inputs(rand(1, 512), rand(BROADCAST_MIN_TIMES // 2, 512))
  assert count(Xf.exp() @ Wf.T) == 1

def test_reshape_of_a_kernel_output_needs_no_kernel():
  # a 2-D host array is COPY then RESHAPE: the copy alone
  GlobalCounters.reset()
  t = Tensor(rand(3, 4)).realize()
  assert GlobalCounters.kernel_count == 1 and t.uop.op is Ops.RESHAPE

# ---- the kernelize graph of the seeds ----

def test_kernelize_leaves_assign_of_kernel():
  t = Tensor([1, 2, 3, 4])
  out = t + 3 + 4
  out.kernelize()
  u = out.uop
  assert u.op is Ops.ASSIGN and u.src[0].op is Ops.BUFFER and u.src[1].op is Ops.KERNEL
  k = u.src[1]
  assert k.arg.ast.op is Ops.SINK and k.src[0] is u.src[0]
  # its input is the copy from the host: ASSIGN(BUFFER, KERNEL<COPY>(BUFFER, BUFFER on PYTHON))
  inp = k.src[1]
  assert inp.op is Ops.ASSIGN and inp.src[1].op is Ops.KERNEL and inp.src[1].arg.ast.op is Ops.COPY
  assert inp.src[1].src[1].op is Ops.BUFFER and inp.src[1].src[1].src[1].arg == "PYTHON"
  assert repr(k.arg) == "<Kernel SINK>" and repr(inp.src[1].arg) == "<Kernel COPY>"
  assert out.tolist() == [8, 9, 10, 11]
  assert out.uop.op is Ops.BUFFER

def test_kernelize_then_realize_runs_each_kernel_once():
  A, = inputs(rand(4))
  out = (A * 2).kernelize()
  GlobalCounters.reset()
  out.realize()
  assert GlobalCounters.kernel_count == 1
  out.realize()
  assert GlobalCounters.kernel_count == 1

def test_identical_specs_realize_once():
  A, = inputs(rand(4))
  x, y = A * 4, A * 4
  assert x.uop is y.uop
  x.realize()
  assert y.uop is x.uop and y.uop.op is Ops.BUFFER

# ---- assign ----

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_assign_twice_adds_twice(device):
  x, = inputs(np.array([1, 2, 3], np.float32), device=device)
  x.assign(x + 1)
  x.assign(x + 1)
  assert x.tolist() == [3, 4, 5]
  x.assign(x + 1).realize()
  x.assign(x + 1).realize()
  assert x.tolist() == [5, 6, 7]

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_assign_keeps_pending_readers_of_the_old_value(device):
  a, = inputs(np.array([1, 2, 3], np.float32), device=device)
  b, s = a + 1, a.sum()  # read a, not computed yet
  a.assign(a * 10).realize()
  assert b.tolist() == [2, 3, 4] and s.item() == 6 and a.tolist() == [10, 20, 30]
  for order in (0, 1):
    a, = inputs(np.array([1, 2, 3], np.float32), device=device)
    b = a + 1
    a.assign(a * 10)
    Tensor.realize(*((a, b) if order else (b, a)))
    assert b.tolist() == [2, 3, 4] and a.tolist() == [10, 20, 30]

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_assign_orders_readers_between_versions(device):
  a, = inputs(np.array([1, 2, 3], np.float32), device=device)
  a.assign(a + 1)
  y = a * 3  # reads the first new version
  a.assign(a + 1)
  Tensor.realize(y, a)
  assert y.tolist() == [6, 9, 12] and a.tolist() == [3, 4, 5]
  # writes without reads still land in order
  a.assign(Tensor([5.0, 5, 5], device=device))
  a.assign(Tensor([7.0, 7, 7], device=device))
  assert a.tolist() == [7, 7, 7]

@pytest.mark.parametrize("device", ["CPU", "PYTHON"])
def test_assign_reading_old_and_new_value(device):
  a, = inputs(np.array([1, 2, 3], np.float32), device=device)
  c = (a + 1) + a.assign(a * 10)
  assert c.tolist() == [12, 23, 34] and a.tolist() == [10, 20, 30]

def test_assign_whose_reader_needs_old_and_new_in_one_node_raises():
  a, = inputs(np.array([1, 2, 3], np.float32), device="PYTHON")
  old = a.uop
  a.assign(a * 10)
  c = Tensor(uop(Ops.ADD, a.dtype, (old, a.uop)))
  with pytest.raises(ScheduleError, match="old version"): c.realize()

# in-place hazards: the assign kernel writes its target while reading it; reads at another element must happen first
INPLACE = {
  "flip": (lambda a: a.flip(0), lambda a: a[::-1]),
  "flip_plus_self": (lambda a: a.flip(0) + a, lambda a: a[::-1] + a),
  "minus_sum": (lambda a: a - a.sum(), lambda a: a - a.sum()),
  "shift": (lambda a: a.pad(((1, 0),))[:4] + 10, lambda a: np.concatenate([[0], a[:3]]) + 10),
  "cumulative": (lambda a: a + a.pad(((1, 0),))[:4] + a.pad(((2, 0),))[:4],
                 lambda a: a + np.concatenate([[0], a[:3]]) + np.concatenate([[0, 0], a[:2]])),
}

@pytest.mark.parametrize("name", INPLACE)
def test_assign_reading_its_target_elsewhere(name):
  f, ref = INPLACE[name]
  a0 = np.array([1, 2, 3, 4], np.float32)
  a, = inputs(a0, device="PYTHON")
  a.assign(f(a))
  close(a, ref(a0))

def test_assign_transpose_in_place():
  a0 = np.arange(9, dtype=np.float32).reshape(3, 3)
  a, = inputs(a0, device="PYTHON")
  a.assign(a.T)
  close(a, a0.T)
  a.assign(a + a.T.flip(0))
  close(a, a0.T + a0[::-1])

def test_assign_into_empty():
  x = Tensor.empty(3, device="PYTHON")
  x.assign(Tensor([1.0, 2.0, 3.0], device="PYTHON"))
  assert x.tolist() == [1, 2, 3]

# ---- issue 27: compiles in parallel, and DEBUG=2's table of the slowest kernels ----

def test_slowest_table_ranks_by_cpu_time():
  """A kernel that waited for a core (long on the wall clock, short on its threads' clocks) ranks below one that computed."""
  from tensor.engine import debug
  table = debug.slowest_table([("waited", 1.0, 0.1, 10**9, 10**6), ("computed", 0.3, 0.3, 10**9, 10**6)]).splitlines()
  assert "400.00 ms of CPU time, 1300.00 ms wall" in table[0]
  assert table[1].split()[0] == "computed" and table[2].split()[0] == "waited" and "(wall 1000.000)" in table[2]

def test_new_kernels_compile_in_parallel_and_debug_2_lists_the_slowest(capsys, tmp_path, monkeypatch):
  """A realize of several new kernels hands their C to a pool of compiler threads (each runner waits for its object); the
  results are the kernels' own. With DEBUG=2 it ends with the table of its slowest kernels and their fractions of peak."""
  from runtime.helpers import Context
  from tensor.engine import realize as R
  monkeypatch.setenv("CACHE_DIR", str(tmp_path))  # empty: every kernel compiles
  submitted = []
  real = R.Compiling.__init__
  def counted(self, future):
    submitted.append(future)
    real(self, future)
  monkeypatch.setattr(R.Compiling, "__init__", counted)
  a = rand(64, 48)
  A, = inputs(a)
  outs = [(A * 1.5).sum(0), (A + 2).max(1), (A - 3).exp(), (A * A).sum()]
  with Context(DEBUG=2): Tensor.realize(*outs)
  assert len(submitted) >= 4
  table = capsys.readouterr().out
  assert "slowest" in table and "GFLOP/s (" in table and "GB/s (" in table and "ms of CPU time" in table and "(wall " in table
  for t, want in zip(outs, [(a * 1.5).sum(0), (a + 2).max(1), np.exp(a - 3), (a * a).sum()]):
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-4, atol=1e-4)
