#!/usr/bin/env node
// Kipp vs llama.cpp's own llama-bench, built natively for this CPU
// (bench/build_llama_native.sh), on the same GGUF and thread count, in one
// run. Issue 13's cases, per weight scheme:
//   prefill 512 and 2048 tokens from an empty context;
//   decode 64 tokens at 0, 512 and 4096 tokens of context.
// Engines alternate case by case (the order flips every round) so machine
// drift hits both; the table reports medians over rounds. The JSON record
// (bench/results/) names the CPU model and flags, the kipp tier, the
// measured read bandwidth and each decode case's roofline (bytes read per
// token / bandwidth), and the measured FP32 FMA peak (bench/fmapeak.c) and
// each prefill case's compute roofline at it (flops per token / peak): the
// ceiling of an exact tier, whose activations stay FP32 (DESIGN section 5).
//
// Bandwidth is read again right before and right after every decode case
// of every round (build/membw, ~1 s each; record.bandwidth_samples), and
// each decode case's roofline uses the median of its own readings
// (entry.bandwidth_gb_s). The hosts here drift between phases: one
// reading at the start of a 30-minute run was 33 GB/s while the same
// binary's decode moved between 25 and 34 tok/s, and a roofline from it
// put a decode at 111 % (stop 39, Zen 4). The start reading stays in
// machine.read_bandwidth_gb_s. Readings a second apart still differ by up
// to 1.8x there (a slow phase ~26-33 GB/s, a fast one ~40-49), so each
// decode case also carries roofline_best_tps: bytes per token over the
// best reading of the whole run (record.bandwidth_best_gb_s), the
// strictest ceiling, which no phase can flatter.
//
// Each of those readings also reads the scheme's GGUF where the page cache
// holds it (build/membw --file: mapped as both engines map it, 2 MiB pages
// advised; record.bandwidth_samples[].file_read_gb_s). The pages a file
// lies on can read slower than a fresh buffer: on the Intel Xeon of stop
// 56 the BF16 synthetic-0.6b file read ~10-20 % slower (one thread, 11.1
// against 12.2-14.3 GB/s for the fresh buffer, 13.2-13.7 for a copy of the
// same file on other pages), and kipp's decode of it ran at that slower
// rate.
// Each decode entry therefore carries roofline_file_tps too: the file's
// bytes per token over the file's median reading, plus what the engine
// reads outside the file (the KV cache, a --kipp-head q8_0 copy) over the
// fresh buffer's -- the ceiling for these bytes where they lie, for kipp
// (kipp_of_file_roofline) and llama.cpp (llama_of_file_roofline), which
// maps the same file (llama-bench's default load mode maps it) except for
// Q4_0 matrices on an AVX2 processor: ggml-cpu repacks those at load into
// a buffer of its own (src/ggml-cpu/repack.cpp, q4_0_8x8), so they count
// at the fresh buffer's reading for llama.cpp.
//
// The same readings take the FP32 FMA peak again (bench/fmapeak.c, ~0.6 s;
// bandwidth_samples[].fma_gflops, each decode entry's median fma_gflops):
// the host's compute phase beside its bandwidth phase, so that a decode
// case's share of the roofline can be set against both, round by round
// (bench/phase_table.mjs). (Stop 57, Intel Xeon: Q8_0 decode's slow
// rounds followed neither; docs/BENCHMARKS.md "Stop 57".)
//
//   node bench/bench_native.mjs [--schemes bf16,q8_0,affine4_gs32,scale4_gs32]
//        [--base build/models/synthetic-0.6b] [--threads 2] [--rounds 1]
//        [--cases prefill512,prefill2048,decode0,decode512,decode4096]
//        (also prefill4, prefill8, prefill9, prefill12, prefill16: not run
//        unless named)
//        [--llama-bin DIR] [--kipp build/kipp] [--kipp-base OTHER_KIPP]
//        [--kipp-isa avx512,avx512bf16] [--kv-quant bf16|q8_0]
//        [--kipp-head bf16|q8_0]
//
// --kipp-isa races kipp once per named cpu tier (KIPP_CPU_ISA set for each
// run; default: KIPP_CPU_ISA if set, else auto) in the same alternation:
// `--kipp-isa avx512,avx512bf16` puts the default exact tier and the opt-in
// BF16-activation tier beside llama.cpp in one run (add amx on a processor
// with AMX: the opt-in tile tier). Every kipp run in the
// record names its tier (kipp_tier), each case's entry has one result per
// tier (kipp_by_tier), and the table one kipp column pair per tier.
//
// --kipp-base adds a second kipp binary (say, a build of the commit before a
// change) to the alternation (at the first --kipp-isa tier), reported as
// "kipp-base": before/after and llama.cpp in the same run. It always reads
// the stored head (no --head flag, which older builds lack), so
// `--kipp-base build/kipp --kipp-head q8_0` races the two heads.
//
// --kv-quant q8_0 runs both engines with a Q8_0 KV cache (kipp --kv-quant
// q8_0; llama-bench -ctk q8_0 -ctv q8_0, ggml's same block format) instead
// of their defaults (kipp BF16, llama.cpp F16); decode rooflines count the
// Q8_0 cache's bytes (34 per 32 values).
//
// --kipp-head q8_0 runs kipp with --head q8_0 (a Q8_0 copy of the output
// head made at load, opt-in; docs/ARCHITECTURE.md "Quantized output head").
// llama.cpp still reads the file's BF16 head, so the two engines read
// different bytes per token: each decode entry's bytes_per_token (and the
// kipp rooflines) count kipp's Q8_0 head, llama_bytes_per_token (and
// llama's best-roofline share) the file's. Not like for like: the table
// says so.
//
// --page-cache fresh (the default) drops each GGUF from the page cache
// before its scheme's runs (dd iflag=nocache count=0: a fadvise DONTNEED,
// no root needed) and has kipp read it once (an 8-token prefill), so the
// kernel reads it fresh into the 2 MiB folios kipp's mapping asks for
// (MADV_HUGEPAGE); both engines then map the same cached pages. How the
// cache holds the file moves prefill of both engines by 10-25 % (4 KiB
// pages cost a page walk per 4 KiB of weights), so each kipp result
// carries weights_pmd_mapped_kib and the scheme records the share after the
// read. --page-cache keep leaves the cache as it is.
//
// Scheme bf16 reads BASE.gguf, every other scheme BASE.SCHEME.gguf (make
// build/models/synthetic-0.6b.q8_0.gguf ...). Without --kipp-isa,
// KIPP_CPU_ISA is passed through to kipp and recorded.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync, statSync, openSync, readSync, closeSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "./args.mjs";
import { cpuinfoField } from "./cpuinfo.mjs";

