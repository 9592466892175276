"""Benchmark: how long an agent waits for perftool's answer through ``perftool mcp``.

    python bench/bench_mcp.py                  # the real captures in tests/data/real, 3 calls each
    python bench/bench_mcp.py --trace FILE     # any trace

Starts the server as an agent does (a subprocess over stdio, the official SDK's client), then times each ``scan``
call from request to answer: the first call of a trace and the median of the repeats (the server process is warm
then: its modules loaded). Prints the start-up time, each trace's size and times, and the answer's size. Needs
``pip install 'mcp>=2'`` (perftool's ``mcp`` extra).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
REAL = os.path.join(REPO, "tests", "data", "real")
DEFAULT_TRACES = ("nccl_a100_rank.json.gz", "mi300_resnet_actckpt_ddp8_rank0.json.gz", "resnet50_pt18_workers0.json.gz")


async def measure(traces: list[str], repeats: int) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    started = time.perf_counter()
    server = StdioServerParameters(command=sys.executable, args=["-m", "perftool", "mcp"], cwd=REPO)
    async with Client(server) as client:
        await client.list_tools()
        print(f"server started and listed its tools in {time.perf_counter() - started:.2f} s")
        for trace in traces:
            times, size = [], 0
            for _ in range(repeats):
                start = time.perf_counter()
                answer = await client.call_tool("scan", {"traces": [trace]})
                times.append(time.perf_counter() - start)
                size = sum(len(part.text) for part in answer.content)
                if answer.is_error:
                    raise SystemExit(f"{trace}: {answer.content[0].text}")
            warm = statistics.median(times[1:]) if len(times) > 1 else times[0]
            print(
                f"{os.path.basename(trace)} ({os.path.getsize(trace) / 1e6:.1f} MB): scan answered in "
                f"{times[0]:.2f} s first, {warm:.2f} s warm (median of {len(times) - 1}); answer {size / 1e3:.0f} kB"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", action="append", help="a trace to scan (repeatable)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    traces = args.trace or [os.path.join(REAL, name) for name in DEFAULT_TRACES]
    print(f"machine: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; python {sys.version.split()[0]}")
    asyncio.run(measure(traces, max(args.repeats, 1)))


if __name__ == "__main__":
    main()
