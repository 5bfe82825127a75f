/**
 * Request paths: the endpoint template the service uses when no framework names the route (CONTRACT §9: each
 * segment that is all digits, a UUID, or hex of 8 or more characters becomes `:id`; the query is dropped), and the
 * `ignore` option's matching.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function pathOf(url: string): string {
  const end = url.search(/[?#]/);
  return end < 0 ? url : url.slice(0, end);
}

const isHex = (c: number) => (c >= 48 && c <= 57) || (c >= 97 && c <= 102) || (c >= 65 && c <= 70);

/** Whether path[from, to) is an id segment: all digits, a UUID, or 8 or more hex characters. */
function isIdSegment(path: string, from: number, to: number): boolean {
  const n = to - from;
  if (n === 0) return false;
  if (n === 36 && UUID.test(path.slice(from, to))) return true;
  let digitsOnly = true;
  for (let i = from; i < to; i++) {
    const c = path.charCodeAt(i);
    if (c < 48 || c > 57) {
      digitsOnly = false;
      if (n < 8 || !isHex(c)) return false;
    }
  }
  return digitsOnly || n >= 8;
}

/** The path with each id segment as `:id`; the same string (no copy) when there is none. */
export function templatePath(path: string): string {
  let out: string | null = null;
  let start = 0;
  for (let i = 0; i <= path.length; i++) {
    if (i < path.length && path.charCodeAt(i) !== 47) continue;
    if (isIdSegment(path, start, i)) {
      out = `${out ?? path.slice(0, start)}:id`;
    } else if (out !== null) out += path.slice(start, i);
    if (i < path.length && out !== null) out += '/';
    start = i + 1;
  }
  return out ?? path;
}

/** What `ignore` takes: exact paths, globs (`*` within a segment, `**` across), regular expressions, a function. */
export type IgnoreRule = string | RegExp | ((path: string, method: string) => boolean);

function globToRegExp(glob: string): RegExp {
  let re = '';
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i]!;
    if (c === '*' && glob[i + 1] === '*') {
      re += '.*';
      i++;
    } else if (c === '*') re += '[^/]*';
    else if (c === '?') re += '[^/]';
    else re += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${re}$`);
}

export function ignoreMatcher(rules: readonly IgnoreRule[]): (path: string, method: string) => boolean {
  const tests = rules.map((r): ((path: string, method: string) => boolean) => {
    if (typeof r === 'function') return r;
    if (r instanceof RegExp) return (p) => r.test(p);
    if (!r.includes('*') && !r.includes('?')) return (p) => p === r;
    const re = globToRegExp(r);
    return (p) => re.test(p);
  });
  return (path, method) => {
    for (const t of tests) {
      try {
        if (t(path, method)) return true;
      } catch {
        // A user's function that throws ignores nothing.
      }
    }
    return false;
  };
}
