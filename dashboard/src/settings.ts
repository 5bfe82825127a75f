import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, get, post } from './api.js';
import { copy, html, when } from './html.js';

interface Settings {
  indexedContextKeys: string[];
  outcomeRules: unknown[];
  retentionDays: number;
  healthThresholds: {
    degraded: { failureRate: number; p95Ms: number };
    critical: { failureRate: number; p95Ms: number };
  };
}
interface Key {
  id: string;
  name: string;
  mode: 'test' | 'live';
  permissions: string[];
  prefix: string;
  last4: string;
  createdAt: string;
  lastUsedAt: string | null;
  revokedAt: string | null;
}
interface Member {
  id: string;
  email: string;
  name: string | null;
  role: string;
  createdAt: string;
}

const message = (err: unknown) =>
  err instanceof ApiError
    ? err.details.length > 0
      ? `${err.message}: ${err.details.map((d) => `${d.path} ${d.message}`).join('; ')}`
      : err.message
    : String(err);

const inputValue = (e: Event) => (e.target as HTMLInputElement).value;

/** The number fields of the form, as typed (a field being edited may be empty; it is checked when saved). */
const NUMBER_FIELDS = [
  ['retention', 'Retention (days)', 1, 400, 1],
  // Any fraction: the API takes any number here, and a value set over it must not make the form unsavable.
  ['deg-rate', 'Degraded at failure rate (%)', 0, 100, 'any'],
  ['deg-p95', 'Degraded at p95 (ms)', 0, undefined, 'any'],
  ['crit-rate', 'Critical at failure rate (%)', 0, 100, 'any'],
  ['crit-p95', 'Critical at p95 (ms)', 0, undefined, 'any'],
] as const;
type NumberField = (typeof NUMBER_FIELDS)[number][0];

function numbersOf(s: Settings): Record<NumberField, string> {
  const t = s.healthThresholds;
  // Percentages rounded to what a person typed (0.1 × 100 is 10.000000000000002).
  const percent = (n: number) => String(Math.round(n * 100_000) / 1000);
  return {
    retention: String(s.retentionDays),
    'deg-rate': percent(t.degraded.failureRate),
    'deg-p95': String(t.degraded.p95Ms),
    'crit-rate': percent(t.critical.failureRate),
    'crit-p95': String(t.critical.p95Ms),
  };
}

/** Workspace settings (CONTRACT §10): each field a labelled control, saved together. */
function SettingsForm() {
  const [keys, setKeys] = useState('');
  const [rules, setRules] = useState('');
  const [numbers, setNumbers] = useState<Record<NumberField, string> | null>(null);
  const [status, setStatus] = useState<{ ok: boolean; text: string } | null>(null);
  const show = (r: Settings) => {
    setKeys(r.indexedContextKeys.join('\n'));
    setRules(JSON.stringify(r.outcomeRules, null, 2));
    setNumbers(numbersOf(r));
  };
  useEffect(() => {
    get<Settings>('/api/workspace/settings')
      .then(show)
      .catch((err) => setStatus({ ok: false, text: message(err) }));
  }, []);
  if (!numbers)
    return status ? html`<p role="alert" class="error">${status.text}</p>` : html`<p>Loading…</p>`;
  const save = async (e: Event) => {
    e.preventDefault();
    let outcomeRules: unknown;
    try {
      outcomeRules = JSON.parse(rules || '[]');
    } catch {
      setStatus({ ok: false, text: 'Outcome rules: not valid JSON' });
      return;
    }
    const n = {} as Record<NumberField, number>;
    for (const [id, label] of NUMBER_FIELDS) {
      const v = numbers[id].trim() === '' ? Number.NaN : Number(numbers[id]);
      if (!Number.isFinite(v)) {
        setStatus({ ok: false, text: `${label}: a number is needed` });
        return;
      }
      n[id] = v;
    }
    try {
      const saved = await api<Settings>('PATCH', '/api/workspace/settings', {
        indexedContextKeys: keys
          .split(/[\n,]/)
          .map((k) => k.trim())
          .filter(Boolean),
        outcomeRules,
        retentionDays: n.retention,
        healthThresholds: {
          degraded: { failureRate: n['deg-rate'] / 100, p95Ms: n['deg-p95'] },
          critical: { failureRate: n['crit-rate'] / 100, p95Ms: n['crit-p95'] },
        },
      });
      show(saved);
      setStatus({ ok: true, text: 'Saved. The changes apply to data sent from now on.' });
    } catch (err) {
      setStatus({ ok: false, text: message(err) });
    }
  };
  const field = ([id, label, min, max, step]: (typeof NUMBER_FIELDS)[number]) =>
    html`<label for=${id}>${label}</label>
      <input id=${id} type="number" required min=${min} max=${max} step=${step} value=${numbers[id]}
        onInput=${(e: Event) => setNumbers({ ...numbers, [id]: inputValue(e) })} />`;
  return html`<form class="settings" onSubmit=${save} aria-label="Workspace settings">
    <label for="indexed">Indexed context keys (one dotted path a line)</label>
    <textarea id="indexed" rows="4" value=${keys} onInput=${(e: Event) => setKeys(inputValue(e))}></textarea>
    <label for="rules">Outcome rules (JSON)</label>
    <textarea id="rules" rows="6" value=${rules} onInput=${(e: Event) => setRules(inputValue(e))}></textarea>
    ${field(NUMBER_FIELDS[0])}
    <fieldset><legend>Health thresholds</legend>${NUMBER_FIELDS.slice(1).map(field)}</fieldset>
    ${status ? html`<p role=${status.ok ? 'status' : 'alert'} class=${status.ok ? '' : 'error'}>${status.text}</p>` : null}
    <button type="submit">Save settings</button>
  </form>`;
}

