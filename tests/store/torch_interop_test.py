"""PyTorch interop: torch.distributed.TCPStore clients against our server, and
our client against torch's server (libuv and classic backends).

Fails (never skips) when torch cannot be imported: tools/setup installs it.
"""
import os
import socket
import struct
import subprocess
import sys
import time
from datetime import timedelta

try:
    import torch.distributed as dist
except ImportError as e:  # a failure, not a skip
    sys.exit(f"FAIL: torch is not importable from {sys.executable}: {e}")

HERE = os.path.dirname(os.path.abspath(__file__))
PEER = os.path.join(HERE, "interop_peer")
failures = []


def check(what, got, want):
    if got != want:
        failures.append(f"{what}: got {got!r}, want {want!r}")


def torch_client_ops(port, use_libuv, server="our server", long_keys=True):
    """Every operation with torch's client; the expected answers are torch's
    own servers' (main() runs this against them too)."""
    tag = f"torch client (use_libuv={use_libuv}) on {server}"
    s = dist.TCPStore("127.0.0.1", port, is_master=False, use_libuv=use_libuv,
                      wait_for_workers=False, timeout=timedelta(seconds=10))
    s.set("k", "v")                                   # SET
    check(f"{tag} get", s.get("k"), b"v")             # WAIT + GET
    check(f"{tag} add", s.add("n", 5), 5)              # ADD
    check(f"{tag} add", s.add("n", -2), 3)
    check(f"{tag} get counter", s.get("n"), b"3")
    check(f"{tag} compare_set hit", s.compare_set("k", "v", "w"), b"w")
    check(f"{tag} compare_set miss", s.compare_set("k", "x", "y"), b"w")
    check(f"{tag} compare_set new", s.compare_set("c", "", "d"), b"d")
    check(f"{tag} check", s.check(["k", "n"]), True)  # CHECK
    check(f"{tag} check missing", s.check(["k", "absent"]), False)
    s.wait(["k", "n"])                                # WAIT
    start = time.monotonic()
    try:                                              # WAIT + CANCEL_WAIT
        s.wait(["absent"], timedelta(milliseconds=200))
        failures.append(f"{tag} wait on a missing key returned")
    except Exception as e:  # torch raises DistStoreError
        check(f"{tag} wait timeout names key", "absent" in str(e), True)
    check(f"{tag} wait timeout bounded", time.monotonic() - start < 3, True)
    s.set("after", "ok")
    check(f"{tag} get after cancel", s.get("after"), b"ok")
    check(f"{tag} delete", s.delete_key("c"), True)   # DELETE_KEY
    check(f"{tag} delete again", s.delete_key("c"), False)
    s.append("log", "ab")                             # APPEND
    s.append("log", "c")
    check(f"{tag} append", s.get("log"), b"abc")
    s.multi_set(["m1", "m2"], ["1", "2"])             # MULTI_SET
    check(f"{tag} multi_get", s.multi_get(["m2", "m1"]), [b"2", b"1"])  # MULTI_GET
    check(f"{tag} num_keys", s.num_keys() >= 6, True)  # GETNUMKEYS
    s.set("text", "12abc")                            # ADD parses like std::stoll
    check(f"{tag} add to leading digits", s.add("text", 1), 13)
    check(f"{tag} get added text", s.get("text"), b"13")
    s.set("empty", "")
    check(f"{tag} get empty", s.get("empty"), b"")
    if long_keys:  # torch's libuv server closes on keys over 8 KiB; ours takes them
        long_key = "L" * 9000
        s.set(long_key, "v")
        check(f"{tag} get with a 9000-byte key", s.get(long_key), b"v")
        s.delete_key(long_key)
    c = s.clone()                                     # VALIDATE + PING again
    check(f"{tag} clone get", c.get("k"), b"w")
    # A worker of a 2-rank job counts itself in on "init/" and returns.
    w = dist.TCPStore("127.0.0.1", port, world_size=2, is_master=False,
                      use_libuv=use_libuv, timeout=timedelta(seconds=10))
    check(f"{tag} worker sees keys", w.get("k"), b"w")
    for key in ["k", "n", "after", "log", "m1", "m2", "text", "empty"]:
        s.delete_key(key)


def frame_str(b):
    return struct.pack("<Q", len(b)) + b


