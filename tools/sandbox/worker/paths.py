"""What a child may touch outside its working directory (Landlock rules and the audit hook share these)."""

from __future__ import annotations

# Read-only system paths the libraries may touch after the fork: shared libraries of lazily loaded extension
# modules, time zones, CPU/memory probes (DuckDB reads cgroup files when it starts), random devices.
SYSTEM_READ = [
    "/usr/lib",
    "/usr/lib64",
    "/lib",
    "/lib64",
    "/usr/local/lib",
    "/etc/ld.so.cache",
    "/usr/share/zoneinfo",
    "/etc/localtime",
    "/dev/null",
    "/dev/zero",
    "/dev/urandom",
    "/dev/random",
    "/proc/meminfo",
    "/proc/cpuinfo",
    "/proc/stat",
    "/sys/fs/cgroup",
    "/sys/devices/system/cpu",
]
WRITABLE_DEVICES = ("/dev/null",)
