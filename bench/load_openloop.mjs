// Open-loop load with a shared system prompt (issue 10): Poisson arrivals at
// several rates against `kipp serve` and llama.cpp's own `llama-server`, on
// the same GGUF, the same thread count and the same number of parallel
// sequences, alternating the engines' order rate by rate in one run.
//
// usage: node bench/load_openloop.mjs --kipp build/kipp --llama DIR/llama-server
//          -m build/models/synthetic-0.6b.gguf [--threads 2] [--slots 4]
//          [--ctx 2048] [--rates 0.05,0.1,0.2] [--requests 12]
//          [--max-tokens 64] [--system-tokens 1000] [--seed 1]
//          [--run-limit-s 420] [--engines kipp,llama] [--out FILE.json]
//
// Each request is POST /v1/completions, stream: true, greedy, max_tokens 64:
// the shared ~1,000-token system text followed by a short per-request user
// part (distinct for every request of every run, so only the system part can
// be reused). The same prompt strings, in the same order at the same arrival
// offsets, go to both servers (same GGUF, so the same tokenizer).
// TTFT = client time from sending to the first streamed token; TPOT = (last
// token time - first token time) / (tokens - 1); every token's arrival time
// is recorded. Each server is warmed with one request carrying the system
// prompt before the first rate (llama-server caches it in that slot only; the
// other slots fill as requests land on them, as in any steady state).
// llama-server gets ignore_eos (Kipp has no such field): with random weights
// EOS is ~1/151k per token; every record keeps completion_tokens to check.
import { spawn, execSync } from "node:child_process";
import { cpus, loadavg } from "node:os";
import { writeFileSync, mkdirSync, existsSync } from "node:fs";
import { dirname } from "node:path";
import { parseArgs } from "./args.mjs";

const { opt } = parseArgs("load_openloop", ["--kipp", "--llama", "-m", "--threads", "--slots", "--ctx", "--rates",
    "--requests", "--max-tokens", "--system-tokens", "--seed", "--run-limit-s", "--engines", "--slo-ttft", "--slo-tpot",
    "--slo2-ttft", "--slo2-tpot", "--out"]);
