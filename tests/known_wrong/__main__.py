"""python -m tests.known_wrong [stale] PATTERN SIZE: one line per round of the GPU variants matching PATTERN
(rounds), with `stale` only those the ledger holds no current grade of (tests.known_wrong.ledger);
python -m tests.known_wrong ledger: per exercise, how many variants the ledger holds a current grade of."""
import sys
from collections import Counter

from tests.known_wrong import all_variants, rounds

args = sys.argv[1:]
if args[:1] == ["ledger"]:
    from tests.known_wrong.ledger import read, stale

    gpu = [v for v in all_variants() if not v.extra.get("cpu")]
    old = {v.id for v in stale(gpu)}
    total, current = Counter(v.exercise for v in gpu), Counter(v.exercise for v in gpu if v.id not in old)
    known = read()
    for exercise in sorted(total):
        dates = sorted({known[v.id]["date"] for v in gpu if v.exercise == exercise and v.id not in old})
        print(f"{exercise:27s} {current[exercise]:3d} of {total[exercise]:3d} current"
              + (f" (graded {', '.join(dates)})" if dates else ""))
    print(f"{'all':27s} {sum(current.values()):3d} of {sum(total.values()):3d} current")
    sys.exit(0)
stale_only = args[:1] == ["stale"]
args = args[1:] if stale_only else args
for line in rounds(args[0] if args else ".", int(args[1]) if len(args) > 1 else 16, stale_only):
    print(line)