/** API keys: the list, a new key (shown once, with a copy button), revocation. */
function Keys(props: { admin: boolean }) {
  const [keys, setKeys] = useState<Key[]>([]);
  const [name, setName] = useState('');
  const [mode, setMode] = useState<'test' | 'live'>('live');
  const [read, setRead] = useState(false);
  const [created, setCreated] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = () =>
    get<{ data: Key[] }>('/api/keys')
      .then((r) => setKeys(r.data))
      .catch((err) => setError(message(err)));
  useEffect(() => {
    load();
  }, []);
  const create = async (e: Event) => {
    e.preventDefault();
    try {
      const k = await post<Key & { key: string }>('/api/keys', {
        name,
        mode,
        permissions: read ? ['ingest', 'read'] : ['ingest'],
      });
      setCreated(k.key);
      setName('');
      setError(null);
      await load();
    } catch (err) {
      setError(message(err));
    }
  };
  const revoke = async (k: Key) => {
    if (!confirm(`Revoke ${k.name} (${k.prefix}…${k.last4})? Requests with it are refused at once.`)) return;
    try {
      await api('DELETE', `/api/keys/${k.id}`);
      await load();
    } catch (err) {
      setError(message(err));
    }
  };
  return html`<section aria-label="API keys"><h2>API keys</h2>
    ${error ? html`<p role="alert" class="error">${error}</p>` : null}
    ${
      created
        ? html`<div class="new-key" role="status">
            <p>Your new key, shown this once (only its hash is kept):</p>
            <code>${created}</code>
            <button type="button" onClick=${(e: Event) => copy(created, (e.target as Element).previousElementSibling)}>Copy</button>
            <button type="button" class="link" onClick=${() => setCreated(null)}>Done</button>
          </div>`
        : null
    }
    <div class="scroll"><table aria-label="Keys"><thead><tr><th>Name</th><th>Key</th><th>Mode</th><th>Permissions</th><th>Last used</th><th></th></tr></thead>
      <tbody>${keys.map(
        (
          k,
        ) => html`<tr class=${k.revokedAt ? 'revoked' : ''}><td>${k.name}</td><td><code>${k.prefix}…${k.last4}</code></td><td>${k.mode}</td>
          <td>${k.permissions.join(', ')}</td><td>${k.lastUsedAt ? when(k.lastUsedAt) : 'never'}</td>
          <td>${k.revokedAt ? `revoked ${when(k.revokedAt)}` : props.admin ? html`<button type="button" onClick=${() => revoke(k)} aria-label=${`Revoke ${k.name}`}>Revoke</button>` : null}</td></tr>`,
      )}</tbody></table></div>
    ${props.admin ? null : html`<p>Only owners and admins create and revoke keys.</p>`}
    ${
      props.admin
        ? html`<form class="inline" onSubmit=${create} aria-label="New key">
        <label for="key-name">Key name</label>
        <input id="key-name" required maxlength="100" value=${name} onInput=${(e: Event) => setName(inputValue(e))} />
        <label for="key-mode">Mode</label>
        <select id="key-mode" value=${mode} onChange=${(e: Event) => setMode((e.target as HTMLSelectElement).value as 'test' | 'live')}>
          <option value="live">live</option><option value="test">test</option>
        </select>
        <label><input type="checkbox" checked=${read} onChange=${(e: Event) => setRead((e.target as HTMLInputElement).checked)} /> can read</label>
        <button type="submit">Create key</button>
      </form>`
        : null
    }
  </section>`;
}

