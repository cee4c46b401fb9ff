#!/usr/bin/env python3
"""Prints the scalars of a TensorBoard run directory as one JSON object.

Usage: read-tensorboard.py DIR

DIR holds the event files of one run (those of `openclaw_metrics::tensorboard::EventWriter`,
say). They are read with TensorBoard's own loader, so what this prints is what TensorBoard
would chart: `{tag: [[step, value], ...], ...}`, each tag's points in the order read. NaN and
infinities are printed as the strings "NaN", "Infinity" and "-Infinity" to keep the output
valid JSON. Needs the `tensorboard` package (`pip install tensorboard`), nothing else.
"""
import json
import math
import sys

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def number(x):
    if math.isfinite(x):
        return x
    # json.dumps would print bare NaN/Infinity, which JSON parsers reject.
    return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    # 0: keep every point; the default samples scalars down to 10,000 per tag.
    acc = EventAccumulator(sys.argv[1], size_guidance={"scalars": 0})
    acc.Reload()
    out = {
        tag: [[e.step, number(e.value)] for e in acc.Scalars(tag)]
        for tag in acc.Tags()["scalars"]
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
