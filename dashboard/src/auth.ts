import { useState } from 'preact/hooks';
import { ApiError, post } from './api.js';
import { html } from './html.js';
import { navigate } from './router.js';

/** What sign-up answers: the test key is kept in memory only, for the empty state's curl (CONTRACT §14). */
export interface SignupAnswer {
  testKey?: { key: string; prefix: string; last4: string };
}
export let freshTestKey: string | null = null;

/** Sign-in and sign-up (CONTRACT §2, §14): fields `Email`, `Password`; buttons `Log in`, `Sign up`. */
export function AuthPage(props: { mode: 'login' | 'signup'; next: string; onSignedIn: () => Promise<void> }) {
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const signup = props.mode === 'signup';
  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const answer = await post<SignupAnswer>(signup ? '/api/auth/signup' : '/api/auth/login', {
        email,
        password,
      });
      freshTestKey = signup ? (answer.testKey?.key ?? null) : null;
      // Who is signed in first, then the view: the app shows the sign-in form while it knows no one.
      await props.onSignedIn();
      navigate(props.next || '/executions', true);
    } catch (err) {
      setError(
        err instanceof ApiError
          ? err.details.length > 0
            ? err.details.map((d) => `${d.path}: ${d.message}`).join('; ')
            : err.message
          : String(err),
      );
    } finally {
      setBusy(false);
    }
  };
  const other = `${signup ? '/login' : '/signup'}${props.next ? `?next=${encodeURIComponent(props.next)}` : ''}`;
  return html`<main class="auth">
    <h1>${signup ? 'Create your workspace' : 'Sign in'}</h1>
    <form onSubmit=${submit}>
      <label for="email">Email</label>
      <input id="email" type="email" autocomplete="username" required value=${email}
        onInput=${(e: Event) => setEmail((e.target as HTMLInputElement).value)} />
      <label for="password">Password</label>
      <input id="password" type="password" autocomplete=${signup ? 'new-password' : 'current-password'} required
        minlength=${signup ? 10 : undefined} value=${password}
        onInput=${(e: Event) => setPassword((e.target as HTMLInputElement).value)} />
      ${error ? html`<p role="alert" class="error">${error}</p>` : null}
      <button type="submit" disabled=${busy}>${signup ? 'Sign up' : 'Log in'}</button>
    </form>
    <p>${signup ? 'Already have an account? ' : 'New here? '}<a href=${other}>${signup ? 'Log in' : 'Sign up'}</a></p>
  </main>`;
}