const { opt } = parseArgs("bench_native", ["--schemes", "--base", "--threads", "--rounds", "--cases",
  "--llama-bin", "--kipp", "--kipp-base", "--kipp-isa", "--kv-quant", "--page-cache", "--kipp-head"]);
const schemes = opt("--schemes", "bf16,q8_0,affine4_gs32,scale4_gs32").split(",");
const base = opt("--base", "build/models/synthetic-0.6b");
const threads = Number(opt("--threads", "2"));
const rounds = Number(opt("--rounds", "1"));
const kipp = opt("--kipp", "build/kipp");
const kippBase = opt("--kipp-base", null);
const kvQuant = opt("--kv-quant", "bf16");
if (!["bf16", "q8_0"].includes(kvQuant)) { console.error(`bench_native: --kv-quant ${kvQuant}: bf16 or q8_0`); process.exit(2); }
const kippHead = opt("--kipp-head", "bf16");
if (!["bf16", "q8_0"].includes(kippHead)) { console.error(`bench_native: --kipp-head ${kippHead}: bf16 or q8_0`); process.exit(2); }
const pageCache = opt("--page-cache", "fresh");
if (!["fresh", "keep"].includes(pageCache)) { console.error(`bench_native: --page-cache ${pageCache}: fresh or keep`); process.exit(2); }
const DECODE = 64;
const allCases = {
  prefill512: { name: "prefill 512", kind: "prefill", p: 512 },
  prefill2048: { name: "prefill 2048", kind: "prefill", p: 2048 },
  decode0: { name: "decode 64 @ 0", kind: "decode", depth: 0 },
  decode512: { name: "decode 64 @ 512", kind: "decode", depth: 512 },
  decode4096: { name: "decode 64 @ 4096", kind: "decode", depth: 4096 },
  // Not issue 13's: a few rows per call (batched decode of a few sessions,
  // speculation's verify step, a short prompt), where the weights' reads
  // rather than the FMAs bound the step. Nine repetitions each, since one
  // call is tens of milliseconds; no compute roofline (not the bound).
  prefill4: { name: "prefill 4", kind: "prefill", p: 4, reps: 9, small: true },
  prefill8: { name: "prefill 8", kind: "prefill", p: 8, reps: 9, small: true },
  prefill9: { name: "prefill 9", kind: "prefill", p: 9, reps: 9, small: true },
  prefill12: { name: "prefill 12", kind: "prefill", p: 12, reps: 9, small: true },
  prefill16: { name: "prefill 16", kind: "prefill", p: 16, reps: 9, small: true },
};
const defaultCases = Object.keys(allCases).filter((k) => !allCases[k].small);
const caseKeys = opt("--cases", defaultCases.join(",")).split(",");
for (const k of caseKeys) if (!allCases[k]) { console.error(`bench_native: unknown case ${k}`); process.exit(2); }

