// Structured output on a random-weight model, checked by an independent
// validator: for every schema below (>= 50) and 3 seeds (n = 3 choices;
// choice i samples with seed + i), the server's output must parse and
// validate under ajv (JSON Schema draft 2020-12 semantics for this subset).
// finish_reason must be "stop": the bounds (maxLength, maxItems, the
// defaults in src/core/grammar_internal.h) keep every document within
// max_tokens. Also: json_object, the 400 for an unsupported keyword, and
// `kipp generate --json-schema` through the CLI.
//
// env: INSTRUCT_URL (a `kipp serve` of synthetic-tiny-instruct),
//      KIPP + MODEL for the CLI check (optional)
// ajv: resolved from node_modules (add it to package.json devDependencies)
// or NODE_PATH.
import { execFileSync } from "node:child_process";
import { writeFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createRequire } from "node:module";
import OpenAI from "openai";

const require = createRequire(import.meta.url);
const Ajv = require("ajv").default ?? require("ajv");
const ajv = new Ajv({ strict: false, allErrors: true });

const URL_ = process.env.INSTRUCT_URL;
if (!URL_) throw new Error("missing env INSTRUCT_URL");
const client = new OpenAI({ baseURL: `${URL_}/v1`, apiKey: "unused", maxRetries: 0, timeout: 600000 });

let checks = 0;
function check(cond, what, detail) {
    checks++;
    if (!cond) throw new Error(`FAIL: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail).slice(0, 800)}`);
}

// ---- the schemas ------------------------------------------------------------
const S = (maxLength = 12, minLength = 0) => ({ type: "string", maxLength, minLength });
const obj = (properties, required = Object.keys(properties), extra = {}) =>
    ({ type: "object", properties, required, additionalProperties: false, ...extra });
const schemas = [
    { type: "string", maxLength: 8 },
    { type: "string", minLength: 3, maxLength: 5 },
    { type: "string", minLength: 0, maxLength: 0 },
    { type: "integer" },
    { type: "number" },
    { type: "boolean" },
    { type: "null" },
    { type: ["string", "null"], maxLength: 6 },
    { type: ["integer", "boolean", "null"] },
    { enum: ["red", "green", "blue"] },
    { enum: [1, 2, 3, 12, 123] },
    { enum: ["a", 1, null, true, { k: [1, "x"] }, [1, 2]] },
    { const: "fixed" },
    { const: { nested: { deep: [true, null, 1.5] } } },
    { type: "string", enum: ["x", 1, "y"] },
    { type: "array", items: { type: "integer" }, maxItems: 5 },
    { type: "array", items: { type: "boolean" }, minItems: 2, maxItems: 2 },
    { type: "array", items: S(4), minItems: 1, maxItems: 3 },
    { type: "array", items: { type: "array", items: { type: "null" }, maxItems: 2 }, maxItems: 3 },
    { type: "array", maxItems: 0 },
    obj({ name: S(), age: { type: "integer" } }),
    obj({ a: { type: "number" }, b: { type: "boolean" }, c: { type: "null" } }),
    obj({ x: S(5) }, []),
    obj({ x: S(5), y: { type: "integer" } }, ["y"]),
    obj({}, []),
    obj({ "we\"ird key": S(3), "ключ": { type: "integer" }, "": { type: "boolean" } }),
    obj({ tags: { type: "array", items: S(6), maxItems: 3 } }),
    obj({ inner: obj({ v: { type: "integer" } }) }),
    obj({ l1: obj({ l2: obj({ l3: obj({ leaf: S(4) }) }) }) }),
    obj({ status: { enum: ["ok", "error"] }, code: { type: "integer" } }),
    obj({ maybe: { anyOf: [S(4), { type: "null" }] } }),
    obj({ kind: { const: "point" }, x: { type: "number" }, y: { type: "number" } }),
    { anyOf: [{ type: "integer" }, S(5)] },
    { anyOf: [obj({ a: S(3) }), obj({ b: { type: "integer" } })] },
    { anyOf: [obj({ a: S(3) }), obj({ a: { type: "integer" } })] },
    { anyOf: [{ type: "array", items: { type: "integer" }, maxItems: 3 }, { type: "null" }] },
    { $defs: { pt: obj({ x: { type: "integer" }, y: { type: "integer" } }) },
      type: "array", items: { $ref: "#/$defs/pt" }, maxItems: 3 },
    { definitions: { name: S(6) }, ...obj({ first: { $ref: "#/definitions/name" }, last: { $ref: "#/definitions/name" } }) },
    { $defs: { a: { $ref: "#/$defs/b" }, b: { type: "boolean" } }, ...obj({ v: { $ref: "#/$defs/a" } }) },
    obj({ list: { type: "array", items: obj({ id: { type: "integer" }, ok: { type: "boolean" } }), maxItems: 2 } }),
    { type: "object", properties: { free: S(3) }, required: ["free", "extra"] },
    { type: "object", maxProperties: undefined, properties: { t: { type: "string", maxLength: 2, description: "annotated", title: "T" } }, required: ["t"] },
    { title: "untyped object", properties: { p: { type: "integer" } }, required: ["p"], additionalProperties: false },
    { items: { type: "integer" }, maxItems: 2 },
    { minLength: 1, maxLength: 3 },
    true,
    {},
    obj({ a: S(2), b: S(2), c: S(2), d: S(2), e: S(2), f: S(2) }, ["a", "c", "e"]),
    obj({ nums: { type: "array", items: { type: "number" }, minItems: 3, maxItems: 3 } }),
    obj({ mixed: { type: ["array", "object"], items: { type: "integer" }, maxItems: 2, properties: { q: { type: "integer" } }, required: ["q"], additionalProperties: false } }),
    { type: "string" }, // the default bound (256 characters)
    obj({ unicode: { enum: ["日本", "🌍", "a\"b\\c\n"] } }),
    obj({ deep: { type: "array", items: { type: "array", items: { type: "array", items: { type: "integer" }, maxItems: 2 }, maxItems: 2 }, maxItems: 2 } }),
].map((s) => (s && typeof s === "object" ? JSON.parse(JSON.stringify(s)) : s)); // drop undefined
check(schemas.length >= 50, `${schemas.length} schemas`);

