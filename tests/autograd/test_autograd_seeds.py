"""The seeds' autograd worked examples (../shared/seeds/002, "Automatic Differentiation" and "Chain Rule"), verbatim but
for the import (API.md: tinygrad -> tensor); what the seed prints in its comments is asserted on the captured output.
They read x and y (x.item(), y.item()) before taking the gradient, so reading values must leave the graph differentiable.
"""
import pytest
from tensor import Tensor

def printed(capsys) -> list[float]: return [float(line) for line in capsys.readouterr().out.split()]

def test_automatic_differentiation(capsys):
  x = Tensor([2.0], requires_grad=True)
  y = x**2 + 3*x + 1
  loss = y.sum()

  print(x.item()) # 2.0
  print(y.item()) # 4 + 6 + 1 = 11

  grad, = loss.gradient(x)
  print(grad.item()) # 7.0
  assert printed(capsys) == [2.0, 11.0, 7.0]

def test_chain_rule(capsys):
  x = Tensor([2.0], requires_grad=True)
  z = (x**2 + 1).log()
  loss = z.sum()

  print(x.item()) # 2.0
  print(z.item()) # log(2^2 + 1) = log(5) ≈ 1.6094378232955933

  grad, = loss.gradient(x)
  print(grad.item()) # 0.8
  assert printed(capsys) == pytest.approx([2.0, 1.6094378232955933, 0.8], rel=1e-6)

def test_backward_gives_the_same(capsys):
  # the seeds' other spelling, loss.backward() then x.grad (API.md: "loss.gradient(x) and loss.backward() give d/dx exactly")
  x = Tensor([2.0], requires_grad=True)
  (x**2 + 3*x + 1).sum().backward()
  assert x.grad.item() == 7.0
  x = Tensor([2.0], requires_grad=True)
  (x**2 + 1).log().sum().backward()
  assert x.grad.item() == pytest.approx(0.8, rel=1e-6)
