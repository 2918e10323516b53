// TTFT of a repeated long prompt through `kipp serve`, cold (first request)
// vs warm (the prompt's blocks adopted from the shared KV pool), issue 10.
// usage: node bench/ttft_prefix.mjs URL TOKENS RUNS [OUT.json]
// Each run uses a fresh prompt (a distinct first word) sent twice; TTFT is
// the client-side time to the first streamed token, plus the server's own
// timings.prompt_ms.
import { execSync } from "node:child_process";
import { cpus } from "node:os";
import { readFileSync, writeFileSync } from "node:fs";

const [url, tokens, runs, out] = [process.argv[2], Number(process.argv[3] ?? 3000), Number(process.argv[4] ?? 2), process.argv[5]];
const sh = (c) => { try { return execSync(c, { encoding: "utf8" }).trim(); } catch { return null; } };
// curl, not fetch: a cold prefill on a busy machine can outlast fetch's
// 300 s header/body timeouts. With max_tokens 1 the response completes at
// the first token, so curl's time_total is the TTFT (plus one JSON write).
async function once(prompt) {
    const body = JSON.stringify({ prompt, max_tokens: 1, temperature: 0 });
    writeFileSync("/tmp/ttft_body.json", body);
    const outp = sh(`curl -s -o /tmp/ttft_resp.json -w '%{time_total}' -H 'content-type: application/json' ` +
                    `--data-binary @/tmp/ttft_body.json ${url}/v1/completions`);
    const j = JSON.parse(readFileSync("/tmp/ttft_resp.json", "utf8"));
    if (!j.usage) throw new Error(JSON.stringify(j));
    return { ttft_ms: Number(outp) * 1000, prompt_tokens: j.usage.prompt_tokens, server_prompt_ms: j.timings?.prompt_ms ?? null };
}
const metric = async (name) => Number(new RegExp(`^${name} ([0-9.e+-]+)$`, "m").exec(await (await fetch(`${url}/metrics`)).text())[1]);
const results = [];
for (let r = 0; r < runs; r++) {
    // Common English words are one token each in Qwen's BPE (with the space).
    const vocab = ["the", "cache", "block", "prefix", "token", "model", "server", "turn", "reuse", "pool",
                   "green", "river", "stone", "light", "house", "water", "paper", "music", "table", "garden"];
    const words = Array.from({ length: tokens - 4 }, (_, i) => vocab[(i * 7 + (i >> 3) * 3) % vocab.length]);
    const prompt = `Run ${r}: ` + words.join(" ");
    const reused0 = await metric("kipp_prefix_tokens_reused_total");
    const cold = await once(prompt);
    const reused1 = await metric("kipp_prefix_tokens_reused_total");
    const warm = await once(prompt);
    const reused2 = await metric("kipp_prefix_tokens_reused_total");
    results.push({ run: r, cold: { ...cold, reused_positions: reused1 - reused0 }, warm: { ...warm, reused_positions: reused2 - reused1 },
                   speedup: cold.ttft_ms / warm.ttft_ms });
    console.error(`run ${r}: ${cold.prompt_tokens} tokens, cold ${cold.ttft_ms.toFixed(0)} ms, warm ${warm.ttft_ms.toFixed(1)} ms (${(cold.ttft_ms / warm.ttft_ms).toFixed(1)}x)`);
}
const record = {
    bench: "ttft_prefix", date: new Date().toISOString(), commit: sh("git rev-parse HEAD"),
    machine: { cpu: cpus()[0]?.model, cores: cpus().length, flags: sh("grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2") },
    compiler: sh("cc --version | head -1"), command: process.argv.slice(1).join(" "), runs: results,
    median_speedup: results.map((x) => x.speedup).sort((a, b) => a - b)[Math.floor(results.length / 2)],
};
console.log(JSON.stringify({ ...record, machine: { ...record.machine, flags: "(in file)" } }, null, 1));
if (out) writeFileSync(out, JSON.stringify(record, null, 1) + "\n");
