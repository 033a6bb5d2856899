#!/usr/bin/env python3
"""Load benchmark of an OpenAI-compatible server (ferrite-serve or llama-server), standard library
only: N concurrent streaming clients POST /v1/completions and time every server-sent event.

Workloads (deterministic from --seed, the same text for every server):
  mixed          --requests prompts of 16..480 words and 16..192 output tokens, varied (the
                 upper ends are --max-prompt-words and --max-output-tokens)
  shared-prefix  SGLang's generated-shared-prefix workload scaled down: --groups groups x
                 --per-group prompts, a --prefix-words system prefix per group (about 1,024 tokens
                 of SmolLM2's tokenizer at the default), a short question, --output-tokens tokens
Each request asks for exactly max_tokens tokens (ignore_eos, which both servers accept), so the
output is the same size everywhere; the token count comes from the final usage when the server
sends one (stream_options.include_usage), else from the number of events with text.

Prints one JSON object: requests, failures, wall seconds, output tokens, aggregate output tokens/s,
time to first token p50/p99 and inter-token latency p50/p99 (milliseconds).

usage: load_bench.py --url http://127.0.0.1:8080 [--workload mixed|shared-prefix] [--clients 32]
                     [--requests 64] [--seed 1] [--model NAME] [--timeout 600] [--disconnect FRACTION]
A request the --disconnect draw picks hangs up after a random number of its tokens (up to half):
those are counted apart, and every other request must end complete (failures otherwise).
"""
import argparse
import asyncio
import json
import random
import sys
import time
import urllib.parse

WORDS = ("the of and to in is was for on that with as by at from his her it an were are which this be "
         "or has had not but one all they their there been more when who will would can said into time "
         "about other many then them these some her would make like him into has look two more write go "
         "see number way could people my than first water been call who oil its now find long down day did "
         "get come made may part over new sound take only little work know place year live me back give most "
         "very after thing our just name good sentence man think say great where help through much before "
         "line right too mean old any same tell boy follow came want show also around form three small set "
         "put end does another well large must big even such because turn here why ask went men read need "
         "land different home us move try kind hand picture again change off play spell air away animal house "
         "point page letter mother answer found study still learn should america world").split()

QUESTIONS = ["What is the main idea above?", "Summarise the text in one line.", "Which word comes first?",
             "Is the text about water?", "Name a place from the text.", "What happens at the end?",
             "Who is mentioned most?", "Give the text a title."]


def text_of(rng, n_words):
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


def workload(args):
    rng = random.Random(args.seed)
    reqs = []
    if args.workload == "mixed":
        for _ in range(args.requests):
            reqs.append((text_of(rng, rng.randint(16, args.max_prompt_words)), rng.randint(16, args.max_output_tokens)))
    else:
        for g in range(args.groups):
            prefix = "System: " + text_of(rng, args.prefix_words) + "\n"
            for k in range(args.per_group):
                reqs.append((prefix + "User: " + QUESTIONS[(g + k) % len(QUESTIONS)] + "\nAssistant:", args.output_tokens))
        rng.shuffle(reqs)
    return reqs


async def read_http(reader):
    """Yields body bytes as they arrive (chunked or until close); raises on a non-200 status."""
    status = await reader.readline()
    parts = status.split()
    if len(parts) < 2:
        raise RuntimeError(f"bad status line {status!r}")
    headers = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        k, _, v = line.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    code = int(parts[1])
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size_line = await reader.readline()
            size = int(size_line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readline()
                return
            data = await reader.readexactly(size)
            await reader.readexactly(2)
            if code != 200:
                raise RuntimeError(f"HTTP {code}: {data[:200]!r}")
            yield data
    else:
        n = int(headers.get("content-length", "-1"))
        data = await (reader.readexactly(n) if n >= 0 else reader.read())
        if code != 200:
            raise RuntimeError(f"HTTP {code}: {data[:200]!r}")
        yield data


async def one_request(url, model, prompt, max_tokens, timeout, disconnect_after):
    """Streams one completion; returns (t_first, [event times], tokens, error, disconnected)."""
    u = urllib.parse.urlparse(url)
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "stream": True, "ignore_eos": True, "stream_options": {"include_usage": True}}).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    t0 = time.perf_counter()
    times, tokens, usage = [], 0, None
    reader, writer = await asyncio.open_connection(u.hostname, u.port)
    try:
        writer.write(head + body)
        await writer.drain()
        buf = b""

        async def consume():
            nonlocal buf, tokens, usage
            async for data in read_http(reader):
                buf += data
                while b"\n\n" in buf:
                    event, buf = buf.split(b"\n\n", 1)
                    for line in event.split(b"\n"):
                        if not line.startswith(b"data:"):
                            continue
                        payload = line[5:].strip()
                        if payload == b"[DONE]":
                            return
                        obj = json.loads(payload)
                        if obj.get("usage"):
                            usage = obj["usage"]
                        for ch in obj.get("choices") or []:
                            if ch.get("text"):
                                times.append(time.perf_counter())
                                tokens += 1
                        if disconnect_after is not None and tokens >= disconnect_after:
                            raise ConnectionAbortedError("client disconnected on purpose")
        await asyncio.wait_for(consume(), timeout)
    except ConnectionAbortedError:
        return (times[0] - t0 if times else None, times, tokens, None, True)
    except Exception as e:  # a failure is counted, never hidden
        return (None, times, tokens, f"{type(e).__name__}: {e}", False)
    finally:
        writer.close()
    n = usage["completion_tokens"] if usage and "completion_tokens" in usage else tokens
    return (times[0] - t0 if times else None, times, n, None, False)


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


