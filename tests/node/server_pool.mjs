// The shared KV pool through `kipp serve` and the official `openai` client.
// Driven by tests/scripts/test_server_pool.sh:
//   DEFAULT_URL  instruct fixture on default settings
//   SMALL_URL    base fixture with a pool of a few blocks and 16 sessions
// Every check must pass; the first failure throws (non-zero exit).
import OpenAI from "openai";

const DEFAULT_URL = process.env.DEFAULT_URL, SMALL_URL = process.env.SMALL_URL;
let checks = 0;
function check(cond, what, detail) {
    checks++;
    if (!cond) throw new Error(`FAIL: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
}
const client = (url) => new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 300000 });
const dflt = client(DEFAULT_URL), small = client(SMALL_URL);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function metrics(url) {
    const text = await (await fetch(`${url}/metrics`)).text();
    const m = {};
    for (const line of text.split("\n")) {
        const mm = /^([a-z_]+) ([0-9.e+-]+)$/.exec(line);
        if (mm) m[mm[1]] = Number(mm[2]);
    }
    return m;
}
async function waitFor(url, pred, what) {
    let m = null;
    for (let i = 0; i < 400; i++) {
        m = await metrics(url);
        if (pred(m)) return m;
        await sleep(50);
    }
    check(false, what, m);
}

// ---- /health ---------------------------------------------------------------
check((await fetch(`${DEFAULT_URL}/health`)).status === 200, "/health is 200 once loaded");

// ---- cross-request reuse: a repeated long prompt adopts its blocks ----------
const longPrompt = "The history of paged attention and prefix caching, told in many small steps: " +
    Array.from({ length: 60 }, (_, i) => `step ${i} follows`).join(", ");
const req = { prompt: longPrompt, max_tokens: 6, temperature: 0 };
const m0 = await metrics(DEFAULT_URL);
const first = await dflt.completions.create(req);
const m1 = await metrics(DEFAULT_URL);
const second = await dflt.completions.create(req);
const m2 = await metrics(DEFAULT_URL);
const promptTokens = first.usage.prompt_tokens;
check(promptTokens > 200, "the long prompt is long", promptTokens);
check(second.choices[0].text === first.choices[0].text, "warm answer equals cold answer");
const reused = m2.kipp_prefix_tokens_reused_total - m1.kipp_prefix_tokens_reused_total;
// Full blocks by reference, the rest of the prompt from the published
// partial block by copy: all but the last token, whose logits are needed.
check(reused === promptTokens - 1, "the second request adopted all but the last prompt token", { reused, promptTokens });
check(m2.kipp_kv_pool_reused_blocks_total > m1.kipp_kv_pool_reused_blocks_total, "reused blocks counted");
check(m1.kipp_prefix_tokens_reused_total - m0.kipp_prefix_tokens_reused_total < 32, "the first request was cold");
// max_tokens 1: the session ends with the prompt itself (the one sampled
// token is never evaluated), so only its partial last block holds the tail.
const shortReq = { prompt: "A different opening, then " + Array.from({ length: 30 }, (_, i) => `clause ${i}`).join("; "),
                   max_tokens: 1, temperature: 0 };
const short1 = await dflt.completions.create(shortReq);
const m3 = await metrics(DEFAULT_URL);
const short2 = await dflt.completions.create(shortReq);
const m4 = await metrics(DEFAULT_URL);
const shortTokens = short1.usage.prompt_tokens;
check(shortTokens % 32 > 1, "the short prompt ends inside a block", shortTokens);
check(short2.choices[0].text === short1.choices[0].text, "warm 1-token answer equals cold");
check(m4.kipp_prefix_tokens_reused_total - m3.kipp_prefix_tokens_reused_total === shortTokens - 1,
      "a prompt ending in a partial block is adopted up to its last token",
      { reused: m4.kipp_prefix_tokens_reused_total - m3.kipp_prefix_tokens_reused_total, shortTokens });

// ---- n=5 chat without max_tokens on defaults --------------------------------
// Admitted (not a 400) and all five choices generate; random weights rarely
// stop, so the stream is cut once every choice has produced text (running
// five choices to the 4,096-position context takes minutes here).
{
    const ac = new AbortController();
    const stream = await dflt.chat.completions.create({ messages: [{ role: "user", content: "hi" }], n: 5, stream: true },
                                                      { signal: ac.signal });
    const seen = [0, 0, 0, 0, 0];
    try {
        for await (const ch of stream) {
            for (const c of ch.choices) if (c.delta?.content) seen[c.index]++;
            if (seen.every((k) => k >= 3)) break;
        }
    } catch (e) { /* aborted */ }
    check(seen.every((k) => k >= 3), "n=5 chat without max_tokens: every choice generates on defaults", seen);
    const m = await metrics(DEFAULT_URL);
    ac.abort();
    check(m.kipp_kv_pool_reused_blocks_total >= 0, "metrics readable during n=5");
}

// ---- 6 concurrent default chats are all active; disconnect frees the pool ---
const idle = await waitFor(DEFAULT_URL, (m) => m.kipp_requests_running === 0, "idle before the six chats");
const acs = [], streams = [];
for (let i = 0; i < 6; i++) {
    const ac = new AbortController();
    acs.push(ac);
    streams.push(dflt.chat.completions.create({ messages: [{ role: "user", content: `chat ${i}: tell me a long story` }], stream: true },
                                              { signal: ac.signal }));
}
const live = await Promise.all(streams);
const readers = live.map(async (s) => { try { for await (const _ of s) { /* drain */ } } catch (e) { /* aborted */ } });
const busy = await waitFor(DEFAULT_URL, (m) => m.kipp_requests_running === 6 && m.kipp_batch_choices_running === 6,
                           "six concurrent default chats all active");
check(busy.kipp_requests_waiting === 0, "none of the six waits", busy);
check(busy.kipp_kv_pool_blocks_free < idle.kipp_kv_pool_blocks_free, "the chats hold pool blocks", busy);
for (const ac of acs) ac.abort();
await Promise.all(readers);
const after = await waitFor(DEFAULT_URL, (m) => m.kipp_requests_running === 0 && m.kipp_kv_pool_blocks_free === m.kipp_kv_pool_blocks_total,
                            "after the disconnects every pool block is free again");
check(after.kipp_kv_pool_usage_ratio === 0, "usage ratio back to 0", after.kipp_kv_pool_usage_ratio);

// ---- 16 concurrent requests on a pool of a few blocks: answers equal isolated ones
const prompts = Array.from({ length: 16 }, (_, i) => `Request number ${i} says`);
const oneSmall = (p) => small.completions.create({ prompt: p, max_tokens: 40, temperature: 0 }).then((r) => r.choices[0].text);
const isolated = [];
for (const p of prompts) isolated.push(await oneSmall(p));
const s0 = await metrics(SMALL_URL);
const together = await Promise.all(prompts.map(oneSmall));
const s1 = await metrics(SMALL_URL);
for (let i = 0; i < prompts.length; i++)
    check(together[i] === isolated[i], `concurrent answer ${i} equals its isolated answer`, { got: together[i], want: isolated[i] });
check(s1.kipp_preemptions_total > s0.kipp_preemptions_total, "the small pool forced preemptions", s1.kipp_preemptions_total);
check(s1.kipp_requests_failed_total === s0.kipp_requests_failed_total, "no request failed", s1);
// A request that can never fit is a 400 naming the limit.
try {
    await small.completions.create({ prompt: "x", max_tokens: 4000 });
    check(false, "an impossible request was accepted");
} catch (e) {
    check(e.status === 400 && /KV pool/.test(e.message), "a request that can never fit is a 400 naming the pool", e.message);
}

console.log(`server_pool: ${checks} checks passed`);
