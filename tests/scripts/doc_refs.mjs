// Every citation of a section of our docs -- a docs/ file name followed by
// a quoted heading, in code comments, help texts and the docs themselves --
// names a section that exists in that document: a Markdown heading or a bold paragraph lead
// (**Stop 42 (Zen 4): ...**) that starts with the quoted text. Sections move
// (docs/CPU-JOURNAL.md took the CPU backend's stop-by-stop entries out of
// docs/ARCHITECTURE.md); a citation left pointing at the old place is a
// reader sent nowhere.
//
// Usage: node tests/scripts/doc_refs.mjs [ROOT]   (ROOT: the checkout, default .)
// DOC_REFS_LIST=1 also lists every citation it found, as "DOC.md Title".
// Prints each citation that resolves nowhere and exits 1 if there is one.
import { readFileSync, readdirSync, statSync, existsSync } from "node:fs";
import { join, relative } from "node:path";

const root = process.argv[2] ?? ".";
const SCAN = ["src", "include", "tests", "bench", "tools", "docs", "README.md", "Makefile"];
const SKIP_DIRS = new Set(["node_modules", "results", "vectors", ".git"]);
// The checker and its test hold made-up citations on purpose.
const SKIP_FILES = new Set(["doc_refs.mjs", "test_doc_refs.sh"]);
const TEXT = /\.(c|h|mjs|js|sh|py|md)$|^Makefile$/;

function* files(path) {
    const st = statSync(path);
    if (st.isFile()) {
        const name = path.split("/").pop();
        if (TEXT.test(name) && !SKIP_FILES.has(name)) yield path;
        return;
    }
    for (const name of readdirSync(path).sort()) {
        if (SKIP_DIRS.has(name)) continue;
        yield* files(join(path, name));
    }
}

// One line's worth of text with the line breaks and the comment leaders
// (" * ", "// ", "# ") that a wrapped citation carries removed.
const unwrap = (s) => s.replace(/\s*\n[ \t]*(?:\*(?!\*)|\/\/|#(?!#))?[ \t]*/g, " ").replace(/\s+/g, " ").trim();

// The sections of a document: headings and bold leads, whitespace folded.
const sectionsCache = new Map();
function sections(doc) {
    if (sectionsCache.has(doc)) return sectionsCache.get(doc);
    const text = readFileSync(join(root, doc), "utf8");
    const out = [];
    for (const m of text.matchAll(/^#{1,6}\s+(.+)$/gm)) out.push(unwrap(m[1]).replace(/`/g, ""));
    for (const m of text.matchAll(/^(?:\s*[-*]\s+)?\*\*([^*]+?)\*\*/gms)) out.push(unwrap(m[1]).replace(/`/g, ""));
    sectionsCache.set(doc, out);
    return out;
}
// Whether some section starts with the cited text, followed by the end or a
// character that cannot continue a word or number ("Stop 7" is not "Stop 70").
function resolves(doc, cited) {
    const want = unwrap(cited).replace(/`/g, "");
    return sections(doc).some((h) => h.startsWith(want) && !/^[A-Za-z0-9]/.test(h.slice(want.length)));
}

// docs/NAME.md, then up to a few characters (", ", " (", "'s ") and maybe a
// wrapped line, then one or more quoted titles joined by ", " / " and ".
const CITE = /docs\/([A-Z][A-Za-z0-9_-]*\.md)(?:'s)?[ \t]*[,(]?[ \t]*(?:\n[ \t]*(?:\*|\/\/|#)?[ \t]*)?"([^"]{1,200})"((?:(?:[ \t]*(?:,|and|,[ \t]*and)[ \t]*(?:\n[ \t]*(?:\*|\/\/|#)?[ \t]*)?)"[^"]{1,200}")*)/g;

let cites = 0;
const bad = [];
const listed = [];
for (const top of SCAN) {
    const start = join(root, top);
    if (!existsSync(start)) continue;
    for (const f of files(start)) {
        const text = readFileSync(f, "utf8");
        for (const m of text.matchAll(CITE)) {
            const doc = join("docs", m[1]);
            const titles = [m[2], ...[...m[3].matchAll(/"([^"]+)"/g)].map((x) => x[1])];
            const line = text.slice(0, m.index).split("\n").length;
            for (const t of titles) {
                if (process.env.DOC_REFS_LIST) listed.push(`${m[1]} ${unwrap(t)}`);
                cites++;
                if (!existsSync(join(root, doc))) bad.push(`${relative(root, f)}:${line}: ${doc} does not exist ("${unwrap(t)}")`);
                else if (!resolves(doc, t)) bad.push(`${relative(root, f)}:${line}: ${doc} has no section "${unwrap(t)}"`);
            }
        }
    }
}
if (process.env.DOC_REFS_LIST) for (const c of listed) console.log(c);
for (const b of bad) console.log(b);
console.log(`doc_refs: ${cites} citations of docs/*.md sections, ${bad.length} unresolved`);
if (cites === 0) {
    console.log("doc_refs: found no citation at all -- the scan is broken");
    process.exit(1);
}
process.exit(bad.length ? 1 : 0);
