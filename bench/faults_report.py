"""What bench/faults.py prints (one row per part, then what each found) and the tables the docs show
(`TABLES`, read by bench/report.py through bench/faults.py).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import harness
from faults_check import PhaseResult
from faults_common import StandInEmbedder
from faults_transfer import TRANSFER_FORMS, TransferResult

# what a phase adds to its summary, printed under the table in this order
EXTRAS = (
    "cut_forgets", "detector", "rounds", "writers_start_gap_ms", "forgotten", "at_end", "servers_started_s",
    "seen_by_another_server", "forgets_retried", "write_latency_ms", "slowest_writes", "bucket_commits",
    "bucket_requests", "gateway_ms_per_request", "cpu", "outage",
)  # fmt: skip
COLUMNS = ("phase", "trials", "acknowledged", "lost", "duplicated", "corrupt", "leaked bytes", "failed", "seconds")


def table(results: Sequence[PhaseResult]) -> str:
    rows = [
        (
            r.phase, str(r.trials), str(r.acknowledged), str(len(r.lost)), str(len(r.raw_duplicates)),
            str(len(r.corrupt)), str(len(r.leaks)), str(len(r.failed)), f"{r.seconds:.0f}",
        )
        for r in results
    ]  # fmt: skip
    widths = [max([len(c), *(len(row[i]) for row in rows)]) for i, c in enumerate(COLUMNS)]
    lines = [
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(COLUMNS, widths, strict=True)))
    ]
    for row in rows:
        lines.append(
            "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths, strict=True)))
        )
    return "\n".join(lines)


def report(results: Sequence[PhaseResult], settings: Mapping[str, Any], seconds: float) -> str:
    parts = settings["parts"].split(",")
    planned = {
        "kill": f"{settings['kills']} kills ({settings['kills_per_phase']} per phase)",
        "servers": f"{settings['servers']} servers x {settings['writes']} writes",
        "race": f"{settings['race_rounds']} race rounds",
    }
    out = [
        f"faults: seed {settings['seed']}; {', '.join(planned[p] for p in planned if p in parts)}; "
        f"whole run {seconds:.0f} s",
        f"kill phases and race: stand-in embedder {StandInEmbedder.name} (the faults are in storage, and the real "
        "model costs each child process ~5 s); servers: the real server and model",
        "",
        table(results),
        "",
        "acknowledged: calls that returned (compactions included); lost: acknowledged notes/events not visible; "
        "duplicated: ids in more than one raw row; corrupt: distinct problems; leaked bytes: (forgotten note, file) "
        "pairs whose bytes hold its secret or vector; failed: calls that raised something other than a refusal",
    ]
    for r in results:
        out.append("")
        out.append(f"{r.phase}: acknowledged {dict(r.acknowledged_by_op)}; refused {r.refused}")
        if r.in_flight:
            out.append(f"  kills landed in: {dict(r.in_flight.most_common())}")
        for key in EXTRAS:
            if key in r.extra:
                out.append(f"  {key.replace('_', ' ')}: {r.extra[key]}")
        if len(r.visible_duplicates) != len(r.raw_duplicates):
            out.append(
                f"  duplicated as readers see them: {len(r.visible_duplicates)} (raw rows {len(r.raw_duplicates)}; "
                "readers keep the first row of each id)"
            )
        for title, found in (("lost", r.lost), ("duplicated", r.raw_duplicates), ("corrupt", r.corrupt)):
            for what, trial in list(found.items())[:10]:
                out.append(f"  {title} (first in trial {trial}): {what}")
            if len(found) > 10:
                out.append(f"  … {len(found) - 10} more {title}")
        cut = {rec["cut_forget"]["note"]: rec["cut_forget"]["outcome"] for rec in r.records if "cut_forget" in rec}
        for leak, trial in list(r.leaks.values())[:10]:
            how = f"its forget was {cut[leak.note]}" if leak.note in cut else "its forget was acknowledged"
            out.append(
                f"  leaked (first in trial {trial}): {leak.note} {leak.holds} in {leak.path} ({leak.file}); {how}"
            )
        if r.leaks:
            kinds = Counter(leak.file for leak, _ in r.leaks.values())
            cut_notes = len({leak.note for leak, _ in r.leaks.values() if leak.note in cut})
            out.append(
                f"  leaks by file: {dict(kinds)}; notes: {len({k[0] for k in r.leaks})}, "
                f"of which the kill cut their forget: {cut_notes}"
            )
        for failure in r.failed[:5]:
            out.append(f"  failed: {failure[:300]}")
    return "\n".join(out)


def transfer_report(results: Sequence[TransferResult], settings: Mapping[str, Any]) -> str:
    about = settings["transfer_source"]
    out = [
        "",
        f"transfer: a source of {about['notes']} notes and {about['events']} events (the CLI's model); unkilled "
        f"{about['unkilled_s']} s; kills: every other one within the writes, the rest anywhere",
        f"  the unkilled runs began writing after {about['writes_from_s']} s",
        f"  exit statuses of the imports that ran to their end (restores, re-runs): {about['import_exit_statuses']}",
    ]
    for r in results:
        out.append(f"{TRANSFER_FORMS[r.form]}: {dict(r.outcomes.most_common())}")
        if r.form == "import":
            left = Counter(rec["left"] for rec in r.records)
            some = sorted(rec["left_notes"] for rec in r.records if rec["left"] == "some")
            out.append(f"  what a kill left stored: {dict(left)}; notes left by a kill mid-write: {some}")
        for title, found in (("lost", r.lost), ("duplicated", r.duplicated), ("corrupt", r.corrupt)):
            for what, trial in list(found.items())[:10]:
                out.append(f"  {title} (first in trial {trial}): {what}")
    return "\n".join(out)


def main_table(payload: Mapping[str, Any]) -> str:
    """The kill phases, the servers and the race: one row each."""
    rows = [
        (p["phase"], p["trials"], p["acknowledged"], p["lost"], p["duplicated"], p["corrupt"], p["leaked_bytes"],
         p["failed_calls"], round(p["seconds"]))
        for p in payload["phases"]
    ]  # fmt: skip
    return harness.markdown_table(COLUMNS, rows)


def transfer_table(payload: Mapping[str, Any]) -> str:
    """kill -9 during import and export: one row per command."""
    header = (
        "command killed",
        "trials",
        "kills",
        "lost",
        "duplicated",
        "corrupt",
        "silently partial restores",
        "outcomes",
    )
    rows = [
        (f"`corrigenda {t['form']}`", t["trials"], t["kills"], t["lost"], t["duplicated"], t["corrupt"], t["silently_partial"],
         "; ".join(f"{k} {v}" for k, v in t["outcomes"].items()))
        for t in payload["transfer"]
    ]  # fmt: skip
    return harness.markdown_table(header, rows)


def servers_table(payload: Mapping[str, Any]) -> str:
    """Each servers phase: each kind of write's latency from its client, and the bucket's requests."""
    phases = [p for p in payload["phases"] if "write_latency_ms" in p and "outage" not in p]
    if len(phases) == 1:
        return _servers_phase_table(phases[0], payload["settings"])
    return "\n\n".join(f"{p['phase']}: {_servers_phase_table(p, payload['settings'])}" for p in phases)


def _servers_phase_table(phase: Mapping[str, Any], settings: Mapping[str, Any]) -> str:
    rows: list[tuple[object, ...]] = [
        (op, t["calls"], t["p50"], t["p99"], t["max"]) for op, t in phase["write_latency_ms"].items()
    ]
    table = harness.markdown_table(("write", "calls", "p50 ms", "p99 ms", "max ms"), rows)
    bucket = phase.get("bucket_requests")
    said = (
        f"{settings['servers']} servers × {settings['writes']} writes over {settings['transport']}"
        f"{' (' + settings['mix'] + ' mix)' if settings.get('mix', 'all') != 'all' else ''}; "
        f"lost {phase['lost']}, duplicated {phase['duplicated']}, corrupt {phase['corrupt']}, "
        f"leaked {phase['leaked_bytes']}, failed calls {phase['failed_calls']}"
    )
    if bucket:
        said += f"; bucket requests during the writes {bucket['during the writes']:,}, {bucket['per write']} a write"
        writes = bucket["during the writes"] / bucket["per write"] if bucket["per write"] else 0
        kinds = [(k, n) for k, n in bucket.items() if k not in ("during the writes", "per write")]
        if writes and kinds:
            said += " (" + ", ".join(f"{k} {n / writes:.1f}" for k, n in kinds) + ")"
    cpu = phase.get("bucket_server_cpu_ms_per_request")
    if cpu:  # the local S3 API is one Python process: what each kind of request costs it says where its time goes
        said += "; the S3 server's CPU a request, ms: " + ", ".join(f"{k} {v}" for k, v in cpu.items())
        said += f"; keys a listing answered: {phase['keys_per_listing']}"
    return f"{said}\n\n{table}"


STORES = {"moto": "moto's S3 (one process)", "seaweed": "SeaweedFS (6 processes)"}
READ_KINDS = ("manifest", "data read", "other read")  # the gate's reads (local_s3.KINDS), which SeaweedFS counts as one


def stores_table(payload: Mapping[str, Any]) -> str:
    """The servers part run on each store in one sitting (--local-s3 --seaweed): each kind of write's latency,
    store beside store, then the requests a write made of each store, by kind."""
    phases = [p for p in payload["phases"] if "write_latency_ms" in p and p.get("store")]
    ops = sorted({op for p in phases for op in p["write_latency_ms"]})
    if "forget" not in ops:  # then "all but forget" is "all writes" again
        ops.remove("all but forget")
    rows: list[tuple[object, ...]] = [
        (op, STORES[p["store"]], t["calls"], t["p50"], t["p99"], t["max"])
        for op in ops
        for p in phases
        if (t := p["write_latency_ms"].get(op))
    ]
    latency = harness.markdown_table(("write", "store", "calls", "p50 ms", "p99 ms", "max ms"), rows)
    counted = []
    for p in phases:
        bucket = p.get("bucket_requests") or {}
        if not bucket.get("per write"):
            continue
        writes = bucket["during the writes"] / bucket["per write"]

        def per_write(*kinds: str, bucket: Mapping[str, Any] = bucket, writes: float = writes) -> float:
            return round(sum(bucket.get(k, 0) for k in kinds) / writes, 1)

        counted.append(
            (STORES[p["store"]], bucket["per write"], per_write(*READ_KINDS, "read"), per_write("list"),
             per_write("put"), per_write("delete"), p.get("refused_commits", "–"), p["lost"], p["duplicated"],
             p["failed_calls"])
        )  # fmt: skip
    header = ("store", "requests a write", "reads", "listings", "puts", "deletes", "commits refused (412)",
              "lost", "duplicated", "failed calls")  # fmt: skip
    requests = harness.markdown_table(header, counted) if counted else ""
    return f"{latency}\n\n{requests}".rstrip()


def cluster_table(payload: Mapping[str, Any]) -> str:
    """The faults of a SeaweedFS cluster (--parts cluster): one row per fault, over its runs."""
    by_fault: dict[str, list[Mapping[str, Any]]] = {}
    for p in payload["phases"]:
        if "outage" in p:
            by_fault.setdefault(p["outage"]["fault"], []).append(p)
    rows: list[tuple[object, ...]] = []
    for fault, phases in by_fault.items():
        outages = [p["outage"] for p in phases]
        said: Counter[str] = Counter()  # the SDK's "Error executing tool X: " left out, the rest cut short
        for o in outages:
            for text, n in o["errors_said"].items():
                text = re.sub(r"^Error executing tool \w+: ", "", text)
                said[text if len(text) <= 110 else text[:110] + "…"] += n
        back = [t for o in outages for t in o["wrote_again_after_s"] if t is not None]
        silent = sum(t is None for o in outages for t in o["wrote_again_after_s"])
        rows.append(
            (fault, len(phases), f"{payload['settings']['servers']} × {payload['settings']['writes']}",
             sum(p["acknowledged"] for p in phases), sum(p["lost"] for p in phases),
             sum(p["duplicated"] for p in phases), sum(p["corrupt"] for p in phases),
             sum(o["errors_while_out"] for o in outages), sum(o["errors_of_more_than_one_line"] for o in outages),
             sum(len(o["errors_outside_it"]) for o in outages),
             f"{max(back):.2f}" + (f" ({silent} wrote no more)" if silent else "") if back else "–",
             "; ".join(f"{n}× {text}" for text, n in said.most_common(2)) or "–")
        )  # fmt: skip
    header = ("fault", "runs", "servers × writes", "acknowledged", "lost", "duplicated", "corrupt",
              "errors while out", "of more than one line", "errors outside it", "wrote again after, s (max)",
              "what the servers said while out")  # fmt: skip
    return harness.markdown_table(header, rows)


def cpu_table(payload: Mapping[str, Any]) -> str:
    """Each servers phase: the CPU its timed writes cost, a write, by group of processes and by the store's
    roles, and the floor that sets on the clients' latency (faults_cpu.cpu_figures)."""
    phases = [p for p in payload["phases"] if "cpu" in p and "outage" not in p]
    if not phases:
        return "no CPU figures (a results file from before they were measured)"
    if len(phases) == 1:
        return _cpu_phase_table(phases[0]["cpu"])
    return "\n\n".join(f"{p['phase']}: {_cpu_phase_table(p['cpu'])}" for p in phases)


