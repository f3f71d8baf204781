"""examples/torch/cnn.h's residual CNN in Python, parameter for parameter
(same names, so the same registration order and DDP buckets). Used by
examples/reference/train_torch.py (--model=cnn) and
tests/reference/torch_ddp_goldens.py."""
import torch.nn as nn
import torch.nn.functional as F


class ResidualCnn(nn.Module):
    def __init__(self, width=16, side=28, classes=10):
        super().__init__()

        def conv(i, o, k):
            return nn.Conv2d(i, o, k, padding=k // 2, bias=False)

        self.conv1 = conv(1, width, 3)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = conv(width, width, 3)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = conv(width, width, 3)
        self.bn3 = nn.BatchNorm2d(width)
        self.conv4 = conv(width, 2 * width, 3)
        self.bn4 = nn.BatchNorm2d(2 * width)
        self.conv5 = conv(2 * width, 2 * width, 3)
        self.bn5 = nn.BatchNorm2d(2 * width)
        self.down = conv(width, 2 * width, 1)
        self.down_bn = nn.BatchNorm2d(2 * width)
        self.fc = nn.Linear(2 * width * (side // 4) ** 2, classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn3(self.conv3(F.relu(self.bn2(self.conv2(x))))) + x)
        x = F.max_pool2d(x, 2)
        main = self.bn5(self.conv5(F.relu(self.bn4(self.conv4(x)))))
        shortcut = self.down_bn(self.down(x))
        x = F.relu(main + shortcut)
        x = F.max_pool2d(x, 2)
        return self.fc(x.flatten(1))
