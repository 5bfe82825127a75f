/** A benchmark's whole-number option (`--name`), checked against its bounds; anything else is an error that names it. */
export function wholeNumber(name: string, raw: string | undefined, min: number, max: number): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new Error(`--${name} must be a whole number in [${min}, ${max}]`);
  return n;
}

/** A benchmark's repeatable `--env KEY=VALUE` options as one environment; anything else is an error that says so. */
export function envOptions(pairs: string[]): Record<string, string> {
  const env: Record<string, string> = {};
  for (const kv of pairs) {
    const at = kv.indexOf('=');
    if (at < 1) throw new Error(`--env takes KEY=VALUE, not ${kv}`);
    env[kv.slice(0, at)] = kv.slice(at + 1);
  }
  return env;
}
