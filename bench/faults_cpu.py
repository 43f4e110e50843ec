"""bench/faults.py's servers part: the CPU the timed writes cost each group of processes on this machine
(the servers, the store's processes by role, the load balancer, the bench's clients), read from /proc
before and after them, and the floor that cost sets on a closed loop of clients (`cpu_figures`)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The store's processes by role (`SeaweedCluster.processes`: master, volume servers, filer, s3 gateway; or
# moto), asked at each census, so that a component an outage restarted is found under its new id.
StoreProcesses = Callable[[], Mapping[str, Sequence[int]]]
SERVERS, STORE, BALANCER, BENCH = "servers", "store", "balancer", "bench (clients)"  # the groups of processes
TICKS_PER_S = os.sysconf("SC_CLK_TCK")  # /proc's unit of CPU time


@dataclass(frozen=True)
class Census:
    """The CPU seconds (user + system) each process of this one's tree had used at one moment, by group
    (`census`), and the seconds every CPU of the machine had been busy, whoever's."""

    at: float  # time.perf_counter()
    groups: dict[str, dict[int, float]]  # group (the store's by role) → process id → CPU seconds
    roles: tuple[str, ...]  # the groups that are the store's roles
    machine_busy_s: float


def census(store: Mapping[str, Sequence[int]]) -> Census:
    """This process's tree, each process in a group: this one (the bench: the clients), the store's by
    their role in `store`, HAProxy's, and the rest, the servers; a process's children count with it."""
    table = processes()
    children: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    role = {pid: name for name, pids in store.items() for pid in pids}
    groups: dict[str, dict[int, float]] = {SERVERS: {}, **{name: {} for name in store}, BALANCER: {}}
    groups[BENCH] = {os.getpid(): table[os.getpid()][2]}

    def add(pid: int, group: str) -> None:
        groups[group][pid] = table[pid][2]
        for child in children.get(pid, []):
            add(child, group)

    for child in children.get(os.getpid(), []):
        add(child, role.get(child) or (BALANCER if table[child][1] == "haproxy" else SERVERS))
    return Census(time.perf_counter(), groups, tuple(store), machine_busy_s())


def processes() -> dict[int, tuple[int, str, float]]:
    """Every process now, from /proc: its id → (its parent's, its command name, its CPU seconds)."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            line = stat.read_text()
        except OSError:  # it ended while we looked
            continue
        name_ends = line.rindex(")")  # the name is in parentheses and may hold spaces or parentheses
        fields = line[name_ends + 2 :].split()  # from the 3rd field (state); utime and stime are the 14th and 15th
        seconds = (int(fields[11]) + int(fields[12])) / TICKS_PER_S
        found[int(stat.parent.name)] = (int(fields[1]), line[line.index("(") + 1 : name_ends], seconds)
    return found


def machine_busy_s() -> float:
    """The seconds all CPUs have spent on anything but idling or waiting for I/O (/proc/stat's `cpu` line)."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, Path("/proc/stat").read_text().split()[1:9])
    return (user + nice + system + irq + softirq + steal) / TICKS_PER_S


def cpu_figures(before: Census, after: Census, clients: int, writes: int, read_backs: int) -> dict[str, Any]:
    """What the timed writes cost in CPU, between two censuses: ms a write for each group of processes
    that had one (a process started between them counts from 0; one that ended is lost) and for each of
    the store's roles, their total, what the machine's other processes took meanwhile, and the floor
    that cost sets on a closed loop of as many clients as servers, each making its next call once the
    last is answered: no call of theirs can take less on average than `total * clients / CPUs`
    (`floor_with_others_ms`: with the other processes' CPU too, what they left us). A write's CPU
    includes its read-back by another server (a client's cycle is the write and that read), hence
    `cycle_ms`, the cycle the clients measured."""
    wall_s = after.at - before.at
    spent = {
        group: sum(cpu - before.groups.get(group, {}).get(pid, 0.0) for pid, cpu in pids.items())
        for group, pids in after.groups.items()
        if pids
    }
    total = sum(spent.values())
    store = {role: spent.pop(role) for role in after.roles if role in spent}
    others = after.machine_busy_s - before.machine_busy_s - total  # another bench on the machine, say
    cpus = os.cpu_count() or 1

    def per_write(seconds: float) -> float:
        return round(1000 * seconds / max(1, writes), 1)

    groups = {SERVERS: spent.pop(SERVERS, 0.0), **({STORE: sum(store.values())} if store else {}), **spent}
    return {
        "cpus": cpus, "clients": clients, "writes": writes,
        "read_backs": read_backs, "wall_s": round(wall_s, 1),
        "processes": {group: len(pids) for group, pids in after.groups.items() if pids},
        "ms_per_write": {group: per_write(seconds) for group, seconds in groups.items()} | {"total": per_write(total)},
        "store_ms_per_write": {role: per_write(seconds) for role, seconds in store.items()},
        "others_ms_per_write": per_write(others),
        "busy": round(total / (wall_s * cpus), 2) if wall_s else 0.0,  # of all the machine's CPU time
        "floor_ms": round(1000 * total / max(1, writes) * clients / cpus, 1),
        "floor_with_others_ms": round(1000 * (total + others) / max(1, writes) * clients / cpus, 1),
        "cycle_ms": round(1000 * wall_s * clients / max(1, writes), 1),
    }  # fmt: skip