const sh = (cmd, a, env) => {
  try { return execFileSync(cmd, a, { encoding: "utf8", env: env ?? process.env, stdio: ["ignore", "pipe", "pipe"] }).trim(); }
  catch { return null; }
};

let llamaBin = opt("--llama-bin", null);
if (!llamaBin) {
  llamaBin = sh("sh", ["bench/build_llama_native.sh"]);
  if (!llamaBin) { console.error("bench_native: bench/build_llama_native.sh failed"); process.exit(1); }
  llamaBin = llamaBin.split("\n").pop();
}
const llamaBench = path.join(llamaBin, "llama-bench");

// ---- what one decode step reads: the GGUF's tensor bytes ------------------
// Walks the GGUF header (v2/v3) to the tensor directory. A tied head reads
// token_embd in full every token; an untied model reads output.weight in
// full and one row of token_embd (counted as 0).
function ggufTensors(file) {
  const fd = openSync(file, "r");
  const size = statSync(file).size;
  let buf = Buffer.alloc(0), bufOff = 0, pos = 0;
  const need = (n) => {
    if (pos + n <= bufOff + buf.length) return;
    const len = Math.max(n, 1 << 22);
    buf = Buffer.alloc(len);
    const got = readSync(fd, buf, 0, len, pos);
    buf = buf.subarray(0, got);
    bufOff = pos;
  };
  const u32 = () => { need(4); const v = buf.readUInt32LE(pos - bufOff); pos += 4; return v; };
  const u64 = () => { need(8); const v = Number(buf.readBigUInt64LE(pos - bufOff)); pos += 8; return v; };
  const str = () => { const n = u64(); need(n); const s = buf.toString("utf8", pos - bufOff, pos - bufOff + n); pos += n; return s; };
  const scalar = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const value = (t) => {
    if (t === 8) return str();
    if (t === 9) { const et = u32(), n = u64(); const out = []; for (let i = 0; i < n; i++) { const v = value(et); if (out.length < 4) out.push(v); } return out; }
    const w = scalar[t];
    if (!w) throw new Error(`gguf: value type ${t}`);
    need(w);
    const o = pos - bufOff;
    const v = t === 4 ? buf.readUInt32LE(o) : t === 5 ? buf.readInt32LE(o) : t === 6 ? buf.readFloatLE(o)
      : t === 10 ? Number(buf.readBigUInt64LE(o)) : t === 0 || t === 7 ? buf[o] : null;
    pos += w;
    return v;
  };
  if (u32() !== 0x46554747) throw new Error(`${file}: not a GGUF`);
  u32();
  const nT = u64(), nKV = u64();
  const meta = {};
  for (let i = 0; i < nKV; i++) { const k = str(); meta[k] = value(u32()); }
  const tensors = [];
  for (let i = 0; i < nT; i++) {
    const name = str(), nd = u32(); const dims = []; for (let d = 0; d < nd; d++) dims.push(u64());
    tensors.push({ name, dims, type: u32(), offset: u64() });
  }
  closeSync(fd);
  const align = meta["general.alignment"] || 32;
  const dataStart = Math.ceil(pos / align) * align;
  tensors.sort((a, b) => a.offset - b.offset);
  const dataBytes = size - dataStart;
  for (let i = 0; i < tensors.length; i++)
    tensors[i].bytes = (i + 1 < tensors.length ? tensors[i + 1].offset : dataBytes) - tensors[i].offset;
  return { meta, tensors, dataBytes, size };
}

