"""An inference script for the tests of sbprof run: a local pretrained EncoderASR transcribes batches of noise.

    python transcribe.py --source MODEL_FOLDER --batches 8 --batch_size 2 --seconds 1.0
"""
import argparse
import time

import torch
from speechbrain.inference.ASR import EncoderASR


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", required=True)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--batch_size", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    asr = EncoderASR.from_hparams(source=args.source, savedir=args.source)
    generator = torch.Generator().manual_seed(0)
    samples = int(args.seconds * 16000)
    for _ in range(args.batches):
        wavs = 0.1 * torch.randn(args.batch_size, samples, generator=generator)
        start = time.perf_counter()
        asr.transcribe_batch(wavs, torch.ones(args.batch_size))
        print(f"call_s {time.perf_counter() - start!r}", flush=True)
    print("transcribed", args.batches, "batches")


if __name__ == "__main__":
    main()
