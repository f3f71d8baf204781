"""The wheel //python:wheel builds: pip installs it into a folder of its own
(--target), `import torch` loads the backend through the wheel's
`torch.backends` entry point (no `import ddpx_torch` anywhere), a job runs
on it, and a wheel whose recorded torch version differs refuses in one line
naming both versions, without taking `import torch` down."""

import glob
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))


def find_wheel():
    found = glob.glob(os.path.join(HERE, "..", "..", "python", "ddpx_torch-*.whl"))
    if not found:
        raise AssertionError("no ddpx_torch wheel next to the test (data = //python:wheel)")
    return found[0]


# A 2-rank job on "cpu:ddpx" that never imports ddpx_torch: the entry point
# registered the backend when torch was imported.
JOB = textwrap.dedent("""
    import sys, tempfile, os
    import torch, torch.distributed as dist, torch.multiprocessing as mp
    assert "ddpx" in dist.Backend.backend_list, dist.Backend.backend_list
    def rank_main(rank, path):
        dist.init_process_group("cpu:ddpx", init_method="file://" + path, rank=rank, world_size=2)
        t = torch.full((4,), rank + 1.0)
        dist.all_reduce(t)
        assert t.tolist() == [3.0] * 4, t
        backend = dist.group.WORLD._get_backend(torch.device("cpu"))
        assert type(backend).__name__ == "DdpxBackend", type(backend)
        dist.destroy_process_group()
    if __name__ == "__main__":
        fd, path = tempfile.mkstemp(dir=os.environ.get("TEST_TMPDIR")); os.close(fd); os.unlink(path)
        mp.spawn(rank_main, args=(path,), nprocs=2)
        print("JOB OK", "ddpx_torch" in sys.modules)
""")


class PackagingTest(unittest.TestCase):
    maxDiff = None

    @classmethod
    def setUpClass(cls):
        cls.target = tempfile.mkdtemp(prefix="ddpx_wheel_", dir=os.environ.get("TEST_TMPDIR"))
        subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                        "--disable-pip-version-check", "--target", cls.target, find_wheel()],
                       check=True, capture_output=True, timeout=300)

    def python(self, code, target=None, autoload=True):
        env = dict(os.environ)
        # Only the installed copy: not the Bazel tree's package.
        env["PYTHONPATH"] = target or self.target
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "1" if autoload else "0"
        script = os.path.join(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")), "job.py")
        with open(script, "w") as f:
            f.write(code)
        return subprocess.run([sys.executable, script], env=env, capture_output=True,
                              text=True, timeout=240)

    def test_wheel_holds_the_package_and_the_entry_point(self):
        info = glob.glob(os.path.join(self.target, "ddpx_torch-*.dist-info"))
        self.assertEqual(len(info), 1)
        with open(os.path.join(info[0], "entry_points.txt")) as f:
            self.assertIn("[torch.backends]\nddpx = ddpx_torch_autoload:load", f.read())
        self.assertTrue(glob.glob(os.path.join(self.target, "ddpx_torch", "_C*.so")))

    def test_import_torch_loads_the_backend_and_a_job_runs(self):
        result = self.python(JOB)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        # Loaded by torch itself, not by the script.
        self.assertIn("JOB OK True", result.stdout)

    def test_without_autoload_torch_knows_no_ddpx(self):
        result = self.python("import torch.distributed as d; print('ddpx' in d.Backend.backend_list)",
                             autoload=False)
        self.assertEqual(result.stdout.strip(), "False", result.stderr)

    def test_another_torch_version_is_refused_in_one_line(self):
        # The same install, recording another torch version than this one.
        other = tempfile.mkdtemp(prefix="ddpx_other_", dir=os.environ.get("TEST_TMPDIR"))
        subprocess.run(["cp", "-r", self.target + "/.", other], check=True)
        with open(os.path.join(other, "ddpx_torch", "_build_info.py"), "w") as f:
            f.write('TORCH_VERSION = "1.0.0+other"\n')
        import torch
        expected = (f"ddpx_torch was built with torch 1.0.0+other but this is torch "
                    f"{torch.__version__}")

        explicit = self.python("import ddpx_torch", target=other, autoload=False)
        self.assertNotEqual(explicit.returncode, 0)
        last = explicit.stderr.strip().splitlines()[-1]
        self.assertTrue(last.startswith("ImportError: " + expected), explicit.stderr)

        # Through the entry point: torch still imports; the backend refuses.
        code = textwrap.dedent("""
            import warnings
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                import torch, torch.distributed as dist
            print("WARNED", [str(w.message) for w in caught if "ddpx_torch" in str(w.message)])
            import os, tempfile
            path = os.path.join(tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR")), "store")
            try:
                dist.init_process_group("ddpx", init_method="file://" + path, rank=0, world_size=1)
            except RuntimeError as e:
                print("REFUSED", str(e))
        """)
        autoloaded = self.python(code, target=other)
        self.assertEqual(autoloaded.returncode, 0, autoloaded.stderr)
        self.assertIn("WARNED ['" + expected, autoloaded.stdout)
        refused = [line for line in autoloaded.stdout.splitlines() if line.startswith("REFUSED")]
        self.assertEqual(len(refused), 1, autoloaded.stdout)
        self.assertIn(expected, refused[0])
        self.assertNotIn("\n", refused[0])


if __name__ == "__main__":
    unittest.main()
