"""ResNet-18/34/50/101/152 (He et al. 2015, the v1.5 variant: a bottleneck's stride on its 3x3 conv) as tinygrad's
extra/models/resnet.py lays it out, in our Tensor API. The parameter names are torchvision's, so a torch state dict loads
as it is (bench/inference.py copies a randomly initialised torch model's weights into it and compares the logits).

  python examples/resnet.py            # ResNet-18 on a random batch of 2, the logits' shape and the time of one forward
"""
from __future__ import annotations
import time
from tensor import Tensor, nn

class BasicBlock:
  expansion = 1
  def __init__(self, in_planes: int, planes: int, stride: int = 1):
    self.conv1 = nn.Conv2d(in_planes, planes, 3, stride=stride, padding=1, bias=False)
    self.bn1 = nn.BatchNorm2d(planes)
    self.conv2 = nn.Conv2d(planes, planes, 3, padding=1, bias=False)
    self.bn2 = nn.BatchNorm2d(planes)
    self.downsample: list = []
    if stride != 1 or in_planes != planes:
      self.downsample = [nn.Conv2d(in_planes, planes, 1, stride=stride, bias=False), nn.BatchNorm2d(planes)]
  def __call__(self, x: Tensor) -> Tensor:
    out = self.bn1(self.conv1(x)).relu()
    out = self.bn2(self.conv2(out))
    return (out + x.sequential(self.downsample)).relu()

class Bottleneck:
  expansion = 4
  def __init__(self, in_planes: int, planes: int, stride: int = 1):
    self.conv1 = nn.Conv2d(in_planes, planes, 1, bias=False)
    self.bn1 = nn.BatchNorm2d(planes)
    self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
    self.bn2 = nn.BatchNorm2d(planes)
    self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
    self.bn3 = nn.BatchNorm2d(planes * 4)
    self.downsample: list = []
    if stride != 1 or in_planes != planes * 4:
      self.downsample = [nn.Conv2d(in_planes, planes * 4, 1, stride=stride, bias=False), nn.BatchNorm2d(planes * 4)]
  def __call__(self, x: Tensor) -> Tensor:
    out = self.bn1(self.conv1(x)).relu()
    out = self.bn2(self.conv2(out)).relu()
    out = self.bn3(self.conv3(out))
    return (out + x.sequential(self.downsample)).relu()

BLOCKS = {18: (BasicBlock, [2, 2, 2, 2]), 34: (BasicBlock, [3, 4, 6, 3]), 50: (Bottleneck, [3, 4, 6, 3]),
          101: (Bottleneck, [3, 4, 23, 3]), 152: (Bottleneck, [3, 8, 36, 3])}

class ResNet:
  """(N, 3, H, W) images -> (N, num_classes) logits."""
  def __init__(self, depth: int = 18, num_classes: int = 1000):
    block, counts = BLOCKS[depth]
    self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
    self.bn1 = nn.BatchNorm2d(64)
    planes, self.layer1, self.layer2, self.layer3, self.layer4 = 64, [], [], [], []
    for layer, width, n, stride in zip((self.layer1, self.layer2, self.layer3, self.layer4), (64, 128, 256, 512), counts, (1, 2, 2, 2)):
      for i in range(n):
        layer.append(block(planes, width, stride if i == 0 else 1))
        planes = width * block.expansion
    self.fc = nn.Linear(planes, num_classes)

  def __call__(self, x: Tensor) -> Tensor:
    out = self.bn1(self.conv1(x)).relu()
    out = out.pad([1, 1, 1, 1]).max_pool2d((3, 3), 2)  # zero padding is safe after the relu
    for layer in (self.layer1, self.layer2, self.layer3, self.layer4): out = out.sequential(layer)
    return self.fc(out.mean([2, 3]))

if __name__ == "__main__":
  model = ResNet(18)
  x = Tensor.rand(2, 3, 224, 224).realize()
  t0 = time.perf_counter()
  with Tensor.test(): out = model(x).realize()
  print(f"logits {out.shape}, first forward (compiling) {time.perf_counter() - t0:.1f} s")
