"""The sandbox's syscall filter: a seccomp program that bubblewrap loads (``bwrap --seccomp FD``).

Every process of a student's kernel runs under it. The default is to allow: the filter
denies only what a notebook never needs and what would cross between submissions, reach
the host kernel's rarely used attack surface or hold memory that no limit counts (the
table :data:`DENIED`). NumPy, SciPy, scikit-learn, threads, ``fork``, ``subprocess``,
``multiprocessing`` and ipykernel's ZMQ sockets keep working.

The program is compiled by libseccomp (through the ``pyseccomp`` ctypes bindings to the
system's ``libseccomp.so.2``), never assembled by hand, for the machine's native ABI only:
a system call made through another ABI (``int 0x80`` or x32 on x86_64, AArch32 on arm64)
kills the whole process (libseccomp's own default for a foreign ABI kills only the thread).
A system call that the installed libseccomp does not know, or that this architecture
does not have, is skipped (:func:`skipped` lists which and why).
"""

from __future__ import annotations

import errno
import functools
import os
import tempfile
from typing import NamedTuple

__all__ = ["DENIED", "Denial", "filter_unavailable", "number", "program", "skipped",
           "write_program"]

#: A libseccomp argument comparison: (argument index, operator, datum_a, datum_b) with the
#: operator's name in pyseccomp (``EQ``, ``GE``, ``MASKED_EQ``). A :class:`Denial`'s ``when``
#: holds rules, each a comparison or a tuple of comparisons of *different* arguments that
#: must ALL hold; a call is denied when ANY rule holds (libseccomp refuses two comparisons
#: of one argument in a single rule).
Cmp = tuple[int, str, int, int]
Rule = Cmp | tuple[Cmp, ...]

_CLONE_NEW = {  # the namespace flags clone(2) accepts (CLONE_NEWTIME only fits clone3/unshare)
    "CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}
#: Socket families a kernel needs: ZMQ's ipc and tcp sockets, and netlink (getaddrinfo,
#: interface listings). Every other family is refused, so none autoloads a kernel module.
ALLOWED_FAMILIES = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10, "AF_NETLINK": 16}


#: fcntl(2) commands that create state on an inode or a file, visible to every process that
#: opens the same file: POSIX and open-file-description record locks, leases, directory
#: notifications (dnotify). Every sandbox binds the same read-only installation, so a lock
#: on ``kpca_lib/__init__.py`` is seen by a sandbox graded at the same time.
_FCNTL_INODE_STATE = {"F_GETLK": 5, "F_SETLK": 6, "F_SETLKW": 7, "F_OFD_GETLK": 36,
                      "F_OFD_SETLK": 37, "F_OFD_SETLKW": 38, "F_SETLEASE": 1024,
                      "F_NOTIFY": 1026}
_F_SETPIPE_SZ = 1031
#: setsockopt(2) options that raise a socket's buffers above the host's defaults (SOL_SOCKET).
_SOL_SOCKET = 1
_SOCKET_BUFFERS = {"SO_SNDBUF": 7, "SO_RCVBUF": 8, "SO_SNDBUFFORCE": 32, "SO_RCVBUFFORCE": 33}


def _any_flag(flags: dict[str, int]) -> tuple[Cmp, ...]:
    return tuple((0, "MASKED_EQ", bit, bit) for bit in flags.values())


def _not_persona_0_or_query() -> tuple[Cmp, ...]:
    """personality(2) reads an unsigned int: deny every value whose low 32 bits are neither
    0 (PER_LINUX) nor 0xffffffff (a query). Such a value has a set bit followed (cyclically)
    by a clear one, so 32 two-bit masks cover exactly the denied values."""
    return tuple((0, "MASKED_EQ", (1 << b) | (1 << (b + 1) % 32), 1 << b) for b in range(32))


def _family_not_allowed() -> tuple[Cmp, ...]:
    """socket(2)'s family (an int) is none of :data:`ALLOWED_FAMILIES`; any high bit counts
    as not allowed."""
    allowed = sorted(ALLOWED_FAMILIES.values())
    top = allowed[-1]
    eq = tuple((0, "EQ", f, 0) for f in range(top) if f not in allowed)
    return (*eq, (0, "GE", top + 1, 0))


