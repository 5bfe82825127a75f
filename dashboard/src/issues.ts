import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, get, post, qs, useAnswer } from './api.js';
import { Chart, type ChartSeries } from './chart.js';
import { html, when } from './html.js';
import { type Location, navigate, withParams } from './router.js';

const STATUSES = ['open', 'regressed', 'acknowledged', 'resolved', 'ignored'] as const;
type Status = (typeof STATUSES)[number];

interface IssueRow {
  id: string;
  title: string;
  status: Status;
  service: string;
  endpoint: string;
  failureType: string;
  exceptionType: string | null;
  lastSeenAt: string;
  firstSeenAt: string;
  occurrences: { total: number; last24h: number; last7d: number };
  assignee: string | null;
}

interface Member {
  id: string;
  email: string;
  name: string | null;
}

const SORTS: [string, string][] = [
  ['-lastSeenAt', 'Last seen'],
  ['-firstSeenAt', 'First seen'],
  ['-occurrences', 'Occurrences'],
];

function useMembers(): Member[] {
  const [members, setMembers] = useState<Member[]>([]);
  useEffect(() => {
    get<{ data: Member[] }>('/api/workspace/members')
      .then((r) => setMembers(r.data))
      .catch(() => setMembers([]));
  }, []);
  return members;
}

/** Issues (CONTRACT §14): tabs by status with their counts, sort, assignee; a table whose rows link to each issue. */
export function IssuesPage(props: { loc: Location }) {
  const { params } = props.loc;
  const status = (params.get('status') as Status | null) ?? 'open';
  const sort = params.get('sort') ?? '-lastSeenAt';
  const assignee = params.get('assignee') ?? '';
  const page = Number(params.get('page') ?? '1') || 1;
  const members = useMembers();
  const { data: list, error } = useAnswer(
    (signal) =>
      get<{ data: IssueRow[]; total: number; hasMore: boolean }>(
        `/api/issues${qs({ status, sort, assignee, page, pageSize: 50 })}`,
        signal,
      ),
    [props.loc],
  );
  // The tabs' counts: they change with the assignee filter (and the mode), not with the tab, sort or page.
  const counts =
    useAnswer(
      (signal) =>
        Promise.all(
          STATUSES.map((s) =>
            get<{ total: number }>(`/api/issues${qs({ status: s, assignee, pageSize: 1 })}`, signal).then(
              (r) => [s, r.total] as const,
            ),
          ),
        ).then((pairs): Partial<Record<Status, number>> => Object.fromEntries(pairs)),
      [assignee, params.get('mode')],
    ).data ?? {};
  const set = (changes: Record<string, string | number | null>) => navigate(withParams(params, changes));
  const who = (id: string | null) => (id ? (members.find((m) => m.id === id)?.email ?? id) : '–');
  return html`<main>
    <h1>Issues</h1>
    <nav class="tabs" aria-label="Status">
      ${STATUSES.map(
        (s) =>
          html`<a href=${withParams(params, { status: s, page: null })} aria-current=${s === status ? 'page' : undefined}>
            ${s[0]!.toUpperCase() + s.slice(1)} <span class="count">${counts[s] ?? ''}</span></a>`,
      )}
    </nav>
    <div class="search">
      <label for="sort">Sort</label>
      <select id="sort" value=${sort} onChange=${(e: Event) => set({ sort: (e.target as HTMLSelectElement).value, page: null })}>
        ${SORTS.map(([v, l]) => html`<option value=${v}>${l}</option>`)}
      </select>
      <label for="assignee-filter">Assigned to</label>
      <select id="assignee-filter" value=${assignee} onChange=${(e: Event) => set({ assignee: (e.target as HTMLSelectElement).value, page: null })}>
        <option value="">Anyone</option><option value="none">Nobody</option>
        ${members.map((m) => html`<option value=${m.id}>${m.email}</option>`)}
      </select>
    </div>
    ${error ? html`<p role="alert" class="error">${error.message}</p>` : null}
    ${
      list && list.total === 0
        ? html`<p>No ${status} issues.</p>`
        : list
          ? html`<div class="scroll"><table>
              <thead><tr><th>Issue</th><th>Service</th><th>Events (24 h)</th><th>Last seen</th><th>Assignee</th></tr></thead>
              <tbody>${list.data.map(
                (i) => html`<tr>
                  <td><a href=${`/issues/${i.id}`}>${i.title}</a></td>
                  <td>${i.service}</td>
                  <td class="num">${i.occurrences.total.toLocaleString()} (${i.occurrences.last24h.toLocaleString()})</td>
                  <td>${when(i.lastSeenAt)}</td>
                  <td>${who(i.assignee)}</td>
                </tr>`,
              )}</tbody></table></div>
              <nav class="pager" aria-label="Pages">
                <button type="button" disabled=${page <= 1} onClick=${() => set({ page: page - 1 })}>Previous</button>
                <span>Page ${page}</span>
                <button type="button" disabled=${!list.hasMore} onClick=${() => set({ page: page + 1 })}>Next</button>
              </nav>`
          : html`<p>Loading…</p>`
    }
  </main>`;
}