def pipelined_wait_then_compare_set(port):
    """WAIT on a missing key and COMPARE_SET creating it, in one write: the
    reply bytes, in the order the server sends them."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(bytes([0]) + struct.pack("<I", 0x3C85F7CE))  # VALIDATE
    key = b"/order-%d" % time.monotonic_ns()
    sock.sendall(bytes([6]) + struct.pack("<Q", 1) + frame_str(key) +       # WAIT
                 bytes([2]) + frame_str(key) + frame_str(b"") + frame_str(b"v"))  # COMPARE_SET
    want = 1 + 8 + 1
    got = b""
    sock.settimeout(5)
    while len(got) < want:
        chunk = sock.recv(want - len(got))
        if not chunk:
            break
        got += chunk
    sock.close()
    return got


def against_our_server():
    peer = subprocess.Popen([PEER, "--mode=serve"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        line = peer.stdout.readline().split()
        if len(line) != 2 or line[0] != "port":
            failures.append(f"our server did not report its port: {line}")
            return
        port = int(line[1])
        for use_libuv in (True, False):
            torch_client_ops(port, use_libuv)
        ours = pipelined_wait_then_compare_set(port)
        torch_master = dist.TCPStore("127.0.0.1", 0, is_master=True, use_libuv=True,
                                     wait_for_workers=False, timeout=timedelta(seconds=10))
        theirs = pipelined_wait_then_compare_set(torch_master.port)
        check("pipelined WAIT + COMPARE_SET replies in torch's order", ours, theirs)
        check("STOP_WAITING first", ours[:1], b"\x00")
    finally:
        out, _ = peer.communicate(input="", timeout=30)
        print("our server:", out.strip())
        check("our server dropped nobody", "dropped 0" in out, True)


def torch_clients_within_connection_limits():
    """torch's clients send VALIDATE as soon as they connect: a server with a
    300 ms handshake timeout and 32 connections per address serves 24 of
    them idling past the timeout, while a silent socket is closed."""
    peer = subprocess.Popen([PEER, "--mode=serve", "--validate_timeout_ms=300",
                             "--max_connections_per_address=32"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = int(peer.stdout.readline().split()[1])
        clients = [dist.TCPStore("127.0.0.1", port, is_master=False, use_libuv=i % 2 == 0,
                                 wait_for_workers=False, timeout=timedelta(seconds=10))
                   for i in range(24)]
        silent = socket.create_connection(("127.0.0.1", port))
        silent.settimeout(10)
        check("a silent socket is closed by the handshake timeout", silent.recv(1), b"")
        time.sleep(0.6)
        for i, c in enumerate(clients):
            c.set(f"idle-{i}", str(i))
        check("24 idle torch clients still served",
              [clients[0].get(f"idle-{i}") for i in range(24)],
              [str(i).encode() for i in range(24)])
    finally:
        out, _ = peer.communicate(input="", timeout=30)
        print("our server with connection limits:", out.strip())
        check("only the silent socket dropped, nobody refused",
              "refused 0, dropped 1 (no VALIDATE within 300 ms" in out, True)


def against_torch_server(use_libuv):
    master = dist.TCPStore("127.0.0.1", 0, is_master=True, use_libuv=use_libuv,
                           wait_for_workers=False, timeout=timedelta(seconds=10))
    master.set("from_torch", "hi")
    result = subprocess.run([PEER, "--mode=client", f"--port={master.port}",
                             f"--libuv={str(use_libuv).lower()}"],
                            capture_output=True, text=True, timeout=60)
    print(f"our client vs torch server (use_libuv={use_libuv}):", result.stdout.strip())
    if result.returncode != 0:
        failures.append(f"our client vs torch (use_libuv={use_libuv}): "
                        f"{result.stdout} {result.stderr}")
    check(f"torch sees our key (use_libuv={use_libuv})", master.get("from_ddpx"), b"hello")
    check(f"torch sees our counter (use_libuv={use_libuv})", master.get("n"), b"3")


def main():
    print("torch", __import__("torch").__version__, "from", sys.executable)
    against_our_server()
    torch_clients_within_connection_limits()
    for use_libuv in (True, False):
        against_torch_server(use_libuv)
    # The same checks against torch's own servers: the answers expected of
    # ours are the ones torch's give.
    for server_libuv in (True, False):
        master = dist.TCPStore("127.0.0.1", 0, is_master=True, use_libuv=server_libuv,
                               wait_for_workers=False, timeout=timedelta(seconds=10))
        torch_client_ops(master.port, server_libuv,
                         server=f"torch's server (use_libuv={server_libuv})",
                         long_keys=not server_libuv)
    if failures:
        print("FAILURES:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("PASS: every operation works both ways")


if __name__ == "__main__":
    main()
