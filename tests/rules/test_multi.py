"""rules/multi.rules: every rule fires while tensor graphs over several devices are lowered to per-device graphs (nothing
runs), and what each lowering gives: no MULTI left below the roots, each shard on its own device, the split axis followed.
The values are tested in tests/multi/test_shard.py."""
from __future__ import annotations
import numpy as np
import pytest
from fires import assert_every_rule_fires, firing, rules_of
from runtime.dtype import dtypes
from runtime.ops import Ops
from runtime.uop import uop
from tensor import Tensor
from tensor.engine.multi import lower
from tensor.engine.state import ENGINE
from tensor.engine.storage import device_node
from tensor.multi import MultiDeviceError

D2 = ("CPU", "CPU:1")

def graphs() -> list[Tensor]:
  a = Tensor(np.arange(24, dtype=np.float32).reshape(4, 6)).realize()
  s, r = a.shard(D2, axis=0), a.to(D2)
  w = Tensor(np.ones((3, 2, 3, 3), np.float32)).to(D2)
  x = Tensor(np.ones((2, 2, 5, 5), np.float32)).shard(D2, axis=0)
  t = Tensor(np.zeros((4, 6), np.float32)).shard(D2, axis=0).realize()
  idx = Tensor(np.array([[0], [3]], dtype=np.int32)).shard(D2, axis=0)
  return [s + 1, (s * r).sum(0), s.sum(1), s.reshape(2, 2, 6).permute(2, 0, 1).flip(1), s[:, :3].pad(((1, 1), (0, 0))),
          s[2:], s.to("CPU:1"), s.contiguous().detach(), s.reshape(4, 1, 6).expand(4, 2, 6), x.conv2d(w), t.assign(s * 2), r[idx],
          s.pad(((0, 0), (1, 1))).flip(1), s.to(("CPU:2", "CPU:3")), Tensor(uop(Ops.COPY, s.dtype, (s.uop, device_node(D2))))]

def test_every_rule_fires_and_no_multi_is_left_below_the_roots():
  with firing() as counts:
    for g in graphs():
      flat, _ = lower([g.uop], ENGINE)
      below = [u for f in flat for u in f.toposort()]
      assert not any(u.op is Ops.MULTI or (u.op is Ops.DEVICE and u.arg.__class__ is tuple) for u in below)
      assert all(isinstance(f.device, str) for f in flat)
    with pytest.raises(MultiDeviceError, match="GATHER has no multi-device form"):  # a table on one device, indices on two
      table = Tensor(np.ones((4, 2), np.float32))
      idx = Tensor(np.zeros((2, 1), np.int32)).shard(D2, axis=0)
      lower([uop(Ops.GATHER, dtypes.float32, (table.uop, idx.uop), None)], ENGINE)
  # the last rule raises (the GATHER above reaches it): a rule that raises is not counted as fired
  assert_every_rule_fires(rules_of("rules/multi.rules"), counts, {"u@(_ srcs*)": "raises MultiDeviceError"})

def test_the_split_axis_is_followed_and_shards_stay_on_their_devices():
  a = Tensor(np.arange(24, dtype=np.float32).reshape(4, 6)).realize()
  s = a.shard(D2, axis=1)
  flat, rebuild = lower([s.permute(1, 0).reshape(6, 2, 2).uop], ENGINE)
  assert [f.device for f in flat] == list(D2) and [f.shape for f in flat] == [(3, 2, 2)] * 2
  root = s.permute(1, 0).reshape(6, 2, 2).uop
  after = rebuild({})[root]
  assert after.op is Ops.MULTI and after.arg == 0 and after.shape == (6, 2, 2)
  # a reduction over the split axis: one result per device, whole on each
  flat, rebuild = lower([s.sum(1).uop], ENGINE)
  assert [f.shape for f in flat] == [(4,)] * 2 and rebuild({})[s.sum(1).uop].arg is None
  assert lower([a.uop], ENGINE) is None and lower([(a + 1).uop], ENGINE) is None  # nothing on several devices: no lowering
