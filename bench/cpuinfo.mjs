// The processor, as /proc/cpuinfo names it, for the bench/ scripts'
// records: one reading of the file, its fields by name (the first CPU's,
// which is what a field's first match is), and the one-line label
// kernel_micro.c's cpu_name also writes, "MODEL NAME (family F model M)".
// Off Linux (no /proc/cpuinfo) every field is undefined and the label null.
import { readFileSync } from "node:fs";

let text = null;
try {
  text = readFileSync("/proc/cpuinfo", "utf8");
} catch {
  text = "";
}
export const cpuinfoField = (key) => (text.match(new RegExp(`^${key}\\s*:\\s*(.*)$`, "m")) || [])[1];
export function cpuLabel() {
  const name = cpuinfoField("model name");
  return name ? `${name} (family ${cpuinfoField("cpu family")} model ${cpuinfoField("model")})` : null;
}
