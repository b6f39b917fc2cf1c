// The aggregation server's dashboard: a job list (#/) and a page per job
// (#/jobs/ID), read from the admin API with the token the user typed. The
// token stays in this tab's sessionStorage and travels only in the
// Authorization header: never in a URL, a cookie or localStorage. Every
// string from the server is inserted with textContent (no innerHTML), and the
// page loads nothing but this script and dashboard.css (see the
// Content-Security-Policy it is served with).
'use strict';

(() => {
  const TOKEN_KEY = 'fedsvd.adminToken';
  const POLL_MS = 2000;
  const JOB_ID = /^j-[0-9a-f]{32}$/;
  const PHASES = [
    ['advertise_keys', 'waiting_for_parties', 'Advertise keys (join)'],
    ['share_keys', 'share_keys', 'Share keys'],
    ['exponents', 'exponents', 'Exponents'],
    ['masked_input', 'masked_input', 'Masked input'],
    ['consistency', 'consistency', 'Consistency'],
    ['unmasking', 'unmasking', 'Unmasking'],
    ['factorizing', 'factorizing', 'Factorizing'],
    ['noise_exchange', 'noise_exchange', 'Noise exchange'],
    ['plain_upload', 'plain_upload', 'Plain upload'],
  ];
  const ROUND_NAME = ['advertise keys', 'share keys', 'masked input', 'consistency', 'unmasking'];

  const $ = (id) => document.getElementById(id);
  let timer = null;
  let deadline = null; // {at: ms since epoch (local clock), job}
  let results = new Map(); // job id -> Result document (done jobs)
  let generation = 0; // bumps on every route change: late replies are dropped

  // ---- small DOM helpers (text only)
  function el(tag, opts, ...kids) {
    const e = document.createElement(tag);
    if (opts) {
      if (opts.cls) e.className = opts.cls;
      if (opts.href) e.setAttribute('href', opts.href);
      if (opts.title) e.title = opts.title;
    }
    for (const k of kids) {
      e.append(k instanceof Node ? k : document.createTextNode(k == null ? '' : String(k)));
    }
    return e;
  }
  const td = (v, cls) => el('td', cls ? { cls } : null, v);
  const setText = (id, v) => {
    $(id).textContent = v == null ? '' : String(v);
  };
  const fmtBytes = (n) => {
    if (typeof n !== 'number') return '';
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    let x = n;
    while (x >= 1024 && i < u.length - 1) {
      x /= 1024;
      i++;
    }
    return i === 0 ? `${n} B` : `${x.toFixed(1)} ${u[i]} (${n})`;
  };
  const fmtSecs = (s) => (typeof s === 'number' ? s.toFixed(s < 10 ? 2 : 1) : '');
  const fmtCountdown = (s) => {
    const t = Math.max(0, Math.round(s));
    const h = Math.floor(t / 3600);
    const m = Math.floor((t % 3600) / 60);
    const sec = t % 60;
    const pad = (x) => String(x).padStart(2, '0');
    return h > 0 ? `${h}:${pad(m)}:${pad(sec)}` : `${m}:${pad(sec)}`;
  };
  const parties = (ids) => (ids.length === 1 ? `party ${ids[0]}` : `parties ${ids.join(', ')}`);

  // ---- the token: sessionStorage of this tab only
  const token = () => sessionStorage.getItem(TOKEN_KEY) || '';
  function showSession() {
    const on = token() !== '';
    $('login').hidden = on;
    $('session').hidden = !on;
  }

  class ApiError extends Error {
    constructor(status, detail) {
      super(detail);
      this.status = status;
    }
  }

  async function api(method, path) {
    const r = await fetch(path, {
      method,
      headers: { Authorization: `Bearer ${token()}`, Accept: 'application/json' },
      cache: 'no-store',
      credentials: 'omit',
      referrerPolicy: 'no-referrer',
    });
    let body = null;
    try {
      body = await r.json();
    } catch (e) {
      body = null;
    }
    if (!r.ok) {
      const detail = body && typeof body.detail === 'string' ? body.detail : `HTTP ${r.status}`;
      throw new ApiError(r.status, detail);
    }
    return body;
  }

  function message(text) {
    setText('msg', text);
  }

  function failed(e) {
    if (e instanceof ApiError && e.status === 401) {
      sessionStorage.removeItem(TOKEN_KEY);
      showSession();
      message('The token was refused; sign in again.');
      stop();
      return;
    }
    message(e instanceof ApiError ? `${e.status}: ${e.message}` : `Cannot reach the server (${e})`);
  }

  // ---- the job list
  async function showList(gen) {
    const doc = await api('GET', '/v1/jobs');
    if (gen !== generation) return;
    message('');
    const tb = $('jobs').tBodies[0];
    const rows = [];
    for (const j of doc.jobs) {
      if (!JOB_ID.test(j.id)) continue;
      const waiting = Array.isArray(j.waiting_for) ? j.waiting_for : [];
      const joined = Array.isArray(j.party_states)
        ? j.party_states.filter((p) => p.joined).length
        : j.present.length;
      const tr = el(
        'tr',
        null,
        el('td', { cls: 'mono' }, el('a', { href: `#/jobs/${j.id}` }, j.id)),
        td(j.name),
        td(j.algorithm),
        td(j.state, `state-${j.state}`),
        td(j.phase),
        td(`${joined}/${j.parties}`, 'num'),
        td(waiting.length ? parties(waiting) : '', waiting.length ? 'wait' : ''),
        td(j.created_at),
      );
      rows.push(tr);
    }
    tb.replaceChildren(...rows);
    $('no-jobs').hidden = rows.length > 0;
  }

  // ---- one job
  function summary(j) {
    const items = [
      ['State', j.state],
      ['Phase', j.phase],
      ['Algorithm', j.algorithm],
      ['Aggregation', `${j.aggregation + 1} of ${j.aggregations}`],
      ['Parties', `${j.parties} (threshold ${j.threshold})`],
      ['Shape', `${j.shape[0]} x ${j.shape[1]}`],
      ['Created', j.created_at],
      ['Round timeout', `${j.round_timeout_s} s`],
      ['Bytes in / out', `${fmtBytes(j.bytes_in)} / ${fmtBytes(j.bytes_out)}`],
    ];
    if (j.join_timeout_s != null) items.splice(8, 0, ['Join timeout', `${j.join_timeout_s} s`]);
    if (j.k != null) items.push(['k', j.k]);
    const dl = $('summary');
    const kids = [];
    for (const [k, v] of items) kids.push(el('dt', null, k), el('dd', null, v));
    const dd = el('dd', null);
    dd.id = 'deadline';
    kids.push(el('dt', null, 'Deadline'), dd);
    dl.replaceChildren(...kids);
    deadline =
      typeof j.deadline_in_s === 'number' ? { at: Date.now() + j.deadline_in_s * 1000 } : null;
    renderDeadline();
  }

  function renderDeadline() {
    const d = $('deadline');
    if (!d) return;
    if (deadline === null) {
      d.textContent = 'none (no round open)';
      d.className = '';
      return;
    }
    const left = (deadline.at - Date.now()) / 1000;
    d.textContent = `${fmtCountdown(left)} left`;
    d.className = left < 30 ? 'wait' : '';
  }

  function partyRows(j) {
    const rows = [];
    const states = Array.isArray(j.party_states) ? j.party_states : [];
    for (const p of states) {
      let status = '';
      let cls = '';
      if (p.dropped) {
        status = 'dropped';
        cls = 'state-failed';
      } else if (p.waiting) {
        status = j.phase === 'waiting_for_parties' ? 'waiting for it to join' : 'waiting for its message';
        cls = 'wait';
      } else if (p.expected && p.sent) {
        status = 'sent; waiting for the others';
      } else if (j.state === 'done') {
        status = 'done';
        cls = 'state-done';
      } else if (j.state === 'failed') {
        status = 'job failed';
      } else if (p.joined) {
        status = 'in the job';
      }
      const round =
        typeof p.round === 'number' ? `${p.round} (${ROUND_NAME[p.round] || ''})` : p.expected ? j.phase : '';
      const tr = el(
        'tr',
        p.waiting ? { cls: 'current' } : null,
        td(`party ${p.party}`),
        td(p.joined ? 'yes' : 'no', p.joined ? '' : 'wait'),
        td(round),
        td(p.expected ? (p.sent ? 'yes' : 'no') : ''),
        td(p.dropped ? 'yes' : 'no', p.dropped ? 'state-failed' : ''),
        td(status, cls),
      );
      tr.dataset.party = String(p.party);
      rows.push(tr);
    }
    $('parties').tBodies[0].replaceChildren(...rows);
  }

  function phaseRows(j) {
    const rows = [];
    const bytes = j.bytes_by_phase || {};
    for (const [key, phase, label] of PHASES) {
      const cur = j.state === 'running' && j.phase === phase;
      const t = j.timings[key];
      const b = bytes[key];
      if (t == null && b == null && !cur) continue;
      let time = fmtSecs(t);
      if (cur && typeof j.phase_elapsed_s === 'number') {
        time = `${fmtSecs((t || 0) + j.phase_elapsed_s)} (open)`;
      }
      rows.push(
        el(
          'tr',
          cur ? { cls: 'current' } : null,
          td(label),
          td(time, 'num'),
          td(b ? fmtBytes(b.in) : '', 'num'),
          td(b ? fmtBytes(b.out) : '', 'num'),
        ),
      );
    }
    $('phases').tBodies[0].replaceChildren(...rows);
  }

  function download(jobId, name) {
    fetch(`/v1/jobs/${jobId}/result/${encodeURIComponent(name)}`, {
      headers: { Authorization: `Bearer ${token()}` },
      cache: 'no-store',
      credentials: 'omit',
      referrerPolicy: 'no-referrer',
    })
      .then((r) => {
        if (!r.ok) throw new ApiError(r.status, `cannot download ${name}`);
        return r.blob();
      })
      .then((b) => {
        const u = URL.createObjectURL(b);
        const a = el('a', { href: u });
        a.download = name;
        document.body.append(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(u), 10000);
      })
      .catch(failed);
  }

  function showResult(jobId, res) {
    $('result').hidden = false;
    const values = Array.isArray(res.singular_values)
      ? res.singular_values
      : Array.isArray(res.eigenvalues)
        ? res.eigenvalues
        : null;
    $('singular').hidden = values === null;
    if (values !== null) {
      setText('values-title', Array.isArray(res.singular_values) ? 'Singular values' : 'Eigenvalues');
      const total = typeof res.total_sq === 'number' && res.total_sq > 0 ? res.total_sq : null;
      const rows = values.map((v, i) =>
        el(
          'tr',
          null,
          td(i + 1, 'num'),
          td(typeof v === 'number' ? v.toPrecision(12) : String(v), 'num value'),
          td(total !== null && typeof v === 'number' ? `${((100 * v * v) / total).toFixed(2)} %` : '', 'num'),
        ),
      );
      $('singular-values').tBodies[0].replaceChildren(...rows);
    }
    const files = Array.isArray(res.files) ? res.files : [];
    $('files').tBodies[0].replaceChildren(
      ...files.map((f) => {
        const b = el('button', null, 'Download');
        b.type = 'button';
        b.addEventListener('click', () => download(jobId, f.name));
        return el(
          'tr',
          null,
          td(f.name, 'mono'),
          td(Array.isArray(f.shape) ? f.shape.join(' x ') : ''),
          td(f.sha256, 'mono'),
          el('td', null, b),
        );
      }),
    );
  }

  async function showJob(id, gen) {
    const j = await api('GET', `/v1/jobs/${id}`);
    if (gen !== generation) return;
    message('');
    setText('job-name', j.name || '(no name)');
    setText('job-id', j.id);
    summary(j);
    const waiting = Array.isArray(j.waiting_for) ? j.waiting_for : [];
    const w = $('waiting');
    if (j.state === 'running' && waiting.length > 0) {
      w.textContent =
        j.phase === 'waiting_for_parties'
          ? `Waiting for ${parties(waiting)} to join`
          : `Waiting for ${parties(waiting)} (${j.phase})`;
      w.hidden = false;
    } else if (j.state === 'running') {
      w.textContent = `Working: ${j.phase}`;
      w.hidden = false;
    } else {
      w.hidden = true;
    }
    $('error').hidden = j.error == null;
    setText('error', j.error == null ? '' : `Error: ${j.error}`);
    $('cancel').hidden = j.state !== 'running';
    $('cancel').disabled = false;
    partyRows(j);
    phaseRows(j);
    if (j.state === 'done') {
      let res = results.get(j.id);
      if (!res) {
        res = await api('GET', `/v1/jobs/${j.id}/result`);
        if (gen !== generation) return;
        results.set(j.id, res);
      }
      showResult(j.id, res);
    } else {
      $('result').hidden = true;
    }
  }

  async function cancelJob() {
    const m = /^#\/jobs\/(j-[0-9a-f]{32})$/.exec(location.hash);
    if (!m || !window.confirm(`Cancel job ${m[1]}? The parties stop and the job fails.`)) return;
    $('cancel').disabled = true;
    try {
      await api('DELETE', `/v1/jobs/${m[1]}`);
      message('');
    } catch (e) {
      failed(e);
    }
    refresh();
  }

  // ---- routing and polling
  function stop() {
    if (timer !== null) clearTimeout(timer);
    timer = null;
  }

  async function refresh() {
    stop();
    const gen = generation;
    if (token() === '') {
      $('list-view').hidden = true;
      $('job-view').hidden = true;
      return;
    }
    const m = /^#\/jobs\/([^/]*)$/.exec(location.hash);
    try {
      if (m) {
        $('list-view').hidden = true;
        $('job-view').hidden = false;
        if (!JOB_ID.test(m[1])) {
          message('Not a job id.');
          return;
        }
        await showJob(m[1], gen);
      } else {
        $('job-view').hidden = true;
        $('list-view').hidden = false;
        await showList(gen);
      }
    } catch (e) {
      if (gen === generation) failed(e);
    }
    if (gen === generation && token() !== '') timer = setTimeout(refresh, POLL_MS);
  }

  function route() {
    generation++;
    deadline = null;
    refresh();
  }

  function init() {
    $('login').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const t = $('token').value.trim();
      $('token').value = '';
      if (t === '') return;
      sessionStorage.setItem(TOKEN_KEY, t);
      showSession();
      message('');
      route();
    });
    $('signout').addEventListener('click', () => {
      sessionStorage.removeItem(TOKEN_KEY);
      results = new Map();
      showSession();
      stop();
      route();
    });
    $('cancel').addEventListener('click', cancelJob);
    window.addEventListener('hashchange', route);
    setInterval(renderDeadline, 1000);
    showSession();
    route();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init);
  else init();
})();