function decodeBytes(file) {
  const g = ggufTensors(file);
  const tied = !g.tensors.some((t) => t.name === "output.weight");
  const embd = g.tensors.find((t) => t.name === "token_embd.weight");
  const weights = g.dataBytes - (tied ? 0 : embd.bytes);
  // The head's BF16 rows, and the same rows as Q8_0 (34 bytes per 32
  // values): what --kipp-head q8_0 reads instead.
  const head = tied ? embd : g.tensors.find((t) => t.name === "output.weight");
  const headValues = head.dims.reduce((x, y) => x * y, 1);
  const headQ8Bytes = (headValues / 32) * 34;
  const kippWeights = kippHead === "q8_0" ? weights - head.bytes + headQ8Bytes : weights;
  // Of those, what kipp reads from the file's mapping (the rest: the head
  // copy, in memory kipp allocated).
  const kippFileWeights = kippHead === "q8_0" ? weights - head.bytes : weights;
  // What llama.cpp reads from the mapping: all but the Q4_0 (type 2)
  // matrices it repacks on AVX2 (declared below, with the CPU flags).
  const q4_0Bytes = g.tensors.filter((t) => t.type === 2).reduce((a, t) => a + t.bytes, 0);
  const llamaFileWeights = weights - (llamaRepacksQ4_0 ? q4_0Bytes : 0);
  const arch = g.meta["general.architecture"] || "qwen3";
  const layers = g.meta[`${arch}.block_count`];
  const kvHeads = g.meta[`${arch}.attention.head_count_kv`] || 8;
  const headDim = g.meta[`${arch}.attention.key_length`] || 128;
  // BF16 K and V per cached position, every layer (DESIGN.md section 6).
  const kvPerPos = layers * 2 * kvHeads * headDim * (kvQuant === "q8_0" ? 34 / 32 : 2);
  // Multiply-adds per token in the seven projections (prefill's work; the
  // output head runs for the last token only) and query heads (attention).
  const projParams = g.tensors.filter((t) => /^blk\.\d+\.(attn_(q|k|v|output)|ffn_(gate|up|down))\.weight$/.test(t.name))
    .reduce((a, t) => a + t.dims.reduce((x, y) => x * y, 1), 0);
  const qHeads = g.meta[`${arch}.attention.head_count`] || 16;
  return { weights, kippWeights, kippFileWeights, llamaFileWeights, kvPerPos, layers, tied, projParams, qHeads, headDim };
}

// ---- machine -------------------------------------------------------------
mkdirSync("build", { recursive: true });
sh("cc", ["-O3", "-march=native", "-pthread", "bench/membw.c", "-o", "build/membw"]);
const readBandwidth = (file) => JSON.parse(sh("build/membw", [String(threads), ...(file ? ["--file", file] : [])]) || "{}");
const bw = readBandwidth();
// FP32 FMA peak: the exact tiers' prefill ceiling (DESIGN keeps activations FP32).
sh("cc", ["-O2", "-pthread", "bench/fmapeak.c", "-o", "build/fmapeak"]);
const readFma = () => JSON.parse(sh("build/fmapeak", [String(threads)]) || "{}");
const fma = readFma();
const flags = (cpuinfoField("flags") || "").split(/\s+/);
const simdFlags = flags.filter((f) => /^(avx|amx|fma|f16c|sse4|vnni)/.test(f));
const has = (f) => flags.includes(f);
const llamaRepacksQ4_0 = has("avx2");
// The tier kipp's auto picks (src/cpu/dispatch.c decides by CPUID; this
// mirrors it): the best exact tier, never the opt-in avx512bf16, amx, avx2i8 or avx512i8.
const avx512 = has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq");
const autoTier = avx512 ? "avx512" : has("avx2") && has("fma") && has("f16c") ? "avx2" : "generic";
const tiers = opt("--kipp-isa", process.env.KIPP_CPU_ISA || "auto").split(",")
  .map((t) => (t === "auto" || t === "" ? autoTier : t));
const tierNeeds = { generic: true, avx2: has("avx2") && has("fma") && has("f16c"), avx512,
                    avx2i8: has("avx2") && has("fma") && has("f16c"),
                    avx512i8: avx512 && has("avx512_vnni"),
                    avx512bf16: avx512 && has("avx512_bf16"),
                    amx: avx512 && has("avx512_bf16") && has("amx_tile") && has("amx_bf16") };
