// OpenAI conformance details of `kipp serve` (issue #12, "conformance
// defects"), through the official `openai` client where it can say it, raw
// fetch or sockets where the client would hide it. Driven by
// tests/scripts/test_server_conformance.sh:
//   URL   http://127.0.0.1:PORT of a server on synthetic-tiny-instruct, --ctx 512
// Every check must pass; the first failure throws (non-zero exit).
import net from "node:net";
import OpenAI from "openai";

import { checkHarness } from "./check_harness.mjs";

const URL_ = process.env.URL;
if (!URL_) throw new Error("missing env URL");
const MODEL = "synthetic-tiny-instruct", CTX = 512;
const client = new OpenAI({ baseURL: `${URL_}/v1`, apiKey: "unused", maxRetries: 0, timeout: 30000 });

const { check, section, finish } = checkHarness("server_conformance");
async function post(path, body) { // body: a string (raw JSON) or an object
    const r = await fetch(`${URL_}${path}`, { method: "POST", headers: { "content-type": "application/json" },
                                              body: typeof body === "string" ? body : JSON.stringify(body) });
    return { status: r.status, json: await r.json() };
}
async function expectError(promise, status, mention, what) {
    const r = await promise;
    check(r.status === status, `${what}: status ${status}`, r);
    check(JSON.stringify(r.json).includes(mention), `${what}: message mentions '${mention}'`, r.json);
    return r.json;
}
const cp = (s) => [...s].length; // code points, as Python's len() counts

// ---- no seed: a fresh random seed per request; a seed reproduces ---------------
await section("no seed: a fresh random seed per request; a seed reproduces", async () => {
    const req = { model: MODEL, prompt: "Once upon a time", max_tokens: 16, temperature: 1.0 };
    const texts = [];
    for (let i = 0; i < 3; i++) texts.push((await client.completions.create(req)).choices[0].text);
    check(new Set(texts).size > 1, "requests without a seed sample differently", texts);
    const a = await client.completions.create({ ...req, seed: 42 }), b = await client.completions.create({ ...req, seed: 42 });
    check(a.choices[0].text === b.choices[0].text, "the same seed gives the same text", [a.choices[0].text, b.choices[0].text]);
});

// ---- seed range: [0, 2^64-1], stated in the error -------------------------------
await section("seed range: [0, 2^64-1], stated in the error", async () => {
    const body = (seed) => `{"model":"${MODEL}","prompt":"Hi","max_tokens":4,"temperature":1,"seed":${seed}}`;
    const top = await post("/v1/completions", body("18446744073709551615"));
    const top2 = await post("/v1/completions", body("18446744073709551615"));
    check(top.status === 200 && top.json.choices[0].text === top2.json.choices[0].text, "seed 2^64-1 accepted and reproducible", [top, top2]);
    await expectError(post("/v1/completions", body("18446744073709551616")), 400, "18446744073709551615", "seed 2^64");
    await expectError(post("/v1/completions", body("-1")), 400, "18446744073709551615", "seed -1");
    await expectError(post("/v1/completions", body("1.5")), 400, "seed", "seed 1.5");
});

// ---- max_tokens: the error states the real limit ---------------------------------
await section("max_tokens: the error states the real limit", async () => {
    for (const mt of ["99999999999999999999", "9223372036854775807", "100000", "0"]) {
        const r = await expectError(post("/v1/completions", `{"prompt":"Hi","max_tokens":${mt}}`), 400, "max_tokens", `max_tokens ${mt}`);
        check(!r.error.message.includes("9223372036854775807") && r.error.message.includes(String(CTX - 1)),
              `max_tokens ${mt}: the message states 1..${CTX - 1}`, r.error.message);
    }
});