class Denial(NamedTuple):
    """A group of system calls the filter refuses, with the errno they return and why."""

    syscalls: tuple[str, ...]
    errno: int
    why: str
    #: The rules (see :data:`Rule`); empty: the call is always denied.
    when: tuple[Rule, ...] = ()


_EPERM, _ENOSYS, _EAFNOSUPPORT, _ENOLCK = errno.EPERM, errno.ENOSYS, errno.EAFNOSUPPORT, errno.ENOLCK

#: What the filter denies, group by group. Everything else is allowed.
DENIED: tuple[Denial, ...] = (
    Denial(("keyctl", "add_key", "request_key"), _EPERM,
           "kernel keyrings are not namespaced: a key would cross to other submissions and runs"),
    Denial(("unshare", "setns"), _EPERM,
           "no new or foreign namespaces (a nested mount namespace mounts unsized tmpfs)"),
    Denial(("clone",), _EPERM, "clone with any CLONE_NEW* flag creates namespaces",
           _any_flag(_CLONE_NEW)),
    Denial(("clone3",), _ENOSYS,
           "its flags live in memory a filter cannot read; ENOSYS makes glibc fall back to clone "
           "(as Docker and Flatpak do)"),
    Denial(("mount", "umount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount",
            "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr"), _EPERM,
           "the file system layout is the sandbox's"),
    Denial(("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd"), _EPERM,
           "no reading or steering of other processes"),
    Denial(("bpf", "perf_event_open", "userfaultfd"), _EPERM,
           "kernel attack surface and timing side channels a notebook never needs"),
    Denial(("io_uring_setup", "io_uring_enter", "io_uring_register"), _EPERM,
           "io_uring bypasses per-call filtering and is a frequent source of kernel bugs"),
    Denial(("init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
            "reboot", "swapon", "swapoff", "acct", "syslog", "quotactl", "open_by_handle_at",
            "name_to_handle_at", "lookup_dcookie", "iopl", "ioperm", "settimeofday",
            "clock_settime", "clock_adjtime", "adjtimex", "vhangup", "uselib", "ustat", "sysfs",
            "nfsservctl"), _EPERM,
           "administration of the machine: modules, reboot, clocks, swap, accounting, raw I/O"),
    Denial(("personality",), _EPERM,
           "a persona other than the default changes the address-space layout "
           "(e.g. ADDR_NO_RANDOMIZE); personality(0) and the query 0xffffffff stay allowed",
           _not_persona_0_or_query()),
    Denial(("memfd_create", "memfd_secret"), _EPERM,
           "anonymous memory files that no size limit counts"),
    Denial(("shmget", "msgget"), _EPERM,
           "System V segments and queues outlive a process and RLIMIT_AS does not count them"),
    Denial(("socket", "socketpair"), _EAFNOSUPPORT,
           "families other than AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK (raw packets, "
           "crypto, Bluetooth, ...) reach kernel code and modules a notebook never needs",
           _family_not_allowed()),
    # A sandbox observes nothing another sandbox does (docs/security.md): every sandbox binds
    # the same installation, so state kept per inode or per host crosses between two
    # submissions graded at the same time. None of it is ever needed by a notebook.
    Denial(("flock",), _ENOLCK,
           "flock(2) locks belong to the inode: two sandboxes share the installation's inodes, so "
           "one could signal the other (ENOLCK: 'no locks available', as on some NFS mounts)"),
    Denial(("fcntl",), _ENOLCK,
           "record locks (POSIX and OFD), leases and dnotify (F_NOTIFY) belong to the inode, "
           "like flock; every other fcntl command stays allowed",
           tuple((1, "EQ", cmd, 0) for cmd in _FCNTL_INODE_STATE.values())),
    Denial(("inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_init",
            "fanotify_mark"), _ENOSYS,
           "file watches see every open and read of a shared file, by any process of the host "
           "(what another kernel imports, and when); instances are a per-user, host-wide count. "
           "ENOSYS: libraries fall back to polling"),
    Denial(("io_setup", "io_submit", "io_getevents", "io_pgetevents", "io_cancel",
            "io_destroy"), _ENOSYS,
           "Linux AIO contexts are counted host-wide (/proc/sys/fs/aio-nr against aio-max-nr): one "
           "sandbox could exhaust them for the whole host, and the count is a channel. ENOSYS: "
           "libraries fall back to threads"),
    Denial(("fcntl",), _EPERM,
           "F_SETPIPE_SZ: a pipe larger than the default is kernel memory that no limit of the "
           "sandbox counts", ((1, "EQ", _F_SETPIPE_SZ, 0),)),
    Denial(("setsockopt",), _EPERM,
           "SO_SNDBUF, SO_RCVBUF and their FORCE forms: socket buffers above the host's defaults "
           "are kernel memory (the grader counts the sandbox's socket memory, "
           "run.report_plugin)",
           tuple(((1, "EQ", _SOL_SOCKET, 0), (2, "EQ", opt, 0))
                 for opt in _SOCKET_BUFFERS.values())),
)


