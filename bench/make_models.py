#!/usr/bin/env python3
"""TorchScript models for `accelkit bench --model FILE` (the inference figures in
bench/results/inference-cpu.md), written with torch.jit.script from plain torch.nn (no
torchvision), random weights from a fixed seed:

  linear4096.pt   4 x (Linear(4096, 4096) + ReLU)                      --input 16x4096
  resnet18.pt     ResNet-18 (BasicBlock [2, 2, 2, 2], 1000 classes)    --input 16x3x224x224
  mnist_cnn.pt    pytorch/examples' C++ MNIST network, eval            --input 64x1x28x28
  transformer_encoder.pt  PyTorch's own nn.TransformerEncoder (d 128, 4 heads, feed-forward
                  512, dropout 0.1, 3 layers, batch first)  --input 64x64x128 --mode train

    .venv/bin/python bench/make_models.py OUT_DIR

Save with the Python of the LibTorch that will load them (TorchScript files are read by the
same or a newer LibTorch).
"""
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class LinearStack(nn.Module):
    def __init__(self, width=4096, layers=4):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(layers)])

    def forward(self, x):
        for layer in self.layers:
            x = F.relu(layer(x))
        return x


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        s = x if self.down is None else self.down(x)
        return F.relu(y + s)


class ResNet18(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        blocks = []
        cin = 64
        for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
            blocks += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
        x = self.blocks(x)
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


class MnistNet(nn.Module):
    """pytorch/examples cpp/mnist: conv(1,10,5) conv(10,20,5)+dropout, fc 320-50-10, log_softmax."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, 5)
        self.conv2 = nn.Conv2d(10, 20, 5)
        self.drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.relu(self.fc1(x))
        x = F.dropout(x, 0.5, self.training)
        return F.log_softmax(self.fc2(x), dim=1)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(20240901)
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(128, 4, 512, dropout=0.1, batch_first=True), 3,
                                    enable_nested_tensor=False)
    for name, model in [("linear4096", LinearStack()), ("resnet18", ResNet18()), ("mnist_cnn", MnistNet()),
                        ("transformer_encoder", encoder)]:
        model.eval()
        if name == "resnet18":  # running statistics as a trained network has them, not 0/1
            for m in model.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.uniform_(-0.1, 0.1)
                    m.running_var.uniform_(0.5, 1.5)
        path = os.path.join(out, name + ".pt")
        torch.jit.save(torch.jit.script(model), path)
        print(path)


if __name__ == "__main__":
    main()
