// No client can take `kipp serve` away from the others (issue #12,
// "availability defects"). Driven by tests/scripts/test_server_availability.sh:
//   URL        a server with --header-timeout 1 --body-timeout 1 --send-timeout 1
//              --max-body 2097152 --ctx 512 (tiny instruct fixture)
//   DRAIN_URL, DRAIN_PID   a server with --shutdown-timeout 10 (SIGTERMed here)
//   CUT_URL, CUT_PID       a server with --shutdown-timeout 0.3 (SIGTERMed here)
// Counts and times are bounded: 64 + 64 sockets, 2,000 and 30,000
// pipelined requests, a 1 MiB prompt; every wait has a timeout.
import net from "node:net";
import { Worker } from "node:worker_threads";
import OpenAI from "openai";

import { checkHarness } from "./check_harness.mjs";

const env = (k) => {
    if (!process.env[k]) throw new Error(`missing env ${k}`);
    return process.env[k];
};
const URL_ = env("URL");
const MODEL = "synthetic-tiny-instruct";
const client = (url) => new OpenAI({ baseURL: `${url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 30000 });
const api = client(URL_);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const { check, section, finish } = checkHarness("server_availability");
async function metrics(url = URL_) {
    const text = await (await fetch(`${url}/metrics`)).text();
    const m = {};
    for (const line of text.split("\n")) {
        const mm = /^([a-z_]+(?:\{[^}]*\})?) (\d+)$/.exec(line);
        if (mm) m[mm[1]] = Number(mm[2]);
    }
    return m;
}
function connect(url = URL_) {
    const { hostname, port } = new URL(url);
    const s = net.connect(Number(port), hostname);
    s.data = ""; // the first 64 KiB received
    s.gone = false;
    s.ok = 0; // "HTTP/1.1 200" status lines received, counted as they arrive
    s.firstOkAt = 0; // when the first of them arrived
    let tail = "";
    s.on("data", (d) => {
        const str = d.toString("latin1");
        if (s.data.length < 65536) s.data += str;
        const joined = tail + str;
        s.ok += (joined.match(/HTTP\/1\.1 200/g) || []).length;
        if (s.ok && !s.firstOkAt) s.firstOkAt = Date.now();
        tail = joined.slice(-11);
    });
    s.on("error", () => {});
    s.on("close", () => { s.gone = true; });
    return new Promise((resolve, reject) => { s.on("connect", () => resolve(s)); s.on("error", reject); });
}
async function until(cond, ms, what) {
    const end = Date.now() + ms;
    while (!(await cond())) {
        if (Date.now() > end) throw new Error(`FAIL: ${what} (not within ${ms} ms)`);
        await sleep(20);
    }
}
const timed = async (p) => { const t = Date.now(); const v = await p; return [v, Date.now() - t]; };
const completion = { model: MODEL, prompt: "Hello", max_tokens: 4, temperature: 0 };

// A stream read in a worker thread (so this thread's own work - writing
// 30,000 requests, building 1 MiB - cannot delay its clock): the arrival
// time of every SSE chunk is posted back as it comes; stop() ends it.
function watchStream(maxTokens) {
    const w = new Worker(`
        const { parentPort, workerData } = require("node:worker_threads");
        (async () => {
            const r = await fetch(workerData.url + "/v1/completions", { method: "POST", body: workerData.body });
            const reader = r.body.getReader();
            for (;;) {
                const { value, done } = await reader.read();
                if (done) break;
                const n = Buffer.from(value).toString().split("data: ").length - 1;
                for (let i = 0; i < n; i++) parentPort.postMessage(Date.now());
            }
        })();`, { eval: true, workerData: { url: URL_, body: JSON.stringify(
            { model: MODEL, prompt: "A long story:", max_tokens: maxTokens, temperature: 0, stream: true }) } });
    const out = { times: [] };
    out.started = new Promise((resolve) => w.on("message", (t) => { out.times.push(t); if (out.times.length === 2) resolve(); }));
    out.stop = () => w.terminate();
    return out;
}

// ---- 64 idle keep-alive connections: the longest idle is evicted ---------------
await section("64 idle keep-alive connections: the longest idle is evicted", async () => {
    const idle = [];
    for (let i = 0; i < 64; i++) {
        const s = await connect();
        s.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
        idle.push(s);
    }
    await until(() => idle.every((s) => s.data.includes("\r\n\r\n{")), 5000, "64 keep-alive connections answered");
    const [h, ms] = await timed(fetch(`${URL_}/healthz`));
    check(h.status === 200, "healthz with 64 idle connections open", h.status);
    check(ms < 1000, "healthz answered at once", ms);
    const c = await api.completions.create(completion);
    check(c.choices.length === 1, "a completion with 64 idle connections open");
    const m = await metrics();
    check(m.kipp_http_evictions_total >= 1, "idle connections were evicted for newcomers", m.kipp_http_evictions_total);
    check(idle.filter((s) => s.gone).length >= 1, "an evicted connection was closed");
    for (const s of idle) s.destroy();
});

// ---- 64 slowloris connections: control slots answer, 503s counted, heads time out --
await section("64 slowloris connections: control slots answer, 503s counted, heads time out", async () => {
    const before = await metrics();
    const slow = [];
    for (let i = 0; i < 64; i++) {
        const s = await connect();
        s.write("POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: ");
        s.drip = setInterval(() => { if (!s.gone) s.write("a"); }, 200);
        slow.push(s);
    }
    await sleep(100);
    const [h, ms] = await timed(fetch(`${URL_}/healthz`));
    check(h.status === 200 && ms < 1000, "healthz answers while 64 slowloris connections hold every request slot", [h.status, ms]);
    const mm = await fetch(`${URL_}/metrics`);
    check(mm.status === 200, "metrics answers too", mm.status);
    const busy = await fetch(`${URL_}/v1/completions`, { method: "POST", body: JSON.stringify(completion) });
    check(busy.status === 503 && busy.headers.get("retry-after"), "a completion gets 503 + Retry-After while full", busy.status);
    // every head is late after --header-timeout 1: 408, closed
    await until(() => slow.every((s) => s.gone), 4000, "slowloris connections closed by the head deadline");
    check(slow.every((s) => s.data.startsWith("HTTP/1.1 408")), "slowloris connections got 408", slow.map((s) => s.data.slice(0, 12)));
    for (const s of slow) clearInterval(s.drip);
    const c = await api.completions.create(completion);
    check(c.choices.length === 1, "completions work again once the slowloris connections are gone");
    const m = await metrics();
    check(m.kipp_http_rejected_total > before.kipp_http_rejected_total, "503s for lack of a slot are counted",
          [before.kipp_http_rejected_total, m.kipp_http_rejected_total]);
    check(m['kipp_http_timeouts_total{phase="head"}'] >= 64, "head deadlines counted", m);
});

// ---- a body that never completes: 408 after --body-timeout -----------------------
await section("a body that never completes: 408 after --body-timeout", async () => {
    const s = await connect();
    s.write("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"prompt\":");
    await until(() => s.gone, 4000, "a stalled body is closed by the body deadline");
    check(s.data.startsWith("HTTP/1.1 408"), "a stalled body gets 408", s.data.slice(0, 40));
});

// ---- a client that stops reading loses its slot: the send deadline ------------------
await section("a client that stops reading loses its slot: the send deadline", async () => {
    const s = await connect();
    s.pause(); // stop reading: the kernel buffers fill, then ours
    const N = 2000;
    s.write("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(N));
    await sleep(3500); // --send-timeout 1
    const m = await metrics();
    check(m['kipp_http_timeouts_total{phase="send"}'] >= 1, "the send deadline fired", m['kipp_http_timeouts_total{phase="send"}']);
    s.resume();
    await until(() => s.gone, 5000, "the non-reading client's connection was closed");
    const answered = s.ok;
    check(answered < N, "it did not get every response", answered);
});

// ---- bounded work per turn: 30,000 pipelined requests, a 1 MiB prompt -------------------
await section("bounded work per turn: 30,000 pipelined requests, a 1 MiB prompt", async () => {
    // The prompt is built before the stream is watched: the gaps below are
    // timestamped by this process, so its own synchronous work inside the
    // window (building 1 MiB of words) would read as a server stall.
    // 1 MiB of distinct pseudo-random words: nothing for the tokenizer to reuse
    let seed = 12345, words = [];
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648;
    for (let n = 0; n < (1 << 20) + 100;) {
        let w = "";
        for (let k = 3 + Math.floor(rnd() * 7); k > 0; k--) w += String.fromCharCode(97 + Math.floor(rnd() * 26));
        words.push(w);
        n += w.length + 1;
    }
    const big = JSON.stringify({ model: MODEL, prompt: words.join(" "), max_tokens: 1 });
    check(big.length > 1 << 20 && big.length < 2 << 20, "a 1 MiB prompt", big.length);
    // One measurement: a stream runs while 30,000 pipelined requests and the
    // 1 MiB prompt are served; its chunks are timestamped by a worker thread.
    const measure = async () => {
        const w = watchStream(480);
        await w.started;
        const t0 = Date.now();
        const s = await connect();
        const N = 30000;
        s.write("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".repeat(N));
        await until(() => s.ok === N, 30000, "30,000 pipelined requests answered");
        const tPipelined = Date.now();
        const pipelineMs = tPipelined - t0;
        s.destroy();
        const [r, bigMs] = await timed(fetch(`${URL_}/v1/completions`, { method: "POST", body: big }));
        const bj = await r.json();
        check(r.status === 400 && /context/.test(bj.error.message), "the 1 MiB prompt is tokenized and refused (context 512)", bj);
        const t1 = Date.now();
        await sleep(200); // the chunk after t1 closes the last gap
        await w.stop();
        const times = w.times;
        const gaps = [];
        for (let i = 1; i < times.length; i++) if (times[i] > t0 && times[i - 1] < t1) gaps.push(times[i] - times[i - 1]);
        // Stream chunks that arrived while the pipelined answers were still
        // arriving: a loop that served all 30,000 before returning to the
        // stream leaves none there, however fast or slow the machine.
        const interleaved = times.filter((t) => t > s.firstOkAt && t < tPipelined).length;
        const worst = Math.max(0, ...gaps);
        console.log(`availability: 30,000 pipelined in ${pipelineMs} ms, 1 MiB prompt answered in ${bigMs} ms, ` +
                    `stream gaps meanwhile: worst ${worst} ms over ${gaps.length}, ${interleaved} stream chunks ` +
                    `between the first and the last pipelined answer`);
        return { worst, gaps: gaps.length, interleaved };
    };
    // The gap bound is wall-clock on a shared 2-core machine, where the
    // test's own client, the server and its compute threads contend and the
    // host sometimes steals the CPU (one fresh-clone run and one local run
    // each saw a single 1.2-1.4 s gap, with the pipeline taking 3x its quiet
    // time). So a gap over the bound is measured once more, and both
    // attempts are printed: a server that stalls the stream fails both.
    let m = await measure();
    if (m.worst >= 1000) {
        console.log(`availability: worst gap ${m.worst} ms on the first attempt; measuring once more`);
        m = await measure();
    }
    check(m.gaps >= 3, "the stream kept producing meanwhile", m.gaps);
    check(m.interleaved >= 3, "stream chunks arrived between pipelined answers", m.interleaved);
    check(m.worst < 1000, "no stream stalled for a second", m.worst);
});

// ---- half-close: the request is still answered ---------------------------------------
await section("half-close: the request is still answered", async () => {
    const s = await connect();
    const body = JSON.stringify(completion);
    s.end(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    await until(() => s.gone, 10000, "the half-closed connection finished");
    check(s.data.startsWith("HTTP/1.1 200") && s.data.includes('"choices"'), "a request followed by shutdown(SHUT_WR) gets its response", s.data.slice(0, 80));
    const p = await connect();
    p.end("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
    await until(() => p.gone, 5000, "pipelined + half-closed finished");
    check(p.ok === 2, "both pipelined requests before the half-close answered", p.data.slice(0, 200));
});

// ---- 413 drains: a client still sending its body sees the status ------------------------
await section("413 drains: a client that sends its whole body, then reads, sees the status", async () => {
    // Like a blocking client (write everything, then read): closing on it
    // with its body unread resets the connection, and its write fails
    // before it ever reads the 413.
    const s = await connect();
    s.pause();
    let writeError = null;
    const body = Buffer.alloc(3000000, 97);
    await new Promise((resolve) => {
        s.write("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 3000000\r\n\r\n");
        s.write(body, (e) => { writeError = e; resolve(); });
        s.once("error", (e) => { writeError = e; resolve(); });
    });
    check(!writeError, "the whole body could be sent", String(writeError));
    s.resume();
    await until(() => s.gone, 8000, "the 413 connection finished");
    check(s.data.startsWith("HTTP/1.1 413"), "the client sees 413 after sending its body", s.data.slice(0, 40));
});

// ---- SIGTERM drains ---------------------------------------------------------------
async function rawStream(url, body) {
    const r = await fetch(`${url}/v1/completions`, { method: "POST", body: JSON.stringify({ ...body, stream: true }) });
    const reader = r.body.getReader();
    const out = { text: "", first: null };
    out.first = new Promise((resolve) => { out.gotFirst = resolve; });
    out.done = (async () => {
        try {
            for (;;) {
                const { value, done } = await reader.read();
                if (done) break;
                out.text += Buffer.from(value).toString();
                if (out.text.includes('"text"')) out.gotFirst();
            }
        } catch (e) { out.error = String(e); }
        out.gotFirst();
    })();
    return out;
}
// A non-streamed completion: { status, json } or { error } (never rejects).
function request(url, body) {
    return fetch(`${url}/v1/completions`, { method: "POST", body: JSON.stringify(body) })
        .then(async (r) => ({ status: r.status, json: await r.json() }), (e) => ({ error: String(e.cause ?? e) }));
}
// Waits until the server has taken n jobs (so a request is surely in flight).
async function jobsSubmitted(url, n) {
    await until(async () => (await metrics(url)).kipp_jobs_submitted_total >= n, 10000, `${n} jobs submitted`);
}
async function refused(url) {
    try { await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2000) }); return false; } catch { return true; }
}
await section("SIGTERM within --shutdown-timeout: everything in flight finishes normally", async () => {
    const url = env("DRAIN_URL"), pid = Number(env("DRAIN_PID"));
    const st = await rawStream(url, { model: MODEL, prompt: "A story:", max_tokens: 48, temperature: 0 });
    await st.first;
    const plain = request(url, { ...completion, max_tokens: 24 });
    await jobsSubmitted(url, 2);
    process.kill(pid, "SIGTERM");
    await sleep(300);
    check(await refused(url), "no new connections once draining");
    const pr = await plain;
    check(pr.status === 200 && pr.json.choices[0].finish_reason, "a non-streamed request in flight finishes", pr);
    await st.done;
    check(st.text.endsWith("data: [DONE]\n\n") && st.text.includes('"finish_reason":"length"'), "a stream in flight finishes with [DONE]", st.text.slice(-200));
});
await section("SIGTERM past --shutdown-timeout: in-flight requests are cancelled with a final event", async () => {
    const url = env("CUT_URL"), pid = Number(env("CUT_PID"));
    const st = await rawStream(url, { model: MODEL, prompt: "A story:", max_tokens: 3000, temperature: 0 });
    await st.first;
    const plain = request(url, { ...completion, max_tokens: 3000 });
    await jobsSubmitted(url, 2);
    process.kill(pid, "SIGTERM");
    const pr = await plain;
    check(pr.status === 503 && /shutting down/.test(pr.json.error.message), "a non-streamed request past the deadline gets 503", pr);
    await st.done;
    check(st.text.endsWith("data: [DONE]\n\n") && /"error".*shutting down/.test(st.text), "a stream past the deadline gets an error event and [DONE]", st.text.slice(-300));
});

finish();