// ---- the runs -------------------------------------------------------------------
const messages = [{ role: "user", content: "Answer in JSON." }];
async function run(i) {
    const schema = schemas[i];
    const validate = ajv.compile(schema);
    const r = await client.chat.completions.create({
        messages, n: 3, seed: 1000 + 7 * i, temperature: 1, max_tokens: 1500,
        response_format: { type: "json_schema", json_schema: { name: `s${i}`, schema, strict: true } },
    });
    for (const c of r.choices) {
        const what = `schema ${i} ${JSON.stringify(schema).slice(0, 120)} choice ${c.index}`;
        check(c.finish_reason === "stop", `${what}: finish_reason`, { finish: c.finish_reason, content: c.message.content });
        let doc;
        try { doc = JSON.parse(c.message.content); } catch (e) {
            check(false, `${what}: output parses`, c.message.content);
        }
        check(validate(doc), `${what}: ajv validates`, { content: c.message.content, errors: validate.errors });
        check(!/\s/.test(c.message.content.replace(/"(?:[^"\\]|\\.)*"/g, "")), `${what}: compact`, c.message.content);
    }
}
// two requests at a time (6 sequences: the server batches them in one eval)
let next = 0;
async function worker() { while (next < schemas.length) await run(next++); }
await Promise.all([worker(), worker()]);
console.log(`structured_output: ${schemas.length} schemas x 3 seeds validated by ajv`);

// json_object: any object. On random weights an unconstrained object can
// outgrow max_tokens (keys and strings run to their bounds): then the reply
// must say "length" and the text must be a prefix of an object; complete
// replies must parse as objects. At least one of the seeds must complete.
{
    let complete = 0;
    for (const seed of [1, 2, 3]) {
        const r = await client.chat.completions.create({ messages, seed, temperature: 1, max_tokens: 1000,
            response_format: { type: "json_object" } });
        const c = r.choices[0];
        check(c.message.content.startsWith("{"), "json_object starts an object", c.message.content.slice(0, 80));
        if (c.finish_reason === "length") continue;
        check(c.finish_reason === "stop", "json_object finish_reason", c.finish_reason);
        const doc = JSON.parse(c.message.content);
        check(doc !== null && typeof doc === "object" && !Array.isArray(doc), "json_object is an object", c.message.content);
        complete++;
    }
    check(complete >= 1, "json_object: at least one of 3 seeds completes within 1000 tokens", complete);
    console.log(`structured_output: json_object complete in ${complete}/3 seeds`);
}

// unsupported keywords: 400 naming the keyword
for (const [schema, word] of [[{ type: "string", pattern: "^a" }, "pattern"],
                              [{ type: "integer", minimum: 0 }, "minimum"],
                              [{ oneOf: [{ type: "string" }] }, "oneOf"],
                              [{ type: "string", format: "email" }, "format"]]) {
    try {
        await client.chat.completions.create({ messages, max_tokens: 4,
            response_format: { type: "json_schema", json_schema: { name: "bad", schema } } });
        check(false, `unsupported '${word}' accepted`);
    } catch (e) {
        check(e.status === 400 && String(e.message).includes(`'${word}'`), `unsupported '${word}' -> 400`, e.message);
    }
}

// the client's parse helper: message.parsed is the document
{
    const schema = obj({ city: S(10), population: { type: "integer" } });
    const r = await client.beta.chat.completions.parse({ messages, seed: 9, temperature: 1, max_tokens: 400,
        response_format: { type: "json_schema", json_schema: { name: "city", schema, strict: true } } });
    const m = r.choices[0].message;
    check(m.parsed && typeof m.parsed.city === "string" && Number.isInteger(m.parsed.population),
          "chat.completions.parse gives message.parsed", m);
    check(ajv.validate(schema, m.parsed), "parsed document validates", m.parsed);
}

// kipp generate --json-schema (the CLI uses the same grammar)
if (process.env.KIPP && process.env.MODEL) {
    const dir = mkdtempSync(join(tmpdir(), "kipp-schema-"));
    const schema = obj({ id: { type: "integer" }, tags: { type: "array", items: S(5), maxItems: 2 } });
    writeFileSync(join(dir, "s.json"), JSON.stringify(schema));
    for (const seed of ["1", "2"]) {
        const out = execFileSync(process.env.KIPP, ["generate", "-m", process.env.MODEL, "-p", "JSON:",
            "-n", "400", "--temperature", "1", "--seed", seed, "--json-schema", join(dir, "s.json")],
            { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).replace(/\n$/, "");
        check(ajv.validate(schema, JSON.parse(out)), "kipp generate --json-schema output validates", out);
    }
}
console.log(`structured_output: ${checks} checks passed`);
