"""Hold all but N GiB of the GPU's memory, to grade as if on a smaller card.

    python scripts/ballast.py 14.5 &   # what a 16 GB T4 leaves free; 11 for a 12 GB card, 7.5 for 8 GB
    BALLAST_PID=$!; make grade TARGET=solutions; kill $BALLAST_PID

Allocates one plain block (cudaMalloc through PyTorch's allocator) of the free memory less N GiB,
prints what is left free, and sleeps until it is killed.
"""
from __future__ import annotations

import sys
import time

import torch


def main() -> int:
    keep_gib = float(sys.argv[1])
    free, total = torch.cuda.mem_get_info()
    hold = int(free - keep_gib * 2**30)
    if hold <= 0:
        print(f"ballast: only {free / 2**30:.1f} GiB free, holding nothing", flush=True)
    else:
        block = torch.empty(hold, dtype=torch.uint8, device="cuda")  # noqa: F841 (held until killed)
    free_after, _ = torch.cuda.mem_get_info()
    print(f"ballast: {free_after / 2**30:.1f} GiB of {total / 2**30:.1f} GiB left free", flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
