// Tool calling and reasoning through the official `openai` client against
// `kipp serve` on synthetic-tiny-instruct (random weights, hybrid-thinking
// Qwen3 template). What is exercised, honestly:
//  - tool calls: with tool_choice "required" / a named function the output
//    is constrained, so the model always calls; the round trip (tools ->
//    tool_calls -> tool result -> next turn) and the stream helper's
//    assembly of tool-call deltas are real. With "auto" a random model
//    practically never writes <tool_call>, so parsing free output is
//    covered by tests/unit/test_chat_output.c instead. parallel_tool_calls:
//    logit_bias on "\n" makes the model take every call the grammar allows
//    (16 when parallel, 1 when not), each validated by ajv.
//  - reasoning: a random model does not write <think>...</think> by itself;
//    logit_bias on the <think>/</think> tokens makes the output start with a
//    think block, and the streamed reasoning_content/content must equal the
//    non-streamed split of the same seed. The text rules are unit-tested.
// env: INSTRUCT_URL. ajv as in structured_output.mjs.
import { createRequire } from "node:module";
import OpenAI from "openai";

const require = createRequire(import.meta.url);
const Ajv = require("ajv").default ?? require("ajv");
const ajv = new Ajv({ strict: false });

const URL_ = process.env.INSTRUCT_URL;
if (!URL_) throw new Error("missing env INSTRUCT_URL");
const client = new OpenAI({ baseURL: `${URL_}/v1`, apiKey: "unused", maxRetries: 0, timeout: 300000 });
let checks = 0;
function check(cond, what, detail) {
    checks++;
    if (!cond) throw new Error(`FAIL: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail).slice(0, 800)}`);
}

const weatherParams = {
    type: "object",
    properties: { city: { type: "string", maxLength: 12 }, unit: { enum: ["celsius", "fahrenheit"] } },
    required: ["city", "unit"],
    additionalProperties: false,
};
const searchParams = {
    type: "object",
    properties: { query: { type: "string", minLength: 1, maxLength: 10 }, limit: { type: "integer" } },
    required: ["query"],
    additionalProperties: false,
};
const tools = [
    { type: "function", function: { name: "get_weather", description: "Weather for a city", parameters: weatherParams } },
    { type: "function", function: { name: "search", description: "Web search", parameters: searchParams } },
];
const paramsOf = { get_weather: weatherParams, search: searchParams };

function checkCall(call, what, name) {
    check(call.type === "function" && typeof call.id === "string" && call.id.length > 0, `${what}: id and type`, call);
    if (name) check(call.function.name === name, `${what}: the named function`, call);
    check(call.function.name in paramsOf, `${what}: a known function`, call);
    const args = JSON.parse(call.function.arguments);
    check(ajv.validate(paramsOf[call.function.name], args), `${what}: arguments satisfy the parameter schema`,
          { args, errors: ajv.errors });
    return args;
}

// ---- round trip: required -> tool_calls -> tool result -> next turn ---------
const messages = [{ role: "user", content: "What is the weather in Paris?" }];
for (const seed of [1, 2, 3]) {
    // one call: a random model rarely stops between parallel calls (see below)
    const r = await client.chat.completions.create({ messages, tools, tool_choice: "required", seed,
        temperature: 1, max_tokens: 300, parallel_tool_calls: false });
    const c = r.choices[0];
    check(c.finish_reason === "tool_calls", "required: finish_reason tool_calls", c);
    check(c.message.content === null && c.message.tool_calls.length === 1, "required: one call, no content", c.message);
    checkCall(c.message.tool_calls[0], `required seed ${seed}`);
    if (seed !== 1) continue;
    const call = c.message.tool_calls[0];
    const turn2 = [...messages, c.message,
        { role: "tool", tool_call_id: call.id, content: JSON.stringify({ temperature: 21 }) }];
    const r2 = await client.chat.completions.create({ messages: turn2, tools, seed, max_tokens: 8,
        temperature: 0 });
    check(r2.choices[0].message.role === "assistant", "turn 2 answered", r2.choices[0]);
    check(r2.usage.prompt_tokens > r.usage.prompt_tokens + 10, "turn 2 prompt holds the call and its result",
          [r.usage, r2.usage]);
    // tool_choice none: the tools are not rendered (shorter prompt), nothing is constrained
    const r3 = await client.chat.completions.create({ messages: turn2, tools, tool_choice: "none", max_tokens: 4 });
    check(r3.usage.prompt_tokens < r2.usage.prompt_tokens, "tool_choice none renders no tools", [r2.usage, r3.usage]);
}

