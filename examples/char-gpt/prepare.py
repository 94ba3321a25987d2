#!/usr/bin/python3
"""A byte-level corpus for the char-level GPT: the fortune cookies Debian's
`fortunes` package ships, as train.bin and val.bin of uint16 token ids.

    /usr/bin/python3 examples/char-gpt/prepare.py --out gpt/data

Every file of the corpus folder except fortune's index files (*.dat) and the
UTF-8 links to the same texts (*.u8) is read in name order and concatenated;
each byte is one token (vocabulary 256, so no tokenizer and no meta file).
The first 90 % of the tokens are train.bin, the rest val.bin, as nanoGPT's
data/shakespeare_char/prepare.py splits.  The files are in llm.c's format
by default (dev/data/data_common.py, write_datafile: 256 little-endian int32
- magic 20240520, version 1, the token count - then the uint16 ids) or, with
--format nanogpt, nanoGPT's headerless uint16 ids; engine/tokens.h reads
both."""
import argparse, os, sys
import numpy as np

LLMC_MAGIC, LLMC_VERSION, LLMC_HEADER_INTS = 20240520, 1, 256


def corpus_files(folder):
    """The corpus's text files in name order: fortune's *.dat indexes and the
    *.u8 links are not text of their own."""
    names = sorted(n for n in os.listdir(folder) if not n.endswith((".dat", ".u8")))
    paths = [os.path.join(folder, n) for n in names]
    return [p for p in paths if os.path.isfile(p) and not os.path.islink(p)]


def write_tokens(path, ids, fmt):
    """ids (uint16) to path in llm.c's or nanoGPT's format."""
    with open(path, "wb") as f:
        if fmt == "llmc":
            header = np.zeros(LLMC_HEADER_INTS, dtype="<i4")
            header[0], header[1], header[2] = LLMC_MAGIC, LLMC_VERSION, len(ids)
            f.write(header.tobytes())
        f.write(ids.astype("<u2").tobytes())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--corpus", default="/usr/share/games/fortunes",
                   help="folder of text files (Debian package fortunes)")
    p.add_argument("--out", default="char-gpt-data", help="folder to write train.bin and val.bin into")
    p.add_argument("--format", choices=("llmc", "nanogpt"), default="llmc",
                   help="llm.c's header + uint16 (default) or nanoGPT's headerless uint16")
    p.add_argument("--val-fraction", type=float, default=0.1, help="the last part held out")
    a = p.parse_args()
    if not 0 < a.val_fraction < 1:
        sys.exit("prepare.py: --val-fraction %g is not between 0 and 1" % a.val_fraction)
    if not os.path.isdir(a.corpus):
        sys.exit("prepare.py: %s: no such folder (Debian package fortunes)" % a.corpus)
    files = corpus_files(a.corpus)
    if not files:
        sys.exit("prepare.py: %s: no text files" % a.corpus)
    data = b"".join(open(f, "rb").read() for f in files)
    ids = np.frombuffer(data, dtype=np.uint8).astype(np.uint16)
    n = int(len(ids) * (1 - a.val_fraction))
    if n < 2 or len(ids) - n < 2:
        sys.exit("prepare.py: %s: %d bytes, too few to split" % (a.corpus, len(ids)))
    os.makedirs(a.out, exist_ok=True)
    write_tokens(os.path.join(a.out, "train.bin"), ids[:n], a.format)
    write_tokens(os.path.join(a.out, "val.bin"), ids[n:], a.format)
    print("%d files, %d bytes: %s/train.bin %d tokens, %s/val.bin %d tokens (%s format)"
          % (len(files), len(ids), a.out, n, a.out, len(ids) - n, a.format))


if __name__ == "__main__":
    main()
