#!/usr/bin/env node
// Per-round decode against the host's phase, from a bench_native.mjs record
// whose bandwidth samples carry the FMA peak (fma_gflops; records from
// commit "bench_native: an FMA-peak reading ..." on):
//
//   node bench/phase_table.mjs bench/results/native-....json
//
// For each scheme and decode case, one row per round: kipp's and llama.cpp's
// tok/s, that round's readings (the fresh buffer, the file's own pages, the
// FMA peak; each the mean of the readings taken right before and right
// after the case), and each engine's share of that round's file roofline
// (the file's bytes at the file's reading, the KV cache's at the fresh
// buffer's: bench_native's roofline_file_tps, per round instead of over the
// median). Then the Pearson correlation, over the rounds, of each engine's
// share with the FMA peak and with the file's reading: which of the two
// phases a decode follows. Reads the record only; runs nothing.
import { readFileSync } from "node:fs";

const file = process.argv[2];
if (!file || process.argv.length > 3) {
  console.error("usage: node bench/phase_table.mjs RECORD.json");
  process.exit(2);
}
const rec = JSON.parse(readFileSync(file, "utf8"));
const mean = (v) => v.reduce((a, b) => a + b, 0) / v.length;
const pearson = (x, y) => {
  const mx = mean(x), my = mean(y);
  let sxy = 0, sxx = 0, syy = 0;
  for (let i = 0; i < x.length; i++) {
    sxy += (x[i] - mx) * (y[i] - my); sxx += (x[i] - mx) ** 2; syy += (y[i] - my) ** 2;
  }
  return sxx && syy ? sxy / Math.sqrt(sxx * syy) : NaN;
};

let rows = 0;
for (const [scheme, s] of Object.entries(rec.schemes)) {
  for (const e of s.cases) {
    if (!e.bytes_per_token) continue; // prefill
    // Per engine, the bytes a token reads from the file's mapping (at the
    // file's reading) and the rest (the KV cache; a --kipp-head q8_0 copy;
    // llama.cpp's Q4_0 matrices, repacked at load on AVX2) at the fresh
    // buffer's, as bench_native's roofline_file_tps. Records before the
    // split was stored hold it only where every weight is in the file.
    let fileBytes = { kipp: s.kipp_file_weight_bytes_per_token, llama: s.llama_file_weight_bytes_per_token };
    if (fileBytes.kipp === undefined || fileBytes.llama === undefined) {
      if ((rec.kipp_head || "bf16") !== "bf16" || scheme === "scale4_gs32") {
        console.log(`${scheme} ${e.case}: this record does not say which bytes lie in the file (--kipp-head q8_0, or Q4_0 ` +
                    "matrices llama.cpp may repack); left out");
        continue;
      }
      fileBytes = { kipp: s.kipp_weight_bytes_per_token, llama: s.weight_bytes_per_token };
    }
    const total = { kipp: e.bytes_per_token, llama: e.llama_bytes_per_token };
    // one kipp column per tier the record raced (--kipp-isa), then llama.cpp
    const tiers = rec.kipp_tiers || [rec.kipp_tier];
    const engines = [...tiers.map((t) => ({ name: `kipp ${t}`, who: "kipp", tier: t })), { name: "llama.cpp", who: "llama" }];
    const out = [];
    for (let r = 0; r < rec.rounds; r++) {
      const smp = rec.bandwidth_samples.filter((x) => x.scheme === scheme && x.case === e.case && x.round === r);
      const runs = engines.map((g) => rec.runs.find((x) => x.scheme === scheme && x.case === e.case && x.round === r &&
                                                        x.engine === g.who && (!g.tier || x.kipp_tier === g.tier)));
      if (runs.some((x) => !x) || smp.length === 0 || smp.some((x) => !x.fma_gflops || !x.file_read_gb_s)) continue;
      const bw = mean(smp.map((x) => x.read_gb_s)), fbw = mean(smp.map((x) => x.file_read_gb_s));
      const fma = mean(smp.map((x) => x.fma_gflops));
      const roof = (who) => 1 / (fileBytes[who] / (fbw * 1e9) + (total[who] - fileBytes[who]) / (bw * 1e9));
      out.push({ r, bw, fbw, fma, tps: runs.map((x) => x.tps), share: runs.map((x, i) => x.tps / roof(engines[i].who)) });
    }
    if (out.length < 3) {
      console.log(`${scheme} ${e.case}: ${out.length} complete round(s) with FMA readings, too few`);
      continue;
    }
    rows += out.length;
    console.log(`\n${scheme}, ${e.case} (${rec.machine.cpu})`);
    const cols = ["round", ...engines.map((g) => `${g.name} tok/s`), "fresh GB/s", "file GB/s", "FMA GFLOPS",
                  ...engines.map((g) => `${g.name} / file roofline`)];
    console.log(`| ${cols.join(" | ")} |`);
    console.log(`|${cols.map(() => "---|").join("")}`);
    for (const o of out)
      console.log(`| ${[o.r + 1, ...o.tps.map((v) => v.toFixed(2)), o.bw.toFixed(1), o.fbw.toFixed(1), o.fma.toFixed(0),
                        ...o.share.map((v) => `${(100 * v).toFixed(0)} %`)].join(" | ")} |`);
    const col = (f) => out.map(f);
    const spread = (v) => `${Math.min(...v).toFixed(2)}-${Math.max(...v).toFixed(2)}`;
    console.log(`over ${out.length} rounds: ` + engines.map((g, i) =>
      `${g.name} ${spread(col((o) => o.tps[i]))} tok/s, its share's correlation with the FMA peak ` +
      `${pearson(col((o) => o.share[i]), col((o) => o.fma)).toFixed(2)}, with the file's reading ` +
      `${pearson(col((o) => o.share[i]), col((o) => o.fbw)).toFixed(2)}`).join("; "));
  }
}
if (!rows) {
  console.error(`${file}: no decode case with FMA readings in three or more rounds`);
  process.exit(1);
}
