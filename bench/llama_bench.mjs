#!/usr/bin/env node
// llama.cpp's side of bench/bench_decode.mjs, through node-llama-cpp (CPU,
// prebuilt binaries): the same measurement `kipp bench` makes, on the same
// GGUF, with the same thread count and the same prompt token ids.
//
//   node bench/llama_bench.mjs -m FILE [--threads N] [--prompt-tokens P]
//        [--decode D] [--reps R]
//
// Prefill: the first P-1 prompt tokens in one evaluateWithoutGeneratingNewTokens
// call (tokens/s over P-1). Decode: evaluate([last prompt token]) greedy and
// time D generated tokens, i.e. D single-token evaluations at P..P+D context.
// Prints one JSON object (same keys as `kipp bench --json`).
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

function parse(argv) {
  const o = { threads: 2, prompt: 512, decode: 64, reps: 3, batch: 512 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = argv[i + 1];
    if (a === "-m") o.file = v;
    else if (a === "--threads") o.threads = Number(v);
    else if (a === "--prompt-tokens") o.prompt = Number(v);
    else if (a === "--decode") o.decode = Number(v);
    else if (a === "--reps") o.reps = Number(v);
    else if (a === "--batch") o.batch = Number(v);
    else { process.stderr.write(`llama_bench: unknown argument ${a}\n`); process.exit(2); }
    i++;
  }
  if (!o.file) { process.stderr.write("llama_bench: -m FILE required\n"); process.exit(2); }
  return o;
}

// The same xorshift64 token ids as src/cli/cmd_bench.c.
function promptTokens(n) {
  const M = (1n << 64n) - 1n;
  let x = 0x243f6a8885a308d3n;
  const out = [];
  for (let i = 0; i < n; i++) {
    x ^= (x << 13n) & M; x ^= x >> 7n; x ^= (x << 17n) & M;
    out.push(Number(x % 151000n));
  }
  return out;
}

const median = (v) => { const s = [...v].sort((a, b) => a - b); const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };

async function main() {
  const o = parse(process.argv.slice(2));
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: o.file, gpuLayers: 0 });
  const ctx = await model.createContext({
    contextSize: o.prompt + o.decode + 16, threads: o.threads,
    batchSize: Math.min(o.batch, o.prompt + o.decode + 16) });
  const seq = ctx.getSequence();
  const prompt = promptTokens(o.prompt);
  const runOnce = async (p, d) => {
    await seq.clearHistory();
    const t0 = performance.now();
    if (p > 1) await seq.evaluateWithoutGeneratingNewTokens(prompt.slice(0, p - 1));
    const t1 = performance.now();
    let got = 0;
    if (d > 0) {
      for await (const _tok of seq.evaluate([prompt[p - 1]], { temperature: 0 })) {
        if (++got >= d) break;
      }
    }
    const t2 = performance.now();
    return { prefill: (p - 1) / ((t1 - t0) / 1e3), decode: d ? d / ((t2 - t1) / 1e3) : 0 };
  };
  await runOnce(Math.min(o.prompt, 32), Math.min(o.decode, 4)); // warm-up
  const pre = [], dec = [];
  for (let r = 0; r < o.reps; r++) {
    const x = await runOnce(o.prompt, o.decode);
    pre.push(x.prefill); dec.push(x.decode);
  }
  const rss = process.resourceUsage().maxRSS / 1024;
  process.stdout.write(JSON.stringify({
    backend: "llama.cpp (node-llama-cpp 3.21.1, prebuilt CPU)", model: o.file,
    threads: o.threads, prompt_tokens: o.prompt, decode_tokens: o.decode,
    decode_context: o.prompt, batch_size: ctx.batchSize ?? o.batch, reps: o.reps,
    prefill_tps: median(pre), decode_tps: o.decode ? median(dec) : 0,
    peak_rss_mib: rss, prefill_tps_runs: pre, decode_tps_runs: dec }) + "\n");
  await ctx.dispose();
  await model.dispose();
  await llama.dispose();
}

main().catch((e) => { process.stderr.write(`llama_bench: ${e && e.stack ? e.stack : e}\n`); process.exit(1); });