for (const t of tiers) {
  if (!(t in tierNeeds)) { console.error(`bench_native: --kipp-isa: unknown tier ${t} (auto, generic, avx2, avx512, avx512bf16, amx, avx2i8, avx512i8)`); process.exit(2); }
  if (!tierNeeds[t]) { console.error(`bench_native: --kipp-isa: this processor cannot run tier ${t}`); process.exit(2); }
}
if (new Set(tiers).size !== tiers.length) { console.error("bench_native: --kipp-isa names a tier twice"); process.exit(2); }
const tier = tiers.join("+");
const tierEnv = (t) => ({ ...process.env, KIPP_CPU_ISA: t });

const record = {
  date: new Date().toISOString(),
  commit: sh("git", ["rev-parse", "HEAD"]),
  dirty: (sh("git", ["status", "--porcelain", "--untracked-files=no"]) || "") !== "",
  machine: {
    cpu: cpuinfoField("model name"), cpu_family: Number(cpuinfoField("cpu family")), cpu_model: Number(cpuinfoField("model")),
    cores_online: os.cpus().length, mem_gib: +(os.totalmem() / 2 ** 30).toFixed(1), kernel: os.release(),
    simd_flags: simdFlags, read_bandwidth_gb_s: bw.read_gb_per_s, bandwidth_threads: bw.threads,
    bandwidth_seq_gb_s: bw.seq_gb_per_s, bandwidth_rows8_gb_s: bw.rows8_gb_per_s,
    fp32_fma_gflops: fma.fp32_fma_gflops, fma_vector_bits: fma.vector_bits,
    loadavg_start: os.loadavg(),
  },
  compiler: sh("cc", ["--version"])?.split("\n")[0],
  kipp_tier: tier, kipp_tiers: tiers, kipp_auto_tier: autoTier,
  kipp_tier_forced: Boolean(process.env.KIPP_CPU_ISA) || opt("--kipp-isa", null) !== null,
  // decode's weight prefetch as asked ("auto" unless KIPP_CPU_DECODE_PREFETCH
  // is set); each kipp run's result.decode_prefetch is what it resolved to
  kipp_decode_prefetch: process.env.KIPP_CPU_DECODE_PREFETCH || "auto",
  llama: { bin: llamaBin,
           source: sh("cat", [path.join(llamaBin, "..", "SOURCE")]) ?? sh("cat", [path.join(llamaBin, "SOURCE")]) },
  kipp_base: kippBase, kv_quant: kvQuant, kipp_head: kippHead, page_cache: pageCache, threads, rounds, decode_tokens: DECODE, schemes: {}, runs: [],
  bandwidth_samples: [],
};

function kippArgs(file, c, head = kippHead) {
  const p = c.kind === "prefill" ? c.p : Math.max(c.depth, 1);
  return ["bench", "-m", file, "--backend", "cpu", "--threads", String(threads), "--prompt-tokens", String(p),
          "--decode", String(c.kind === "prefill" ? 0 : DECODE), "--reps", String(c.reps ?? 1), "--json",
          ...(kvQuant === "q8_0" ? ["--kv-quant", "q8_0"] : []),
          ...(head === "q8_0" ? ["--head", "q8_0"] : [])];
}
function llamaArgs(file, c) {
  const a = ["-m", file, "-t", String(threads), "-r", String(c.reps ?? 1), "-o", "json",
             ...(kvQuant === "q8_0" ? ["-ctk", "q8_0", "-ctv", "q8_0"] : [])];
  return c.kind === "prefill" ? [...a, "-p", String(c.p), "-n", "0"]
                              : [...a, "-p", "0", "-n", String(DECODE), "-d", String(c.depth)];
}
function runKipp(file, c, bin = kipp, t = tiers[0], head = kippHead) {
  const a = kippArgs(file, c, head);
  const r = spawnSync(bin, a, { encoding: "utf8", maxBuffer: 1 << 24, env: tierEnv(t) });
  if (r.status !== 0) throw new Error(`KIPP_CPU_ISA=${t} kipp ${a.join(" ")}: ${r.stderr}`);
  const j = JSON.parse(r.stdout.trim().split("\n").pop());
  return { tps: c.kind === "prefill" ? j.prefill_tps : j.decode_tps, command: `KIPP_CPU_ISA=${t} ${[bin, ...a].join(" ")}`,
           raw: j, tier: t };
}
function runLlama(file, c) {
  const a = llamaArgs(file, c);
  const r = spawnSync(llamaBench, a, { encoding: "utf8", maxBuffer: 1 << 24 });
  if (r.status !== 0) throw new Error(`llama-bench ${a.join(" ")}: ${r.stderr}`);
  const j = JSON.parse(r.stdout)[0];
  return { tps: j.avg_ts, command: [llamaBench, ...a].join(" "), raw: j };
}