// ---- NUL inside names and keys never bypasses validation -------------------------
await section("NUL inside names and keys never bypasses validation", async () => {
    await expectError(post("/v1/completions", `{"prompt":"Hi","max_tokens\\u0000":5}`), 400, "max_tokens", "key with NUL");
    await expectError(post("/v1/completions", `{"prompt":"Hi","max_tokens":4,"stream_options\\u0000x":{}}`), 400, "stream_options", "key with NUL and suffix");
    await expectError(post("/v1/completions", `{"prompt":"Hi","max_tokens":4,"logit_bias":{"9707\\u0000":5}}`), 400, "NUL", "nested key with NUL");
    await expectError(post("/v1/completions", `{"model":"${MODEL}\\u0000x","prompt":"Hi","max_tokens":4}`), 404, "model", "model with NUL");
    await expectError(post("/v1/chat/completions", `{"messages":[{"role":"user\\u0000x","content":"Hi"}],"max_tokens":4}`), 400, "role", "role with NUL");
    await expectError(post("/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi","role\\u0000":"system"}],"max_tokens":4}`), 400, "NUL", "message key with NUL");
    await expectError(post("/v1/chat/completions", `{"messages":[{"role":"user","name":"a\\u0000b","content":"Hi"}],"max_tokens":4}`), 400, "name", "name with NUL");
});

// ---- developer role, message name, unknown chat_template_kwargs ------------------
await section("developer role, message name, unknown chat_template_kwargs", async () => {
    const chat = (messages, extra = {}) => client.chat.completions.create({ model: MODEL, messages, max_tokens: 8, temperature: 0, ...extra })
        .then((r) => r.choices[0].message.content);
    const sys = await chat([{ role: "system", content: "Be brief." }, { role: "user", content: "Hello" }]);
    const dev = await chat([{ role: "developer", content: "Be brief." }, { role: "user", content: "Hello" }]);
    check(dev === sys, "developer renders as system", { dev, sys });
    const plain = await chat([{ role: "user", content: "Hello" }]);
    const named = await chat([{ role: "user", name: "alice", content: "Hello" }]);
    check(named === plain, "a message name is accepted (not rendered)", { named, plain });
    const kw = { chat_template_kwargs: { enable_thinking: false } };
    const noThink = await chat([{ role: "user", content: "Hello" }], kw);
    const extraKw = await chat([{ role: "user", content: "Hello" }], { chat_template_kwargs: { enable_thinking: false, custom_flag: 1, tools_hint: "x" } });
    check(extraKw === noThink, "unknown chat_template_kwargs keys are accepted and ignored", { extraKw, noThink });
    await expectError(post("/v1/chat/completions", { messages: [{ role: "user", content: "Hi" }], chat_template_kwargs: { enable_thinking: "no" } }),
                      400, "enable_thinking", "enable_thinking must still be a boolean");
});

// ---- GET /v1/models/{id} ------------------------------------------------------
await section("GET /v1/models/{id}", async () => {
    const m = await client.models.retrieve(MODEL);
    check(m.id === MODEL && m.object === "model", "models.retrieve", m);
    let status = 0;
    try { await client.models.retrieve("no-such-model"); } catch (e) { status = e.status; }
    check(status === 404, "models.retrieve of an unknown id is 404", status);
    check((await fetch(`${URL_}/v1/models/${encodeURIComponent(MODEL)}`)).status === 200, "percent-encoded id");
});

// ---- 405 carries Allow -------------------------------------------------------
await section("405 carries Allow", async () => {
    const g = await fetch(`${URL_}/v1/completions`);
    check(g.status === 405 && g.headers.get("allow") === "POST", "GET /v1/completions: 405 with Allow: POST", [g.status, g.headers.get("allow")]);
    const p = await fetch(`${URL_}/v1/models`, { method: "POST", body: "{}" });
    check(p.status === 405 && p.headers.get("allow") === "GET", "POST /v1/models: 405 with Allow: GET", [p.status, p.headers.get("allow")]);
});

// ---- chunked request bodies ---------------------------------------------------
await section("chunked request bodies", async () => {
    function raw(bytes) {
        const { hostname, port } = new URL(URL_);
        return new Promise((resolve, reject) => {
            const s = net.connect(Number(port), hostname);
            let data = "";
            const timer = setTimeout(() => { s.destroy(); reject(new Error("raw request timed out")); }, 10000);
            s.on("connect", () => s.write(bytes));
            s.on("data", (d) => { data += d; if (/\r\n\r\n[\s\S]*\}$/.test(data)) s.end(); });
            s.on("error", () => {});
            s.on("close", () => { clearTimeout(timer); resolve(data); });
        });
    }
    {
        const body = JSON.stringify({ model: MODEL, prompt: "Hello world", max_tokens: 6, temperature: 0 });
        const want = (await client.completions.create(JSON.parse(body))).choices[0].text;
        const parts = [body.slice(0, 10), body.slice(10, 11), body.slice(11)];
        const chunked = parts.map((p) => `${Buffer.byteLength(p).toString(16)};note=x\r\n${p}\r\n`).join("") + "0\r\nX-Trailer: 1\r\n\r\n";
        const resp = await raw(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${chunked}`);
        check(resp.startsWith("HTTP/1.1 200"), "chunked request body accepted", resp.slice(0, 200));
        const json = JSON.parse(resp.slice(resp.indexOf("\r\n\r\n") + 4));
        check(json.choices[0].text === want, "chunked body means the same request", { got: json.choices[0].text, want });
        // fetch with a stream body sends Transfer-Encoding: chunked too
        const stream = new ReadableStream({ start(c) { for (const p of parts) c.enqueue(new TextEncoder().encode(p)); c.close(); } });
        const r = await fetch(`${URL_}/v1/completions`, { method: "POST", body: stream, duplex: "half" });
        check(r.status === 200 && (await r.json()).choices[0].text === want, "fetch with a streamed body", r.status);
    }
});

