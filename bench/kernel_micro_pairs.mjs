#!/usr/bin/env node
// Two kernel_micro binaries (two builds of the library: this one and one
// from an older commit, or a measurement build) alternated on the same
// cases, several rounds, the order swapped every round; every record
// kernel_micro prints is kept, in one JSON record under bench/results/.
//
//   node bench/kernel_micro_pairs.mjs --a build/kernel_micro --a-label HEAD \
//        --b /tmp/kexp/km_old --b-label a108784 [--rounds 3] [--tag NAME] [--out DIR] \
//        "att avx512 q8_0 4096 28" "KERNEL_MICRO_SCALE_CODES=16384 att avx512 q8_0 4096 28" ...
//
// A case is kernel_micro's arguments, led by any NAME=VALUE settings for
// its environment. The record: the CPU (kernel_micro's own name for it),
// both binaries and labels, the command line, and per case the rounds'
// records of each binary; written to DIR (bench/results unless --out). Machines here are noisy: read pairs, not one
// number. (build an older library: docs/BENCHMARKS.md "Stop 70", Reproduce)
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const argv = process.argv.slice(2);
const opt = { rounds: 3, tag: "pairs", out: join(dirname(fileURLToPath(import.meta.url)), "results") };
const cases = [];
for (let i = 0; i < argv.length; i++) {
  const a = argv[i];
  if (["--a", "--b", "--a-label", "--b-label", "--rounds", "--tag", "--out"].includes(a)) {
    if (i + 1 >= argv.length) fail(`${a} needs a value`);
    opt[a.slice(2).replace("-l", "L")] = argv[++i];
  } else if (a.startsWith("--")) fail(`unknown option ${a}`);
  else cases.push(a);
}
function fail(msg) {
  console.error(`kernel_micro_pairs: ${msg}\nusage: node bench/kernel_micro_pairs.mjs --a BIN ` +
                `--b BIN [--a-label L] [--b-label L] [--rounds N] [--tag NAME] [--out DIR] CASE...`);
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
    return JSON.parse(out.trim().split("\n").pop());
  } catch (e) {
    console.error(`kernel_micro_pairs: ${bin} ${c}: ${out === undefined ? (e.stderr || e.message).trim()
                                                               : "no JSON record: " + out.trim()}`);
    process.exit(1);
  }
}

const results = cases.map((c) => ({ case: c, a: [], b: [] }));
let cpu = null;
for (let r = 0; r < rounds; r++)
  for (const res of results)
    for (const side of r % 2 ? ["b", "a"] : ["a", "b"]) {
      const rec = run(opt[side], res.case);
      cpu ??= rec.cpu;
      res[side].push(rec);
    }
const when = new Date().toISOString();
const record = {
  tool: "bench/kernel_micro_pairs.mjs", when, cpu, rounds,
  a: { bin: opt.a, label: opt.aLabel ?? opt.a }, b: { bin: opt.b, label: opt.bLabel ?? opt.b },
  command: ["node", "bench/kernel_micro_pairs.mjs", ...process.argv.slice(2)].join(" "),
  results,
};
mkdirSync(opt.out, { recursive: true });
const file = join(opt.out, `kernel-micro-${opt.tag}-${when.replace(/[:.]/g, "-")}.json`);
writeFileSync(file, JSON.stringify(record, null, 1) + "\n");
const rate = (rec) => (rec.query_rows > 1 ? rec.gflops : rec.gb_per_s) ?? rec.ms_per_sample ?? rec.gflops;
for (const res of results)
  console.log(`${res.case}: ${record.a.label} ${res.a.map(rate).join(" ")} | ` +
              `${record.b.label} ${res.b.map(rate).join(" ")}`);
console.log(`wrote ${file}`);
