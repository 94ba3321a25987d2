#!/usr/bin/python3
"""The op inventory of the char-level GPT's ONNX export: for each opset
(14 to 17), training and eval mode, with and without constant folding,
export.py's export of model.py and a count of its nodes by op type (the
onnx package's reading of the file), as one Markdown table.  With
--supported engine/onnx.c, each op is marked with whether spotdeck's ONNX
loader lowers it today (the names of that file's supported-op table, its
`{ { "Op", ...` rows).  doc/gpt-onnx-ops.md is this script's output:

    /usr/bin/python3 examples/char-gpt/ops.py --supported engine/onnx.c > doc/gpt-onnx-ops.md"""
import argparse, collections, os, re, sys, tempfile
import onnx
import torch
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export import export
from model import GPT, GPTConfig

VARIANTS = [(opset, training, fold) for opset in (14, 15, 16, 17)
            for training in (True, False) for fold in (False, True)]


def inventory(opset, training, fold, seed=1):
    """{op type: count} and the initializer count of one export."""
    torch.manual_seed(seed)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.onnx")
        export(GPT(GPTConfig()), path, opset, training, fold)
        m = onnx.load(path)
    onnx.checker.check_model(m)
    return collections.Counter(n.op_type for n in m.graph.node), len(m.graph.initializer)


def supported_ops(path):
    """The op names of engine/onnx.c's supported-op table."""
    return set(re.findall(r'^\s*\{ \{ "([A-Za-z]+)",', open(path).read(), re.M))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--supported", help="engine/onnx.c, to mark the ops its loader lowers")
    a = p.parse_args()
    sup = supported_ops(a.supported) if a.supported else None
    counts = {v: inventory(*v) for v in VARIANTS}
    ops = sorted(set().union(*(c for c, _ in counts.values())))
    head = ["%d %s%s" % (o, "train" if t else "eval", " fold" if f else "") for o, t, f in VARIANTS]
    print("| op | spotdeck | " + " | ".join(head) + " |")
    print("|---|---|" + "---|" * len(head))
    for op in ops:
        mark = "" if sup is None else ("yes" if op in sup else "**no**")
        print("| %s | %s | %s |" % (op, mark, " | ".join(str(counts[v][0][op] or "") for v in VARIANTS)))
    print("| *nodes* | | %s |" % " | ".join(str(sum(counts[v][0].values())) for v in VARIANTS))
    print("| *initializers* | | %s |" % " | ".join(str(counts[v][1]) for v in VARIANTS))


if __name__ == "__main__":
    main()
