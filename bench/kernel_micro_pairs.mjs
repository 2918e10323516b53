#!/usr/bin/env node
// Two kernel_micro binaries (two builds of the library: this one and one
// from an older commit, or a measurement build) alternated on the same
// cases, several rounds, the order swapped every round; every record
// kernel_micro prints is kept, in one JSON record under bench/results/.
// Two kipp binaries work the same way on `bench ... --json` cases (the
// whole engine; with --profile, each step's rate: --steps picks which
// to print).
//
//   node bench/kernel_micro_pairs.mjs --a build/kernel_micro --a-label HEAD \
//        --b /tmp/kexp/km_old --b-label a108784 [--rounds 3] [--tag NAME] [--out DIR] \
//        "att avx512 q8_0 4096 28" "KERNEL_MICRO_SCALE_CODES=16384 att avx512 q8_0 4096 28" ...
//   node bench/kernel_micro_pairs.mjs --a build/kipp --b /tmp/old/kipp --steps attn_output,down \
//        "bench -m build/models/synthetic-0.6b.scale4_gs32.gguf -t 2 --prompt-tokens 16 --decode 0 --reps 7 --profile --json"
//
// A case is the binary's arguments, led by any NAME=VALUE settings for
// its environment. The record: the CPU (kernel_micro's own name for it;
// for kipp, /proc/cpuinfo's), both binaries and labels, the command line,
// and per case the rounds' records of each binary; written to DIR
// (bench/results unless --out) as kernel-micro-TAG-WHEN.json, or
// kipp-bench-TAG-WHEN.json for kipp's records. Machines here are noisy:
// read pairs, not one number. (build an older library or kipp:
// docs/BENCHMARKS.md "Stop 70", Reproduce)
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { cpuLabel } from "./cpuinfo.mjs";

const argv = process.argv.slice(2);
const opt = { rounds: 3, tag: "pairs", out: join(dirname(fileURLToPath(import.meta.url)), "results") };
const cases = [];
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (["--a", "--b", "--a-label", "--b-label", "--rounds", "--tag", "--out", "--steps"].includes(a)) {
    if (i + 1 >= argv.length) fail(`${a} needs a value`);
    opt[a.slice(2).replace("-l", "L")] = argv[++i];
  } else if (a.startsWith("--")) fail(`unknown option ${a}`);
  else cases.push(a);
}
function fail(msg) {
  console.error(`kernel_micro_pairs: ${msg}\nusage: node bench/kernel_micro_pairs.mjs --a BIN ` +
                `--b BIN [--a-label L] [--b-label L] [--rounds N] [--tag NAME] [--out DIR] [--steps S,S] CASE...`);
  process.exit(2);
}
const rounds = Number(opt.rounds);
if (!opt.a || !opt.b || !cases.length) fail("--a, --b and at least one case are required");
if (!Number.isInteger(rounds) || rounds < 1 || rounds > 50) fail("--rounds: 1 to 50");
if (!/^[A-Za-z0-9_.-]+$/.test(opt.tag)) fail("--tag: letters, digits, _ . - only");

function run(bin, c) {
  const words = c.trim().split(/\s+/);
  const env = { ...process.env };
  while (words.length && /^[A-Z_][A-Z0-9_]*=/.test(words[0])) {
    const [k, ...v] = words.shift().split("=");
    env[k] = v.join("=");
  }
  let out;
  try {
    out = execFileSync(bin, words, { env, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
    const rec = JSON.parse(out.trim().split("\n").pop());
    if (rec === null || typeof rec !== "object" || Array.isArray(rec)) throw new Error("not an object");
    return rec;
  } catch (e) {
    console.error(`kernel_micro_pairs: ${bin} ${c}: ${out === undefined ? (e.stderr || e.message).trim()
                                                               : "no JSON record: " + out.trim()}`);
    process.exit(1);
  }
}

const results = cases.map((c) => ({ case: c, a: [], b: [] }));
let cpu = null, kippBench = false;
for (let r = 0; r < rounds; r++)
  for (const res of results)
    for (const side of r % 2 ? ["b", "a"] : ["a", "b"]) {
      const rec = run(opt[side], res.case);
      cpu ??= rec.cpu;
      kippBench ||= "prefill_tps" in rec;
      res[side].push(rec);
    }
// kipp bench's record does not name the processor: the machine's does.
cpu ??= cpuLabel();
const when = new Date().toISOString();
const record = {
  tool: "bench/kernel_micro_pairs.mjs", when, cpu, rounds,
  a: { bin: opt.a, label: opt.aLabel ?? opt.a }, b: { bin: opt.b, label: opt.bLabel ?? opt.b },
  command: ["node", "bench/kernel_micro_pairs.mjs", ...process.argv.slice(2)].join(" "),
  results,
};
mkdirSync(opt.out, { recursive: true });
const file = join(opt.out, `${kippBench ? "kipp-bench" : "kernel-micro"}-${opt.tag}-${when.replace(/[:.]/g, "-")}.json`);
writeFileSync(file, JSON.stringify(record, null, 1) + "\n");
// What is printed per run: kernel_micro's rate; kipp bench's tok/s
// (prefill, or decode when it decoded), then the GFLOPS of each --steps
// step of its profile.
const steps = opt.steps ? opt.steps.split(",") : [];
const kippRate = (rec) =>
  [rec.decode_tokens > 0 ? rec.decode_tps : rec.prefill_tps,
   ...steps.map((s) => (rec.profile ?? []).find((p) => p.step === s)?.gflops ?? "-")].join("/");
const rate = (rec) => "prefill_tps" in rec ? kippRate(rec)
                      : (rec.query_rows > 1 ? rec.gflops : rec.gb_per_s) ?? rec.ms_per_sample ?? rec.gflops;
for (const res of results)
  console.log(`${res.case}: ${record.a.label} ${res.a.map(rate).join(" ")} | ` +
              `${record.b.label} ${res.b.map(rate).join(" ")}`);
console.log(`wrote ${file}`);