interface IssueDetail extends IssueRow {
  fingerprintParts: string[];
  environments: string[];
  method: string | null;
  statusChangedAt: string;
  resolvedAt: string | null;
  hypothesis: { text: string; facts: string[] };
  suggestedFix: { text: string; facts: string[] };
  commonFactors: {
    field: string;
    value: string | number | boolean | null;
    issueShare: number;
    baselineShare: number;
  }[];
  representativeExecution: {
    executionId: string;
    startedAt: string;
    endpoint: string;
    statusCode: number | null;
  } | null;
  recentActivity: {
    id: string;
    type: string;
    actor: { type: string; id?: string };
    at: string;
    data: Record<string, unknown>;
  }[];
}

interface Comment {
  id: string;
  body: string;
  author: { id: string; email: string };
  createdAt: string;
}

/** The moves a status allows (CONTRACT §9), as the buttons that make them. */
const MOVES: Record<Status, [string, Status][]> = {
  open: [
    ['Acknowledge', 'acknowledged'],
    ['Resolve', 'resolved'],
    ['Ignore', 'ignored'],
  ],
  acknowledged: [
    ['Resolve', 'resolved'],
    ['Ignore', 'ignored'],
    ['Reopen', 'open'],
  ],
  regressed: [
    ['Acknowledge', 'acknowledged'],
    ['Resolve', 'resolved'],
    ['Ignore', 'ignored'],
  ],
  resolved: [['Reopen', 'open']],
  ignored: [['Reopen', 'open']],
};

const pct = (n: number) => `${Math.round(n * 100)} %`;

