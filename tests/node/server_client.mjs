// `kipp serve` through the official `openai` npm client (plus raw fetch and
// raw sockets where the client would hide what we check). Driven by
// tests/scripts/test_server.sh, which starts two servers and computes the
// `kipp generate` references:
//   BASE_URL, INSTRUCT_URL          http://127.0.0.1:PORT of each server
//   REF_DIR                         files written by `kipp generate`:
//     base_text.txt, base_tokens.txt (prompt BASE_PROMPT / BASE_TOKENS, greedy, N_GEN tokens)
//     chat_think.txt, chat_nothink.txt (instruct, the rendered "Hello" conversation)
//   BASE_PROMPT, BASE_TOKENS, N_GEN
//   LOGITS_FILE                     kipp generate --all-logits rows for BASE_TOKENS (greedy)
// Every check must pass; the first failure throws (non-zero exit).
import { readFileSync } from "node:fs";
import net from "node:net";
import OpenAI from "openai";

const env = (k) => {
    if (!process.env[k]) throw new Error(`missing env ${k}`);
    return process.env[k];
};
const BASE_URL = env("BASE_URL"), INSTRUCT_URL = env("INSTRUCT_URL"), REF = env("REF_DIR");
const N_GEN = Number(env("N_GEN"));
const BASE_PROMPT = env("BASE_PROMPT");
const BASE_TOKENS = env("BASE_TOKENS").split(",").map(Number);
// `kipp generate` ends its output with exactly one newline of its own.
const ref = (name) => readFileSync(`${REF}/${name}`, "utf8").replace(/\n$/, "");

