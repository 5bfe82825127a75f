/**
 * Request paths: the endpoint template the service uses when no framework names the route (CONTRACT §9: each
 * segment that is all digits, a UUID, or hex of 8 or more characters becomes `:id`; the query is dropped), and the
 * `ignore` option's matching.
 */

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const DIGITS = /^[0-9]+$/;
const HEX = /^[0-9a-f]{8,}$/i;

export function pathOf(url: string): string {
  const end = url.search(/[?#]/);
  return end < 0 ? url : url.slice(0, end);
}

const isId = (s: string) => s !== '' && (DIGITS.test(s) || UUID.test(s) || HEX.test(s));

export function templatePath(path: string): string {
  // Most paths have no segment to replace: an id holds a digit, or is 8 or more hex letters.
  if (!/[0-9a-fA-F]/.test(path)) return path;
  const segments = path.split('/');
  let changed = false;
  for (let i = 0; i < segments.length; i++) {
    if (isId(segments[i]!)) {
      segments[i] = ':id';
      changed = true;
    }
  }
  return changed ? segments.join('/') : path;
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