/** Members: the list, adding one (with a first password), removing one. */
function Members(props: { admin: boolean; userId: string }) {
  const [members, setMembers] = useState<Member[]>([]);
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [role, setRole] = useState('member');
  const [error, setError] = useState<string | null>(null);
  const load = () =>
    get<{ data: Member[] }>('/api/workspace/members')
      .then((r) => setMembers(r.data))
      .catch((err) => setError(message(err)));
  useEffect(() => {
    load();
  }, []);
  const add = async (e: Event) => {
    e.preventDefault();
    try {
      await post('/api/workspace/members', { email, password, role });
      setEmail('');
      setPassword('');
      setError(null);
      await load();
    } catch (err) {
      setError(message(err));
    }
  };
  const remove = async (m: Member) => {
    if (!confirm(`Remove ${m.email}? Their sessions end at once.`)) return;
    try {
      await api('DELETE', `/api/workspace/members/${m.id}`);
      await load();
    } catch (err) {
      setError(message(err));
    }
  };
  return html`<section aria-label="Members"><h2>Members</h2>
    ${error ? html`<p role="alert" class="error">${error}</p>` : null}
    <div class="scroll"><table aria-label="Members"><thead><tr><th>Email</th><th>Role</th><th>Since</th><th></th></tr></thead>
      <tbody>${members.map(
        (m) => html`<tr><td>${m.email}</td><td>${m.role}</td><td>${when(m.createdAt)}</td>
          <td>${m.role === 'owner' || !props.admin || m.id === props.userId ? null : html`<button type="button" onClick=${() => remove(m)} aria-label=${`Remove ${m.email}`}>Remove</button>`}</td></tr>`,
      )}</tbody></table></div>
    ${
      props.admin
        ? html`<form class="inline" onSubmit=${add} aria-label="New member">
        <label for="member-email">Member email</label>
        <input id="member-email" type="email" required value=${email} onInput=${(e: Event) => setEmail(inputValue(e))} />
        <label for="member-password">First password</label>
        <input id="member-password" type="password" required minlength="10" autocomplete="new-password" value=${password} onInput=${(e: Event) => setPassword(inputValue(e))} />
        <label for="member-role">Role</label>
        <select id="member-role" value=${role} onChange=${(e: Event) => setRole((e.target as HTMLSelectElement).value)}>
          <option value="member">member</option><option value="admin">admin</option>
        </select>
        <button type="submit">Add member</button>
      </form>`
        : null
    }
  </section>`;
}

/**
 * Settings (CONTRACT §14): workspace settings, API keys, members. A plain member sees the keys and members; the
 * controls that only owners and admins may use (CONTRACT §10) are not offered.
 */
export function SettingsPage(props: { role: string; userId: string }) {
  const admin = props.role === 'owner' || props.role === 'admin';
  return html`<main class="detail">
    <h1>Settings</h1>
    ${admin ? html`<${SettingsForm} />` : html`<p>Only owners and admins see and change the workspace's settings.</p>`}
    <${Keys} admin=${admin} />
    <${Members} admin=${admin} userId=${props.userId} />
  </main>`;
}
