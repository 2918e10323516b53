// Wraps bench/ttft_prefix.mjs into a full JSON record (issue 10 benchmark 1):
// for each run, starts a fresh `kipp serve` (empty pool, so the first request
// is truly cold), runs ttft_prefix.mjs for one cold+warm pair, stops the
// server, and keeps the load average around every run plus the model file,
// server command, commit, CPU and compiler.
// usage: node bench/ttft_prefix_record.mjs [-m MODEL] [--kipp build/kipp]
//          [--threads 2] [--tokens 3000] [--runs 3] [--warm-extra 0] [--out FILE.json]
// --warm-extra N sends the same prompt N more times after ttft_prefix.mjs's
// cold+warm pair (curl, max_tokens 1, as ttft_prefix.mjs does): more warm
// samples, since a short warm eval is the one most distorted by a loaded
// machine (time slices, thread wake-ups).
import { spawn, execSync } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { readFileSync, writeFileSync, mkdirSync, statSync } from "node:fs";
import { dirname } from "node:path";

const argv = process.argv.slice(2);
const opt = (n, d) => { const i = argv.indexOf(n); return i >= 0 ? argv[i + 1] : d; };
const model = opt("-m", "build/models/synthetic-0.6b.gguf"), kipp = opt("--kipp", "build/kipp");
const warmExtra = Number(opt("--warm-extra", 0));
const threads = opt("--threads", "2"), tokens = Number(opt("--tokens", 3000)), runs = Number(opt("--runs", 3));
const out = opt("--out", `bench/results/ttft_prefix-${model.split("/").pop().replace(/\.gguf$/, "")}-t${threads}-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
const sh = (c) => { try { return execSync(c, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim(); } catch { return null; } };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function serve(port) {
    const args = ["serve", "-m", model, "--threads", threads, "--port", String(port), "--ctx", "4096"];
    const p = spawn(kipp, args, { stdio: ["ignore", "ignore", "inherit"] });
    for (let i = 0; i < 600; i++) {
        try { if ((await fetch(`http://127.0.0.1:${port}/health`)).status === 200) return { p, cmd: [kipp, ...args].join(" ") }; } catch {}
        await sleep(500);
    }
    p.kill("SIGTERM");
    throw new Error("kipp serve did not come up");
}
const record = {
    bench: "ttft_prefix", date: new Date().toISOString(), commit: sh("git rev-parse HEAD"),
    dirty: !!sh("git status --porcelain --untracked-files=no"),
    machine: { cpu: cpus()[0]?.model, cores: cpus().length, flags: sh("grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2") },
    compiler: sh("cc --version | head -1"), model: { path: model, bytes: statSync(model).size },
    command: "node " + process.argv.slice(1).join(" "), runs: [],
};
for (let r = 0; r < runs; r++) {
    const port = 18900 + Math.floor(Math.random() * 90);
    const s = await serve(port);
    const la0 = loadavg();
    try {
        const tmp = `/tmp/ttft_prefix_run_${process.pid}.json`;
        const cmd = `node bench/ttft_prefix.mjs http://127.0.0.1:${port} ${tokens} 1 ${tmp}`;
        execSync(cmd, { stdio: ["ignore", "ignore", "inherit"] });
        const inner = JSON.parse(readFileSync(tmp, "utf8"));
        // The prompt ttft_prefix.mjs sent for its run 0 (same generator).
        const vocab = ["the", "cache", "block", "prefix", "token", "model", "server", "turn", "reuse", "pool",
                       "green", "river", "stone", "light", "house", "water", "paper", "music", "table", "garden"];
        const prompt = "Run 0: " + Array.from({ length: tokens - 4 }, (_, i) => vocab[(i * 7 + (i >> 3) * 3) % vocab.length]).join(" ");
        writeFileSync(`/tmp/ttft_extra_${process.pid}.json`, JSON.stringify({ prompt, max_tokens: 1, temperature: 0 }));
        const extra = [];
        for (let k = 0; k < warmExtra; k++) {
            const t = sh(`curl -s -o /tmp/ttft_extra_resp_${process.pid}.json -w '%{time_total}' -H 'content-type: application/json' ` +
                         `--data-binary @/tmp/ttft_extra_${process.pid}.json http://127.0.0.1:${port}/v1/completions`);
            const j = JSON.parse(readFileSync(`/tmp/ttft_extra_resp_${process.pid}.json`, "utf8"));
            extra.push({ ttft_ms: Number(t) * 1000, prompt_tokens: j.usage?.prompt_tokens, server_prompt_ms: j.timings?.prompt_ms ?? null, loadavg: loadavg()[0] });
        }
        record.runs.push({ ...inner.runs[0], run: r, server: s.cmd, bench_command: cmd, loadavg_start: la0, loadavg_end: loadavg(), warm_extra: extra });
    } finally { s.p.kill("SIGTERM"); await sleep(1000); }
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, JSON.stringify(record, null, 1) + "\n");
}
const sp = record.runs.map((x) => x.speedup).sort((a, b) => a - b);
const med = (xs) => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2; };
record.median_speedup = med(sp);
record.median_cold_ms = med(record.runs.map((x) => x.cold.ttft_ms));
record.median_warm_ms = med(record.runs.map((x) => x.warm.ttft_ms));
// Over every warm sample (the pair's warm request and the extra ones).
record.median_warm_all_ms = med(record.runs.flatMap((x) => [x.warm.ttft_ms, ...x.warm_extra.map((e) => e.ttft_ms)]));
record.speedup_median_cold_over_median_warm_all = record.median_cold_ms / record.median_warm_all_ms;
writeFileSync(out, JSON.stringify(record, null, 1) + "\n");
console.log(JSON.stringify({ out, median_speedup: record.median_speedup, median_cold_ms: record.median_cold_ms,
                             median_warm_ms: record.median_warm_ms, median_warm_all_ms: record.median_warm_all_ms,
                             speedup_all: record.speedup_median_cold_over_median_warm_all, runs: record.runs.map((x) => [x.cold.ttft_ms, x.warm.ttft_ms, x.warm.reused_positions]) }));