/** One issue (CONTRACT §14): its evidence, its history, and the controls to work it. */
export function IssuePage(props: { id: string }) {
  const [issue, setIssue] = useState<IssueDetail | null>(null);
  const [comments, setComments] = useState<Comment[]>([]);
  const [occurrences, setOccurrences] = useState<{ times: number[]; series: ChartSeries[] } | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [draft, setDraft] = useState('');
  const [busy, setBusy] = useState(false);
  const members = useMembers();
  const url = `/api/issues/${encodeURIComponent(props.id)}`;
  const loadComments = () =>
    get<{ data: Comment[] }>(`${url}/comments?pageSize=200`)
      .then((r) => setComments(r.data))
      .catch(() => {});
  useEffect(() => {
    get<IssueDetail>(url)
      .then((i) => {
        setIssue(i);
        const to = Date.now();
        const from = to - 7 * 86_400_000;
        return get<{ series: { points: { t: string; value: number | null }[] }[] }>(
          `/api/metrics/timeseries${qs({ metric: 'requests', issueId: i.id, interval: '1h', from: new Date(from).toISOString(), to: new Date(to).toISOString() })}`,
        ).then((t) => {
          const points = t.series[0]?.points ?? [];
          // Made once: the chart is drawn again only when these change, not at every keystroke in the comment box.
          setOccurrences({
            times: points.map((p) => Date.parse(p.t) / 1000),
            series: [{ label: 'occurrences', values: points.map((p) => p.value), color: '#b3261e' }],
          });
        });
      })
      .catch((err) =>
        setError(
          err instanceof ApiError && err.status === 404 ? 'No such issue.' : String(err.message ?? err),
        ),
      );
    loadComments();
  }, [props.id]);
  const change = async (body: Record<string, unknown>) => {
    setBusy(true);
    try {
      setIssue({ ...(issue as IssueDetail), ...(await api<IssueDetail>('PATCH', url, body)) });
      setError(null);
    } catch (err) {
      setError(String((err as Error).message ?? err));
    } finally {
      setBusy(false);
    }
  };
  const comment = async (e: Event) => {
    e.preventDefault();
    if (!draft.trim()) return;
    setBusy(true);
    try {
      await post(`${url}/comments`, { body: draft });
      setDraft('');
      await loadComments();
      setIssue(await get<IssueDetail>(url));
    } catch (err) {
      setError(String((err as Error).message ?? err));
    } finally {
      setBusy(false);
    }
  };
  if (!issue)
    return html`<main><h1>Issue</h1>${error ? html`<p role="alert">${error}</p>` : html`<p>Loading…</p>`}</main>`;
  return html`<main class="detail">
    <h1>${issue.title}</h1>
    <p class="meta">${issue.status} · ${issue.service} · ${issue.environments.join(', ')} · first seen ${when(issue.firstSeenAt)} · last seen ${when(issue.lastSeenAt)}</p>
    ${error ? html`<p role="alert" class="error">${error}</p>` : null}
    <div class="actions">
      ${MOVES[issue.status].map(
        ([label, to]) =>
          html`<button type="button" disabled=${busy} onClick=${() => change({ status: to })}>${label}</button>`,
      )}
      <label for="assignee">Assignee</label>
      <select id="assignee" disabled=${busy} value=${issue.assignee ?? ''}
        onChange=${(e: Event) => change({ assignee: (e.target as HTMLSelectElement).value || null })}>
        <option value="">Nobody</option>
        ${members.map((m) => html`<option value=${m.id}>${m.email}</option>`)}
      </select>
    </div>
    <section aria-label="Occurrences"><h2>Occurrences</h2>
      <p>${issue.occurrences.total.toLocaleString()} in all, ${issue.occurrences.last24h.toLocaleString()} in the last 24 h, ${issue.occurrences.last7d.toLocaleString()} in 7 days</p>
      ${occurrences ? html`<${Chart} label="Occurrences over time" times=${occurrences.times} series=${occurrences.series} />` : null}
    </section>
    <section aria-label="Fingerprint"><h2>Fingerprint</h2>
      <ol class="parts">${issue.fingerprintParts.map((p) => html`<li><code>${p || '(none)'}</code></li>`)}</ol>
    </section>
    <section aria-label="Hypothesis"><h2>Hypothesis</h2><p>${issue.hypothesis.text}</p>
      ${issue.hypothesis.facts.length ? html`<ul>${issue.hypothesis.facts.map((f) => html`<li>${f}</li>`)}</ul>` : null}</section>
    <section aria-label="Suggested fix"><h2>Suggested fix</h2><p>${issue.suggestedFix.text}</p>
      ${issue.suggestedFix.facts.length ? html`<ul>${issue.suggestedFix.facts.map((f) => html`<li>${f}</li>`)}</ul>` : null}</section>
    <section aria-label="Common factors"><h2>Common factors</h2>
      ${
        issue.commonFactors.length === 0
          ? html`<p>None stands out against the endpoint's successful executions.</p>`
          : html`<ul class="factors">${issue.commonFactors.map(
              (f) => html`<li><span>${f.field} = ${String(f.value)}</span>
                <span class="bar" role="img" aria-label=${`${pct(f.issueShare)} of this issue against ${pct(f.baselineShare)} of the baseline`}>
                  <span class="issue" style=${`width:${f.issueShare * 100}%`}></span>
                  <span class="base" style=${`width:${f.baselineShare * 100}%`}></span>
                </span>
                <span>${pct(f.issueShare)} vs ${pct(f.baselineShare)}</span></li>`,
            )}</ul>`
      }
    </section>
    <section aria-label="Executions"><h2>Executions</h2>
      ${issue.representativeExecution ? html`<p>Representative: <a href=${`/executions/${encodeURIComponent(issue.representativeExecution.executionId)}`}>${issue.representativeExecution.executionId}</a> (${when(issue.representativeExecution.startedAt)})</p>` : null}
      <p><a href=${`/executions?q=${encodeURIComponent(`issue:${issue.id}`)}&range=7d`}>All executions of this issue</a></p>
    </section>
    <section aria-label="Comments"><h2>Comments</h2>
      <ul class="comments">${comments.map((c) => html`<li><p>${c.body}</p><p class="meta">${c.author.email} · ${when(c.createdAt)}</p></li>`)}</ul>
      <form onSubmit=${comment}>
        <label for="comment">Comment</label>
        <textarea id="comment" rows="3" maxlength="10000" value=${draft} onInput=${(e: Event) => setDraft((e.target as HTMLTextAreaElement).value)}></textarea>
        <button type="submit" disabled=${busy || !draft.trim()}>Add comment</button>
      </form>
    </section>
    <section aria-label="Activity"><h2>Activity</h2>
      <ul class="activity">${issue.recentActivity.map(
        (a) =>
          html`<li>${when(a.at)}: ${a.type.replace('_', ' ')}${a.data.to ? ` → ${String(a.data.to)}` : ''} ${a.actor.type === 'system' ? '(system)' : ''}</li>`,
      )}</ul>
    </section>
  </main>`;
}