// ---- frequency/presence penalties count generated tokens only ---------------------
await section("frequency/presence penalties count generated tokens only", async () => {
    // The prompt is 40 copies of token T. On random weights T's raw logit is
    // some g below the best one (measured: its raw log-prob with a +100 bias);
    // a bias of g + 6 makes T the greedy first token by a margin of 6.
    // Counting the prompt, frequency_penalty 2 would take 2 * 40 = 80 and
    // change that token; counting generated tokens only, the first token sees
    // no penalty, and later ones lose 2 per earlier T (so the run of T's ends).
    {
        const T = 9707; // "Hello"
        const base = { model: MODEL, prompt: Array(40).fill(T), max_tokens: 1, temperature: 0, logprobs: 1 };
        const probe = (await client.completions.create({ ...base, logit_bias: { [T]: 100 } })).choices[0];
        check(probe.text === "Hello", "a +100 bias selects T", probe.text);
        const gap = Object.values(probe.logprobs.top_logprobs[0])[0] - probe.logprobs.token_logprobs[0];
        const bias = Math.ceil(gap) + 6;
        check(bias > 6 && bias <= 100, "T's raw gap leaves room for a bias", gap);
        const req = { ...base, logit_bias: { [T]: bias } };
        const plain = (await client.completions.create(req)).choices[0].text;
        check(plain === "Hello", "the bias makes T the greedy token", { plain, gap });
        const freq = (await client.completions.create({ ...req, frequency_penalty: 2 })).choices[0].text;
        check(freq === plain, "frequency_penalty does not count prompt tokens", { freq, plain });
        const pres = (await client.completions.create({ ...req, presence_penalty: 2, frequency_penalty: 2 })).choices[0].text;
        check(pres === plain, "presence + frequency penalties do not count prompt tokens", { pres, plain });
        const run = (await client.completions.create({ ...req, max_tokens: 8, frequency_penalty: 2 })).choices[0].text;
        check(run.startsWith("HelloHello") && run !== "Hello".repeat(8), "generated tokens are penalized", run);
    }
});

