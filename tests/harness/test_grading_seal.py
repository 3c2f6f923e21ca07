"""The pieces that keep the running verifier's files and memory out of the agent's reach (issue
34): sealed uploads (owned by another uid, read-only) and the supervisor's seccomp program. The
attacks themselves run in tests/harness/test_grading_attacks.py."""

from __future__ import annotations

import io
import struct
import tarfile
from pathlib import Path

from clawloop.harness.grading_supervisor import (
    DENIED_CALLS,
    SECCOMP_RET_ALLOW,
    SECCOMP_RET_EPERM,
    seccomp_program,
)
from clawloop.harness.sandbox.archive import pack


def _members(data: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return {m.name: m for m in tar.getmembers()}


def test_a_sealed_pack_is_another_uids_and_read_only_with_its_own_folder(tmp_path: Path) -> None:
    kit = tmp_path / "kit"
    (kit / "site").mkdir(parents=True)
    (kit / "site/sitecustomize.py").write_text("x = 1\n")
    (kit / "run.sh").write_text("echo\n")
    (kit / "run.sh").chmod(0o700)
    sealed = _members(pack(kit, "kit", prefix="abc", uid=65534, readonly=True))
    assert set(sealed) == {"abc", "abc/site", "abc/site/sitecustomize.py", "abc/run.sh"}
    assert {m.uid for m in sealed.values()} == {65534}
    modes = {n: m.mode for n, m in sealed.items()}
    assert modes == {"abc": 0o555, "abc/site": 0o555, "abc/site/sitecustomize.py": 0o444,
                     "abc/run.sh": 0o555}  # fmt: skip
    plain = _members(pack(kit, "kit", prefix="abc"))
    assert "abc" not in plain and {m.uid for m in plain.values()} == {0}


def _run_bpf(prog: bytes, nr: int, arch: int) -> int:
    """Classic BPF as seccomp runs it, for the instructions seccomp_program emits."""
    data = struct.pack("=iI", nr, arch) + bytes(56)
    ins = [struct.unpack("=HBBI", prog[i : i + 8]) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ins[pc]
        if code == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif code in (0x15, 0x35):
            hit = acc == k if code == 0x15 else acc >= k
            pc += 1 + (jt if hit else jf)
        elif code == 0x06:
            return k
        else:
            raise AssertionError(f"unexpected BPF op {code:#x}")


def test_the_seccomp_program_refuses_only_writes_to_other_processes() -> None:
    prog = seccomp_program(DENIED_CALLS)
    x86, i386, arm = 0xC000003E, 0x40000003, 0xC00000B7
    for arch, calls in DENIED_CALLS.items():
        for nr in calls:
            assert _run_bpf(prog, nr, arch) == SECCOMP_RET_EPERM, (arch, nr)
    assert _run_bpf(prog, 0x40000000 + 101, x86) == SECCOMP_RET_EPERM  # x32 ptrace
    for nr, arch in [(0, x86), (59, x86), (62, x86), (1, i386), (63, arm), (101, arm)]:
        assert _run_bpf(prog, nr, arch) == SECCOMP_RET_ALLOW, (arch, nr)
    assert _run_bpf(prog, 101, 0x12345) == SECCOMP_RET_ALLOW  # an arch it does not know
