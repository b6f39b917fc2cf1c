// Drives the dashboard in Debian's chromium (playwright-core); run by
// tests/browser/run.sh, which starts the services and writes the config:
//   node dashboard.mjs CONFIG.json
// CONFIG: url (the aggregation server, https), admin (token), job (a fedpca
// job parties 1 and 2 joined), job2 (a job nobody joined), spki (the server
// key's SPKI hash), chromium, shots (screenshot dir), agent3 + op + join3
// (the request that makes party 3 join). Prints "ok"/"FAIL" lines and ends
// with "dashboard: P passed, F failed".
import fs from 'node:fs';
import { chromium } from 'playwright-core';

const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
let passed = 0;
let failed = 0;
function check(name, cond, detail) {
  if (cond) {
    passed++;
    console.log(`ok   ${name}`);
  } else {
    failed++;
    console.log(`FAIL ${name}${detail !== undefined ? `: ${detail}` : ''}`);
  }
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const api = async (path, opts = {}) => {
  const r = await fetch(`${cfg.url}${path}`, {
    ...opts,
    headers: { authorization: `Bearer ${cfg.admin}`, ...(opts.headers || {}) },
  });
  return r.json();
};

const consoleMsgs = []; // every console message and page error, in order
const urls = []; // every URL the page requested
const authSeen = []; // Authorization headers of the page's API requests
let browser;

async function main() {
  browser = await chromium.launch({
    executablePath: cfg.chromium,
    headless: true,
    args: ['--no-sandbox', `--ignore-certificate-errors-spki-list=${cfg.spki}`],
  });
  const context = await browser.newContext({ viewport: { width: 1200, height: 900 } });
  const page = await context.newPage();
  page.on('console', (m) => consoleMsgs.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => consoleMsgs.push(`pageerror: ${e.message}`));
  page.on('request', (r) => {
    urls.push(r.url());
    if (new URL(r.url()).pathname.startsWith('/v1/')) authSeen.push(r.headers().authorization || '');
  });
  page.on('response', (r) => {
    if (r.status() >= 400) consoleMsgs.push(`http: ${r.status()} ${new URL(r.url()).pathname}`);
  });
  page.on('dialog', (d) => d.accept());

  // ---- the page and its headers, over TLS
  const resp = await page.goto(`${cfg.url}/`);
  const h = resp.headers();
  const csp = h['content-security-policy'] || '';
  check('the page loads over HTTPS (test CA key pinned)', resp.status() === 200 && page.url().startsWith('https://'));
  check(
    `Content-Security-Policy: script-src 'self', frame-ancestors 'none', no 'unsafe-inline' (${csp})`,
    /script-src 'self'/.test(csp) && /style-src 'self'/.test(csp) && /frame-ancestors 'none'/.test(csp) &&
      /default-src 'none'/.test(csp) && !/unsafe/.test(csp),
  );
  check(
    'X-Content-Type-Options nosniff, Referrer-Policy no-referrer',
    h['x-content-type-options'] === 'nosniff' && h['referrer-policy'] === 'no-referrer',
  );
  const html = await resp.text();
  check('the page has no inline script or style', !/<script>|<script [^>]*>[^<]|<style|style=/.test(html));
  for (const [p, type] of [['/dashboard.js', 'text/javascript'], ['/dashboard.css', 'text/css']]) {
    const r = await page.request.get(`${cfg.url}${p}`);
    check(
      `${p}: ${type}, with the same policy and nosniff`,
      r.status() === 200 && (r.headers()['content-type'] || '').startsWith(type) &&
        r.headers()['content-security-policy'] === csp && r.headers()['x-content-type-options'] === 'nosniff',
    );
  }

  // ---- sign in: the token goes to sessionStorage only
  check('before sign-in: no job list is shown', await page.locator('#list-view').isHidden());
  await page.fill('#token', cfg.admin);
  await page.click('#signin');
  const row = page.locator(`#jobs a[href="#/jobs/${cfg.job}"]`);
  await row.waitFor({ timeout: 15000 });
  check('the list shows both jobs', (await page.locator('#jobs tbody tr').count()) >= 2);
  const store = await page.evaluate(() => ({
    session: sessionStorage.getItem('fedsvd.adminToken'),
    local: localStorage.length,
    cookie: document.cookie,
    input: document.getElementById('token').value,
  }));
  check('sessionStorage holds the token', store.session === cfg.admin);
  check('no localStorage, no cookie, the input cleared', store.local === 0 && store.cookie === '' && store.input === '');
  check('the token is not in the URL', !page.url().includes(cfg.admin));
  const listRow = page.locator('#jobs tbody tr', { has: page.locator(`a[href="#/jobs/${cfg.job}"]`) });
  await page.waitForFunction(
    (id) => {
      const a = document.querySelector(`#jobs a[href="#/jobs/${id}"]`);
      return a && /party 3/.test(a.closest('tr').textContent);
    },
    cfg.job,
    { timeout: 20000 },
  ).catch(() => {});
  check(
    'the list row says the job waits for party 3',
    /Waiting|party 3/.test(await listRow.textContent()) && (await listRow.textContent()).includes('party 3'),
    await listRow.textContent(),
  );
  await page.screenshot({ path: `${cfg.shots}/dashboard-list.png`, fullPage: true });

  // ---- the job page while party 3 is missing
  await row.click();
  await page.waitForURL(`**/#/jobs/${cfg.job}`);
  const waiting = page.locator('#waiting');
  await page
    .waitForFunction(() => document.getElementById('waiting').textContent === 'Waiting for party 3 to join', null, {
      timeout: 20000,
    })
    .catch(() => {});
  check('the job page names the missing party', (await waiting.textContent()) === 'Waiting for party 3 to join',
    await waiting.textContent());
  const prow = (i) => page.locator(`#parties tbody tr[data-party="${i}"]`);
  const cells = async (i) => (await prow(i).locator('td').allTextContents()).map((s) => s.trim());
  const p1 = await cells(1);
  const p3 = await cells(3);
  check('party 1 joined, round 0, sent', p1[1] === 'yes' && p1[2].startsWith('0') && p1[3] === 'yes', p1.join('|'));
  check('party 3 not joined, waited for', p3[1] === 'no' && /waiting for it to join/.test(p3[5]), p3.join('|'));
  const d1 = await page.locator('#deadline').textContent();
  await sleep(2100);
  const d2 = await page.locator('#deadline').textContent();
  const secs = (s) => {
    const m = /^(?:(\d+):)?(\d+):(\d\d) left$/.exec(s || '');
    return m ? Number(m[1] || 0) * 3600 + Number(m[2]) * 60 + Number(m[3]) : NaN;
  };
  check(`the deadline counts down (${d1} -> ${d2})`, secs(d2) < secs(d1) && secs(d1) <= 600, `${d1} -> ${d2}`);
  const ph = await page.locator('#phases tbody tr.current td').allTextContents();
  check('the open phase (advertise keys) with its time and bytes', /Advertise keys/.test(ph[0] || '') &&
    /open/.test(ph[1] || '') && /B/.test(ph[2] || ''), ph.join('|'));
  check('the cancel button is offered while the job runs', await page.locator('#cancel').isVisible());
  await page.screenshot({ path: `${cfg.shots}/dashboard-detail-waiting.png`, fullPage: true });

  // ---- party 3 joins; the page shows the job done and the singular values
  const jr = await fetch(`${cfg.agent3}/v1/participations`, {
    method: 'POST',
    headers: { authorization: `Bearer ${cfg.op}`, 'content-type': 'application/json' },
    body: fs.readFileSync(cfg.join3),
  });
  check('party 3 joins (its agent accepts the invitation)', jr.status === 201, jr.status);
  await page
    .locator('#singular-values tbody tr')
    .first()
    .waitFor({ timeout: 60000 })
    .catch(() => {});
  const state = await page.locator('#summary dd').first().textContent();
  check('the page shows the job done', state === 'done', state);
  check('no party is waited for once done', await waiting.isHidden());
  const shown = (await page.locator('#singular-values td.value').allTextContents()).map(Number);
  const res = await api(`/v1/jobs/${cfg.job}/result`);
  const want = res.singular_values || [];
  const close = shown.length === want.length && want.length === 3 &&
    shown.every((v, i) => Math.abs(v - want[i]) <= 1e-10 * Math.abs(want[i]));
  check(`the singular values shown are the API's (${shown.join(', ')})`, close,
    `shown ${shown.join(',')} api ${want.join(',')}`);
  const files = (await page.locator('#files tbody tr td:first-child').allTextContents()).join(',');
  check(`the result files are listed (${files})`,
    files === (res.files || []).map((f) => f.name).join(',') && files.length > 0, files);
  const times = await page.locator('#phases tbody tr').count();
  check(`the phases with their timings (${times} rows)`, times >= 5);
  check('no cancel button once done', await page.locator('#cancel').isHidden());
  await page.screenshot({ path: `${cfg.shots}/dashboard-detail-done.png`, fullPage: true });

  // ---- cancel the second job from its page
  await page.goto(`${cfg.url}/#/jobs/${cfg.job2}`);
  await page.locator('#cancel').waitFor({ state: 'visible', timeout: 15000 });
  check('a reload keeps the session (sessionStorage) without asking again', await page.locator('#login').isHidden());
  await page.click('#cancel');
  await page
    .waitForFunction(() => /cancelled/.test(document.getElementById('error').textContent), null, {
      timeout: 15000,
    })
    .catch(() => {});
  const err = await page.locator('#error').textContent();
  check(`cancel: the page shows the job failed with the reason (${err})`, /cancelled by the operator/.test(err), err);
  const j2 = await api(`/v1/jobs/${cfg.job2}`);
  check('cancel: the API says the job failed', j2.state === 'failed', j2.state);
  await page.screenshot({ path: `${cfg.shots}/dashboard-detail-cancelled.png`, fullPage: true });

  // ---- the token in requests and URLs; the console
  check(`the token is in no URL the page requested (${urls.length} requests)`,
    urls.length > 5 && urls.every((u) => !u.includes(cfg.admin)));
  check(`every API request carried it as a bearer token (${authSeen.length})`,
    authSeen.length > 3 && authSeen.every((a) => a === `Bearer ${cfg.admin}`));
  const bad = consoleMsgs.filter((m) => /Content.Security.Policy|Refused to|^error|^pageerror|^http/i.test(m));
  check('no console errors (no CSP violation) while the page was used', bad.length === 0, bad.join(' / '));
  // the policy is enforced: an inline script added now is refused
  await page.evaluate(() => {
    const s = document.createElement('script');
    s.textContent = 'window.inlineRan = true;';
    document.body.append(s);
  });
  await sleep(200);
  const ran = await page.evaluate(() => window.inlineRan === true);
  check('an injected inline script is refused (CSP enforced)', !ran &&
    consoleMsgs.some((m) => /Content Security Policy/.test(m)), consoleMsgs.slice(-3).join(' / '));
  await page.click('#signout');
  check('sign out clears sessionStorage', (await page.evaluate(() => sessionStorage.length)) === 0);
}

try {
  await main();
} catch (e) {
  check('the browser run', false, e && e.stack ? e.stack : String(e));
} finally {
  if (browser) await browser.close().catch(() => {});
}
console.log(`dashboard: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
