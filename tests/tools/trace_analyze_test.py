"""tools/trace_analyze on made-up dumps of 4 ranks: each verdict kind, the
skip found from call sites, corrupt, cut-short and foreign files reported
(never a crash), and the timeline files."""

import json
import os
import shutil
import subprocess
import tempfile
import unittest

SCRIPT = os.path.join(os.environ.get("TEST_SRCDIR", "."), os.environ.get("TEST_WORKSPACE", ""),
                      "tools", "trace_analyze")
if not os.path.exists(SCRIPT):
    SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "trace_analyze")

MONO = 1_000_000_000_000
REAL = 1_800_000_000_000_000_000


def op(seq, state="completed", name="allreduce", numel=8, root=-1, site="", step=-1, t=0,
       dtype="float32"):
    start = MONO + t * 1_000_000
    return {"type": "op", "id": seq + 1, "group": 0, "seq": seq, "p2p": False, "op": name,
            "state": state, "ntensors": 1, "dtypes": [dtype], "numel": [numel],
            "total_numel": numel, "root": root, "peer": -1, "tag": 0, "reduce_op": "SUM",
            "timeout_ms": 3000, "site": site, "bucket": -1, "step": step,
            "enqueued_ns": start, "started_ns": start + 1000,
            "ended_ns": start + 500_000 if state in ("completed", "failed") else 0}


def dump(rank, ops, errors=(), world=4, end=True, reason="test"):
    lines = [{"type": "header", "format": "ddpx-flight-recorder", "version": 1, "reason": reason,
              "host": "h", "pid": 100 + rank, "rank": rank, "world_size": world,
              "time_realtime_ns": REAL, "time_monotonic_ns": MONO + 10_000_000_000,
              "capacity": 2000, "recorded": len(ops), "entries": len(ops)},
             {"type": "group", "group": 0, "name": "default_pg", "rank": rank, "size": world,
              "ranks": list(range(world)), "backend": "gloo", "alive": True,
              "next_seq": len(ops), "next_p2p_seq": 0}]
    lines += ops
    lines += list(errors)
    if end:
        lines.append({"type": "end", "ops": len(ops), "groups": 1, "errors": len(errors)})
    return "".join(json.dumps(l) + "\n" for l in lines)


def error(seq, reason, culprits):
    return {"type": "error", "id": seq + 1, "group": 0, "seq": seq, "op": "allreduce",
            "message": "allreduce #%d failed" % seq, "culprit_reason": reason,
            "culprits": culprits, "peer_states": []}


class TraceAnalyzeTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def write(self, name, text):
        with open(os.path.join(self.dir, name), "w") as f:
            f.write(text)

    def run_tool(self, *extra):
        r = subprocess.run(["python3", SCRIPT, self.dir] + list(extra), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=120)
        out = r.stdout.decode()
        self.assertNotIn("Traceback", out)
        return r.returncode, out, out.strip().split("\n")[-1]

    def test_stopped_rank_is_a_straggler(self):
        for r in (0, 1, 3):
            ops = [op(s, t=s) for s in range(5)] + [op(5, "failed", t=5)]
            self.write("rank%d.jsonl" % r, dump(r, ops, [error(5, "silent", [2])]))
        code, out, last = self.run_tool()
        self.assertEqual(code, 0, out)
        self.assertEqual(last, "VERDICT kind=straggler ranks=2 group=default_pg seq=5 op=allreduce")
        self.assertIn("no dump from rank 2", out)
        self.assertIn("rank 2: no dump", out)

    def test_live_rank_that_never_entered_is_a_straggler(self):
        for r in (0, 1, 2):
            self.write("rank%d.jsonl" % r, dump(r, [op(s, t=s) for s in range(5)] + [op(5, "started", t=5)]))
        self.write("rank3.jsonl", dump(3, [op(s, t=s) for s in range(5)]))
        _, out, last = self.run_tool()
        self.assertEqual(last, "VERDICT kind=straggler ranks=3 group=default_pg seq=5 op=allreduce")
        self.assertIn("rank 3: allreduce #4 of default_pg, completed", out)

    def test_killed_rank_is_dead(self):
        for r in (1, 2, 3):
            ops = [op(s, t=s) for s in range(3)] + [op(3, "failed", t=3)]
            self.write("rank%d.jsonl" % r, dump(r, ops, [error(3, "exited", [0])]))
        _, out, last = self.run_tool()
        self.assertEqual(last, "VERDICT kind=dead ranks=0 group=default_pg seq=3 op=allreduce")

    def test_other_count_is_a_mismatch(self):
        for r in range(4):
            ops = [op(s, t=s) for s in range(4)] + [op(4, "failed", numel=9 if r == 1 else 8, t=4)]
            self.write("rank%d.jsonl" % r, dump(r, ops))
        _, out, last = self.run_tool()
        self.assertEqual(last, "VERDICT kind=mismatch ranks=1 group=default_pg seq=4 op=allreduce")
        self.assertIn("rank 1 calls allreduce of 9 x float32", out)

    def test_other_root_is_a_mismatch(self):
        for r in range(4):
            ops = [op(0), op(1, "failed", name="broadcast", root=1 if r == 3 else 0)]
            self.write("rank%d.jsonl" % r, dump(r, ops))
        _, _, last = self.run_tool()
        self.assertEqual(last, "VERDICT kind=mismatch ranks=3 group=default_pg seq=1 op=broadcast")

    def test_skipped_collective_is_found_from_call_sites(self):
        for r in range(4):
            steps = [0, 1, 3, 4] if r == 2 else [0, 1, 2, 3, 4]
            ops = [op(s, site="train", step=st, t=s) for s, st in enumerate(steps)]
            self.write("rank%d.jsonl" % r, dump(r, ops))
        _, out, last = self.run_tool()
        self.assertEqual(last, "VERDICT kind=mismatch ranks=2 group=default_pg seq=2 op=allreduce")
        self.assertIn("it skipped allreduce #2", out)

    def test_healthy_job_is_none(self):
        for r in range(4):
            self.write("rank%d.jsonl" % r, dump(r, [op(s, t=s) for s in range(6)]))
        _, out, last = self.run_tool()
        self.assertEqual(last, "VERDICT kind=none ranks=- group=- seq=- op=-")
        with open(os.path.join(self.dir, "timeline.json")) as f:
            trace = json.load(f)
        names = [e["name"] for e in trace["traceEvents"] if e["ph"] == "X"]
        self.assertEqual(len(names), 24)
        self.assertIn("allreduce #5", names)
        if shutil.which("gnuplot"):
            with open(os.path.join(self.dir, "timeline.png"), "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_corrupt_and_cut_short_dumps_are_reported_not_fatal(self):
        good = [op(s, t=s) for s in range(5)] + [op(5, "failed", t=5)]
        self.write("rank0.jsonl", dump(0, good, [error(5, "silent", [2])]))
        text = dump(1, good, [error(5, "silent", [2])])
        self.write("rank1.jsonl", text[: len(text) * 2 // 3])  # cut mid-line
        lines = dump(3, good).split("\n")
        lines[4] = "{not json at all"
        self.write("rank3.jsonl", "\n".join(lines))
        self.write("rank2.jsonl", "")
        self.write("notes.jsonl", "hello\n")
        with open(os.path.join(self.dir, "garbage.jsonl"), "wb") as f:
            f.write(b"\xff\xfe\x00\x01binary")
        code, out, last = self.run_tool("--no-png")
        self.assertEqual(code, 0, out)
        self.assertIn("rank1.jsonl: the last line has no newline (the file was cut short)", out)
        self.assertIn("rank1.jsonl: no end line: the dump was cut short", out)
        self.assertIn("rank3.jsonl: line 5 is not a JSON object", out)
        self.assertIn("rank2.jsonl: no header line", out)
        self.assertIn("notes.jsonl: skipped", out)
        self.assertEqual(last, "VERDICT kind=straggler ranks=2 group=default_pg seq=5 op=allreduce")

    def test_no_dump_at_all(self):
        code, out, last = self.run_tool()
        self.assertEqual(code, 1)
        self.assertEqual(last, "VERDICT kind=none ranks=- group=- seq=- op=-")


if __name__ == "__main__":
    unittest.main()
