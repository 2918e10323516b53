#!/usr/bin/env node
// Constrained-decoding overhead per token (issue #12): `kipp generate` on
// the same model, prompt and seed, once plain and once per schema with
// --json-schema / --json-object. kipp generate times the mask and the
// sampler separately (stderr line "constrained: mask X ms/token, sample Y
// ms/token, mask = Z% of generation time"); the overhead is the mask's
// share of decode time. Writes a JSON record (commit, machine, commands,
// every run) to bench/results/ and prints a Markdown table.
//
//   node bench/bench_constrained.mjs [-m build/models/synthetic-0.6b.gguf] [-n 48]
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync, mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "./args.mjs";

const { opt } = parseArgs("bench_constrained", ["-m", "-n", "--kipp"]);
const model = opt("-m", "build/models/synthetic-0.6b.gguf");
const n = opt("-n", "48");
const kipp = opt("--kipp", "build/kipp");
const dir = mkdtempSync(path.join(os.tmpdir(), "kipp-bench-schema-"));

const schemas = {
    "json_object": null,
    "object with strings": { type: "object", properties: { name: { type: "string", maxLength: 40 },
        bio: { type: "string" }, tags: { type: "array", items: { type: "string", maxLength: 10 } } },
        required: ["name", "bio", "tags"], additionalProperties: false },
    "numbers and enums": { type: "array", items: { type: "object", properties: {
        x: { type: "number" }, k: { enum: ["alpha", "beta", "gamma"] }, ok: { type: "boolean" } },
        required: ["x", "k", "ok"], additionalProperties: false }, maxItems: 20 },
};

function gen(extra) {
    const cmd = [kipp, "generate", "-m", model, "-p", "Reply in JSON:", "-n", n, "--temperature", "1",
                 "--seed", "7", ...extra];
    const t0 = Date.now();
    const r = spawnSync(cmd[0], cmd.slice(1), { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`${cmd.join(" ")} failed: ${r.stderr}`);
    const g = /generation (\d+) tokens in ([\d.]+) s/.exec(r.stderr);
    const c = /mask ([\d.]+) ms\/token, sample ([\d.]+) ms\/token, mask = ([\d.]+)% of generation time; document (\w+)/.exec(r.stderr);
    return { command: cmd.join(" "), wall_s: (Date.now() - t0) / 1e3, tokens: Number(g[1]),
             generation_s: Number(g[2]), decode_ms_per_token: 1e3 * Number(g[2]) / Number(g[1]),
             mask_ms_per_token: c ? Number(c[1]) : 0, sample_ms_per_token: c ? Number(c[2]) : null,
             mask_fraction: c ? Number(c[3]) / 100 : 0, document: c ? c[4] : null,
             output: r.stdout.slice(0, 400), loadavg: os.loadavg() };
}

const runs = [{ case: "plain", ...gen([]) }];
for (const [name, schema] of Object.entries(schemas)) {
    let extra = ["--json-object"];
    if (schema) {
        const f = path.join(dir, name.replace(/\W+/g, "_") + ".json");
        writeFileSync(f, JSON.stringify(schema));
        extra = ["--json-schema", f];
    }
    runs.push({ case: name, schema, ...gen(extra) });
}
const sh = (c) => { try { return execFileSync("sh", ["-c", c], { encoding: "utf8" }).trim(); } catch { return null; } };
const record = {
    date: new Date().toISOString(), commit: sh("git rev-parse HEAD"), dirty: sh("git status --porcelain") !== "",
    machine: { cpu: os.cpus()[0]?.model, cores_online: os.cpus().length, mem_gib: +(os.totalmem() / 2 ** 30).toFixed(1) },
    compiler: sh("cc --version | head -1"), model, tokens_requested: Number(n),
    note: "mask_fraction = time in kipp_grammar_mask / generation time (eval + mask + sample) per token; " +
          "the plain run is the same command without a grammar",
    runs,
};
mkdirSync("bench/results", { recursive: true });
const out = `bench/results/constrained-${path.basename(model, ".gguf")}-${record.date.replace(/[:.]/g, "-")}.json`;
writeFileSync(out, JSON.stringify(record, null, 2) + "\n");
console.log("| case | tokens | decode ms/token | mask ms/token | sample ms/token | mask share |");
console.log("|---|---|---|---|---|---|");
for (const r of runs)
    console.log(`| ${r.case} | ${r.tokens} | ${r.decode_ms_per_token.toFixed(1)} | ${r.mask_ms_per_token.toFixed(3)} | ${r.sample_ms_per_token ?? "-"} | ${(100 * r.mask_fraction).toFixed(2)} % |`);
console.log(`wrote ${out}`);
