// Command-line options of the bench/ scripts: each script names the options
// that take a value and the bare flags it knows. Anything else -- a typo,
// --help, an option missing its value -- prints what the script accepts and
// exits 2, rather than starting a run of many minutes with defaults.
export function parseArgs(script, valueOptions, flagOptions = []) {
  const args = process.argv.slice(2);
  for (let i = 0; i < args.length; i++) {
    if (flagOptions.includes(args[i])) continue;
    if (valueOptions.includes(args[i]) && i + 1 < args.length) { i++; continue; }
    const why = valueOptions.includes(args[i]) ? `${args[i]} needs a value` : `unknown option ${args[i]}`;
    const known = [...valueOptions.map((o) => `${o} VALUE`), ...flagOptions].join(" ");
    console.error(`${script}: ${why}\noptions: ${known}\n(the comment at the top of bench/${script}.mjs says what each does)`);
    process.exit(2);
  }
  const valueAt = (name) => {
    for (let i = 0; i < args.length; i++) {
      if (flagOptions.includes(args[i])) continue;
      if (args[i] === name) return args[i + 1];
      i++; /* skip the value */
    }
    return undefined;
  };
  return {
    args,
    opt: (name, dflt) => valueAt(name) ?? dflt,
    has: (flag) => args.some((a, i) => a === flag && (i === 0 || !valueOptions.includes(args[i - 1]))),
  };
}
