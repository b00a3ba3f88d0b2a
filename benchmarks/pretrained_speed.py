"""Tokens per second of SmolLM2-135M-Instruct: the book's code, transformers and llama.cpp.

The book's code is :class:`transformer_intro.models.LanguageModel` with SmolLM2's configuration
(``transformer_intro.pretrained.load_smollm2``), generating through the attention module's
key-value cache. Same GGUF weights (float32 both), same templated prompt, greedy decoding.
``jax-blocks`` is the book's code with the weights kept in the file's blocks (Q4_1, the token
table Q8_0: ``transformer_intro.pretrained.gguf.quantised_model_from_gguf``), multiplied by the
package's C++ kernel (``transformer_intro.quantisation``); its tokens are compared with the
float32 model's, whose weights are the same numbers. ``jax-blocks-q8`` is the same model with
each vector rounded to Q8_0 blocks before a product (``vector_format="Q8_0"``, as llama.cpp
does): integer products, no longer the float32 model's numbers.
Prefill (the prompt in one pass) and decoding (one token per step, on the key-value cache) are
timed apart, after a call that compiles (JAX) or warms up (torch). Each implementation runs at
each thread setting in ``--threads``; the best is reported. Each setting runs in a fresh
subprocess pinned to that many cores (``taskset``), since JAX fixes its thread pool when it
starts. Each worker also reports its peak resident memory, after loading and in all, and what it
holds at the end, before and after handing the memory it has freed back to the operating system
(glibc's ``malloc_trim``; not on other C libraries).

    python benchmarks/pretrained_speed.py --tokens 64 --threads 1 2 [--llama-python PYTHON]

With ``--llama-python``, a Python that has llama-cpp-python (a benchmark environment of its own,
not the book's requirements: ``benchmarks/requirements-llama.txt`` says how), llama.cpp runs
too, at each thread setting, on the same file with its weights as stored (Q4_1), on the book's
token ids for the prompt: prefill is one ``eval`` of the prompt, decoding takes the likeliest
token of the last logits and evaluates it, token by token.

The workers inherit the environment: with glibc, ``MALLOC_ARENA_MAX=1 python
benchmarks/pretrained_speed.py ...`` measures them with one pool of memory for all threads.

With ``--profile-prefill`` it instead profiles the book's prefill in this process, on all its
cores: wall and CPU milliseconds, XLA's FLOP count, and the CPU time of the matrix products
against the rest (``benchmarks/lm_step_profile.py``'s trace reading).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

PROMPT = "Explain in a few sentences why the sky is blue."
# the book's code: (weights kept in blocks, the vectors' format, the blocks scanned)
JAX_WORKERS = {
    "jax": (False, None, False),
    "jax-blocks": (True, None, False),
    "jax-blocks-q8": (True, "Q8_0", False),
    "jax-blocks-scan": (True, None, True),
    "jax-blocks-q8-scan": (True, "Q8_0", True),
}


def resident_mib() -> dict:
    """What the process holds now, in MiB, and after returning freed memory to the system.

    The C library keeps memory that the program has freed for its next allocations;
    ``malloc_trim(0)`` hands it back, so the difference is memory no longer in use that the
    peak still counts.
    """
    import ctypes
    import gc

    def now() -> float | None:
        try:
            with open("/proc/self/status") as status:
                line = next(line for line in status if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            return None
        return int(line.split()[1]) / 1024

    held = now()
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        return {"resident_mib": held, "resident_trimmed_mib": None}
    return {"resident_mib": held, "resident_trimmed_mib": now()}


def summary(runs: list[tuple], prompt_tokens: int, num_tokens: int, loaded_mib: float) -> dict:
    """A worker's figures from its timed runs, each (prefill s, decode s, tokens): the best of
    each, the first run's tokens, and the process's memory."""
    prefill_s = min(r[0] for r in runs)
    decode_s = min(r[1] for r in runs)
    return {
        "prompt_tokens": prompt_tokens,
        "prefill_s": prefill_s,
        "prefill_tokens_per_s": prompt_tokens / prefill_s,
        "decode_tokens_per_s": num_tokens / decode_s,
        "tokens": runs[0][2],
        "peak_after_loading_mib": loaded_mib,
        "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        **resident_mib(),
    }


def _mib(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f} MiB"


def run_jax(
    num_tokens: int,
    repeats: int,
    blocks: bool = False,
    vector_format: str | None = None,
    scan_blocks: bool = False,
) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    from transformer_intro.models.generation import compiled_decode, padded_prompt, prefill
    from transformer_intro.pretrained import load_smollm2

    model, tokenizer = load_smollm2(
        quantised=blocks, vector_format=vector_format, scan_blocks=scan_blocks
    )
    loaded_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ids = tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}]))
    prompt, window = padded_prompt(model, np.asarray(ids, np.int32), num_tokens)  # as generate_ids
    prompt = jnp.asarray(prompt)
    length = jnp.int32(len(ids))
    key, temperature = jax.random.PRNGKey(0), jnp.float32(0.0)
    # As generate_ids: decoding is compiled before the prompt's first pass.
    decode = compiled_decode(model, prompt, window, length, key, num_tokens, temperature)

    def once():
        tic = time.perf_counter()
        logits, cache = prefill(model, prompt, length, window)
        jax.block_until_ready(logits)
        middle = time.perf_counter()
        tokens = decode(model, logits, cache, length, key, num_tokens, temperature)
        jax.block_until_ready(tokens)
        return middle - tic, time.perf_counter() - middle, np.asarray(tokens).tolist()

    once()  # compiles the prefill
    runs = [once() for _ in range(repeats)]
    return summary(runs, len(ids), num_tokens, loaded_mib)


def profile_prefill(num_tokens: int, repeats: int) -> None:
    """Where the book's prefill of the benchmark's prompt spends this machine's cores."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from lm_step_profile import cpu_time_by_kind, step_flops, time_steps  # beside this script

    from transformer_intro.models.generation import padded_prompt, prefill
    from transformer_intro.pretrained import load_smollm2

    if jax.default_backend() != "cpu":
        raise SystemExit(
            f"--profile-prefill reads XLA's CPU kernels, not {jax.default_backend()}'s"
        )
    model, tokenizer = load_smollm2()
    ids = tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}]))
    prompt, window = padded_prompt(model, np.asarray(ids, np.int32), num_tokens)
    inputs = (model, jnp.asarray(prompt), jnp.int32(len(ids)), window)
    compiled = prefill.lower(*inputs).compile()
    flops = step_flops(compiled)
    wall, cpu = time_steps(compiled, inputs, repeats)
    kinds = cpu_time_by_kind(compiled, inputs, repeats)
    kernels = sum(kinds.values())
    products = kinds.pop("matrix product", 0.0)
    print(
        f"prefill of {len(ids)} prompt tokens, padded to {prompt.size}, on {os.cpu_count()} cores"
    )
    print(
        f"  {wall * 1e3:.0f} ms wall, {cpu * 1e3:.0f} ms CPU; XLA's count {flops / 1e9:.2f} GFLOP"
    )
    print(
        f"  {flops / wall / 1e9:.0f} GFLOP/s per wall second; profiled kernels {kernels:.0f} CPU "
        f"ms, of which matrix products {products:.0f} ({flops / (products / 1e3) / 1e9:.0f} "
        f"GFLOP/s per CPU second, at most)"
    )


