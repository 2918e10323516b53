// Reused fraction of a 5-turn thinking conversation through `kipp serve`
// (issue 10). Each turn sends the whole history back; the Qwen3 template
// drops earlier turns' <think> part, so turn N+1's prompt diverges from
// what turn N cached inside the previous reply: reuse must still cover the
// common prefix up to there (block-granular). Reports, per turn, the prompt
// tokens and the positions adopted from the pool (kipp_prefix_tokens_reused_total).
// usage: node bench/multiturn_reuse.mjs URL [OUT.json]
import { writeFileSync } from "node:fs";
import OpenAI from "openai";

const url = process.argv[2], out = process.argv[3];
const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 600000 });
async function reusedTotal() {
    const t = await (await fetch(`${url}/metrics`)).text();
    return Number(/^kipp_prefix_tokens_reused_total (\d+)$/m.exec(t)[1]);
}
const system = "You are a careful assistant. " + Array.from({ length: 40 }, (_, i) => `Rule ${i}: answer precisely and cite step ${i}.`).join(" ");
const messages = [{ role: "system", content: system }];
const turns = [];
for (let t = 0; t < 5; t++) {
    messages.push({ role: "user", content: `Turn ${t}: think it through, then explain part ${t} of the plan in detail.` });
    const before = await reusedTotal();
    const r = await client.chat.completions.create({ messages, max_tokens: 48, temperature: 0,
        chat_template_kwargs: { enable_thinking: true } });
    const after = await reusedTotal();
    const msg = r.choices[0].message;
    // What a thinking model's client sends back: the answer, with its
    // reasoning as reasoning_content (the template drops it from history).
    messages.push({ role: "assistant", content: msg.content ?? "", ...(msg.reasoning_content ? { reasoning_content: msg.reasoning_content } : {}) });
    turns.push({ turn: t, prompt_tokens: r.usage.prompt_tokens, reused_positions: after - before });
}
const prompt = turns.reduce((a, x) => a + x.prompt_tokens, 0), reused = turns.reduce((a, x) => a + x.reused_positions, 0);
const later = turns.slice(1), laterPrompt = later.reduce((a, x) => a + x.prompt_tokens, 0),
      laterReused = later.reduce((a, x) => a + x.reused_positions, 0);
const record = { bench: "multiturn_reuse", turns, reused_fraction_all: reused / prompt,
                 reused_fraction_turns_2_to_5: laterReused / laterPrompt, date: new Date().toISOString() };
console.log(JSON.stringify(record, null, 1));
if (out) writeFileSync(out, JSON.stringify(record, null, 1) + "\n");
