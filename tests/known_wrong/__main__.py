"""python -m tests.known_wrong PATTERN SIZE: one line per round of the GPU variants matching PATTERN (rounds)."""
import sys

from tests.known_wrong import rounds

for line in rounds(sys.argv[1] if len(sys.argv) > 1 else ".", int(sys.argv[2]) if len(sys.argv) > 2 else 16):
    print(line)
