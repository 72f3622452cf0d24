#!/usr/bin/env python3
"""The progress bar shows the true running accuracy: for each epoch line of
OUT ("epoch i/N: ... train_acc=A ..."), the bar of that epoch in ERR (stderr,
redrawn with \\r) at its last step ("epoch i/N [...] K/K loss=L acc=B ...")
shows B == A as printed (the running accuracy over every rank's rows at the
epoch's end is the epoch's train accuracy), and no bar shows acc=0.0000 once
an epoch's accuracy is above 0.
Usage: bar_accuracy.py OUT ERR"""
import re
import sys

out, err = open(sys.argv[1]).read(), open(sys.argv[2]).read()
epochs = re.findall(r"^epoch (\d+)/(\d+): train_loss=[\d.]+ train_acc=([\d.]+)", out, re.M)
bars = re.findall(r"epoch (\d+)/(\d+) \[[#.]+\] (\d+)/(\d+) loss=[\d.]+ acc=([\d.]+)", err)
ok = len(epochs) > 0
for e, n, acc in epochs:
    mine = [b for b in bars if b[0] == e and b[1] == n]
    last = [b[4] for b in mine if b[2] == b[3]]
    print("epoch %s: train_acc=%s, bar at the last step: %s, bars: %s" % (e, acc, last, [b[4] for b in mine]))
    ok = ok and len(last) == 1 and last[0] == acc and float(acc) > 0
    ok = ok and all(float(b[4]) > 0 for b in mine)
sys.exit(0 if ok else 1)
