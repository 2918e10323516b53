// Command-line options of the bench/ scripts: each script names the options
// that take a value and the bare flags it knows. Anything else -- a typo,
// --help, an option missing its value -- prints what the script accepts and
// exits 2, rather than starting a run of many minutes with defaults.
export function parseArgs(script, valueOptions, flagOptions = []) {
  const args = process.argv.slice(2);
  const values = new Map(), flags = new Set();
  for (let i = 0; i < args.length; i++) {
    if (flagOptions.includes(args[i])) { flags.add(args[i]); continue; }
    if (valueOptions.includes(args[i]) && i + 1 < args.length) { values.set(args[i], args[++i]); continue; }
    const why = valueOptions.includes(args[i]) ? `${args[i]} needs a value` : `unknown option ${args[i]}`;
    const known = [...valueOptions.map((o) => `${o} VALUE`), ...flagOptions].join(" ");
    console.error(`${script}: ${why}\noptions: ${known}\n(the comment at the top of bench/${script}.mjs says what each does)`);
    process.exit(2);
  }
  return { args, opt: (name, dflt) => values.get(name) ?? dflt, has: (flag) => flags.has(flag) };
}
