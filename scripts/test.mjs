// `npm test`: install what is missing, build (worker threads run compiled JS), then run every test once; then read
// every line the services of the run logged, and fail if one holds a key, a session token or a password.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build, ensureChromium, ensureDependencies, ensureNatsServer, root } from './setup.mjs';

/** A key or session token as the service makes them (control/secrets.ts). */
const SECRET = /svc_(test|live|sess)_[A-Za-z0-9]{32}/;
/** A password field whose value is not the redaction's. */
const PASSWORD_FIELD = /"(password|newPassword|currentPassword)":"(?!\[redacted\])/;
/** The passwords the tests sign up and log in with (test/support/http.ts and the tests). */
const TEST_PASSWORDS = [
  'correct horse battery staple',
  'long enough password',
  'member password',
  'member secret password',
  'long password 1',
  'another long one',
];

ensureDependencies();
ensureNatsServer();
ensureChromium();
build();
const logDir = mkdtempSync(path.join(os.tmpdir(), 'svc-test-logs-'));
const vitest = path.join(root, 'node_modules', 'vitest', 'vitest.mjs');
const r = spawnSync(process.execPath, [vitest, 'run', ...process.argv.slice(2)], {
  cwd: root,
  stdio: 'inherit',
  env: { ...process.env, SVC_TEST_LOG_DIR: logDir },
});

let lines = 0;
const found = [];
const files = readdirSync(logDir);
for (const file of files) {
  for (const line of readFileSync(path.join(logDir, file), 'utf8').split('\n')) {
    if (!line) continue;
    lines++;
    const password = TEST_PASSWORDS.find((p) => line.includes(p));
    if (SECRET.test(line) || PASSWORD_FIELD.test(line) || password) {
      // Shown masked: the report must not print what it found.
      let shown = line.replace(new RegExp(SECRET, 'g'), 'svc_$1_[found]');
      if (password) shown = shown.replaceAll(password, '[found password]');
      shown = shown.replace(
        /("(?:password|newPassword|currentPassword)":")((?:[^"\\]|\\.)*)"/g,
        '$1[found]"',
      );
      found.push(`${file}: ${shown.slice(0, 300)}`);
    }
  }
}
// The whole suite starts services in-process, which log here: no line at all means the check did not run.
if (lines === 0 && process.argv.length <= 2)
  found.push('no service logged a line: the log check checked nothing');
process.stdout.write(
  `\nlog check: ${lines} lines logged by the run's services (${files.length} logs), ${found.length} with a key, token or password\n`,
);
for (const f of found.slice(0, 10)) process.stdout.write(`  ${f}\n`);
if (found.length === 0) rmSync(logDir, { recursive: true, force: true });
else process.stdout.write(`the logs are kept in ${logDir}\n`);
process.exit(found.length > 0 ? 1 : (r.status ?? 1));
