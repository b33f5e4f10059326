#!/usr/bin/env python3
"""Rewrites the expected alerts of failing `promtool test rules` cases with what promtool got.

Like UPDATE_GOLDEN for the expositions: run it after an intended change to a rule, then
review the diff of the *.test.yml files before committing.

    python3 alerts/tests/update-expectations.py [FILE.test.yml ...]
"""
import glob
import os
import re
import subprocess
import sys


def parse_map(text):
    return {m.group(1): m.group(2).replace('\\"', '"') for m in re.finditer(r'(\w+)="((?:[^"\\]|\\.)*)"', text)}


def quote(value):
    return "'" + value.replace("'", "''") + "'"


def update(path):
    out = subprocess.run(["promtool", "test", "rules", os.path.basename(path)], cwd=os.path.dirname(path) or ".",
                         capture_output=True, text=True)
    out = out.stdout + out.stderr
    text = open(path).read()
    for block in re.split(r"\n    alertname: ", out)[1:]:
        name, time = re.match(r"(\w+), time: ([^,]+),", block).groups()
        got = block.split("got:[", 1)[1]
        alerts = re.findall(r"Labels:\{(.*?)\}\n\s*Annotations:\{(.*?)\},?\n", got)
        pattern = re.compile(r"(      - eval_time: \S+\n        alertname: " + name + r"\n        exp_alerts:)(.*?)(?=\n      - eval_time:|\n  - interval:|\Z)", re.S)
        new = ""
        for labels, annotations in alerts:
            labels = parse_map(labels)
            labels.pop("alertname", None)
            new += "\n          - exp_labels:\n" + "".join(f"              {k}: {quote(v)}\n" for k, v in sorted(labels.items()))
            new += "            exp_annotations:\n" + "".join(f"              {k}: {quote(v)}\n" for k, v in sorted(parse_map(annotations).items()))
        text, n = pattern.subn(lambda m: m.group(1) + (new.rstrip("\n") if new else " []"), text, count=1)
        assert n == 1, f"{path}: no case for {name}"
    open(path, "w").write(text)


for path in sys.argv[1:] or sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "*.test.yml"))):
    update(path)
