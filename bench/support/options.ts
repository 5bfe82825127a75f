/** A benchmark's whole-number option (`--name`), checked against its bounds; anything else is an error that names it. */
export function wholeNumber(name: string, raw: string | undefined, min: number, max: number): number {
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max)
    throw new Error(`--${name} must be a whole number in [${min}, ${max}]`);
  return n;
}
