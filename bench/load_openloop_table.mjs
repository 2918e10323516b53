// Markdown table from bench/load_openloop.mjs records, recomputed from the
// raw per-token times: a request's tokens are its first completion_tokens
// streamed chunks (a trailing finish/usage chunk is not a token), TPOT =
// (time of token n - time of token 1) / (n - 1); the window of a run is from
// its first arrival to its last completion. Goodput = requests meeting the SLO
// per second of that window, counting completed requests only. TTFT and
// TPOT percentiles are over every request that streamed a first token
// (with the tokens it got), so a run cut at its time limit still shows them.
// usage: node bench/load_openloop_table.mjs RECORD.json... [--slo TTFT_S,TPOT_S]...
import { readFileSync } from "node:fs";

const args = process.argv.slice(2), files = [], slos = [];
for (let i = 0; i < args.length; i++) {
    if (args[i] === "--slo") { const [a, b] = args[++i].split(",").map(Number); slos.push({ ttft_s: a, tpot_s: b }); }
    else files.push(args[i]);
}
if (!slos.length) slos.push({ ttft_s: 2, tpot_s: 0.5 }, { ttft_s: 10, tpot_s: 1 });
const pct = (xs, p) => { if (!xs.length) return NaN; const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]; };
const f = (x, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : "-");
console.log(`| engine | rate req/s | load avg | done/started/sent | req/s | out tok/s | TTFT p50 s | TTFT p99 s | TPOT p50 s | TPOT p99 s | ${slos.map((s) => `goodput req/s (TTFT<=${s.ttft_s}s, TPOT<=${s.tpot_s}s)`).join(" | ")} |`);
console.log(`|---|---|---|---|---|---|---|---|---|---|${slos.map(() => "---").join("|")}|`);
for (const file of files) {
    const rec = JSON.parse(readFileSync(file, "utf8"));
    for (const run of rec.runs) {
        const rs = run.requests.map((q) => {
            const n = Math.min(q.completion_tokens, q.token_times_ms.length), t = q.token_times_ms;
            return { ...q, n, ttft: n ? t[0] / 1000 : NaN, tpot: n > 1 ? (t[n - 1] - t[0]) / 1000 / (n - 1) : NaN };
        });
        const ok = rs.filter((q) => q.ok && q.n > 0), st = rs.filter((q) => q.n > 0);
        const start = Math.min(...run.requests.map((q) => q.arrival_s)), end = Math.max(...run.requests.map((q) => q.end_s));
        const win = end - start, toks = ok.reduce((a, q) => a + q.n, 0);
        const good = (s) => ok.filter((q) => q.ttft <= s.ttft_s && !(q.tpot > s.tpot_s)).length;
        const la = (run.loadavg_start[0] + run.loadavg_end[0]) / 2;
        console.log(`| ${run.engine} | ${run.rate_req_per_s} | ${f(la, 1)} | ${ok.length}/${st.length}/${rs.length} | ${f(ok.length / win, 3)} | ${f(toks / win)} | ` +
            `${f(pct(st.map((q) => q.ttft), 50))} | ${f(pct(st.map((q) => q.ttft), 99))} | ${f(pct(st.filter((q) => q.n > 1).map((q) => q.tpot), 50), 3)} | ` +
            `${f(pct(st.filter((q) => q.n > 1).map((q) => q.tpot), 99), 3)} | ${slos.map((s) => `${f(good(s) / win, 3)} (${good(s)})`).join(" | ")} |`);
    }
}