def run_torch(num_tokens: int, repeats: int, threads: int) -> dict:
    import torch
    import transformers

    from transformer_intro.pretrained import find_smollm2

    torch.set_num_threads(threads)
    path = find_smollm2()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()
    loaded_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    ids = tokenizer.apply_chat_template(
        [{"role": "user", "content": PROMPT}], add_generation_prompt=True, return_tensors="pt"
    )
    ids = ids["input_ids"] if isinstance(ids, dict | transformers.BatchEncoding) else ids
    mask = torch.ones_like(ids)

    def once():
        with torch.no_grad():
            tic = time.perf_counter()
            model(ids, attention_mask=mask)
            middle = time.perf_counter()
            out = model.generate(
                ids,
                attention_mask=mask,
                max_new_tokens=num_tokens,
                min_new_tokens=num_tokens,
                do_sample=False,
                pad_token_id=tokenizer.eos_token_id,
            )
            end = time.perf_counter()
        # generate includes its own prefill: subtract the one just measured.
        return middle - tic, (end - middle) - (middle - tic), out[0, ids.shape[1] :].tolist()

    once()
    runs = [once() for _ in range(repeats)]
    return summary(runs, int(ids.shape[1]), num_tokens, loaded_mib)


def run_llama(num_tokens: int, repeats: int, threads: int, model_path: str, ids: list) -> dict:
    import numpy as np
    from llama_cpp import Llama

    llm = Llama(
        model_path=model_path,
        n_ctx=256,
        n_batch=256,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )
    loaded_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    vocab = llm.n_vocab()

    def likeliest() -> int:
        return int(np.argmax(np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), (vocab,))))

    def once():
        llm.reset()
        tic = time.perf_counter()
        llm.eval(ids)
        middle = time.perf_counter()
        tokens = []
        for _ in range(num_tokens):
            tokens.append(likeliest())
            llm.eval(tokens[-1:])
        return middle - tic, time.perf_counter() - middle, tokens

    once()
    runs = [once() for _ in range(repeats)]
    return summary(runs, len(ids), num_tokens, loaded_mib)


