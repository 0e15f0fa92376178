#!/usr/bin/env python3
"""bench/streaming_report.py: the streaming scenarios' table (bench/streaming.sh's runs) in markdown.

  streaming_report.py [--markdown OUT] RESULTS.json...

Each results file holds {meta, streaming: {setup, rounds, runs}} (bench/run.sh --streaming, or
--quick's small form). The runs of every file given are pooled: each cell is the median over the
rounds with the minimum and maximum beside it, then idemproxy's medians against nginx's with the
issue's targets (throughput >= nginx, CPU per GiB <= nginx, peak RSS <= 64 MiB + 128 KiB per
active stream).
"""

import argparse
import json
import statistics
import sys

TARGET_ORDER = ["direct", "idemproxy", "nginx", "nginx-buffered", "nginx-32k"]
TARGET_NAMES = {
    "direct": "upstream alone",
    "idemproxy": "idemproxy",
    "nginx": "nginx (unbuffered)",
    "nginx-buffered": "nginx (buffered)",
    "nginx-32k": "nginx (unbuffered, 32 KiB buffer)",
}
RSS_BASE_KIB = 64 * 1024
RSS_PER_STREAM_KIB = 128


def streams_of(run):
    client = run["client"]
    return client.get("streams") or client.get("concurrency") or 1


def spread(values, digits=1, scale=1.0):
    values = [v * scale for v in values if v is not None]
    if not values:
        return "–"
    fmt = f"{{:,.{digits}f}}"
    if len(values) == 1:
        return fmt.format(values[0])
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}–{fmt.format(max(values))})"


def cpu_figure(run):
    """CPU seconds per GiB moved; for SSE, whose bytes are few, CPU µs per event delivered."""
    if run["client"].get("mode") != "sse":
        return run.get("proxy_cpu_s_per_gib")
    events = run["client"].get("events_received") or 0
    if run.get("proxy_cpu_s") is None or events == 0:
        return None
    return run["proxy_cpu_s"] * 1e6 / events


