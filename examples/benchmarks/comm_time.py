#!/usr/bin/env python3
"""Communication time per step from the trainer's --comm_trace files.

  comm_time.py TRACE_PREFIX NPROC SKIP

reads TRACE_PREFIX.rank0 .. rank<NPROC-1>: one JSON line per step per rank,
  {"step", "rank", "spans": [[bucket, enter_ns, done_ns], ...],
   "collectives": [[n, call_ns, done_ns], ...]}
with stamps on the host's CLOCK_MONOTONIC, which all ranks of one machine
share. Prints, as medians over the steps after SKIP:
  collective_s  hook_s  collectives_per_step

Both measures use one rule: an operation involving every rank cannot start
before the LAST rank arrives, so its cost is
  (latest completion over ranks) - (latest arrival over ranks),
and a rank that arrived early and waited for a straggler is not charged.
Per step the intervals are merged (operations may be in flight together) and
their lengths summed.
- collective_s: per collective issued by DDP and the hook (the n-th
  collective of the step on every rank is the same one): the network time
  proper.
- hook_s: per bucket, from entering the communication hook to its future
  completing: adds the hook's own compression math around its collectives.
A step is left out when ranks disagree on what ran in it.
"""
import json
import statistics
import sys


def load(prefix, nproc):
    per_step = {}  # step -> rank -> record
    for r in range(nproc):
        with open(f"{prefix}.rank{r}") as f:
            for line in f:
                rec = json.loads(line)
                per_step.setdefault(rec["step"], {})[r] = rec
    return per_step


def merged_length(intervals):
    total, end = 0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total, end = total + (b - a), b
        elif b > end:
            total, end = total + (b - end), b
    return total


def transfer_seconds(records, key, nproc):
    """Merged length of [max arrival, max completion] per operation, or None."""
    if len(records) != nproc:
        return None
    by_id = [{s[0]: s for s in records[r][key]} for r in range(nproc)]
    if any(b.keys() != by_id[0].keys() for b in by_id):
        return None
    intervals = []
    for op in by_id[0]:
        spans = [b[op] for b in by_id]
        if any(s[2] == 0 for s in spans):
            return None
        intervals.append((max(s[1] for s in spans), max(s[2] for s in spans)))
    return merged_length(intervals) / 1e9


def main():
    prefix, nproc, skip = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    per_step = load(prefix, nproc)
    collective, hook, counts = [], [], []
    for step in sorted(s for s in per_step if s > skip):
        records = per_step[step]
        c = transfer_seconds(records, "collectives", nproc)
        h = transfer_seconds(records, "spans", nproc)
        if c is not None and h is not None:
            collective.append(c)
            hook.append(h)
            counts.append(len(records[0]["collectives"]))
    if not collective:
        sys.exit(f"{prefix}: no complete steps after {skip}")
    print(statistics.median(collective), statistics.median(hook), statistics.median(counts))


if __name__ == "__main__":
    main()