async def model_id(url):
    """The first model /v1/models lists (both servers list the one they serve)."""
    u = urllib.parse.urlparse(url)
    reader, writer = await asyncio.open_connection(u.hostname, u.port)
    writer.write(f"GET /v1/models HTTP/1.1\r\nHost: {u.hostname}:{u.port}\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    body = b"".join([d async for d in read_http(reader)])
    writer.close()
    return json.loads(body)["data"][0]["id"]


async def main_async(args):
    if args.model is None:
        args.model = await model_id(args.url)
    reqs = workload(args)
    rng = random.Random(args.seed + 1)
    queue = asyncio.Queue()
    for i, r in enumerate(reqs):
        cut = rng.randint(1, max(1, r[1] // 2)) if rng.random() < args.disconnect else None
        queue.put_nowait((i, r, cut))
    results = []

    async def client():
        while True:
            try:
                i, (prompt, n), cut = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            results.append((i, n, await one_request(args.url, args.model, prompt, n, args.timeout, cut)))

    t0 = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(args.clients)))
    wall = time.perf_counter() - t0
    ttft, itl, out_tokens, failures, disconnected, short = [], [], 0, [], 0, 0
    for i, n, (first, times, tokens, err, cut) in results:
        if err:
            failures.append(f"request {i}: {err}")
            continue
        if cut:
            disconnected += 1
            continue
        if tokens != n:
            short += 1
        out_tokens += tokens
        if first is not None:
            ttft.append(first * 1000)
        itl += [(b - a) * 1000 for a, b in zip(times, times[1:])]
    return {
        "url": args.url, "workload": args.workload, "clients": args.clients, "requests": len(reqs),
        "failures": len(failures), "failure_examples": failures[:3], "disconnected": disconnected,
        "short_outputs": short, "wall_s": round(wall, 3), "output_tokens": out_tokens,
        "tokens_per_s": round(out_tokens / wall, 2) if wall > 0 else None,
        "ttft_ms_p50": pct(ttft, 50), "ttft_ms_p99": pct(ttft, 99),
        "itl_ms_p50": pct(itl, 50), "itl_ms_p99": pct(itl, 99),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True)
    ap.add_argument("--workload", choices=["mixed", "shared-prefix"], default="mixed")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--max-prompt-words", type=int, default=480, help="mixed: prompts of 16..this many words")
    ap.add_argument("--max-output-tokens", type=int, default=192, help="mixed: 16..this many output tokens")
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--per-group", type=int, default=8)
    ap.add_argument("--prefix-words", type=int, default=1020)
    ap.add_argument("--output-tokens", type=int, default=128)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--model", default=None, help="default: the first model of /v1/models")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--disconnect", type=float, default=0.0, help="fraction of clients that hang up mid-stream")
    args = ap.parse_args()
    for name in ("max_prompt_words", "max_output_tokens"):
        if getattr(args, name) < 16:
            ap.error(f"--{name.replace('_', '-')} must be at least 16 (the workload's lower end)")
    res = asyncio.run(main_async(args))
    for k, v in res.items():
        if isinstance(v, float):
            res[k] = round(v, 2)
    print(json.dumps(res))
    return 1 if res["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
