#!/usr/bin/env node
// A small CLI over node-llama-cpp (llama.cpp, CPU only): the independent peer
// several tests compare Kipp against. Prints JSON on stdout.
//
//   node tools/llama_peer.mjs info FILE
//       {"vocab_size", "n_params", "description", "train_context", "embedding"}
//   node tools/llama_peer.mjs eval FILE --tokens 1,2,3 [--top 5]
//       next-token distribution after the prompt: {"top": [{"id", "p"}...],
//       "entropy": nats, "vocab_size": entries in llama.cpp's distribution}
//   node tools/llama_peer.mjs evalmany FILE --prompts "1,2,3;4,5" [--top 5]
//       JSON array: one eval result per ';'-separated prompt, each from an
//       empty sequence (one model load for all of them)
//   node tools/llama_peer.mjs greedy FILE --tokens 1,2,3 -n N
//       JSON array of N greedily generated ids, exactly as llama.cpp picked
//       them (no stopping at end-of-generation tokens)
//   node tools/llama_peer.mjs tokenize FILE --text STR
//       JSON array of ids (special tokens recognised, no BOS added)
//
// Options: --ctx N (context size, default 512), --threads N (default 2).
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

function usage(msg) {
  if (msg) process.stderr.write(`llama_peer: ${msg}\n`);
  process.stderr.write(
    "usage: node tools/llama_peer.mjs info|eval|evalmany|greedy|tokenize FILE " +
      "[--tokens 1,2,3] [--prompts '1,2;3'] [--top K] [-n N] [--text STR] [--ctx N] [--threads N]\n");
  process.exit(2);
}

function parseArgs(argv) {
  const [cmd, file, ...rest] = argv;
  if (!cmd || !file) usage();
  const o = { cmd, file, top: 5, n: 16, ctx: 512, threads: 2 };
  for (let i = 0; i < rest.length; i++) {
    const a = rest[i], v = rest[i + 1];
    if (v === undefined) usage(`${a} needs a value`);
    if (a === "--tokens") o.tokens = v.split(",").filter((s) => s !== "").map((s) => {
      const t = Number(s);
      if (!Number.isInteger(t) || t < 0) usage(`bad token id '${s}'`);
      return t;
    });
    else if (a === "--prompts") o.prompts = v.split(";").filter((p) => p !== "").map((p) =>
      p.split(",").filter((s) => s !== "").map((s) => {
        const t = Number(s);
        if (!Number.isInteger(t) || t < 0) usage(`bad token id '${s}'`);
        return t;
      }));
    else if (a === "--top") o.top = Number(v);
    else if (a === "-n") o.n = Number(v);
    else if (a === "--text") o.text = v;
    else if (a === "--ctx") o.ctx = Number(v);
    else if (a === "--threads") o.threads = Number(v);
    else usage(`unknown option ${a}`);
    i++;
  }
  if ((cmd === "eval" || cmd === "greedy") && !(o.tokens && o.tokens.length)) usage("--tokens needed");
  if (cmd === "tokenize" && o.text === undefined) usage("--text needed");
  if (cmd === "evalmany" && !(o.prompts && o.prompts.length && o.prompts.every((p) => p.length)))
    usage("--prompts needed");
  return o;
}

// Full next-token distribution after `tokens` as [id, p] pairs, sorted by p.
async function nextDistribution(seq, tokens) {
  const input = tokens.map((t, i) =>
    i === tokens.length - 1 ? [t, { generateNext: { probabilities: true, options: { temperature: 0 } } }] : t);
  const out = await seq.controlledEvaluate(input);
  const last = out[tokens.length - 1];
  if (!last || !last.next.probabilities) throw new Error("llama.cpp returned no probabilities");
  return [...last.next.probabilities.entries()];
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: o.file, gpuLayers: 0 });
  let result;
  if (o.cmd === "tokenize") {
    result = Array.from(model.tokenize(o.text, true));
  } else if (o.cmd === "info") {
    const ctx = await model.createContext({ contextSize: 64, threads: o.threads });
    const probs = await nextDistribution(ctx.getSequence(), [model.tokenize("a", true)[0]]);
    result = {
      vocab_size: probs.length,
      n_params: model._model.getTotalParameters(),
      description: model.typeDescription,
      train_context: model.trainContextSize,
      embedding: model.embeddingVectorSize,
    };
  } else {
    const ctx = await model.createContext({ contextSize: o.ctx, threads: o.threads });
    const seq = ctx.getSequence();
    const summarize = (probs) => {
      let entropy = 0;
      for (const [, p] of probs) if (p > 0) entropy -= p * Math.log(p);
      return {
        top: probs.slice(0, o.top).map(([id, p]) => ({ id, p })),
        entropy,
        vocab_size: probs.length,
      };
    };
    if (o.cmd === "eval") {
      result = summarize(await nextDistribution(seq, o.tokens));
    } else if (o.cmd === "evalmany") {
      result = [];
      for (const p of o.prompts) {
        await seq.clearHistory();
        result.push(summarize(await nextDistribution(seq, p)));
      }
    } else if (o.cmd === "greedy") {
      const ids = [];
      let input = o.tokens;
      for (let i = 0; i < o.n; i++) {
        const items = input.map((t, j) =>
          j === input.length - 1 ? [t, { generateNext: { token: true, options: { temperature: 0 } } }] : t);
        const out = await seq.controlledEvaluate(items);
        const tok = out[input.length - 1]?.next?.token;
        if (tok == null) throw new Error("llama.cpp produced no token");
        ids.push(tok);
        input = [tok];
      }
      result = ids;
    } else {
      usage(`unknown command ${o.cmd}`);
    }
  }
  process.stdout.write(JSON.stringify(result) + "\n");
  await model.dispose();
  await llama.dispose();
}

main().catch((e) => {
  process.stderr.write(`llama_peer: ${e && e.stack ? e.stack : e}\n`);
  process.exit(1);
});