def prompt_ids(path: str) -> list[int]:
    """The templated prompt's token ids, by the book's tokeniser read from the file."""
    from transformer_intro.pretrained import read_gguf, tokeniser_from_gguf

    tokenizer = tokeniser_from_gguf(read_gguf(path)[1])
    return tokenizer.encode(tokenizer.apply_chat_template([{"role": "user", "content": PROMPT}]))


def agreeing_prefix(a: list[int], b: list[int]) -> int:
    """How many tokens two greedy continuations share before they first differ."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--llama-python", help="a Python with llama-cpp-python, to run it too")
    parser.add_argument("--out", help="a JSON file for every run's figures")
    parser.add_argument(
        "--profile-prefill", action="store_true", help="profile the book's prefill instead"
    )
    parser.add_argument(
        "--worker", choices=[*JAX_WORKERS, "torch", "llama"], help=argparse.SUPPRESS
    )
    parser.add_argument("--worker-threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--model-path", help=argparse.SUPPRESS)
    parser.add_argument("--prompt-ids", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.profile_prefill:
        profile_prefill(args.tokens, args.repeats)
        return
    if args.worker in JAX_WORKERS:
        print(json.dumps(run_jax(args.tokens, args.repeats, *JAX_WORKERS[args.worker])))
        return
    if args.worker == "torch":
        print(json.dumps(run_torch(args.tokens, args.repeats, args.worker_threads)))
        return
    if args.worker == "llama":
        ids = json.loads(args.prompt_ids)
        result = run_llama(args.tokens, args.repeats, args.worker_threads, args.model_path, ids)
        print(json.dumps(result))
        return

    from transformer_intro.pretrained import find_smollm2

    model_path = str(find_smollm2())
    names = [*JAX_WORKERS, "torch"] + (["llama"] if args.llama_python else [])
    load_before = os.getloadavg()
    results = {}
    for threads in args.threads:
        # All get the same cores: pinned with taskset, and told their thread count.
        env = dict(os.environ, OMP_NUM_THREADS=str(threads))
        cores = ["taskset", "-c", ",".join(str(c) for c in range(threads))]
        for name in names:
            python = args.llama_python if name == "llama" else sys.executable
            command = [*cores, python, __file__, "--worker", name, "--tokens", str(args.tokens)]
            command += ["--repeats", str(args.repeats), "--worker-threads", str(threads)]
            if name == "llama":
                command += ["--model-path", model_path]
                command += ["--prompt-ids", json.dumps(prompt_ids(model_path))]
            out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
            results[(name, threads)] = json.loads(out.stdout.strip().splitlines()[-1])
            r = results[(name, threads)]
            print(
                f"{name:10s} {threads} thread(s): prefill {r['prompt_tokens']} tokens in "
                f"{r['prefill_s'] * 1e3:.0f} ms ({r['prefill_tokens_per_s']:.0f} tokens/s), "
                f"decode {r['decode_tokens_per_s']:.1f} tokens/s, "
                f"peak memory {r['peak_after_loading_mib']:.0f} MiB after loading, "
                f"{r['peak_mib']:.0f} MiB in all; at the end {_mib(r['resident_mib'])}, "
                f"{_mib(r['resident_trimmed_mib'])} once freed memory is returned",
                flush=True,
            )
    best = {
        name: max(
            (r for (n, _), r in results.items() if n == name),
            key=lambda r: r["decode_tokens_per_s"],
        )
        for name in names
    }
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    print(
        "best decode, tokens/s: "
        + ", ".join(f"{name} {best[name]['decode_tokens_per_s']:.1f}" for name in names)
    )
    same = {
        name: agreeing_prefix(best["jax"]["tokens"], best[name]["tokens"]) for name in names[1:]
    }
    print(f"greedy tokens equal to the book's code's, before the first difference: {same}")
    # Prefill at its own best thread setting, which need not be decoding's.
    prefill = {
        name: max(r["prefill_tokens_per_s"] for (n, _), r in results.items() if n == name)
        for name in names
    }
    print(
        "best prefill, tokens/s: "
        + ", ".join(f"{name} {prefill[name]:.0f}" for name in names)
        + f" ({best['jax']['prompt_tokens']} prompt tokens)"
    )
    if args.out:
        from report import machine, write_json  # beside this script

        command = f"python benchmarks/pretrained_speed.py --tokens {args.tokens} --threads "
        command += " ".join(map(str, args.threads)) + f" --repeats {args.repeats}"
        if args.llama_python:
            command += " --llama-python PYTHON"
        runs = {f"{name}, {threads} thread(s)": r for (name, threads), r in results.items()}
        write_json(
            args.out,
            {
                "command": command,
                "machine": machine(),
                "load_average_before": load_before,
                "load_average_after": os.getloadavg(),
                "tokens_equal_to_book_before_first_difference": same,
                "runs": runs,
            },
        )
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
