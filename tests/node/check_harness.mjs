// The check/section harness the node-driven server tests share.
// With KEEP_GOING=1 a failed check or section is reported and the run goes
// on (to list every defect at once, e.g. against an older build); ONLY=text
// runs the sections whose title contains text; VERBOSE=1 times each section.
export function checkHarness(name) {
    let checks = 0, failures = 0;
    const KEEP_GOING = !!process.env.KEEP_GOING;
    function check(cond, what, detail) {
        checks++;
        if (cond) return;
        const msg = `FAIL: ${what}${detail === undefined ? "" : ": " + JSON.stringify(detail).slice(0, 400)}`;
        if (!KEEP_GOING) throw new Error(msg);
        failures++;
        console.log(msg);
    }
    async function section(title, fn) {
        if (process.env.ONLY && !title.includes(process.env.ONLY)) return; // one section alone
        const t0 = Date.now();
        try {
            await fn();
            if (process.env.VERBOSE) console.log(`${Date.now() - t0} ms: ${title}`);
        } catch (e) {
            if (!KEEP_GOING) throw e;
            failures++;
            console.log(`FAIL: section "${title}" stopped: ${String(e.message ?? e).slice(0, 300)}`);
        }
    }
    // Prints the summary line; exits 1 if any check failed.
    function finish() {
        if (failures) {
            console.log(`${name}: ${failures} of ${checks} checks failed`);
            process.exit(1);
        }
        console.log(`${name}: ${checks} checks passed`);
    }
    return { check, section, finish };
}
