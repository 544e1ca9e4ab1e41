"""Kernel memory in a sandbox's sockets, read from outside through ``sock_diag``.

Without a memory cgroup nothing counts socket buffers: a process's ``Pss`` does not show
them, and ``RLIMIT_AS`` does not bound them (a submission once held 1.5 GB in Unix socket
buffers under ``--memory 768``). Every socket a sandbox can make lives in its own network
namespace (bwrap ``--unshare-net``; the syscall filter refuses ``setns``/``unshare`` and
socket families other than Unix, IP and netlink), so the trusted side asks the kernel for
the memory of *every* socket in that namespace: those held by a file descriptor, those
only in flight inside another socket's queue, and the pending connections of a listener.

The netlink socket is made once per namespace by a thread that enters it (``setns``, which
needs ``CAP_SYS_ADMIN`` over it: a root grader has it) and comes back at once; a grader
that cannot enter it gets ``None`` from :func:`diag_socket` and the caller fails safe
(:func:`measurable`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import struct
import threading

__all__ = ["diag_socket", "socket_bytes", "measurable"]

_CLONE_NEWNET = 0x40000000
_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST, _NLM_F_DUMP = 0x1, 0x300
_NLMSG_ERROR, _NLMSG_DONE = 2, 3
_UDIAG_SHOW_MEMINFO, _UNIX_DIAG_MEMINFO = 0x20, 5
_INET_DIAG_SKMEMINFO = 7
_NDIAG_SHOW_MEMINFO, _NETLINK_DIAG_MEMINFO, _NDIAG_PROTO_ALL = 0x1, 0, 255
#: sk_meminfo: rmem_alloc, rcvbuf, wmem_alloc, sndbuf, fwd_alloc, wmem_queued, ...: what the
#: socket holds is its receive queue, what it allocated to send and its send queue.
_HELD = (0, 2, 5)

_SOCKETS: dict[int, socket.socket] = {}  # netns fd -> its diag socket
_LOCK = threading.Lock()


def _enter(fd: int) -> bool:
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.setns(fd, _CLONE_NEWNET)) == 0


def diag_socket(netns: int) -> socket.socket | None:
    """A ``NETLINK_SOCK_DIAG`` socket in the network namespace ``netns`` (an fd), or None when
    this process may not enter it. Cached per fd."""
    with _LOCK:
        if netns in _SOCKETS:
            return _SOCKETS[netns]
        own = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            if not _enter(netns):
                return None
            try:
                sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG)
            finally:
                if not _enter(own):  # never leave this thread in the sandbox's namespace
                    os._exit(70)
        finally:
            os.close(own)
        sock.settimeout(5.0)
        _SOCKETS[netns] = sock
        return sock


def forget(netns: int) -> None:
    """Close the diag socket of ``netns`` (its sandbox is gone)."""
    with _LOCK:
        sock = _SOCKETS.pop(netns, None)
    if sock is not None:
        sock.close()


def _requests() -> list[bytes]:
    unix = struct.pack("=BBHIIIII", socket.AF_UNIX, 0, 0, 0xFFFFFFFF, 0, _UDIAG_SHOW_MEMINFO, 0, 0)
    out = [unix]
    for family in (socket.AF_INET, socket.AF_INET6):
        for proto in (socket.IPPROTO_TCP, socket.IPPROTO_UDP):
            out.append(
                struct.pack("=BBBBI", family, proto, 1 << (_INET_DIAG_SKMEMINFO - 1), 0, 0xFFFFFFFF)
                + bytes(48)
            )
    out.append(
        struct.pack(
            "=BBHIIII", socket.AF_NETLINK, _NDIAG_PROTO_ALL, 0, 0, _NDIAG_SHOW_MEMINFO, 0, 0
        )
    )
    return out


#: Per family: the size of the reply's fixed header, and the attribute with the memory.
_REPLY = {
    socket.AF_UNIX: (16, _UNIX_DIAG_MEMINFO),
    socket.AF_INET: (72, _INET_DIAG_SKMEMINFO),
    socket.AF_INET6: (72, _INET_DIAG_SKMEMINFO),
    socket.AF_NETLINK: (28, _NETLINK_DIAG_MEMINFO),
}


def _held(body: bytes) -> int:
    """Bytes one socket's reply says it holds (0 if it carries no memory attribute)."""
    family = body[0]
    fixed, wanted = _REPLY.get(family, (len(body), -1))
    at = fixed
    while at + 4 <= len(body):
        length, kind = struct.unpack_from("=HH", body, at)
        if length < 4:
            break
        if kind == wanted:
            values = struct.unpack_from(f"={(length - 4) // 4}I", body, at + 4)
            return sum(values[i] for i in _HELD if i < len(values))
        at += (length + 3) & ~3
    return 0


def _dump(sock: socket.socket, request: bytes, seq: int) -> int:
    header = struct.pack(
        "=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST | _NLM_F_DUMP, seq, 0
    )
    sock.send(header + request)
    total = 0
    while True:
        data = sock.recv(1 << 16)
        at = 0
        while at + 16 <= len(data):
            length, kind, _, got_seq, _ = struct.unpack_from("=IHHII", data, at)
            if length < 16:
                return total
            if kind in (_NLMSG_DONE, _NLMSG_ERROR):
                return total  # an error: this family is not there (no module): nothing held
            if got_seq == seq:
                total += _held(data[at + 16 : at + length])
            at += (length + 3) & ~3


def socket_bytes(netns: int) -> int:
    """Bytes the sockets of the network namespace ``netns`` hold in the kernel (receive and
    send queues, Unix, TCP, UDP and netlink, v4 and v6); 0 when they cannot be read."""
    sock = diag_socket(netns)
    if sock is None:
        return 0
    total = 0
    with _LOCK:
        for seq, request in enumerate(_requests(), start=1):
            with contextlib.suppress(OSError):
                total += _dump(sock, request, seq)
    return total


def measurable() -> bool:
    """Whether this process may read a sandbox's socket memory (it may enter other network
    namespaces: root). Without that and without a memory cgroup, kernel memory is not
    bounded per submission, and the runner grades one submission at a time."""
    return os.geteuid() == 0
