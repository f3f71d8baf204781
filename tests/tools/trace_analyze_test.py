"""tools/trace_analyze on made-up dumps of 4 ranks: each verdict kind, the
skip found from call sites, corrupt, cut-short and foreign files and lines
whose fields have the wrong type reported (never a crash), and the timeline
files."""

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


MISSING = object()


def broken(record, field, value):
    """A copy of record with field set to value, or without it (MISSING)."""
    rec = dict(record)
    if value is MISSING:
        del rec[field]
    else:
        rec[field] = value
    return json.dumps(rec)


def with_lines(text, at, new_lines, replace=False):
    """text's lines with new_lines put at (1-based) line number at; replace
    drops the line that was there."""
    lines = text.split("\n")
    lines[at - 1:at - 1 + (1 if replace else 0)] = new_lines
    return "\n".join(lines)


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

    def test_fields_of_wrong_type_are_reported_and_the_good_lines_analyzed(self):
        # Rank 2 stopped after #4 while the others entered #5: a straggler
        # verdict, which needs every good line of every dump. Lines 1-2 are
        # the header and the group, op #s is line 3 + s.
        good = [op(s, t=s) for s in range(5)] + [op(5, "failed", t=5)]
        texts = {r: dump(r, good, [error(5, "silent", [2])]) for r in (0, 1, 3)}
        texts[2] = dump(2, [op(s, t=s) for s in range(5)])
        # Extra op lines whose identity is unusable (each is skipped), put
        # after op #1 (line 5 on) in ranks 0 and 1.
        ref = op(2, t=2)
        bad_ops = [("seq", None, "null"), ("seq", "3", 'the string "3"'), ("seq", -1, "-1"),
                   ("seq", MISSING, "missing"), ("seq", 2.0, "2.0"),
                   ("root", None, "null"), ("root", "0", 'the string "0"'), ("root", -7, "-7"),
                   ("root", MISSING, "missing"), ("group", None, "null"),
                   ("dtypes", [["float32"]], '[["float32"]]'), ("p2p", "no", 'the string "no"')]
        for r in (0, 1):
            texts[r] = with_lines(texts[r], 5, [broken(ref, f, v) for f, v, _ in bad_ops])
        # Times of the wrong type in rank 3's op #3 (line 6) and rank 2's
        # op #4 (line 7): the op counts, its times are left out.
        texts[3] = with_lines(texts[3], 6, [broken(op(3, t=3), "started_ns", None)], replace=True)
        texts[2] = with_lines(texts[2], 7, [broken(op(4, t=4), "ended_ns", "soon")], replace=True)
        # Header clock fields and an error line of the wrong type in rank 3.
        lines = texts[3].split("\n")
        header = json.loads(lines[0])
        lines[0] = broken(header, "time_monotonic_ns", None)
        texts[3] = "\n".join(lines)
        texts[3] = with_lines(texts[3], 10, [broken(error(5, "silent", [2]), "culprits", ["2"])])
        for r, text in texts.items():
            self.write("rank%d.jsonl" % r, text)

        code, out, last = self.run_tool("--no-png")
        self.assertEqual(code, 0, out)
        for r in (0, 1):
            for n, (field, _, shown) in enumerate(bad_ops, 5):
                self.assertIn("rank%d.jsonl: line %d: op field '%s' is %s" % (r, n, field, shown), out)
        self.assertIn("rank3.jsonl: line 6: op field 'started_ns' is null", out)
        self.assertIn("rank2.jsonl: line 7: op field 'ended_ns' is the string \"soon\"", out)
        self.assertIn("rank3.jsonl: line 1: header field 'time_monotonic_ns' is null", out)
        self.assertIn("rank3.jsonl: line 10: error field 'culprits' is [\"2\"]", out)
        self.assertIn("rank 2: allreduce #4 of default_pg, completed", out)
        self.assertEqual(last, "VERDICT kind=straggler ranks=2 group=default_pg seq=5 op=allreduce")

    def test_every_field_of_every_wrong_type_is_reported(self):
        # Each field the analysis reads, in turn set to each wrong value, in
        # a dump of its own: op, group and error lines as extra lines after
        # the header and the group line, header fields in the header.
        wrong = [None, "1", -5, 1.5, True, [], {}, MISSING]
        strings = ("op", "state", "reduce_op", "site", "name", "message", "culprit_reason")
        lists = ("dtypes", "ranks", "culprits", "peer_states")
        fields = [("op", ["group", "seq", "p2p", "op", "state", "dtypes", "total_numel", "root",
                          "reduce_op", "site", "bucket", "step", "enqueued_ns", "started_ns",
                          "ended_ns"]),
                  ("group", ["group", "name", "rank", "size", "ranks", "next_seq"]),
                  ("error", ["group", "seq", "op", "message", "culprit_reason", "culprits",
                             "peer_states"]),
                  ("header", ["rank", "world_size", "time_realtime_ns", "time_monotonic_ns"])]
        cases = [(kind, f) for kind, names in fields for f in names]
        world = len(cases) * len(wrong)
        expected = []
        r = 0
        for kind, f in cases:
            for v in wrong:
                if (f in strings and isinstance(v, str) or f == "p2p" and v is True or
                        f in lists and v == []):
                    continue  # a value of the right type
                if f in ("root", "bucket", "step", "rank", "world_size") and v == -5:
                    v = -2  # -1 is allowed: none
                text = dump(r, [op(s, t=s) for s in range(3)], [error(2, "silent", [1])],
                            world=world)
                lines = text.split("\n")
                if kind == "header":
                    lines[0] = broken(json.loads(lines[0]), f, v)
                    n = 1
                else:
                    rec = {"op": op(1, t=1), "group": json.loads(lines[1]),
                           "error": error(1, "silent", [1])}[kind]
                    lines.insert(2, broken(rec, f, v))
                    n = 3
                self.write("rank%d.jsonl" % r, "\n".join(lines))
                expected.append("rank%d.jsonl: line %d: %s field '%s' is " % (r, n, kind, f))
                r += 1
        code, out, last = self.run_tool("--no-png")
        self.assertEqual(code, 0, out)
        for e in expected:
            self.assertIn(e, out)
        self.assertTrue(last.startswith("VERDICT kind="), out)

    def test_bad_lines_past_the_first_fifty_are_listed_by_number(self):
        text = dump(0, [op(s, t=s) for s in range(3)])
        bad = [broken(op(1, t=1), "seq", None)] * 60 + ["{not json"] * 3
        self.write("rank0.jsonl", with_lines(text, 3, bad))
        code, out, _ = self.run_tool("--no-png")
        self.assertEqual(code, 0, out)
        self.assertIn("rank0.jsonl: line 52: op field 'seq' is null", out)
        self.assertNotIn("line 53: op field", out)
        self.assertIn("rank0.jsonl: also op field 'seq' at lines 53-62", out)
        self.assertIn("rank0.jsonl: also not a JSON object at lines 63-65", out)

    def test_group_line_of_wrong_type_leaves_its_ops_out_by_name(self):
        for r in range(4):
            text = dump(r, [op(s, t=s) for s in range(3)])
            if r == 1:
                group = json.loads(text.split("\n")[1])
                text = with_lines(text, 2, [broken(group, "ranks", [0, None, 2, 3])], replace=True)
            self.write("rank%d.jsonl" % r, text)
        code, out, last = self.run_tool("--no-png")
        self.assertEqual(code, 0, out)
        self.assertIn("rank1.jsonl: line 2: group field 'ranks' is [0, null, 2, 3]", out)
        self.assertIn("rank1.jsonl: 3 op lines of group 0, which has no usable group line: "
                      "left out", out)
        self.assertTrue(last.startswith("VERDICT kind="), out)

    def test_no_dump_at_all(self):
        code, out, last = self.run_tool()
        self.assertEqual(code, 1)
        self.assertEqual(last, "VERDICT kind=none ranks=- group=- seq=- op=-")

    def test_not_a_folder(self):
        os.rmdir(self.dir)
        code, out, last = self.run_tool()
        self.assertEqual(code, 2, out)
        self.assertIn("is not a folder", out)
        self.assertEqual(last, "VERDICT kind=none ranks=- group=- seq=- op=-")


if __name__ == "__main__":
    unittest.main()