// The record is rewritten after every run, so an interrupted run (a loaded
// machine can take hours) still leaves everything measured so far.
const stamp = record.date.replace(/[:.]/g, "-");
mkdirSync(path.join("bench", "results"), { recursive: true });
const kvTag = (kvQuant === "bf16" ? "" : `-kv${kvQuant}`) + (kippHead === "bf16" ? "" : `-head${kippHead}`);
const out = path.join("bench", "results", `native-${path.basename(base)}-t${threads}-${tier}${kvTag}-${stamp}.json`);
const save = (complete) => {
  record.complete = complete;
  record.machine.loadavg_end = os.loadavg();
  writeFileSync(out, JSON.stringify(record, null, 2) + "\n");
};

const median = (v) => { const s = [...v].sort((a, b) => a - b); const n = s.length;
  return n ? (n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2) : NaN; };

for (const scheme of schemes) {
  const file = scheme === "bf16" ? `${base}.gguf` : `${base}.${scheme}.gguf`;
  const db = decodeBytes(file);
  record.schemes[scheme] = { file, bytes: statSync(file).size, weight_bytes_per_token: db.weights,
                             kipp_weight_bytes_per_token: db.kippWeights,
                             // of those, what each engine reads from the file's mapping
                             kipp_file_weight_bytes_per_token: db.kippFileWeights,
                             llama_file_weight_bytes_per_token: db.llamaFileWeights,
                             kv_bytes_per_position: db.kvPerPos, tied_head: db.tied, cases: [] };
  if (pageCache === "fresh") {
    const ev = spawnSync("dd", [`if=${file}`, "iflag=nocache", "count=0", "status=none"], { encoding: "utf8" });
    const first = runKipp(file, { kind: "prefill", p: 8 });
    record.schemes[scheme].page_cache = { evicted: ev.status === 0, ...(ev.status ? { evict_error: ev.stderr.trim() } : {}),
                                          map_kib: first.raw.weights_map_kib, pmd_mapped_kib: first.raw.weights_pmd_mapped_kib };
    process.stderr.write(`${scheme.padEnd(13)} page cache: ${ev.status === 0 ? "evicted, " : "NOT evicted, "}` +
                         `${(first.raw.weights_pmd_mapped_kib / 1024).toFixed(0)} of ${(first.raw.weights_map_kib / 1024).toFixed(0)} MiB on 2 MiB pages\n`);
  }
  for (let r = 0; r < rounds; r++) {
    for (const [ci, key] of caseKeys.entries()) {
      const c = allCases[key];
      const engines = [...tiers.map((t) => ["kipp", (f, cc) => runKipp(f, cc, kipp, t)]), ["llama", runLlama]];
      if (kippBase) engines.push(["kipp-base", (f, cc) => runKipp(f, cc, kippBase, tiers[0], "bf16")]);
      if ((r + ci) % 2) engines.reverse();
      // The compute phase beside the bandwidth: the FMA peak moves with the
      // host's load (stop 56: 290-374 GFLOPS in one hour) while a plain
      // read barely does.
      const sampleBandwidth = (when) => {
        const b = readBandwidth(), f = readBandwidth(file), p = readFma();
        record.bandwidth_samples.push({ scheme, round: r, case: c.name, when, read_gb_s: b.read_gb_per_s,
                                        seq_gb_s: b.seq_gb_per_s, rows8_gb_s: b.rows8_gb_per_s,
                                        file_read_gb_s: f.read_gb_per_s, file_seq_gb_s: f.seq_gb_per_s,
                                        file_rows8_gb_s: f.rows8_gb_per_s, fma_gflops: p.fp32_fma_gflops });
      };
      if (c.kind === "decode") sampleBandwidth("before");
      for (const [who, fn] of engines) {
        const res = fn(file, c);
        record.runs.push({ scheme, round: r, case: c.name, engine: who, ...(res.tier ? { kipp_tier: res.tier } : {}),
                           tps: res.tps, command: res.command, loadavg: os.loadavg(), result: res.raw });
        save(false);
        const label = who === "kipp" ? `kipp ${res.tier}` : who;
        process.stderr.write(`${scheme.padEnd(13)} round ${r + 1} ${c.name.padEnd(17)} ${label.padEnd(16)} ${res.tps.toFixed(2)} tok/s\n`);
      }
      if (c.kind === "decode") {
        sampleBandwidth("after");
        const [s0, s1] = record.bandwidth_samples.slice(-2);
        process.stderr.write(`${scheme.padEnd(13)} round ${r + 1} ${c.name.padEnd(17)} bandwidth        ${s0.read_gb_s} / ${s1.read_gb_s} GB/s ` +
                             `(before / after; the file's pages ${s0.file_read_gb_s} / ${s1.file_read_gb_s}; ` +
                             `FMA peak ${s0.fma_gflops} / ${s1.fma_gflops} GFLOPS)\n`);
      }
    }
  }
  for (const key of caseKeys) {
    const c = allCases[key];
    const pick = (who, t) => record.runs.filter((x) => x.scheme === scheme && x.case === c.name && x.engine === who &&
                                                   (t === undefined || x.kipp_tier === t)).map((x) => x.tps);
    const l = median(pick("llama"));
    const byTier = Object.fromEntries(tiers.map((t) => { const v = median(pick("kipp", t)); return [t, { kipp_tps: v, ratio: v / l }]; }));
    // kipp_tps / ratio: the first tier's, as in records before --kipp-isa.
    const k = byTier[tiers[0]].kipp_tps;
    const entry = { case: c.name, kipp_tier: tiers[0], kipp_tps: k, llama_tps: l, ratio: k / l, kipp_by_tier: byTier };
    if (kippBase) { entry.kipp_base_tps = median(pick("kipp-base")); entry.base_ratio = entry.kipp_base_tps / l; }
    if (c.kind === "decode") {
      // Mean context over the 64 decoded tokens.
      const kvBytes = db.kvPerPos * (c.depth + DECODE / 2);
      const bytes = db.kippWeights + kvBytes;
      entry.bytes_per_token = bytes;
      entry.llama_bytes_per_token = db.weights + kvBytes;
      // This case's own bandwidth readings (before and after it, every round).
      entry.bandwidth_gb_s = median(record.bandwidth_samples
        .filter((x) => x.scheme === scheme && x.case === c.name).map((x) => x.read_gb_s));
      entry.roofline_tps = (entry.bandwidth_gb_s * 1e9) / bytes;
      entry.fma_gflops = median(record.bandwidth_samples
        .filter((x) => x.scheme === scheme && x.case === c.name && x.fma_gflops).map((x) => x.fma_gflops));
      entry.kipp_of_roofline = k / entry.roofline_tps;
      for (const t of tiers) byTier[t].kipp_of_roofline = byTier[t].kipp_tps / entry.roofline_tps;
      // The same over where each byte lies: the file's pages at their own
      // reading, the rest at the fresh buffer's.
      entry.file_bandwidth_gb_s = median(record.bandwidth_samples
        .filter((x) => x.scheme === scheme && x.case === c.name && x.file_read_gb_s).map((x) => x.file_read_gb_s));
      if (entry.file_bandwidth_gb_s) {
        const at = (fileBytes, otherBytes) =>
          1 / (fileBytes / (entry.file_bandwidth_gb_s * 1e9) + otherBytes / (entry.bandwidth_gb_s * 1e9));
        entry.roofline_file_tps = at(db.kippFileWeights, bytes - db.kippFileWeights);
        entry.llama_roofline_file_tps = at(db.llamaFileWeights, entry.llama_bytes_per_token - db.llamaFileWeights);
        entry.kipp_of_file_roofline = k / entry.roofline_file_tps;
        entry.llama_of_file_roofline = l / entry.llama_roofline_file_tps;
        for (const t of tiers) byTier[t].kipp_of_file_roofline = byTier[t].kipp_tps / entry.roofline_file_tps;
      }
    } else if (fma.fp32_fma_gflops && !c.small) {
      // Prefill's compute roofline at FP32 FMA peak: 2 flops per projection
      // multiply-add, plus causal attention (QK and PV over P/2 positions
      // on average). An exact tier cannot pass it; a BF16/int8 dot product
      // (llama.cpp, the opt-in avx512bf16 tier) can.
      const attn = db.layers * 4 * db.qHeads * db.headDim * (c.p / 2);
      entry.flops_per_token = 2 * db.projParams + attn;
      entry.roofline_tps = (fma.fp32_fma_gflops * 1e9) / entry.flops_per_token;
      entry.roofline_kind = "fp32_fma";
      entry.kipp_of_roofline = k / entry.roofline_tps;
      for (const t of tiers) byTier[t].kipp_of_roofline = byTier[t].kipp_tps / entry.roofline_tps;
    }
    record.schemes[scheme].cases.push(entry);
  }
}
record.bandwidth_best_gb_s = Math.max(bw.read_gb_per_s || 0, ...record.bandwidth_samples.map((x) => x.read_gb_s || 0));
for (const s of Object.values(record.schemes))
  for (const e of s.cases)
    if (e.bytes_per_token) {
      e.roofline_best_tps = (record.bandwidth_best_gb_s * 1e9) / e.bytes_per_token;
      e.kipp_of_best_roofline = e.kipp_tps / e.roofline_best_tps;
      e.llama_of_best_roofline = e.llama_tps * e.llama_bytes_per_token / (record.bandwidth_best_gb_s * 1e9);
    }