let checks = 0;
function check(cond, what, detail) {
    checks++;
    if (!cond) throw new Error(`FAIL: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
}
const client = (url) => new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 30000 });
const base = client(BASE_URL), instruct = client(INSTRUCT_URL);

async function expect400(promise, status, mention, what) {
    try {
        await promise;
    } catch (e) {
        check(e.status === status, `${what}: status ${status}`, { status: e.status, message: e.message });
        check(String(e.message).includes(mention), `${what}: message mentions '${mention}'`, e.message);
        return;
    }
    check(false, `${what}: request was accepted`);
}

async function collect(stream) {
    const texts = [], finish = [];
    let usage = null, chunks = 0, timings = null;
    for await (const ch of stream) {
        chunks++;
        if (ch.usage) usage = ch.usage;
        if (ch.timings) timings = ch.timings;
        for (const c of ch.choices) {
            const piece = c.text ?? c.delta?.content ?? "";
            texts[c.index] = (texts[c.index] ?? "") + piece;
            if (c.finish_reason) finish[c.index] = c.finish_reason;
        }
    }
    return { texts, finish, usage, chunks, timings };
}

async function metrics(url) {
    const text = await (await fetch(`${url}/metrics`)).text();
    const m = {};
    for (const line of text.split("\n")) {
        const mm = /^([a-z_]+(?:\{[^}]*\})?) (\d+)$/.exec(line);
        if (mm) m[mm[1]] = Number(mm[2]);
    }
    return m;
}

// Raw HTTP over a socket: returns the status line's code (or "closed").
function rawRequest(url, bytes) {
    const { hostname, port } = new URL(url);
    return new Promise((resolve, reject) => {
        const s = net.connect(Number(port), hostname);
        let data = "";
        const timer = setTimeout(() => { s.destroy(); reject(new Error("raw request timed out")); }, 10000);
        s.on("connect", () => s.write(bytes));
        s.on("data", (d) => { data += d; });
        s.on("error", () => {});
        s.on("close", () => {
            clearTimeout(timer);
            const m = /^HTTP\/1\.1 (\d{3})/.exec(data);
            resolve(m ? Number(m[1]) : "closed");
        });
    });
}

// ---- models and health --------------------------------------------------------
const models = await base.models.list();
check(models.data.length === 1 && models.data[0].id === "synthetic-tiny", "models.list id", models.data);
check(models.data[0].synthetic === true && /random/.test(models.data[0].note), "models say synthetic", models.data[0]);
check((await fetch(`${BASE_URL}/healthz`)).status === 200, "healthz");

// ---- completions: greedy equals `kipp generate --temperature 0` ----------------
const greedy = { model: "synthetic-tiny", prompt: BASE_PROMPT, max_tokens: N_GEN, temperature: 0 };
const g = await base.completions.create(greedy);
const G = ref("base_text.txt");
check(g.choices.length === 1 && g.choices[0].text === G, "greedy text equals kipp generate", { got: g.choices[0].text, want: G });
check(g.object === "text_completion" && g.id.startsWith("cmpl-"), "completion object", g);
check(g.usage.completion_tokens === N_GEN || g.choices[0].finish_reason === "stop", "usage.completion_tokens", g.usage);
check(g.usage.total_tokens === g.usage.prompt_tokens + g.usage.completion_tokens, "usage total", g.usage);
check(g.system_fingerprint.includes("random") && /random/.test(g.kipp_note), "synthetic note in the response", g);
check(typeof g.timings?.predicted_per_second === "number" && g.timings.prompt_n === g.usage.prompt_tokens, "timings", g.timings);

const gt = await base.completions.create({ ...greedy, prompt: BASE_TOKENS });
check(gt.choices[0].text === ref("base_tokens.txt"), "token-array prompt equals kipp generate --tokens",
      { got: gt.choices[0].text, want: ref("base_tokens.txt") });
check(gt.usage.prompt_tokens === BASE_TOKENS.length, "token prompt usage", gt.usage);

// ---- streaming with include_usage --------------------------------------------
const st = await collect(await base.completions.create({ ...greedy, stream: true, stream_options: { include_usage: true } }));
check(st.texts[0] === G, "streamed text equals non-streamed", { got: st.texts[0], want: G });
check(st.usage && st.usage.completion_tokens === g.usage.completion_tokens, "stream usage chunk", st.usage);
check(st.finish[0] === g.choices[0].finish_reason, "stream finish_reason", st.finish);
check(st.chunks >= 3 && st.timings, "stream chunk count and timings", st);
// the raw stream ends with data: [DONE]
const raw = await (await fetch(`${BASE_URL}/v1/completions`, { method: "POST", body: JSON.stringify({ ...greedy, stream: true }) })).text();
check(raw.endsWith("data: [DONE]\n\n") && raw.startsWith("data: {"), "SSE framing", raw.slice(-40));
check(!raw.includes('"usage"'), "no usage chunk unless include_usage");

// ---- log-probs against kipp generate --all-logits (log-softmax computed here) ----------
{
    const buf = readFileSync(env("LOGITS_FILE"));
    const V = 151936, rows = new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4);
    const lr = await base.completions.create({ ...greedy, prompt: BASE_TOKENS, logprobs: 5 });
    const L = lr.choices[0].logprobs;
    check(L && L.tokens.length === lr.usage.completion_tokens && L.token_logprobs.length === L.tokens.length &&
          L.top_logprobs.length === L.tokens.length && L.text_offset.length === L.tokens.length, "legacy logprobs shape", L);
    check(L.tokens.join("") === lr.choices[0].text, "logprob tokens spell the text", L.tokens);
    let worst = 0;
    for (let g = 0; g < L.tokens.length; g++) {
        const row = rows.subarray((BASE_TOKENS.length - 1 + g) * V, (BASE_TOKENS.length + g) * V);
        let mx = -Infinity;
        for (let i = 0; i < V; i++) if (row[i] > mx) mx = row[i];
        let sum = 0;
        for (let i = 0; i < V; i++) sum += Math.exp(row[i] - mx);
        const lse = mx + Math.log(sum);
        const order = [...row.keys()].sort((a, b) => row[b] - row[a] || a - b).slice(0, 5);
        const want = order.map((i) => row[i] - lse);
        const got = Object.values(L.top_logprobs[g]);
        // greedy: the chosen token is the best one
        worst = Math.max(worst, Math.abs(L.token_logprobs[g] - want[0]));
        check(got.length >= 1 && got.length <= 5, `top_logprobs[${g}] count`, L.top_logprobs[g]);
        for (let k = 0; k < got.length; k++) worst = Math.max(worst, Math.abs(got[k] - want[k]));
        if (g > 0) check(L.text_offset[g] >= L.text_offset[g - 1], "text_offset grows", L.text_offset);
    }
    check(worst < 1e-3, "log-probs equal log-softmax of kipp generate's logits", worst);
    console.log(`log-probs: largest difference from kipp generate's logits ${worst.toExponential(2)}`);
    const ls = await collect(await base.completions.create({ ...greedy, prompt: BASE_TOKENS, logprobs: 5, stream: true }));
    check(ls.texts[0] === lr.choices[0].text, "streamed text with logprobs", ls.texts);
    const sl = [];
    for await (const ch of await base.completions.create({ ...greedy, prompt: BASE_TOKENS, logprobs: 5, stream: true }))
        for (const c of ch.choices) if (c.logprobs) sl.push(...c.logprobs.token_logprobs);
    check(JSON.stringify(sl) === JSON.stringify(L.token_logprobs), "streamed logprobs equal non-streamed", [sl, L.token_logprobs]);

    const cl = await instruct.chat.completions.create({ messages: [{ role: "user", content: "Hello" }], max_tokens: N_GEN,
                                                       temperature: 0, logprobs: true, top_logprobs: 3 });
    const C = cl.choices[0].logprobs?.content;
    check(Array.isArray(C) && C.length >= 1 && C.length <= cl.usage.completion_tokens, "chat logprobs content", cl.choices[0]);
    for (const e of C) {
        check(e.top_logprobs.length === 3 && e.logprob <= 0 && Array.isArray(e.bytes), "chat logprob entry", e);
        check(e.top_logprobs[0].token === e.token && Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-6, "greedy token is the top one", e);
        check(e.top_logprobs[0].logprob >= e.top_logprobs[1].logprob && e.top_logprobs[1].logprob >= e.top_logprobs[2].logprob, "top sorted", e);
    }
    const bytes = Buffer.from(C.flatMap((e) => e.bytes)).toString("utf8");
    check(bytes === cl.choices[0].message.content, "chat logprob bytes spell the content", { bytes, content: cl.choices[0].message.content });
}

// ---- n=2 and seeds -------------------------------------------------------------
const sampled = { model: "synthetic-tiny", prompt: BASE_PROMPT, max_tokens: N_GEN, temperature: 1.0, top_p: 0.95, seed: 7, n: 2 };
const s1 = await base.completions.create(sampled);
const s2 = await base.completions.create(sampled);
const s3 = await base.completions.create({ ...sampled, seed: 8 });
check(s1.choices.length === 2 && s1.choices[0].index === 0 && s1.choices[1].index === 1, "n=2 choices", s1.choices);
check(JSON.stringify(s1.choices) === JSON.stringify(s2.choices), "same seed, same choices", [s1.choices, s2.choices]);
check(s1.choices[0].text !== s1.choices[1].text, "n=2 choices differ", s1.choices);
check(s3.choices[0].text !== s1.choices[0].text, "another seed, another text", [s1.choices[0].text, s3.choices[0].text]);
check(s1.usage.completion_tokens <= 2 * N_GEN && s1.usage.completion_tokens >= 2, "n=2 usage", s1.usage);
const s1s = await collect(await base.completions.create({ ...sampled, stream: true }));
check(s1s.texts[0] === s1.choices[0].text && s1s.texts[1] === s1.choices[1].text, "n=2 streamed equals non-streamed", s1s.texts);

// ---- stop strings ---------------------------------------------------------------
// A stop string from the middle of the greedy text: the output ends right before it.
// Two characters from a third of the way in, whose first occurrence is there.
const chars = [...G];
let stopWord = null;
for (let k = Math.floor(chars.length / 3); k + 2 <= chars.length && !stopWord; k++) {
    const cand = chars.slice(k, k + 2).join("");
    if (G.indexOf(cand) === chars.slice(0, k).join("").length && cand.trim().length) stopWord = cand;
}
check(stopWord !== null, "greedy text has a usable stop string", G);
const cut = G.slice(0, G.indexOf(stopWord));
check(cut.length > 0, "the stop string is not at the start", { G, stopWord });
const sp = await base.completions.create({ ...greedy, stop: ["@@never@@", stopWord] });
check(sp.choices[0].text === cut && sp.choices[0].finish_reason === "stop", "stop string", { got: sp.choices[0], want: cut });
const sps = await collect(await base.completions.create({ ...greedy, stop: stopWord, stream: true }));
check(sps.texts[0] === cut && sps.finish[0] === "stop", "streamed stop string never leaks", sps);

// ---- chat on the instruct entry --------------------------------------------------
const hello = [{ role: "user", content: "Hello" }];
const c1 = await instruct.chat.completions.create({ model: "synthetic-tiny-instruct", messages: hello, max_tokens: N_GEN, temperature: 0 });
check(c1.object === "chat.completion" && c1.choices[0].message.role === "assistant", "chat object", c1);
check(c1.choices[0].message.content === ref("chat_think.txt"), "chat equals kipp generate on the rendered prompt",
      { got: c1.choices[0].message.content, want: ref("chat_think.txt") });
const c2 = await instruct.chat.completions.create({ messages: hello, max_tokens: N_GEN, temperature: 0,
                                                   chat_template_kwargs: { enable_thinking: false } });
check(c2.choices[0].message.content === ref("chat_nothink.txt"), "chat enable_thinking=false",
      { got: c2.choices[0].message.content, want: ref("chat_nothink.txt") });
const c3 = await collect(await instruct.chat.completions.create({ messages: hello, max_tokens: N_GEN, temperature: 0, stream: true,
                                                                    stream_options: { include_usage: true } }));
check(c3.texts[0] === c1.choices[0].message.content && c3.usage.completion_tokens === c1.usage.completion_tokens, "chat stream", c3);

// ---- refusals ---------------------------------------------------------------------
await expect400(base.chat.completions.create({ messages: hello, max_tokens: 4 }), 400, "instruct", "chat on a base model");
await expect400(base.completions.create({ ...greedy, frobnicate: 1 }), 400, "frobnicate", "unknown field");
// tools are supported (tests/node/tools_reasoning.mjs); a malformed one is still a 400
await expect400(instruct.chat.completions.create({ messages: hello, max_tokens: 2, tools: [{ type: "function", function: { name: "bad name" } }] }), 400, "tools", "tools");
await expect400(base.completions.create({ ...greedy, logprobs: 6 }), 400, "logprobs", "legacy logprobs above 5");
await expect400(instruct.chat.completions.create({ messages: hello, top_logprobs: 2 }), 400, "logprobs", "top_logprobs without logprobs");
await expect400(instruct.chat.completions.create({ messages: hello, logprobs: true, top_logprobs: 21 }), 400, "top_logprobs", "top_logprobs above 20");
await expect400(base.completions.create({ ...greedy, n: 9 }), 400, "'n'", "n=9");
await expect400(base.completions.create({ ...greedy, max_tokens: 1 << 20 }), 400, "context", "max_tokens beyond the context");
await expect400(base.completions.create({ ...greedy, model: "gpt-4" }), 404, "gpt-4", "wrong model");
// n * (prompt + max_tokens) beyond the KV pool is admissible now (choices take
// turns through preemption); a choice that cannot fit alone is refused in
// tests/node/server_pool.mjs.
await expect400(base.completions.create({ ...greedy, n: 8 }), 400, "max-sessions", "more sequences than --max-sessions");
await expect400(base.completions.create({ ...greedy, top_p: 0 }), 400, "top_p", "top_p 0");
await expect400(base.completions.create({ ...greedy, stream_options: { include_usage: true } }), 400, "stream_options", "stream_options without stream");
await expect400(instruct.chat.completions.create({ messages: [{ role: "function", content: "x" }], max_tokens: 2 }), 400, "function", "unknown role");
const badJson = await fetch(`${BASE_URL}/v1/completions`, { method: "POST", body: "{\"prompt\": \"x\"," });
check(badJson.status === 400 && /JSON/.test((await badJson.json()).error.message), "malformed JSON is a 400");
check((await fetch(`${BASE_URL}/v1/nothing`)).status === 404, "unknown path 404");
check((await fetch(`${BASE_URL}/v1/completions`)).status === 405, "GET on a POST endpoint 405");
check(await rawRequest(BASE_URL, "POST /v1/completions HTTP/1.1\r\nContent-Length: abc\r\n\r\n") === 400, "bad Content-Length 400");
check(await rawRequest(BASE_URL, `GET /healthz HTTP/1.1\r\nX-Big: ${"a".repeat(20000)}\r\n\r\n`) === 431, "oversized head 431");
check(await rawRequest(BASE_URL, "POST /v1/completions HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n") === 413, "oversized body 413");
check(await rawRequest(BASE_URL, "GARBAGE\r\n\r\n") === 400, "garbage request line 400");
check(await rawRequest(BASE_URL, "POST /v1/completions HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n") === 501, "gzip transfer coding 501");

// ---- concurrency: batched results equal sequential ones ---------------------------
// (the base server runs with --max-sessions 4: six sequences queue FIFO)
const prompts = ["The quick brown fox", "Paged attention is", "1, 2, 3, 4,", "Once upon a time"];
const one = (p) => base.completions.create({ prompt: p, max_tokens: N_GEN, temperature: 0 }).then((r) => r.choices[0].text);
const sequential = [];
for (const p of prompts) sequential.push(await one(p));
const before = await metrics(BASE_URL);
const concurrent = await Promise.all([...prompts.map(one),
    base.completions.create({ prompt: prompts[0], max_tokens: N_GEN, temperature: 0, n: 2 })]);
const after = await metrics(BASE_URL);
for (let i = 0; i < prompts.length; i++)
    check(concurrent[i] === sequential[i], `concurrent result ${i} equals sequential`, { got: concurrent[i], want: sequential[i] });
const nTwo = concurrent[prompts.length];
check(nTwo.choices[0].text === sequential[0] && nTwo.choices[1].text === sequential[0], "greedy n=2 choices equal the single result", nTwo.choices);
const calls = after.kipp_eval_calls_total - before.kipp_eval_calls_total;
const items = after.kipp_eval_items_total - before.kipp_eval_items_total;
check(items > calls, "sequences were batched into shared eval calls", { calls, items });

// ---- a disconnecting client is cancelled; others are not disturbed --------------------
const ac = new AbortController();
const longStream = await base.completions.create({ prompt: "A long story:", max_tokens: 400, temperature: 0, stream: true },
                                                 { signal: ac.signal });
const bystander = one(prompts[1]);
let got = 0;
try {
    for await (const ch of longStream) {
        if (++got === 3) ac.abort();
    }
} catch (e) { /* the abort surfaces here */ }
check(got >= 3, "long stream produced chunks before the abort", got);
check(await bystander === sequential[1], "a bystander finished unchanged");
let m = null;
for (let i = 0; i < 100; i++) {
    m = await metrics(BASE_URL);
    if (m.kipp_jobs_cancelled_total >= 1 && m.kipp_active_sessions === 0) break;
    await new Promise((r) => setTimeout(r, 50));
}
check(m.kipp_jobs_cancelled_total >= 1 && m.kipp_active_sessions === 0 && m.kipp_kv_positions_reserved === 0,
      "the aborted job was cancelled and its sessions freed", m);
check(m.kipp_generated_tokens_total < 400 + before.kipp_generated_tokens_total + 200, "the aborted job stopped generating", m);
check((await one(prompts[2])) === sequential[2], "server healthy after the cancellation");

console.log(`server_client: ${checks} checks passed`);