// ---- log-probs: round-trippable floats; legacy ones cut at a stop string -----------
await section("log-probs: round-trippable floats; legacy ones cut at a stop string", async () => {
    const lr = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hello" }], max_tokens: 8,
                                                      temperature: 0, logprobs: true, top_logprobs: 5 });
    const vals = lr.choices[0].logprobs.content.flatMap((e) => [e.logprob, ...e.top_logprobs.map((t) => t.logprob)]);
    // Round-trip: the printed decimal, narrowed to float and printed again
    // with 9 digits, is the same number (6 digits name no particular float).
    const roundTrips = (v) => Number(Math.fround(v).toPrecision(9)) === v;
    check(vals.length >= 6 && vals.every(roundTrips), "log-probs are printed as round-trippable floats",
          vals.filter((v) => !roundTrips(v)));

    const req = { model: MODEL, prompt: "Hello world, this is", max_tokens: 40, temperature: 0, logprobs: 1 };
    const full = (await client.completions.create(req)).choices[0];
    const L = full.logprobs;
    // a stop string made of two whole ASCII tokens from the middle of the text
    let k = -1;
    for (let i = 3; i + 2 < L.tokens.length && k < 0; i++) {
        const s = L.tokens[i] + L.tokens[i + 1];
        if (/^[\x20-\x7e]+$/.test(s) && L.tokens[i] && L.tokens[i + 1] && full.text.indexOf(s) === L.tokens.slice(0, i).join("").length) k = i;
    }
    if (k < 0) {
        console.log("server_conformance: no ASCII stop candidate in the greedy text; stop-cut check skipped", L.tokens);
    } else {
        const stop = L.tokens[k] + L.tokens[k + 1];
        const want = full.text.slice(0, full.text.indexOf(stop));
        for (const stream of [false, true]) {
            let text = "", tokens = [], offsets = [];
            if (!stream) {
                const c = (await client.completions.create({ ...req, stop })).choices[0];
                text = c.text;
                tokens = c.logprobs.tokens;
                offsets = c.logprobs.text_offset;
            } else {
                for await (const ch of await client.completions.create({ ...req, stop, stream: true }))
                    for (const c of ch.choices) {
                        text += c.text;
                        if (c.logprobs) { tokens.push(...c.logprobs.tokens); offsets.push(...c.logprobs.text_offset); }
                    }
            }
            const what = stream ? "streamed" : "non-streamed";
            check(text === want, `${what}: text cut before the stop string`, { text, want });
            check(tokens.length === k && offsets.length === k, `${what}: exactly the tokens of the returned text`, { tokens, k });
            check(offsets.every((o) => o < cp(text)), `${what}: every text_offset inside the returned text`, { offsets, len: cp(text) });
            check(tokens.join("") === text, `${what}: the tokens spell the returned text`, tokens);
        }
    }
    // text_offset counts characters: each offset is the length, in code points,
    // of the text before the token (checked where tokens are whole characters)
    const cj = await client.completions.create({ model: MODEL, prompt: "日本語の文章：", max_tokens: 40, temperature: 0, logprobs: 0 });
    const C = cj.choices[0].logprobs;
    let prefix = "", exact = 0, nonAscii = false;
    const wrong = [];
    for (let i = 0; i < C.tokens.length; i++) {
        if (C.tokens[i].includes("\ufffd")) break; // a token that splits a character
        if (C.text_offset[i] !== cp(prefix)) wrong.push({ i, got: C.text_offset[i], want: cp(prefix) });
        exact++;
        prefix += C.tokens[i];
        nonAscii ||= /[^\x00-\x7f]/.test(C.tokens[i]);
    }
    check(exact >= 1, "text_offset checked on at least one token", C.tokens);
    check(wrong.length === 0, "text_offset counts characters", wrong.slice(0, 4));
    if (!nonAscii) console.log("server_conformance: note: the greedy text had no non-ASCII token before a split one");
});

finish();
