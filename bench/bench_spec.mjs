#!/usr/bin/env node
// Speculative decoding (issue 11): tokens/s plain vs speculative, in one
// run, alternating plain and speculative per round so machine drift hits
// both. Greedy decoding, so both produce the same tokens (checked: the
// script fails if the outputs differ). Writes a JSON record to
// bench/results/ and prints a Markdown table.
//
//   node bench/bench_spec.mjs [-m build/models/synthetic-0.6b.gguf]
//        [--draft build/models/synthetic-0.6b.scale4_gs32.gguf]
//        [-n 96] [--rounds 2] [--server | --server-only] [--quick]
//        [--llama-bin DIR | --no-llama]
//
// Cases: (a) prompt lookup on copy-heavy prompts (a passage, repeated),
// (b) prompt lookup on ordinary prompts, gate on, (c) a 4-bit self-draft,
// (d) with --server: `kipp serve --spec lookup` at concurrency 1 and 4.
// llama.cpp, same prompts, files and thread count, in the same rounds
// (unless --no-llama): its own `llama-lookup` (a, b; --spec-draft-n-max 8,
// plain = the same tool with --spec-draft-n-max 0) and `llama-speculative`
// (c; -md DRAFT, --spec-draft-n-max 4, plain = llama-lookup with 0), built
// natively by bench/build_llama_native.sh; tok/s from its "decoded N tokens
// in S seconds" line. Its tokens are its own (numerics differ), so only
// speeds and acceptance are compared.
// Threads: `kipp generate` uses every online core (the record says how
// many). NOTE: synthetic checkpoints have random weights; their greedy
// output falls into loops that lookup predicts well, and a 4-bit copy of
// random weights agrees with its BF16 source more or less than a trained
// model's would: acceptance here is not a trained model's.
import { spawnSync, spawn, execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync, statSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "./args.mjs";

const { opt, has } = parseArgs("bench_spec", ["-m", "--draft", "-n", "--rounds", "--kipp", "--llama-bin"],
  ["--quick", "--server", "--server-only", "--no-llama"]);
const model = opt("-m", "build/models/synthetic-0.6b.gguf");
const draft = opt("--draft", "build/models/synthetic-0.6b.scale4_gs32.gguf");
const quick = has("--quick");
const nGen = Number(opt("-n", quick ? "24" : "96"));
const rounds = Number(opt("--rounds", quick ? "1" : "2"));
const kipp = opt("--kipp", "build/kipp");
const withServer = has("--server") || has("--server-only");
const serverOnly = has("--server-only");
const withLlama = !has("--no-llama");
let llamaBin = opt("--llama-bin", null);
if (withLlama && !llamaBin && !serverOnly) {
  const r = spawnSync("sh", ["bench/build_llama_native.sh"], { encoding: "utf8", stdio: ["ignore", "pipe", "inherit"] });
  if (r.status !== 0) throw new Error("bench_spec: bench/build_llama_native.sh failed (or pass --no-llama)");
  llamaBin = r.stdout.trim().split("\n").pop();
}
const threads = os.cpus().length;

const passage = "The committee reviewed the annual report on water quality in the northern " +
  "district. Samples from twelve wells showed nitrate levels below the national limit, " +
  "although two wells near the old tannery exceeded the advisory threshold for lead. " +
  "The committee recommended quarterly testing of those two wells and a public notice " +
  "to the households they serve.";
const prompts = {
  copy: [
    `${passage}\n\nRepeat the passage above exactly.\n\n${passage}\n\n${passage.slice(0, 60)}`,
    `def area(r):\n    return 3.14159 * r * r\n\ndef area(r):\n    return 3.14159 * r * r\n\ndef area(`,
  ],
  ordinary: [
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain why the sky is blue to a ten-year-old.",
    "List three uses of copper in modern electronics and explain each briefly.",
  ],
};
const llamaLookup = (n) => ({ tool: "llama-lookup", args: ["--spec-draft-n-max", String(n)] });
const cases = [
  { name: "(a) lookup, copy-heavy", prompts: prompts.copy, spec: ["--spec", "lookup"],
    llama: llamaLookup(8) },
  { name: "(b) lookup, ordinary, gate on", prompts: prompts.ordinary, spec: ["--spec", "lookup", "--spec-gate", "on"],
    llama: llamaLookup(8) },
  { name: "(c) 4-bit self-draft", prompts: prompts.ordinary.slice(0, 2), spec: ["--draft-model", draft],
    llama: { tool: "llama-speculative", args: ["-md", draft, "--spec-draft-n-max", "4"] } },
];

// llama.cpp's tool on one prompt, greedy; tok/s from its own decode timer.
function llamaRun(tool, prompt, extra) {
  const a = ["-m", model, "-p", prompt, "-n", String(nGen), "--temp", "0", "-t", String(threads),
             "-c", "4096", ...extra];
  const r = spawnSync(path.join(llamaBin, tool), a, { encoding: "utf8", maxBuffer: 1 << 26 });
  const log = (r.stdout || "") + (r.stderr || "");
  const g = log.match(/decoded\s+(\d+) tokens in\s+([\d.]+) seconds/);
  if (r.status !== 0 || !g) throw new Error(`${tool} ${a.join(" ")} failed:\n${log.slice(-2000)}`);
  const num = (k) => Number((log.match(new RegExp(`${k}\\s*=\\s*(\\d+)`)) || [0, 0])[1]);
  return { tokens: Number(g[1]), seconds: Number(g[2]), drafted: num("n_drafted"), accepted: num("n_accept"),
           loadavg: os.loadavg() };
}

const sh = (cmd, a) => { try { return execFileSync(cmd, a, { encoding: "utf8" }).trim(); } catch { return null; } };

function generate(prompt, extra) {
  const a = ["generate", "-m", model, "-p", prompt, "-n", String(nGen), "--print-ids", ...extra];
  const r = spawnSync(kipp, a, { encoding: "utf8", maxBuffer: 1 << 24 });
  if (r.status !== 0) throw new Error(`kipp ${a.join(" ")} failed: ${r.stderr}`);
  const g = r.stderr.match(/generation (\d+) tokens in ([\d.]+) s/);
  const st = r.stderr.match(/drafted (\d+), accepted (\d+) .*?(\d+) tokens in (\d+) target evals/);
  return {
    ids: r.stdout.trim(), tokens: Number(g[1]), seconds: Number(g[2]),
    drafted: st ? Number(st[1]) : 0, accepted: st ? Number(st[2]) : 0,
    target_evals: st ? Number(st[4]) : Number(g[1]), loadavg: os.loadavg(),
  };
}

const record = {
  date: new Date().toISOString(),
  commit: sh("git", ["rev-parse", "HEAD"]),
  dirty: (sh("git", ["status", "--porcelain", "--untracked-files=no"]) || "") !== "",
  // The binary raced: with --kipp OTHER it need not be this tree's build.
  kipp_bin: kipp,
  machine: { cpu: os.cpus()[0]?.model, cores_online: os.cpus().length, kernel: os.release(),
             loadavg_start: os.loadavg() },
  model: { path: model, bytes: statSync(model).size }, draft: { path: draft }, threads,
  llama: withLlama && llamaBin ? { bin: llamaBin } : null,
  n_gen: nGen, rounds, greedy: true,
  note: "synthetic checkpoints have random weights: acceptance rates are not a trained model's",
  cases: [], runs: [],
};

for (const c of serverOnly ? [] : cases) {
  let plainS = 0, specS = 0, plainTok = 0, specTok = 0, drafted = 0, accepted = 0, evals = 0;
  const ll = { plainS: 0, plainTok: 0, specS: 0, specTok: 0, drafted: 0, accepted: 0 };
  for (let r = 0; r < rounds; r++) {
    for (const p of c.prompts) {
      const order = r % 2 ? ["spec", "plain"] : ["plain", "spec"];
      const res = {};
      for (const who of order) {
        res[who] = generate(p, who === "spec" ? c.spec : []);
        record.runs.push({ case: c.name, round: r, mode: who, prompt: p.slice(0, 40), result: { ...res[who], ids: undefined } });
      }
      if (res.plain.ids !== res.spec.ids) throw new Error(`${c.name}: speculative output differs from plain greedy`);
      if (withLlama) {
        for (const who of order) {
          const lr = llamaRun(who === "spec" ? c.llama.tool : "llama-lookup", p,
                              who === "spec" ? c.llama.args : ["--spec-draft-n-max", "0"]);
          record.runs.push({ case: c.name, round: r, mode: `llama-${who}`, tool: who === "spec" ? c.llama.tool : "llama-lookup",
                             prompt: p.slice(0, 40), result: lr });
          if (who === "spec") { ll.specS += lr.seconds; ll.specTok += lr.tokens; ll.drafted += lr.drafted; ll.accepted += lr.accepted; }
          else { ll.plainS += lr.seconds; ll.plainTok += lr.tokens; }
        }
      }
      plainS += res.plain.seconds; plainTok += res.plain.tokens;
      specS += res.spec.seconds; specTok += res.spec.tokens;
      drafted += res.spec.drafted; accepted += res.spec.accepted; evals += res.spec.target_evals;
      process.stderr.write(`${c.name} round ${r + 1}: plain ${(res.plain.tokens / res.plain.seconds).toFixed(2)} tok/s, ` +
        `spec ${(res.spec.tokens / res.spec.seconds).toFixed(2)} tok/s, accepted ${res.spec.accepted}/${res.spec.drafted}\n`);
    }
  }
  const entry = { case: c.name, plain_tps: plainTok / plainS, spec_tps: specTok / specS,
                  speedup: (specTok / specS) / (plainTok / plainS),
                  drafted, accepted, acceptance: drafted ? accepted / drafted : 0,
                  tokens: specTok, target_evals: evals };
  if (withLlama)
    entry.llama = { tool: c.llama.tool, args: c.llama.args, plain_tps: ll.plainTok / ll.plainS,
                    spec_tps: ll.specTok / ll.specS, speedup: (ll.specTok / ll.specS) / (ll.plainTok / ll.plainS),
                    drafted: ll.drafted, accepted: ll.accepted, acceptance: ll.drafted ? ll.accepted / ll.drafted : 0,
                    kipp_spec_over_llama_spec: (specTok / specS) / (ll.specTok / ll.specS) };
  record.cases.push(entry);
}

// (d) the server: N concurrent greedy requests, wall time, plain vs --spec lookup.
async function serverCase(specArgs, concurrency) {
  const srv = spawn(kipp, ["serve", "-m", model, "--port", "0", "--max-sessions", "4",
                           "--threads", String(os.cpus().length), ...specArgs],
                    { stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  const port = await new Promise((resolve, reject) => {
    // The port opens before the model is loaded: wait for "ready" too.
    srv.stderr.on("data", (d) => { log += d; const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/); if (m && /^kipp serve: ready/m.test(log)) resolve(m[1]); });
    srv.on("exit", () => reject(new Error(`server exited: ${log}`)));
  });
  const id = (await (await fetch(`http://127.0.0.1:${port}/v1/models`)).json()).data[0].id;
  const ask = (p) => fetch(`http://127.0.0.1:${port}/v1/completions`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ model: id, prompt: p, max_tokens: nGen, temperature: 0 }),
  }).then((r) => r.json());
  const ps = [...prompts.copy, ...prompts.ordinary].slice(0, concurrency);
  const t0 = Date.now();
  const res = await Promise.all(ps.map(ask));
  const secs = (Date.now() - t0) / 1e3;
  const tokens = res.reduce((s, r) => s + (r.usage?.completion_tokens || 0), 0);
  const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const num = (k) => Number((metrics.match(new RegExp(`^${k} (\\d+)`, "m")) || [0, 0])[1]);
  srv.kill("SIGTERM");
  return { seconds: secs, tokens, tps: tokens / secs, texts: res.map((r) => r.choices?.[0]?.text),
           drafted: num("kipp_spec_drafted_tokens_total"), accepted: num("kipp_spec_accepted_tokens_total") };
}