def events_per_s(run):
    client = run["client"]
    return client["events_received"] / client["seconds"] if client.get("seconds") else None


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--markdown", help="write here (default: stdout)")
    parser.add_argument("results", nargs="+")
    args = parser.parse_args()

    runs, metas, setups = [], [], []
    for path in args.results:
        with open(path) as f:
            document = json.load(f)
        streaming = document.get("streaming")
        if not streaming:
            continue
        metas.append(document.get("meta", {}))
        setups.append(streaming.get("setup", ""))
        runs.extend(streaming.get("runs", []))
    if not runs:
        sys.exit("no streaming runs in " + ", ".join(args.results))

    scenarios = []
    for run in runs:
        if run["scenario"] not in scenarios:
            scenarios.append(run["scenario"])
    by_key = {}
    for run in runs:
        by_key.setdefault((run["scenario"], run["target"]), []).append(run)
    rounds = max(len(v) for v in by_key.values())
    errors = sum(r["client"].get("errors", 0) for r in runs)

    out = []
    out.append("# Streaming scenarios")
    out.append("")
    for meta in metas:
        out.append(f"- {meta.get('date', '?')}, commit {meta.get('commit', '?')}, {meta.get('cores', '?')} cores "
                   f"({meta.get('cpu', '?')}), load average {meta.get('load_before', '?')} before, "
                   f"{meta.get('load_after', '?')} after; {meta.get('versions', '')}")
    out.append(f"- {setups[0]}" if setups else "")
    out.append(f"- {len(runs)} runs, {rounds} per scenario and target; {errors} verification errors")
    out.append("")
    out.append("Each cell: median (min–max) over the rounds. CPU: the proxy's processes, user + system "
               "(nginx: master and workers), per GiB moved; peak RSS growth: VmHWM after the run minus "
               "VmRSS before it (VmHWM reset first), summed over those processes. On a shared machine "
               "the CPU per GiB is the figure to compare; the wall-clock MiB/s moves with whoever else "
               "has the cores (and the client, one Python process, limits it: see 'upstream alone').")
    out.append("")
    out.append("| scenario | path | MiB/s (SSE: events/s) | proxy CPU s/GiB (SSE: µs per event) | peak RSS growth MiB | peak RSS MiB | "
               "event latency p50 ms | p99 ms | RSS growth per stream KiB | errors |")
    out.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for scenario in scenarios:
        for target in TARGET_ORDER:
            group = by_key.get((scenario, target))
            if not group:
                continue
            sse = group[0]["client"].get("mode") == "sse"
            lat = [r["client"].get("latency_us") or {} for r in group]
            out.append("| " + " | ".join([
                scenario,
                TARGET_NAMES.get(target, target),
                spread([events_per_s(r) for r in group], 0) if sse else spread([r["client"].get("mib_per_s") for r in group], 0),
                spread([cpu_figure(r) for r in group], 2 if not sse else 1),
                spread([r.get("rss_growth_kib") for r in group], 1, 1 / 1024),
                spread([r.get("rss_peak_kib") for r in group], 1, 1 / 1024),
                spread([l.get("p50") for l in lat], 2, 1 / 1000) if sse else "",
                spread([l.get("p99") for l in lat], 2, 1 / 1000) if sse else "",
                spread([(r["rss_growth_kib"] / streams_of(r)) if r.get("rss_growth_kib") is not None else None
                        for r in group], 1) if sse and target != "direct" else "",
                str(sum(r["client"].get("errors", 0) for r in group)),
            ]) + " |")
    out.append("")

    out.append("## Targets (idemproxy against nginx, medians)")
    out.append("")
    out.append("| scenario | against | throughput ÷ nginx (≥ 1) | CPU ÷ nginx (≤ 1) | idemproxy's peak RSS vs 64 MiB + 128 KiB × streams | verdicts |")
    out.append("| --- | --- | ---: | ---: | ---: | --- |")
    for scenario in scenarios:
        proxy = by_key.get((scenario, "idemproxy"))
        if not proxy:
            continue
        for flavour in ("nginx", "nginx-buffered", "nginx-32k"):
            nginx = by_key.get((scenario, flavour))
            if not nginx:
                continue
            sse = proxy[0]["client"].get("mode") == "sse"
            verdicts = []
            tp_p = median([r["client"].get("mib_per_s") for r in proxy])
            tp_n = median([r["client"].get("mib_per_s") for r in nginx])
            cpu_p, cpu_n = median([cpu_figure(r) for r in proxy]), median([cpu_figure(r) for r in nginx])
            tp_cell = cpu_cell = "–"
            if sse:
                tp_cell = "(paced by the upstream)"
            elif tp_p and tp_n:
                tp_cell = f"{tp_p:,.0f} ÷ {tp_n:,.0f} MiB/s = {tp_p / tp_n:.2f}×"
                verdicts.append("throughput " + ("met" if tp_p >= tp_n else "**missed**"))
            if cpu_p is not None and cpu_n:
                unit = "µs/event" if sse else "s/GiB"
                cpu_cell = f"{cpu_p:.2f} ÷ {cpu_n:.2f} {unit} = {cpu_p / cpu_n:.2f}×"
                verdicts.append("CPU " + ("met" if cpu_p <= cpu_n else "**missed**"))
            streams = streams_of(proxy[0])
            bound = RSS_BASE_KIB + RSS_PER_STREAM_KIB * streams
            peak = max((r.get("rss_peak_kib") or 0) for r in proxy)
            rss_cell = f"{peak / 1024:.1f} MiB (max) vs {bound / 1024:.1f} MiB"
            verdicts.append("RSS " + ("met" if peak <= bound else "**missed**"))
            out.append(f"| {scenario} | {TARGET_NAMES[flavour]} | {tp_cell} | {cpu_cell} | {rss_cell} | {', '.join(verdicts)} |")
    out.append("")
    text = "\n".join(out)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