class _Compiled(NamedTuple):
    program: bytes
    skipped: tuple[tuple[str, str], ...]


@functools.lru_cache(maxsize=1)
def _compile() -> _Compiled:
    import pyseccomp as sc

    flt = sc.SyscallFilter(defaction=sc.ALLOW)
    # A foreign ABI (x86 int 0x80, x32, AArch32) kills the process, not just the thread.
    flt.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    clone_flags_arg = 1 if sc.system_arch() in (sc.Arch.S390, sc.Arch.S390X) else 0
    skipped: list[tuple[str, str]] = []
    for denial in DENIED:
        action = sc.ERRNO(denial.errno)
        for name in denial.syscalls:
            nr = sc.resolve_syscall(sc.Arch.NATIVE, name)
            if nr < 0:  # -1: unknown to libseccomp; below: a pseudo number, not on this arch
                skipped.append((name, "unknown to the installed libseccomp" if nr == -1
                                else "not on this architecture"))
                continue
            if not denial.when:
                flt.add_rule(action, nr)
            for rule in denial.when:
                cmps = rule if isinstance(rule[0], tuple) else (rule,)
                args = [sc.Arg(clone_flags_arg if name == "clone" else arg, getattr(sc, op), a, b)
                        for arg, op, a, b in cmps]  # type: ignore[misc]
                flt.add_rule(action, nr, *args)
    with tempfile.TemporaryFile() as fh:
        flt.export_bpf(fh)
        fh.seek(0)
        return _Compiled(fh.read(), tuple(skipped))


def program() -> bytes:
    """The compiled seccomp BPF program for this machine's native ABI (``struct sock_filter``
    records, as ``bwrap --seccomp FD`` reads them). Compiled once per process; the same
    libseccomp and kernel always give the same bytes.

    Raises
    ------
    ImportError
        pyseccomp is not installed.
    RuntimeError
        libseccomp.so.2 is not installed.
    OSError
        libseccomp refused the filter.
    """
    return _compile().program


def skipped() -> tuple[tuple[str, str], ...]:
    """``(syscall, reason)`` for each denied system call that the filter could not name:
    unknown to the installed libseccomp, or absent from this architecture."""
    return _compile().skipped


def number(name: str) -> int:
    """The native system call number of ``name`` (as libseccomp knows it).

    Raises
    ------
    ValueError
        libseccomp does not know ``name``, or this architecture does not have it.
    """
    import pyseccomp as sc

    nr = sc.resolve_syscall(sc.Arch.NATIVE, name)
    if nr < 0:
        raise ValueError(f"no system call {name!r} on this architecture (libseccomp: {nr})")
    return nr


def write_program(fd: int) -> None:
    """Write :func:`program` to ``fd`` (a pipe or a file bwrap will read) and leave it open."""
    data = memoryview(program())
    while data:
        data = data[os.write(fd, data):]


def filter_unavailable() -> str | None:
    """None when the filter can be built here, else what is missing and how to install it."""
    try:
        program()
    except ImportError:
        return ("the sandbox's syscall filter needs the Python package pyseccomp: "
                "`pip install pyseccomp` (or `pip install 'kpca-course[course]'`).")
    except (RuntimeError, OSError, AttributeError) as exc:
        return (f"the sandbox's syscall filter cannot be built ({exc}): it needs libseccomp "
                "2.5 or newer (Debian/Ubuntu: `sudo apt-get install libseccomp2`; Fedora: "
                "`sudo dnf install libseccomp`) on a kernel with seccomp filters.")
    return None