const cfg = {
    kipp: opt("--kipp", "build/kipp"), llama: opt("--llama", null), model: opt("-m", "build/models/synthetic-0.6b.gguf"),
    threads: Number(opt("--threads", 2)), slots: Number(opt("--slots", 4)), ctx: Number(opt("--ctx", 2048)),
    rates: opt("--rates", "0.05,0.1,0.2").split(",").map(Number), requests: Number(opt("--requests", 12)),
    maxTokens: Number(opt("--max-tokens", 64)), systemTokens: Number(opt("--system-tokens", 1000)),
    seed: Number(opt("--seed", 1)), runLimitS: Number(opt("--run-limit-s", 420)),
    engines: opt("--engines", "kipp,llama").split(","),
    slo: { ttft_s: Number(opt("--slo-ttft", 2)), tpot_s: Number(opt("--slo-tpot", 0.5)) },
    slo2: { ttft_s: Number(opt("--slo2-ttft", 10)), tpot_s: Number(opt("--slo2-tpot", 1)) },
};
const out = opt("--out", null);
const sh = (c) => { try { return execSync(c, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim(); } catch { return null; } };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const now = () => performance.now();

// mulberry32: a fixed-seed PRNG so arrivals and prompts repeat exactly.
function rng(seed) {
    let a = seed >>> 0;
    return () => { a = (a + 0x6d2b79f5) >>> 0; let t = a; t = Math.imul(t ^ (t >>> 15), t | 1);
        t ^= t + Math.imul(t ^ (t >>> 7), t | 61); return ((t ^ (t >>> 14)) >>> 0) / 4294967296; };
}
// Common English words are one token each in Qwen's BPE (with the space).
const VOCAB = ["the", "cache", "block", "prefix", "token", "model", "server", "turn", "reuse", "pool",
               "green", "river", "stone", "light", "house", "water", "paper", "music", "table", "garden"];
const system = "System: " + Array.from({ length: cfg.systemTokens - 2 }, (_, i) => VOCAB[(i * 7 + (i >> 3) * 3) % VOCAB.length]).join(" ");
function workload(rate, ri) {
    const r = rng(cfg.seed * 1000 + ri);
    let t = 0;
    return Array.from({ length: cfg.requests }, (_, k) => {
        t += -Math.log(1 - r()) / rate; // exponential inter-arrival gaps
        const user = Array.from({ length: 24 }, () => VOCAB[Math.floor(r() * VOCAB.length)]).join(" ");
        return { k, at_s: t, prompt: `${system}\nUser ${ri}-${k}: ${user}\nAssistant:` };
    });
}

async function waitHealthy(url, ms) {
    const t0 = now();
    while (now() - t0 < ms) {
        try { const r = await fetch(`${url}/health`); if (r.status === 200) return; } catch {}
        await sleep(500);
    }
    throw new Error(`${url} not healthy after ${ms} ms`);
}
function startServer(engine, port) {
    const args = engine === "kipp"
        ? ["serve", "-m", cfg.model, "--threads", String(cfg.threads), "--port", String(port),
           "--max-sessions", String(cfg.slots), "--ctx", String(cfg.ctx)]
        : ["-m", cfg.model, "-t", String(cfg.threads), "-tb", String(cfg.threads), "--host", "127.0.0.1",
           "--port", String(port), "-np", String(cfg.slots), "-c", String(cfg.ctx * cfg.slots)];
    const bin = engine === "kipp" ? cfg.kipp : cfg.llama;
    const p = spawn(bin, args, { stdio: ["ignore", "ignore", "pipe"] });
    let tail = "";
    p.stderr.on("data", (d) => { tail = (tail + d).slice(-4000); });
    return { engine, port, url: `http://127.0.0.1:${port}`, proc: p, command: [bin, ...args].join(" "), tail: () => tail };
}

async function request(srv, prompt, deadline) {
    const body = { prompt, max_tokens: cfg.maxTokens, temperature: 0, stream: true, stream_options: { include_usage: true } };
    if (srv.engine === "llama") body.ignore_eos = true;
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(), Math.max(1, deadline - now()));
    const t0 = now(), times = [];
    let usage = null, err = null, buf = "";
    try {
        const res = await fetch(`${srv.url}/v1/completions`, { method: "POST", signal: ac.signal,
            headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
        if (res.status !== 200) throw new Error(`HTTP ${res.status}: ${(await res.text()).slice(0, 300)}`);
        const dec = new TextDecoder();
        for await (const chunk of res.body) {
            buf += dec.decode(chunk, { stream: true });
            let i;
            while ((i = buf.indexOf("\n\n")) >= 0) {
                const ev = buf.slice(0, i); buf = buf.slice(i + 2);
                for (const line of ev.split("\n")) {
                    if (!line.startsWith("data: ")) continue;
                    const d = line.slice(6).trim();
                    if (d === "[DONE]") continue;
                    const j = JSON.parse(d);
                    if (j.usage) usage = j.usage;
                    // One streamed chunk with a choice = one token (both servers
                    // stream token by token; a chunk with empty text still counts).
                    if (j.choices?.length && !j.usage) times.push(now() - t0);
                    else if (j.choices?.length && j.usage && j.choices[0].text) times.push(now() - t0);
                }
            }
        }
    } catch (e) { err = String(e.message ?? e); }
    clearTimeout(timer);
    const n = usage?.completion_tokens ?? times.length;
    const ttft = times.length ? times[0] / 1000 : null;
    const tpot = times.length > 1 ? (times[times.length - 1] - times[0]) / 1000 / (times.length - 1) : null;
    return { ok: !err && times.length > 0, error: err, latency_s: (now() - t0) / 1000, ttft_s: ttft, tpot_s: tpot,
             chunks: times.length, completion_tokens: n, prompt_tokens: usage?.prompt_tokens ?? null,
             token_times_ms: times.map((x) => Math.round(x * 10) / 10) };
}

const pct = (xs, p) => { if (!xs.length) return null; const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]; };
function summarize(reqs, wall_s) {
    const ok = reqs.filter((r) => r.ok && r.completion_tokens >= 1);
    const ttft = ok.map((r) => r.ttft_s), tpot = ok.filter((r) => r.tpot_s != null).map((r) => r.tpot_s);
    const good = (slo) => ok.filter((r) => r.ttft_s <= slo.ttft_s && (r.tpot_s ?? 0) <= slo.tpot_s).length;
    const toks = ok.reduce((a, r) => a + r.completion_tokens, 0);
    return { completed: ok.length, failed: reqs.length - ok.length, wall_s,
             req_per_s: ok.length / wall_s, output_tok_per_s: toks / wall_s,
             ttft_p50_s: pct(ttft, 50), ttft_p99_s: pct(ttft, 99), tpot_p50_s: pct(tpot, 50), tpot_p99_s: pct(tpot, 99),
             goodput_req_per_s: good(cfg.slo) / wall_s, good_requests: good(cfg.slo),
             goodput2_req_per_s: good(cfg.slo2) / wall_s, good2_requests: good(cfg.slo2) };
}

async function runLoad(srv, rate, ri) {
    const work = workload(rate, ri);
    const la0 = loadavg();
    const t0 = now(), deadline = t0 + cfg.runLimitS * 1000;
    const reqs = await Promise.all(work.map(async (w) => {
        await sleep(Math.max(0, t0 + w.at_s * 1000 - now()));
        const r = await request(srv, w.prompt, deadline);
        return { k: w.k, arrival_s: w.at_s, ...r, end_s: (now() - t0) / 1000 };
    }));
    const wall = Math.max(...reqs.map((r) => r.end_s));
    const la1 = loadavg();
    const s = summarize(reqs, wall);
    console.error(`${srv.engine} rate ${rate}/s: ${s.completed}/${reqs.length} ok, ${s.output_tok_per_s.toFixed(2)} tok/s, ` +
        `TTFT p50 ${s.ttft_p50_s?.toFixed(2)} p99 ${s.ttft_p99_s?.toFixed(2)} s, TPOT p50 ${s.tpot_p50_s?.toFixed(3)} ` +
        `p99 ${s.tpot_p99_s?.toFixed(3)} s, goodput ${s.goodput_req_per_s.toFixed(4)} req/s; load ${la0[0].toFixed(1)}->${la1[0].toFixed(1)}`);
    return { engine: srv.engine, rate_req_per_s: rate, loadavg_start: la0, loadavg_end: la1, summary: s, requests: reqs };
}

const servers = [];
const stopAll = () => { for (const s of servers) try { s.proc.kill("SIGTERM"); } catch {} };
process.on("SIGINT", () => { stopAll(); process.exit(130); });
const record = {
    bench: "load_openloop", date: new Date().toISOString(), commit: sh("git rev-parse HEAD"),
    dirty: !!sh("git status --porcelain --untracked-files=no"),
    machine: { cpu: cpus()[0]?.model, cores: cpus().length, flags: sh("grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2") },
    compiler: sh("cc --version | head -1"), model: { path: cfg.model, bytes: existsSync(cfg.model) ? Number(sh(`stat -c %s ${cfg.model}`)) : null },
    llama_source: cfg.llama ? (sh(`cat ${dirname(dirname(cfg.llama))}/SOURCE`) ?? null) : null,
    command: "node " + process.argv.slice(1).join(" "), config: cfg, servers: {}, warmup: {}, runs: [],
};
try {
    let port = 18300 + Math.floor(Math.random() * 500);
    for (const e of cfg.engines) {
        const s = startServer(e, port++);
        servers.push(s);
        record.servers[e] = s.command;
        await waitHealthy(s.url, 300000);
        const w = await request(s, `${system}\nUser warmup: hello\nAssistant:`, now() + 600000);
        record.warmup[e] = { ttft_s: w.ttft_s, prompt_tokens: w.prompt_tokens, ok: w.ok, error: w.error };
        console.error(`${e} warm-up: ${w.prompt_tokens} prompt tokens, TTFT ${w.ttft_s?.toFixed(2)} s ${w.error ?? ""}`);
    }
    for (let ri = 0; ri < cfg.rates.length; ri++) {
        const order = ri % 2 ? [...servers].reverse() : servers;
        for (const s of order) {
            record.runs.push(await runLoad(s, cfg.rates[ri], ri));
            if (out) writeFileSync(out, JSON.stringify(record, null, 1) + "\n"); // partial record as we go
        }
    }
} finally { stopAll(); }
record.table = record.runs.map((r) => ({ engine: r.engine, rate: r.rate_req_per_s, load: r.loadavg_start[0], ...r.summary }));
console.log(JSON.stringify(record.table, null, 1));
if (out) { mkdirSync(dirname(out), { recursive: true }); writeFileSync(out, JSON.stringify(record, null, 1) + "\n"); }
