// Two `kipp serve` replicas behind nginx with consistent hashing on a
// session key (X-Session-Id), driven by tests/scripts/test_replicas.sh:
//   LB_URL, R1_URL, R2_URL, SINGLE_URL (a third server, the reference)
// Each of two conversations sticks to one replica, its later turns reuse
// its prefix there, and every answer equals the single server's answer.
import OpenAI from "openai";

let checks = 0;
function check(cond, what, detail) {
    checks++;
    if (!cond) throw new Error(`FAIL: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail)}`);
}
const { LB_URL, R1_URL, R2_URL, SINGLE_URL } = process.env;
const replicas = [R1_URL, R2_URL];
async function metrics(url) {
    const t = await (await fetch(`${url}/metrics`)).text();
    const m = {};
    for (const line of t.split("\n")) {
        const mm = /^([a-z_]+) ([0-9.e+-]+)$/.exec(line);
        if (mm) m[mm[1]] = Number(mm[2]);
    }
    return m;
}
const system = "You are a terse assistant. " + Array.from({ length: 30 }, (_, i) => `Note ${i}: keep answers short.`).join(" ");
async function converse(client, key, turns) {
    const messages = [{ role: "system", content: system }], answers = [], served = [], reused = [];
    for (let t = 0; t < turns; t++) {
        messages.push({ role: "user", content: `${key} turn ${t}: continue the list.` });
        const before = await Promise.all(replicas.map(metrics));
        const r = await client.chat.completions.create({ messages, max_tokens: 16, temperature: 0 },
                                                         { headers: { "X-Session-Id": key } });
        const after = await Promise.all(replicas.map(metrics));
        const which = [0, 1].filter((i) => after[i].kipp_requests_total > before[i].kipp_requests_total);
        served.push(which.length === 1 ? which[0] : -1);
        reused.push(which.length === 1 ? after[which[0]].kipp_prefix_tokens_reused_total - before[which[0]].kipp_prefix_tokens_reused_total : 0);
        const text = r.choices[0].message.content ?? "";
        answers.push(text);
        messages.push({ role: "assistant", content: text });
    }
    return { answers, served, reused };
}
const lb = new OpenAI({ baseURL: `${LB_URL}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
const single = new OpenAI({ baseURL: `${SINGLE_URL}/v1`, apiKey: "unused", maxRetries: 0, timeout: 120000 });
const keys = ["conversation-alpha", "conversation-beta"];
for (const key of keys) {
    const viaLb = await converse(lb, key, 3);
    const ref = await converse(single, key, 3);
    check(viaLb.served.every((s) => s === viaLb.served[0] && s >= 0), `${key}: every turn served by one replica`, viaLb.served);
    for (let t = 1; t < 3; t++)
        check(viaLb.reused[t] >= 32, `${key}: turn ${t} reused its prefix on replica ${viaLb.served[0]}`, viaLb.reused);
    for (let t = 0; t < 3; t++)
        check(viaLb.answers[t] === ref.answers[t], `${key}: turn ${t} equals a single server's answer`, { lb: viaLb.answers[t], single: ref.answers[t] });
    console.log(`${key}: replica ${viaLb.served[0]}, reused positions per turn ${viaLb.reused.join(", ")}`);
}
console.log(`replicas: ${checks} checks passed`);