// ---- parallel_tool_calls --------------------------------------------------------
// logit_bias +100 on "\n" (198): once a call is complete the grammar allows
// the end or "\n" (the separator before another call), so the biased model
// takes every call the grammar allows: 16 (GRAM_MAX_TOOL_CALLS) when
// parallel_tool_calls is true or absent, exactly 1 when it is false. Inside a
// call "\n" is allowed only where the format puts it, so the calls stay valid.
for (const [parallel, want, tc] of [[undefined, 16, "required"], [true, 16, "required"],
                                    [false, 1, "required"],
                                    [true, 16, { type: "function", function: { name: "search" } }],
                                    [false, 1, { type: "function", function: { name: "search" } }]]) {
    const body = { messages, tools, tool_choice: tc, seed: 11, temperature: 1, max_tokens: 3000,
                   logit_bias: { 198: 100 } };
    if (parallel !== undefined) body.parallel_tool_calls = parallel;
    const what = `parallel_tool_calls ${parallel} ${JSON.stringify(tc)}`;
    const r = await client.chat.completions.create(body);
    const c = r.choices[0];
    check(c.finish_reason === "tool_calls", `${what}: finish_reason`, c);
    check(c.message.tool_calls.length === want, `${what}: ${want} calls`, c.message.tool_calls.length);
    c.message.tool_calls.forEach((call, i) =>
        checkCall(call, `${what} call ${i}`, typeof tc === "object" ? tc.function.name : undefined));
    check(new Set(c.message.tool_calls.map((x) => x.id)).size === want, `${what}: distinct call ids`);
    // streamed: the same calls, each in its own indexed delta
    const stream = client.beta.chat.completions.stream({ ...body });
    const final = await stream.finalChatCompletion();
    const sc = final.choices[0];
    check(sc.message.tool_calls.length === want &&
          sc.message.tool_calls.every((x, i) => x.function.arguments === c.message.tool_calls[i].function.arguments),
          `${what}: stream = non-stream`, [sc.message.tool_calls.length, want]);
}

// ---- a named function ------------------------------------------------------------
for (const name of ["search", "get_weather"]) {
    const r = await client.chat.completions.create({ messages, tools, seed: 5, temperature: 1, max_tokens: 300,
        tool_choice: { type: "function", function: { name } }, parallel_tool_calls: false });
    check(r.choices[0].finish_reason === "tool_calls", `named ${name}: finish_reason`, r.choices[0]);
    checkCall(r.choices[0].message.tool_calls[0], `named ${name}`, name);
}

// ---- streamed tool-call deltas, assembled by the client's stream helper -----------
for (const seed of [7, 8]) {
    const stream = client.beta.chat.completions.stream({ messages, tools, seed, temperature: 1, max_tokens: 300,
        tool_choice: { type: "function", function: { name: "get_weather" } }, parallel_tool_calls: false });
    let deltas = 0;
    stream.on("chunk", (ch) => { if (ch.choices[0]?.delta?.tool_calls) deltas++; });
    const final = await stream.finalChatCompletion();
    check(deltas >= 1, "stream: tool_calls deltas arrived", deltas);
    const c = final.choices[0];
    check(c.finish_reason === "tool_calls", "stream: finish_reason", c);
    const streamed = checkCall(c.message.tool_calls[0], `stream seed ${seed}`, "get_weather");
    // the same seed without streaming gives the same call
    const r = await client.chat.completions.create({ messages, tools, seed, temperature: 1, max_tokens: 300,
        tool_choice: { type: "function", function: { name: "get_weather" } }, parallel_tool_calls: false });
    check(JSON.stringify(JSON.parse(r.choices[0].message.tool_calls[0].function.arguments)) === JSON.stringify(streamed),
          "stream and non-stream calls agree", [r.choices[0].message, c.message]);
}

// ---- bad tool requests -----------------------------------------------------------------
for (const [body, mention] of [
    [{ tools, tool_choice: { type: "function", function: { name: "nope" } } }, "nope"],
    [{ tools: [{ type: "function", function: { name: "bad name" } }] }, "name"],
    [{ tool_choice: "required" }, "tools"],
    [{ tools: [{ type: "function", function: { name: "f", parameters: { type: "object", properties: { x: { type: "string", pattern: "a" } } } } }],
       tool_choice: "required" }, "pattern"],
]) {
    try {
        await client.chat.completions.create({ messages, max_tokens: 4, ...body });
        check(false, `bad tools request accepted (${mention})`);
    } catch (e) {
        check(e.status === 400 && String(e.message).includes(mention), `bad tools request -> 400 (${mention})`, e.message);
    }
}

// ---- reasoning ---------------------------------------------------------------------------
// logit_bias +100 on <think> (151667) and </think> (151668): the output
// starts with a think block. The split must be the same streamed or not.
const bias = { 151667: 100, 151668: 100 };
for (const seed of [11, 12, 13, 14]) {
    const req = { messages: [{ role: "user", content: "Think first." }], seed, temperature: 1, max_tokens: 12,
        logit_bias: bias };
    const r = await client.chat.completions.create(req);
    const m = r.choices[0].message;
    check(typeof m.reasoning_content === "string", "reasoning_content present", m);
    check(!m.content.startsWith("<think>\n") || m.content.length === 0 || true, "content");
    let reasoning = "", content = "";
    const stream = await client.chat.completions.create({ ...req, stream: true });
    for await (const ch of stream) {
        const d = ch.choices[0]?.delta ?? {};
        reasoning += d.reasoning_content ?? "";
        content += d.content ?? "";
    }
    check(reasoning === m.reasoning_content && content === m.content,
          "streamed reasoning_content/content equal the non-streamed split", { m, reasoning, content });
}
// enable_thinking false: the prompt gets the empty think block (4 more tokens)
{
    const q = { messages: [{ role: "user", content: "Hi" }], max_tokens: 1 };
    const on = await client.chat.completions.create(q);
    const off = await client.chat.completions.create({ ...q, chat_template_kwargs: { enable_thinking: false } });
    check(off.usage.prompt_tokens === on.usage.prompt_tokens + 4, "enable_thinking false adds <think>\\n\\n</think>\\n\\n",
          [on.usage, off.usage]);
}
console.log(`tools_reasoning: ${checks} checks passed`);