save(true);
for (const [scheme, s] of Object.entries(record.schemes))
  if (s.page_cache) console.log(`${scheme}: page cache ${s.page_cache.evicted ? "read fresh" : "NOT evicted"}, ` +
                                `${(s.page_cache.pmd_mapped_kib / 1024).toFixed(0)} of ${(s.page_cache.map_kib / 1024).toFixed(0)} MiB on 2 MiB pages`);
console.log(`${record.machine.cpu}, ${threads} threads, kipp tier ${tier}, KV cache ${kvQuant}, read bandwidth at start ${bw.read_gb_per_s} GB/s, ` +
            `best reading ${record.bandwidth_best_gb_s} GB/s, FP32 FMA peak ${fma.fp32_fma_gflops} GFLOPS, medians of ${rounds} round(s)\n` +
            `(roofline: decode = bytes per token / the median bandwidth read before and after that case; ` +
            `best: / the best reading of the run, kipp and llama.cpp; file: the file's bytes / the median reading of the file's own pages; ` +
            `prefill = flops per token / FP32 FMA peak)\n` +
            (kippHead === "q8_0" ? "kipp runs --head q8_0 (a Q8_0 copy of the output head); llama.cpp reads the file's BF16 head: " +
                                   "not like for like, and the rooflines count each engine's own bytes\n" : ""));
