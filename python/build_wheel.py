"""Packs ddpx_torch into a wheel (PEP 427): called by //python:wheel.

    build_wheel.py --out W.whl --version V --name-tag TAG \
        --file ARCHIVE_PATH=SOURCE_PATH ...

Entries are written in the order given, with a fixed timestamp, so the same
inputs give the same bytes. The dist-info holds METADATA, WHEEL, the
`torch.backends` entry point (ddpx = ddpx_torch_autoload:load, which torch's
__init__ calls), top_level.txt and RECORD (sha256 of every file).
"""

import argparse
import base64
import hashlib
import zipfile

DIST = "ddpx_torch"
EPOCH = (1980, 1, 1, 0, 0, 0)


def record_hash(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
    return "sha256=" + digest.decode()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--version", required=True)
    parser.add_argument("--tag", required=True, help="cp311-cp311-linux_x86_64")
    parser.add_argument("--torch_version", required=True)
    parser.add_argument("--file", action="append", default=[], help="ARCHIVE_PATH=SOURCE")
    args = parser.parse_args()

    info = f"{DIST}-{args.version}.dist-info"
    entries = []
    for spec in args.file:
        name, _, source = spec.partition("=")
        with open(source, "rb") as f:
            entries.append((name, f.read()))
    entries.append((f"{info}/METADATA", (
        "Metadata-Version: 2.1\n"
        f"Name: {DIST}\n"
        f"Version: {args.version}\n"
        "Summary: ddpx (shared-memory and host-aware CPU collectives) as a "
        "torch.distributed backend\n"
        f"Requires-Dist: torch=={args.torch_version}\n"
    ).encode()))
    entries.append((f"{info}/WHEEL", (
        "Wheel-Version: 1.0\n"
        "Generator: ddpx build_wheel.py\n"
        "Root-Is-Purelib: false\n"
        f"Tag: {args.tag}\n"
    ).encode()))
    entries.append((f"{info}/entry_points.txt",
                    b"[torch.backends]\nddpx = ddpx_torch_autoload:load\n"))
    entries.append((f"{info}/top_level.txt", b"ddpx_torch\nddpx_torch_autoload\n"))
    record = "".join(f"{name},{record_hash(data)},{len(data)}\n" for name, data in entries)
    record += f"{info}/RECORD,,\n"
    entries.append((f"{info}/RECORD", record.encode()))

    with zipfile.ZipFile(args.out, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in entries:
            entry = zipfile.ZipInfo(name, date_time=EPOCH)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = (0o755 if name.endswith(".so") else 0o644) << 16
            wheel.writestr(entry, data)


if __name__ == "__main__":
    main()