def _cpu_phase_table(cpu: Mapping[str, Any]) -> str:
    total = cpu["ms_per_write"]["total"]
    roles = cpu["store_ms_per_write"]
    count = cpu["processes"]

    def share(ms: float) -> int:
        return round(100 * ms / total) if total else 0

    rows: list[tuple[object, ...]] = []
    for group, ms in cpu["ms_per_write"].items():
        if group == "store":
            rows.append((group, sum(count[r] for r in roles), ms, share(ms)))
            rows += [(f"store: {role}", count[role], m, share(m)) for role, m in roles.items()]
        elif group != "total":
            rows.append((group, count[group], ms, share(ms)))
    rows.append(("total", sum(count.values()), total, 100))
    cycle = "a write and its read-back by another server" if cpu["read_backs"] else "a write"
    clients = f"{cpu['clients']} client{'s' * (cpu['clients'] != 1)}"
    said = (
        f"{cpu['writes']} writes (and {cpu['read_backs']} read-backs) by {clients} in {cpu['wall_s']} s "
        f"on {cpu['cpus']} CPUs, {100 * cpu['busy']:.0f} % of them busy with these processes "
        f"(other processes: {cpu['others_ms_per_write']} ms a write); CPU-bound floor {cpu['floor_ms']} ms a write "
        f"({total} ms × {cpu['clients']} / {cpu['cpus']} CPUs; {cpu['floor_with_others_ms']} ms with the "
        f"other processes' CPU) beside p50 {cpu['p50_ms']} ms, and a client's cycle ({cycle}) measured "
        f"at {cpu['cycle_ms']} ms"
    )
    return f"{said}\n\n{harness.markdown_table(('processes', 'count', 'CPU ms a write', 'share %'), rows)}"


TABLES = {
    "main": main_table, "transfer": transfer_table, "servers": servers_table, "stores": stores_table,
    "cluster": cluster_table, "cpu": cpu_table,
}  # fmt: skip