const baseCols = kippBase ? ["kipp-base tok/s", "base / llama"] : [];
const tierCols = tiers.flatMap((t) => [`kipp ${t} tok/s`, `${t} / llama`]);
const cols = [...baseCols, ...tierCols, "llama.cpp tok/s", "bandwidth GB/s", "roofline tok/s", `kipp / roofline (${tiers.join(", ")})`,
              "best: kipp, llama", "file GB/s", "file roofline: kipp, llama", "FMA GFLOPS"];
console.log(`| scheme | case | ${cols.join(" | ")} |`);
console.log(`|---|---|${cols.map(() => "---|").join("")}`);
for (const [scheme, s] of Object.entries(record.schemes))
  for (const e of s.cases) {
    const cells = [];
    if (kippBase) cells.push(e.kipp_base_tps.toFixed(2), `${e.base_ratio.toFixed(2)}x`);
    for (const t of tiers) cells.push(e.kipp_by_tier[t].kipp_tps.toFixed(2), `${e.kipp_by_tier[t].ratio.toFixed(2)}x`);
    cells.push(e.llama_tps.toFixed(2), e.bandwidth_gb_s ? e.bandwidth_gb_s.toFixed(1) : "-",
               e.roofline_tps ? e.roofline_tps.toFixed(1) : "-",
               e.roofline_tps ? tiers.map((t) => (100 * e.kipp_by_tier[t].kipp_of_roofline).toFixed(0) + " %").join(", ") : "-",
               e.roofline_best_tps ? `${(100 * e.kipp_of_best_roofline).toFixed(0)} %, ${(100 * e.llama_of_best_roofline).toFixed(0)} %` : "-",
               e.file_bandwidth_gb_s ? e.file_bandwidth_gb_s.toFixed(1) : "-",
               e.roofline_file_tps ? `${(100 * e.kipp_of_file_roofline).toFixed(0)} %, ${(100 * e.llama_of_file_roofline).toFixed(0)} %` : "-",
               e.fma_gflops ? e.fma_gflops.toFixed(0) : "-");
    console.log(`| ${scheme} | ${e.case} | ${cells.join(" | ")} |`);
  }
console.log(`\nrecord: ${out}`);