if (withServer) {
  for (const conc of [1, 4]) {
    const plain = await serverCase([], conc);
    const spec = await serverCase(["--spec", "lookup"], conc);
    const same = JSON.stringify(plain.texts) === JSON.stringify(spec.texts);
    const entry = { case: `(d) server lookup, concurrency ${conc}`, plain_tps: plain.tps, spec_tps: spec.tps,
                    speedup: spec.tps / plain.tps, drafted: spec.drafted, accepted: spec.accepted,
                    acceptance: spec.drafted ? spec.accepted / spec.drafted : 0, identical_text: same };
    record.cases.push(entry);
    process.stderr.write(`${entry.case}: plain ${plain.tps.toFixed(2)} tok/s, spec ${spec.tps.toFixed(2)} tok/s, identical ${same}\n`);
    if (!same) throw new Error(`${entry.case}: server output differs with --spec lookup`);
  }
}

record.machine.loadavg_end = os.loadavg();
mkdirSync(path.join("bench", "results"), { recursive: true });
const stamp = record.date.replace(/[:.]/g, "-");
const out = path.join("bench", "results", `spec-${path.basename(model, ".gguf")}-${stamp}.json`);
writeFileSync(out, JSON.stringify(record, null, 2) + "\n");
console.log(`| case | engine | plain tok/s | speculative tok/s | speedup | accepted / drafted |`);
console.log(`|---|---|---|---|---|---|`);
const row = (name, eng, e) =>
  console.log(`| ${name} | ${eng} | ${e.plain_tps.toFixed(2)} | ${e.spec_tps.toFixed(2)} | ${e.speedup.toFixed(2)}x | ` +
              `${e.accepted} / ${e.drafted} (${(100 * e.acceptance).toFixed(0)}%) |`);
for (const e of record.cases) {
  row(e.case, "kipp", e);
  if (e.llama) row(e.case, `llama.cpp ${e.llama.tool}`, e.llama);
}
console.log(`\n${record.machine.cores_online} cores, load average ${record.machine.loadavg_start.map((x) => x.toFixed(1)).join(" ")} at start; record: ${out}`);
