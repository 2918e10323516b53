#!/usr/bin/env node
// Kipp vs llama.cpp on the same GGUF, same thread count, in one run,
// alternating (kipp, llama, kipp, llama, ...) so that machine drift hits
// both. Writes a JSON record (commit, machine, compiler, model, commands,
// every run) to bench/results/ and prints a Markdown table for
// docs/BENCHMARKS.md.
//
//   node bench/bench_decode.mjs [-m build/models/synthetic-0.6b.gguf]
//        [--threads 2] [--rounds 3] [--quick] [--prefill P] [--decode D@P]
//
// Cases (issue #5): prefill at 512 and 2048 prompt tokens; decode (64
// tokens) at short context (16-token prompt) and (32 tokens) at 4096
// tokens of context. --quick shrinks every case for a smoke run.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "./args.mjs";

const { opt, has } = parseArgs("bench_decode", ["-m", "--threads", "--rounds", "--kipp", "--prefill", "--decode"],
  ["--quick"]);
const model = opt("-m", "build/models/synthetic-0.6b.gguf");
const threads = Number(opt("--threads", "2"));
const rounds = Number(opt("--rounds", "3"));
const quick = has("--quick");
const kipp = opt("--kipp", "build/kipp");

// --prefill P and/or --decode D@P replace the cases with one prefill of a
// P-token prompt and/or D decode steps after a P-token prompt (issue 6's
// per-scheme speed table runs these short cases on every weight scheme).
const customPrefill = opt("--prefill", null), customDecode = opt("--decode", null);
const custom = [];
if (customPrefill) custom.push({ name: `prefill ${customPrefill}`, p: Number(customPrefill), d: 0, metric: "prefill_tps" });
if (customDecode) {
  const [d, p] = customDecode.split("@").map(Number);
  custom.push({ name: `decode ${d} @ ${p} ctx`, p, d, metric: "decode_tps" });
}
const cases = custom.length ? custom : quick
  ? [{ name: "prefill 64", p: 64, d: 0, metric: "prefill_tps" },
     { name: "decode @16", p: 16, d: 8, metric: "decode_tps" }]
  : [{ name: "prefill 512", p: 512, d: 0, metric: "prefill_tps" },
     { name: "prefill 2048", p: 2048, d: 0, metric: "prefill_tps" },
     { name: "decode 64 @ 16 ctx", p: 16, d: 64, metric: "decode_tps" },
     { name: "decode 32 @ 4096 ctx", p: 4096, d: 32, metric: "decode_tps" }];

const sh = (cmd, a) => { try { return execFileSync(cmd, a, { encoding: "utf8" }).trim(); } catch { return null; } };

function runJson(cmd, a) {
  const t0 = Date.now();
  const r = spawnSync(cmd, a, { encoding: "utf8", maxBuffer: 1 << 24 });
  if (r.status !== 0) throw new Error(`${cmd} ${a.join(" ")} failed (${r.status}): ${r.stderr}`);
  const line = r.stdout.trim().split("\n").pop();
  return { ...JSON.parse(line), wall_s: (Date.now() - t0) / 1e3, loadavg: os.loadavg() };
}

// Memory bandwidth: the decode roofline's denominator.
mkdirSync("build", { recursive: true });
sh("cc", ["-O3", "-march=native", "-pthread", "bench/membw.c", "-o", "build/membw"]);
const bw = JSON.parse(sh("build/membw", [String(threads)]) || "{}");

const record = {
  date: new Date().toISOString(),
  commit: sh("git", ["rev-parse", "HEAD"]),
  dirty: (sh("git", ["status", "--porcelain", "--untracked-files=no"]) || "") !== "",
  machine: { cpu: os.cpus()[0]?.model, cores_online: os.cpus().length,
             mem_gib: +(os.totalmem() / 2 ** 30).toFixed(1), kernel: os.release(),
             read_bandwidth_gb_s: bw.read_gb_per_s, bandwidth_threads: bw.threads,
             bandwidth_seq_gb_s: bw.seq_gb_per_s, bandwidth_rows8_gb_s: bw.rows8_gb_per_s },
  compiler: sh("cc", ["--version"])?.split("\n")[0],
  model: { path: model, bytes: statSync(model).size },
  kipp_isa: process.env.KIPP_CPU_ISA || "auto",
  threads, rounds, cases: [], runs: [],
};

for (let r = 0; r < rounds; r++) {
  for (const c of cases) {
    const kArgs = ["bench", "-m", model, "--backend", "cpu", "--threads", String(threads),
                   "--prompt-tokens", String(c.p), "--decode", String(c.d), "--reps", "1", "--json"];
    const lArgs = ["bench/llama_bench.mjs", "-m", model, "--threads", String(threads),
                   "--prompt-tokens", String(c.p), "--decode", String(c.d), "--reps", "1"];
    // Alternate which goes first, round by round.
    const order = r % 2 ? [["llama", "node", lArgs], ["kipp", kipp, kArgs]]
                        : [["kipp", kipp, kArgs], ["llama", "node", lArgs]];
    for (const [who, cmd, a] of order) {
      const res = runJson(cmd, a);
      record.runs.push({ round: r, case: c.name, engine: who, command: [cmd, ...a].join(" "), result: res });
      process.stderr.write(`round ${r + 1} ${c.name.padEnd(22)} ${who.padEnd(5)} ${res[c.metric].toFixed(2)} tok/s\n`);
    }
  }
}

const median = (v) => { const s = [...v].sort((a, b) => a - b); const n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2; };
const rows = [];
for (const c of cases) {
  const pick = (who) => record.runs.filter((x) => x.case === c.name && x.engine === who).map((x) => x.result[c.metric]);
  const k = median(pick("kipp")), l = median(pick("llama"));
  const entry = { case: c.name, metric: c.metric, kipp_tps: k, llama_tps: l, ratio: k / l };
  record.cases.push(entry);
  rows.push(`| ${c.name} | ${k.toFixed(2)} | ${l.toFixed(2)} | ${(k / l).toFixed(2)}x | ${k >= l ? "kipp" : "llama.cpp"} |`);
}
// Decode roofline: bytes of weights read per token / bandwidth.
const cpuRss = record.runs.filter((x) => x.engine === "kipp").map((x) => x.result.peak_rss_mib);
record.kipp_peak_rss_mib = Math.max(...cpuRss);
const stamp = record.date.replace(/[:.]/g, "-");
const out = path.join("bench", "results", `bench-${path.basename(model, ".gguf")}-t${threads}-${stamp}.json`);
writeFileSync(out, JSON.stringify(record, null, 2) + "\n");
console.log(`| case | kipp tok/s | llama.cpp tok/s | kipp / llama | faster |`);
console.log(`|---|---|---|---|---|`);
for (const r of rows) console.log(r);
console.log(`\nread bandwidth (${threads} threads): ${bw.read_gb_per_s} GB/s; record: ${out}`);
