#!/usr/bin/env python3
"""The official OpenAI Python client against ferrite-serve: the compatibility check a real client
gives that raw-HTTP tests cannot (its pydantic models, its SSE parser, its error classes).

    py=$(scripts/serve/setup-openai.sh)
    target/debug/ferrite-serve --model MODEL.gguf --port 8080 &
    $py serve/tests/openai_client.py --base-url http://127.0.0.1:8080/v1
    # against `ferrite-serve --fake` (it echoes the prompt): skips what needs a real model
    $py serve/tests/openai_client.py --base-url http://127.0.0.1:8080/v1 --fake

Exits 0 when every check passed, 1 with the failed checks listed otherwise.
"""

import argparse
import json
import sys
import urllib.request

import openai

failures = []


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + ("" if cond else f": {detail}"), flush=True)
    if not cond:
        failures.append(name)


def run(name, fn):
    """Runs one check group; an unexpected exception fails it (and the run continues)."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - report and go on to the next group
        check(name, False, f"{type(e).__name__}: {e}")


def check_usage(name, usage):
    check(f"{name}: usage present", usage is not None, "no usage")
    if usage is not None:
        check(f"{name}: usage counts", usage.prompt_tokens > 0 and usage.completion_tokens > 0
              and usage.total_tokens == usage.prompt_tokens + usage.completion_tokens, str(usage))


PERSON_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def valid_person(v):
    """A hand check of PERSON_SCHEMA (no jsonschema dependency)."""
    return (isinstance(v, dict) and set(v) == {"name", "age"} and isinstance(v["name"], str)
            and isinstance(v["age"], int) and not isinstance(v["age"], bool))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8080/v1")
    ap.add_argument("--fake", action="store_true", help="the server runs --fake: skip model-quality checks")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--only", help="comma-separated check groups to run (default: all)")
    a = ap.parse_args()
    client = openai.OpenAI(base_url=a.base_url, api_key="unused", max_retries=0, timeout=a.timeout)

    try:
        models = client.models.list().data
    except openai.APIError as e:
        print(f"FAIL cannot list models at {a.base_url}: {type(e).__name__}: {e}")
        return 1
    check("models: one model", len(models) == 1, str(models))
    model = models[0].id
    greet = [{"role": "user", "content": "Say hello in one short sentence."}]

    def chat_plain():
        r = client.chat.completions.create(model=model, messages=greet, max_tokens=24, temperature=0)
        c = r.choices[0]
        check("chat: text", isinstance(c.message.content, str) and c.message.content != "", repr(c.message.content))
        check("chat: role", c.message.role == "assistant", c.message.role)
        check("chat: finish_reason", c.finish_reason in ("stop", "length"), c.finish_reason)
        check("chat: object", r.object == "chat.completion", r.object)
        check_usage("chat", r.usage)

    def chat_stream():
        s = client.chat.completions.create(model=model, messages=greet, max_tokens=24, temperature=0, stream=True,
                                           stream_options={"include_usage": True})
        text, reasons, usage = "", [], None
        for ch in s:
            for c in ch.choices:
                text += c.delta.content or ""
                if c.finish_reason:
                    reasons.append(c.finish_reason)
            if ch.usage is not None:
                usage = ch.usage
        check("chat stream: text", text != "", repr(text))
        check("chat stream: one finish_reason", len(reasons) == 1 and reasons[0] in ("stop", "length"), str(reasons))
        check_usage("chat stream", usage)

    def completions():
        r = client.completions.create(model=model, prompt="The capital of France is", max_tokens=12, temperature=0)
        c = r.choices[0]
        check("completions: text", isinstance(c.text, str) and c.text != "", repr(c.text))
        check("completions: finish_reason", c.finish_reason in ("stop", "length"), c.finish_reason)
        check_usage("completions", r.usage)
        s = client.completions.create(model=model, prompt="The capital of France is", max_tokens=12, temperature=0,
                                      stream=True)
        streamed, reasons = "", []
        for ch in s:
            streamed += ch.choices[0].text if ch.choices else ""
            if ch.choices and ch.choices[0].finish_reason:
                reasons.append(ch.choices[0].finish_reason)
        check("completions stream: same text as non-streaming (greedy)", streamed == c.text, f"{streamed!r} vs {c.text!r}")
        check("completions stream: finish_reason", reasons == [c.finish_reason], str(reasons))

    def json_schema():
        r = client.chat.completions.create(
            model=model, max_tokens=64, temperature=0,
            messages=[{"role": "user", "content": "Give me a JSON object for a person named Alice who is 30."}],
            response_format={"type": "json_schema",
                             "json_schema": {"name": "person", "schema": PERSON_SCHEMA, "strict": True}})
        text = r.choices[0].message.content
        try:
            v = json.loads(text)
        except ValueError as e:
            check("json_schema: output is JSON", False, f"{e}: {text!r}")
            return
        check("json_schema: output is JSON", True)
        if a.fake:
            print("skip json_schema: schema validity (the fake backend answers {})")
        else:
            check("json_schema: output validates", valid_person(v), text)

    def stop_sequences():
        # Greedy output without a stop, then again with a stop string taken from its middle: the
        # second output must be the first one cut just before that string.
        prompt = [{"role": "user", "content": "Count from 1 to 20, separated by commas."}]
        full = client.chat.completions.create(model=model, messages=prompt, max_tokens=40, temperature=0,
                                              seed=7).choices[0].message.content
        mid = len(full) // 2
        stop = full[mid:mid + 2]
        if len(full) < 6 or not stop.strip():
            check("stop: a usable first output", False, repr(full))
            return
        expect = full[:full.index(stop)]
        r = client.chat.completions.create(model=model, messages=prompt, max_tokens=40, temperature=0, seed=7,
                                           stop=[stop, "\u0000never"])
        got = r.choices[0].message.content
        check("stop: stop string absent", stop not in got, f"{stop!r} in {got!r}")
        check("stop: output cut at the stop string", got == expect, f"{got!r} vs {expect!r}")
        check("stop: finish_reason stop", r.choices[0].finish_reason == "stop", r.choices[0].finish_reason)
        s = client.chat.completions.create(model=model, messages=prompt, max_tokens=40, temperature=0, seed=7,
                                           stop=stop, stream=True)
        streamed = "".join(c.choices[0].delta.content or "" for c in s if c.choices)
        check("stop: streaming cut the same way", streamed == expect, f"{streamed!r} vs {expect!r}")

    def logprobs():
        r = client.chat.completions.create(model=model, messages=greet, max_tokens=8, temperature=0,
                                           logprobs=True, top_logprobs=3)
        content = r.choices[0].logprobs.content if r.choices[0].logprobs else None
        check("logprobs: present", bool(content), str(r.choices[0].logprobs))
        if content:
            check("logprobs: three alternatives per token", all(len(t.top_logprobs) == 3 for t in content),
                  str([len(t.top_logprobs) for t in content]))
            check("logprobs: all <= 0", all(t.logprob <= 0 and all(x.logprob <= 0 for x in t.top_logprobs)
                                             for t in content), str(content[:2]))
            check("logprobs: one entry per completion token", len(content) == r.usage.completion_tokens,
                  f"{len(content)} vs {r.usage.completion_tokens}")
        c = client.completions.create(model=model, prompt="Hello", max_tokens=4, temperature=0, logprobs=2)
        lp = c.choices[0].logprobs
        check("completions logprobs: shape", lp is not None and len(lp.tokens) == len(lp.token_logprobs)
              and all(len(t) <= 2 for t in lp.top_logprobs), str(lp))
        # the prompt's logprobs (echo): scoring prompt + greedy answer without generating gives the
        # answer's tokens the logprobs the generation gave them
        if a.fake:
            return
        prompt = "The capital of France is"
        g = client.completions.create(model=model, prompt=prompt, max_tokens=6, temperature=0, logprobs=1).choices[0]
        sc = client.completions.create(model=model, prompt=prompt + g.text, max_tokens=0, echo=True, logprobs=1)
        s0 = sc.choices[0]
        sl = s0.logprobs
        check("echo logprobs: the prompt's text back", s0.text == prompt + g.text and sc.usage.completion_tokens == 0,
              f"{s0.text!r} {sc.usage}")
        check("echo logprobs: the first token has none", sl.token_logprobs[0] is None and sl.top_logprobs[0] is None,
              str(sl.token_logprobs[:2]))
        check("echo logprobs: text offsets point at the tokens",
              all(s0.text[o:].startswith(t) for o, t in zip(sl.text_offset, sl.tokens)), str(sl.text_offset))
        n = len(g.logprobs.tokens)
        same_tokens = sl.tokens[-n:] == g.logprobs.tokens
        check("echo logprobs: the answer scores as generated",
              same_tokens and all(abs(x - y) < 1e-5 for x, y in zip(sl.token_logprobs[-n:], g.logprobs.token_logprobs)),
              f"{sl.tokens[-n:]} {sl.token_logprobs[-n:]} vs {g.logprobs.tokens} {g.logprobs.token_logprobs}")
        e = client.completions.create(model=model, prompt=prompt, max_tokens=3, temperature=0, echo=True, logprobs=1).choices[0]
        check("echo logprobs with generation: prompt then answer", e.text.startswith(prompt)
              and len(e.logprobs.tokens) == len(sl.tokens) - n + 3 and e.logprobs.token_logprobs[0] is None,
              f"{e.text!r} {len(e.logprobs.tokens)}")

    def tokenize(text):
        """The server's ids for text (llama-server's POST /tokenize, beside /v1)."""
        root = a.base_url.rsplit("/v1", 1)[0]
        req = urllib.request.Request(root + "/tokenize", data=json.dumps({"content": text}).encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=a.timeout) as r:
            return json.loads(r.read())["tokens"]

    def tokens_of(r):
        return [t.token for t in r.choices[0].logprobs.content]

    def penalties():
        # Greedy counting repeats ", " and digits; frequency and presence penalties make repeats
        # costly, so the penalised output differs and repeats fewer tokens; repetition_penalty
        # (llama-server's and vLLM's extension, through extra_body) changes it too.
        prompt = [{"role": "user", "content": "Count from 1 to 20, separated by commas."}]
        kw = dict(model=model, messages=prompt, max_tokens=32, temperature=0, logprobs=True)
        base = tokens_of(client.chat.completions.create(**kw))
        pen = tokens_of(client.chat.completions.create(**kw, frequency_penalty=1.5, presence_penalty=1.0))
        rep = tokens_of(client.chat.completions.create(**kw, extra_body={"repetition_penalty": 1.5}))

        def repeats(ts):
            return len(ts) - len(set(ts))
        check("penalties: frequency/presence change the output", pen != base, f"{pen!r}")
        check("penalties: fewer repeated tokens", repeats(pen) < repeats(base), f"{repeats(pen)} vs {repeats(base)}")
        check("penalties: repetition_penalty changes the output", rep != base, f"{rep!r}")

    def dry_mirostat():
        # DRY (llama-server's fields, through extra_body, its default breakers and base) on a
        # greedy answer that loops: the output changes and its longest repeated token run is
        # shorter.
        prompt = [{"role": "user", "content": "Write the word hello twenty times."}]
        kw = dict(model=model, messages=prompt, max_tokens=48, temperature=0, logprobs=True)
        base = tokens_of(client.chat.completions.create(**kw))
        dry = tokens_of(client.chat.completions.create(**kw, extra_body={"dry_multiplier": 0.8}))

        def longest_repeat(ts):
            best = 0
            for m in range(1, len(ts)):
                grams = [tuple(ts[i:i + m]) for i in range(len(ts) - m + 1)]
                if len(grams) == len(set(grams)):
                    break
                best = m
            return best
        check("dry: changes the output", dry != base, f"{dry!r}")
        check("dry: repeats less", longest_repeat(dry) < longest_repeat(base),
              f"{longest_repeat(dry)} vs {longest_repeat(base)}")
        # mirostat keeps state across a sequence's draws: the same seed gives the same text
        q = [{"role": "user", "content": "Write one sentence about the sea."}]
        for version in (1, 2):
            mk = dict(model=model, messages=q, max_tokens=24, temperature=1, seed=11,
                      extra_body={"mirostat": version, "mirostat_tau": 3.0, "top_p": 0.5})
            r1 = client.chat.completions.create(**mk)
            r2 = client.chat.completions.create(**mk)
            check(f"mirostat v{version}: answers", bool(r1.choices[0].message.content), str(r1))
            check(f"mirostat v{version}: same seed, same text",
                  r1.choices[0].message.content == r2.choices[0].message.content,
                  f"{r1.choices[0].message.content!r} vs {r2.choices[0].message.content!r}")

    def logit_bias():
        # -100 bans the greedy first token; +100 on another token makes it the first
        q = [{"role": "user", "content": "What is the capital of France?"}]
        kw = dict(model=model, messages=q, max_tokens=4, temperature=0, logprobs=True)
        first = tokens_of(client.chat.completions.create(**kw))[0]
        ids = tokenize(first)
        check("logit_bias: the first token is one id", len(ids) == 1, f"{first!r} -> {ids}")
        banned = tokens_of(client.chat.completions.create(**kw, logit_bias={str(ids[0]): -100}))
        check("logit_bias: -100 bans the token", first not in banned, f"{first!r} in {banned!r}")
        boost = tokenize(" banana")
        forced = tokens_of(client.chat.completions.create(**kw, logit_bias={str(boost[-1]): 100}))
        check("logit_bias: +100 makes the token first", forced[0] == " banana", f"{forced!r}")

    def seeds():
        q = [{"role": "user", "content": "Write a sentence about the sea."}]
        kw = dict(model=model, messages=q, max_tokens=24, temperature=1.0)
        t = [client.chat.completions.create(**kw, seed=s).choices[0].message.content for s in (42, 42, 43)]
        check("seed: the same seed gives the same output", t[0] == t[1], f"{t[0]!r} vs {t[1]!r}")
        check("seed: another seed gives another output", t[0] != t[2], f"{t[0]!r} vs {t[2]!r}")

    weather = {"type": "function", "function": {
        "name": "get_weather", "description": "Get the current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The city"}},
                       "required": ["city"]}}}
    add = {"type": "function", "function": {
        "name": "add", "description": "Add two integers",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                       "required": ["a", "b"]}}}

    def tool_flow():
        # call (required, then a named function among two), streamed and not; the tool's result;
        # the final answer
        msgs = [{"role": "user", "content": "What is the weather in Paris?"}]
        kw = dict(model=model, messages=msgs, max_tokens=64, temperature=0)
        r = client.chat.completions.create(**kw, tools=[weather], tool_choice="required")
        c = r.choices[0]
        calls = c.message.tool_calls or []
        check("tools: finish_reason tool_calls", c.finish_reason == "tool_calls", c.finish_reason)
        check("tools: one call of get_weather", len(calls) >= 1 and calls[0].function.name == "get_weather", str(calls))
        if not calls:
            return
        args = json.loads(calls[0].function.arguments)
        check("tools: arguments hold a city", isinstance(args.get("city"), str) and args["city"] != "", str(args))
        check("tools: an OpenAI call id", calls[0].id.startswith("call_") and calls[0].type == "function", calls[0].id)
        s = client.chat.completions.create(**kw, tools=[weather], tool_choice="required", stream=True)
        acc, reasons = {}, []
        for ch in s:
            for d in ch.choices:
                for tc in d.delta.tool_calls or []:
                    e = acc.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                    e["id"] = tc.id or e["id"]
                    if tc.function:
                        e["name"] += tc.function.name or ""
                        e["arguments"] += tc.function.arguments or ""
                if d.finish_reason:
                    reasons.append(d.finish_reason)
        got = acc.get(0, {})
        check("tools stream: the same call reassembled", got.get("name") == "get_weather"
              and json.loads(got.get("arguments") or "null") == args and bool(got.get("id")), str(acc))
        check("tools stream: finish_reason tool_calls", reasons == ["tool_calls"], str(reasons))
        named = client.chat.completions.create(model=model, max_tokens=64, temperature=0, tools=[weather, add],
                                               messages=[{"role": "user", "content": "What is 2 plus 3?"}],
                                               tool_choice={"type": "function", "function": {"name": "add"}})
        nc = named.choices[0].message.tool_calls or []
        check("tools: the named function is called", len(nc) >= 1 and nc[0].function.name == "add"
              and set(json.loads(nc[0].function.arguments)) == {"a", "b"}, str(nc))
        msgs2 = msgs + [c.message, {"role": "tool", "tool_call_id": calls[0].id,
                                    "content": json.dumps({"temperature_c": 18, "condition": "sunny"})}]
        # the final answer: tool_choice none (SmolLM2-135M, offered the tool again, calls it again)
        final = client.chat.completions.create(model=model, messages=msgs2, tools=[weather], max_tokens=48,
                                               temperature=0, tool_choice="none")
        f = final.choices[0]
        check("tools: an answer after the tool's result", f.finish_reason in ("stop", "length")
              and isinstance(f.message.content, str) and f.message.content.strip() != "", repr(f.message))
        # auto: a call or an answer, never the syntax's JSON or markers as content; streamed, the
        # same content (sent as it becomes certain) and the same calls
        kw2 = dict(model=model, messages=msgs, max_tokens=64, temperature=0, tools=[weather, add])
        a = client.chat.completions.create(**kw2).choices[0]
        check("tools auto: a call or a plain answer", bool(a.message.tool_calls) or (
              isinstance(a.message.content, str) and not a.message.content.lstrip().startswith(("{", "<tool_call>"))),
              repr(a.message))
        pieces, acc, sreasons = [], {}, []
        for ch in client.chat.completions.create(**kw2, stream=True):
            for d in ch.choices:
                if d.delta.content:
                    pieces.append(d.delta.content)
                for tc in d.delta.tool_calls or []:
                    e = acc.setdefault(tc.index, {"name": "", "arguments": ""})
                    e["name"] += (tc.function.name or "") if tc.function else ""
                    e["arguments"] += (tc.function.arguments or "") if tc.function else ""
                if d.finish_reason:
                    sreasons.append(d.finish_reason)
        want_calls = [{"name": c.function.name, "arguments": c.function.arguments} for c in a.message.tool_calls or []]
        check("tools auto stream: the same content", "".join(pieces) == (a.message.content or ""),
              f"{''.join(pieces)!r} vs {a.message.content!r}")
        check("tools auto stream: the same calls", [acc[i] for i in sorted(acc)] == want_calls, f"{acc} vs {want_calls}")
        check("tools auto stream: the same finish", sreasons == [a.finish_reason], str(sreasons))

    def choices():
        # n=3: three choices (indexes 0..2) from one prompt, seeds seed, seed+1, seed+2; the
        # prompt counted once; streamed, each choice's deltas and finish under its index
        q = [{"role": "user", "content": "Write a sentence about the sea."}]
        one = client.chat.completions.create(model=model, messages=q, max_tokens=16, temperature=1.0, seed=5)
        r = client.chat.completions.create(model=model, messages=q, max_tokens=16, temperature=1.0, seed=5, n=3)
        check("n=3: three choices", sorted(c.index for c in r.choices) == [0, 1, 2], str([c.index for c in r.choices]))
        check("n=3: choice 0 is the n=1 answer (same seed)", r.choices[0].message.content == one.choices[0].message.content,
              f"{r.choices[0].message.content!r} vs {one.choices[0].message.content!r}")
        check("n=3: the choices differ", len({c.message.content for c in r.choices}) > 1, str([c.message.content for c in r.choices]))
        check("n=3: the prompt counted once", r.usage.prompt_tokens == one.usage.prompt_tokens, str(r.usage))
        check("n=3: completion tokens of all choices", r.usage.completion_tokens > one.usage.completion_tokens
              and r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens, str(r.usage))
        s = client.chat.completions.create(model=model, messages=q, max_tokens=16, temperature=1.0, seed=5, n=3,
                                           stream=True, stream_options={"include_usage": True})
        texts, reasons, usage = {}, {}, None
        for ch in s:
            for c in ch.choices:
                texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
                if c.finish_reason:
                    reasons[c.index] = c.finish_reason
            usage = ch.usage or usage
        check("n=3 stream: each choice as without streaming", [texts.get(i) for i in range(3)]
              == [c.message.content for c in sorted(r.choices, key=lambda c: c.index)], str(texts))
        check("n=3 stream: a finish per choice", sorted(reasons) == [0, 1, 2], str(reasons))
        check("n=3 stream: usage once, as without streaming", usage is not None and usage.prompt_tokens == r.usage.prompt_tokens
              and usage.completion_tokens == r.usage.completion_tokens, str(usage))

    def embeddings():
        # the SDK asks for base64 unless told (and decodes it); float on request: the same numbers
        texts = ["The cat sat on the mat.", "A cat was sitting on a rug.", "Interest rates rose by half a percent."]
        r = client.embeddings.create(model=model, input=texts)
        e = [d.embedding for d in sorted(r.data, key=lambda d: d.index)]
        check("embeddings: one per input", len(e) == 3 and [d.index for d in r.data] == [0, 1, 2], str(len(e)))
        dim = len(e[0])
        check("embeddings: unit length", all(abs(sum(x * x for x in v) - 1.0) < 1e-3 for v in e),
              str([sum(x * x for x in v) for v in e]))
        f = client.embeddings.create(model=model, input=texts[0], encoding_format="float")
        check("embeddings: float equals base64", len(f.data[0].embedding) == dim
              and max(abs(a - b) for a, b in zip(f.data[0].embedding, e[0])) < 1e-6, "differ")
        check("embeddings: usage", r.usage.prompt_tokens > 0 and r.usage.total_tokens == r.usage.prompt_tokens, str(r.usage))

        def cos(a, b):
            return sum(x * y for x, y in zip(a, b))
        check("embeddings: the two cat sentences are nearer than cat and rates", cos(e[0], e[1]) > cos(e[0], e[2]),
              f"{cos(e[0], e[1]):.4f} vs {cos(e[0], e[2]):.4f}")

    def errors():
        for name, kw in [("n=9", {"n": 9}), ("max_tokens=0", {"max_tokens": 0})]:
            try:
                client.chat.completions.create(model=model, messages=greet, **kw)
                check(f"error {name}: BadRequestError", False, "accepted")
            except openai.BadRequestError as e:
                check(f"error {name}: BadRequestError", e.status_code == 400, str(e))
        try:
            client.get("/no-such-path", cast_to=object)
            check("error bad path: NotFoundError", False, "accepted")
        except openai.NotFoundError:
            check("error bad path: NotFoundError", True)
        try:
            client.models.retrieve("no-such-model")
            check("error unknown model: NotFoundError", False, "accepted")
        except openai.NotFoundError:
            check("error unknown model: NotFoundError", True)

    groups = [("chat", chat_plain), ("chat stream", chat_stream), ("completions", completions),
              ("json_schema", json_schema), ("stop", stop_sequences), ("logprobs", logprobs), ("errors", errors)]
    if a.fake:
        print("skip penalties, logit_bias, seed, tools (the fake backend echoes the prompt)")
    else:
        groups += [("penalties", penalties), ("dry_mirostat", dry_mirostat), ("logit_bias", logit_bias), ("seed", seeds), ("tools", tool_flow),
                   ("n", choices), ("embeddings", embeddings)]
    only = set(a.only.split(",")) if a.only else None
    for name, fn in groups:
        if only is None or name in only:
            run(name, fn)

    if failures:
        print(f"\n{len(failures)} check(s) failed against {a.base_url}:\n  " + "\n  ".join(failures))
        return 1
    print(f"\nall checks passed against {a.base_url} (openai {openai.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
