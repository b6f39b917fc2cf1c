// The contract scenario: a secure-sum job with 3 parties (party 3 stops at
// masked_input, threshold 2) plus every other operation of both services and
// their error responses, all sent to the splitters in front of the services
// (see splitter.mjs): JSON requests are checked by Prism, binary ones by the
// splitter. Requests that the spec itself forbids (unknown fields, no token,
// malformed ids, not JSON) would be stopped by Prism before reaching the
// service, so they carry "x-contract-direct: 1" and the splitter sends them
// straight to the service, checking the response's status, media type and
// problem+json shape against the spec.
//
// Every response is also checked for Prism's "sl-violations" header.
//
// Then a fedsvd and a fedpca job (docs/wire-fedsvd.md) through the same
// proxies: the job spec and status with the fedsvd fields, the exponents
// rounds, the aggregations of kind stats/svd, fedpca's published statistics
// sums, the server's result (S and the masked shared factor) and each
// party's recovered files. The masking server is called directly (its
// contract is checked elsewhere; its key blobs are binary).
//
// usage: node scenario.mjs CONFIG.json
// CONFIG: {server, agents: [url...], adminToken, operatorToken,
//          parties: [file...], wrongShape: file, shape: [r, c], out: dir,
//          masking: url, maskingToken}
// Prints "ok ..."/"FAIL ..." lines and "scenario: P passed, F failed".
import fs from 'node:fs';

const cfg = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
let passed = 0;
let failed = 0;

function ok(msg) {
  passed++;
  console.log(`ok   ${msg}`);
}

function fail(msg) {
  failed++;
  console.log(`FAIL ${msg}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// One request. opts: {token, json, body, type, direct}. Returns {status, type, json, buf, violations}.
async function call(base, method, path, opts = {}) {
  const headers = {};
  let body;
  if (opts.token) {
    headers.authorization = `Bearer ${opts.token}`;
  }
  if (opts.json !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(opts.json);
  } else if (opts.body !== undefined) {
    headers['content-type'] = opts.type || 'application/octet-stream';
    body = opts.body;
  }
  if (opts.direct) {
    headers['x-contract-direct'] = '1';
  }
  const res = await fetch(base + path, { method, headers, body });
  const buf = Buffer.from(await res.arrayBuffer());
  const type = (res.headers.get('content-type') || '').split(';')[0].trim();
  let json = null;
  if (type.endsWith('json') && buf.length > 0) {
    try {
      json = JSON.parse(buf.toString('utf8'));
    } catch {
      json = null;
    }
  }
  const violations = res.headers.get('sl-violations');
  if (violations) {
    fail(`${method} ${path}: Prism reports violations: ${violations.slice(0, 600)}`);
  }
  return { status: res.status, type, json, buf };
}

// expect(name, response, status[, code]): status (and problem code) as expected.
function expect(name, r, status, code) {
  const got = r.json && r.json.code ? ` ${r.json.code}` : '';
  if (r.status !== status) {
    fail(`${name}: HTTP ${r.status}${got}, expected ${status}${code ? ' ' + code : ''}` +
      (r.json && r.json.detail ? ` (${r.json.detail})` : ''));
    return false;
  }
  if (code && (!r.json || r.json.code !== code)) {
    fail(`${name}: problem code '${r.json && r.json.code}', expected '${code}'`);
    return false;
  }
  if (status >= 400 && r.type !== 'application/problem+json') {
    fail(`${name}: error body is '${r.type}', not application/problem+json`);
    return false;
  }
  ok(`${name}: ${status}${code ? ' ' + code : ''}`);
  return true;
}

const S = cfg.server;
const A = cfg.agents;
const admin = cfg.adminToken;
const op = cfg.operatorToken;
const NOJOB = 'j-00000000000000000000000000000000';
const NOPART = 'p-00000000000000000000000000000000';

async function health() {
  for (const [name, base] of [['server', S], ['agent', A[0]]]) {
    expect(`${name} GET /healthz`, await call(base, 'GET', '/healthz'), 200);
    expect(`${name} GET /readyz`, await call(base, 'GET', '/readyz'), 200);
    const m = await call(base, 'GET', '/metrics');
    if (expect(`${name} GET /metrics`, m, 200) && !/^# (HELP|TYPE) /m.test(m.buf.toString())) {
      fail(`${name} /metrics is not Prometheus text`);
    }
    const o = await call(base, 'GET', '/openapi.yaml');
    if (o.status === 200 && o.buf.toString().startsWith('openapi: 3.1')) {
      ok(`${name} GET /openapi.yaml: 200, the contract`);
    } else if (o.status === 404) {
      ok(`${name} GET /openapi.yaml: 404 (not installed next to the binary)`);
    } else {
      fail(`${name} GET /openapi.yaml: ${o.status}`);
    }
  }
}

// Each agent's identity fingerprint (GET /v1/identity): the jobs pin them,
// party i+1 = agent i.
const pins = [];

async function identities() {
  for (let i = 0; i < A.length; i++) {
    const r = await call(A[i], 'GET', '/v1/identity', { token: op });
    if (expect(`agent ${i + 1} GET /v1/identity`, r, 200) && /^[0-9a-f]{64}$/.test(r.json.fingerprint)) {
      pins.push(r.json.fingerprint);
    } else {
      fail(`agent ${i + 1} GET /v1/identity: no fingerprint`);
    }
  }
  expect('GET /v1/identity without a token', await call(A[0], 'GET', '/v1/identity', { direct: true }),
    401);
}

async function createJob(parties, threshold, timeout) {
  const spec = {
    algorithm: 'secure-sum', name: 'contract', parties, threshold, shape: cfg.shape,
    round_timeout_s: timeout, server_url: S, party_keys: pins.slice(0, parties),
  };
  const r = await call(S, 'POST', '/v1/jobs', { token: admin, json: spec });
  if (!expect(`POST /v1/jobs (${parties} parties)`, r, 201)) {
    throw new Error('cannot create a job');
  }
  return r.json;
}

async function serverErrors(job, inv) {
  const id = job.job.id;
  // Valid requests the service must refuse: through Prism.
  expect('POST /v1/jobs threshold > parties', await call(S, 'POST', '/v1/jobs', {
    token: admin, json: { algorithm: 'secure-sum', parties: 2, threshold: 3, shape: cfg.shape },
  }), 422, 'invalid');
  expect('POST /v1/jobs threshold below a majority', await call(S, 'POST', '/v1/jobs', {
    token: admin,
    json: { algorithm: 'secure-sum', parties: 4, threshold: 2, shape: cfg.shape, allow_unpinned: true },
  }), 422, 'invalid');
  expect('GET /v1/jobs/{unknown}', await call(S, 'GET', `/v1/jobs/${NOJOB}`, { token: admin }), 404,
    'not_found');
  expect('POST /v1/jobs without party_keys or allow_unpinned', await call(S, 'POST', '/v1/jobs', {
    token: admin, json: { algorithm: 'secure-sum', parties: 2, shape: cfg.shape },
  }), 422, 'invalid');
  expect('POST /v1/jobs with one key for two parties', await call(S, 'POST', '/v1/jobs', {
    token: admin, json: { algorithm: 'secure-sum', parties: 2, shape: cfg.shape, party_keys: [pins[0]] },
  }), 422, 'invalid');
  const un = await call(S, 'POST', '/v1/jobs', {
    token: admin, json: { algorithm: 'secure-sum', parties: 2, shape: cfg.shape, allow_unpinned: true },
  });
  if (expect('POST /v1/jobs allow_unpinned', un, 201)) {
    expect('DELETE /v1/jobs/{unpinned}', await call(S, 'DELETE', `/v1/jobs/${un.json.job.id}`,
      { token: admin }), 200);
  }
  const lp = await call(S, 'GET', '/v1/jobs', { token: inv[0].token });
  if ([401, 403].includes(lp.status) && lp.type === 'application/problem+json') {
    ok(`GET /v1/jobs with a party token: ${lp.status} ${lp.json && lp.json.code}`);
  } else {
    fail(`GET /v1/jobs with a party token: ${lp.status}, expected 401 or 403`);
  }
  expect('GET /v1/jobs/{id}/result before done', await call(S, 'GET', `/v1/jobs/${id}/result`,
    { token: admin }), 409, 'not_ready');
  expect('GET /v1/jobs/{id}/aggregations/0 before it began',
    await call(S, 'GET', `/v1/jobs/${id}/aggregations/0`, { token: inv[0].token }), 409,
    'not_ready');
  expect('GET /v1/jobs/{id}/shares before R1 closed', await call(S, 'GET', `/v1/jobs/${id}/shares`,
    { token: inv[0].token }), 409, 'not_ready');
  expect('GET /v1/jobs/{id} with a wrong token', await call(S, 'GET', `/v1/jobs/${id}`,
    { token: 'x'.repeat(43) }), 401, 'unauthorized');
  // Requests the spec forbids: straight to the service (checked by the splitter).
  expect('POST /v1/jobs with an unknown field', await call(S, 'POST', '/v1/jobs', {
    token: admin, direct: true,
    json: { algorithm: 'secure-sum', parties: 2, shape: cfg.shape, colour: 'blue' },
  }), 422, 'invalid');
  expect('POST /v1/jobs without a token', await call(S, 'POST', '/v1/jobs', {
    direct: true, json: { algorithm: 'secure-sum', parties: 2, shape: cfg.shape },
  }), 401, 'unauthorized');
  expect('POST /v1/jobs not JSON', await call(S, 'POST', '/v1/jobs', {
    token: admin, direct: true, body: '{"algorithm": ', type: 'application/json',
  }), 400, 'bad_request');
  const bad = await call(S, 'POST', '/v1/jobs', {
    token: admin, direct: true, body: 'parties=2', type: 'text/plain',
  });
  if ([400, 415].includes(bad.status) && bad.type === 'application/problem+json') {
    ok(`POST /v1/jobs as text/plain: ${bad.status} ${bad.json && bad.json.code}`);
  } else {
    fail(`POST /v1/jobs as text/plain: ${bad.status}`);
  }
  expect('POST /v1/jobs/{id}/keys, advert of another party', await call(S, 'POST',
    `/v1/jobs/${id}/keys`, {
      token: inv[0].token,
      json: {
        party: 2, sign_pk: 'A'.repeat(43), c_pk: 'A'.repeat(43), s_pks: 'A'.repeat(43),
        sig: 'A'.repeat(86), max_abs_exp: 3,
      },
    }), 403, 'forbidden');
  const r = await call(S, 'PUT', `/v1/jobs/${id}/aggregations/0/masked/0`, {
    token: inv[0].token, body: Buffer.from('not a npy file'), type: 'application/x-npy', direct: true,
  });
  if ([400, 409, 422].includes(r.status) && r.type === 'application/problem+json') {
    ok(`PUT masked chunk that is not .npy, before masked input: ${r.status} ${r.json && r.json.code}`);
  } else {
    fail(`PUT masked chunk that is not .npy: ${r.status}`);
  }
  expect('GET /v1/jobs/{malformed id}', await call(S, 'GET', '/v1/jobs/nope', {
    token: admin, direct: true,
  }), 404, 'not_found');
}

async function join(inv) {
  const parts = [];
  expect('POST /v1/participations, wrong shape', await call(A[0], 'POST', '/v1/participations', {
    token: op, json: { invitation: inv[0], dataset: { path: cfg.wrongShape, format: 'auto' } },
  }), 422, 'invalid');
  expect('POST /v1/participations, no such file', await call(A[0], 'POST', '/v1/participations', {
    token: op, json: { invitation: inv[0], dataset: { path: '/nonexistent/x.npy' } },
  }), 422, 'invalid');
  expect('POST /v1/participations, unknown field', await call(A[0], 'POST', '/v1/participations', {
    token: op, direct: true,
    json: { invitation: inv[0], dataset: { path: cfg.parties[0] }, colour: 'blue' },
  }), 422, 'invalid');
  expect('POST /v1/participations without a token', await call(A[0], 'POST', '/v1/participations',
    { direct: true, json: { invitation: inv[0], dataset: { path: cfg.parties[0] } } }), 401);
  for (let i = 0; i < 3; i++) {
    const r = await call(A[i], 'POST', '/v1/participations', {
      token: op,
      json: {
        invitation: inv[i], dataset: { path: cfg.parties[i], format: 'auto' },
        fail_at: i === 2 ? 'masked_input' : null,
      },
    });
    expect(`POST /v1/participations party ${i + 1}`, r, 201);
    parts.push(r.json ? r.json.id : null);
  }
  expect('POST /v1/participations again for party 1', await call(A[0], 'POST', '/v1/participations',
    { token: op, json: { invitation: inv[0], dataset: { path: cfg.parties[0] } } }), 409);
  return parts;
}

async function agentReads(parts) {
  expect('GET /v1/participations', await call(A[0], 'GET', '/v1/participations', { token: op }), 200);
  expect('GET /v1/participations/{id}', await call(A[0], 'GET', `/v1/participations/${parts[0]}`,
    { token: op }), 200);
  expect('GET /v1/participations/{unknown}', await call(A[0], 'GET', `/v1/participations/${NOPART}`,
    { token: op }), 404, 'not_found');
  expect('GET /v1/participations/{id} wrong token', await call(A[0], 'GET',
    `/v1/participations/${parts[0]}`, { token: 'y'.repeat(43) }), 401);
  expect('GET /v1/privacy-ledger', await call(A[0], 'GET', '/v1/privacy-ledger', { token: op }),
    200);
  expect('GET /v1/privacy-ledger without a token', await call(A[0], 'GET', '/v1/privacy-ledger'),
    401);
}

async function waitJob(id, token, seconds) {
  const t0 = Date.now();
  let j = null;
  while (Date.now() - t0 < seconds * 1000) {
    const r = await call(S, 'GET', `/v1/jobs/${id}`, { token });
    if (r.status !== 200) {
      fail(`GET /v1/jobs/{id} while waiting: ${r.status}`);
      return null;
    }
    j = r.json;
    if (j.state !== 'running') {
      return j;
    }
    await sleep(250);
  }
  fail(`job still ${j && j.phase} after ${seconds}s`);
  return j;
}

async function waitPart(base, id, seconds) {
  const t0 = Date.now();
  let p = null;
  while (Date.now() - t0 < seconds * 1000) {
    const r = await call(base, 'GET', `/v1/participations/${id}`, { token: op });
    p = r.json;
    if (p && (p.state === 'done' || p.state === 'failed')) {
      return p;
    }
    await sleep(250);
  }
  return p;
}

async function results(job, inv, parts) {
  const id = job.job.id;
  const done = await waitJob(id, admin, 90);
  if (!done || done.state !== 'done') {
    fail(`job ended ${done && done.state}: ${done && done.error}`);
    return;
  }
  ok(`job done; dropped ${JSON.stringify(done.dropped)}`);
  const m = await call(S, 'GET', `/v1/jobs/${id}/result`, { token: admin });
  expect('GET /v1/jobs/{id}/result', m, 200);
  expect('GET /v1/jobs/{id}/result with a party token', await call(S, 'GET', `/v1/jobs/${id}/result`,
    { token: inv[1].token }), 200);
  const f = await call(S, 'GET', `/v1/jobs/${id}/result/sum.npy`, { token: admin });
  if (expect('GET /v1/jobs/{id}/result/sum.npy', f, 200)) {
    fs.writeFileSync(`${cfg.out}/server-sum.npy`, f.buf);
  }
  expect('GET /v1/jobs/{id}/result/other.npy', await call(S, 'GET', `/v1/jobs/${id}/result/other.npy`,
    { token: admin }), 404);
  expect('GET /v1/jobs/{id}/keys (roster)', await call(S, 'GET', `/v1/jobs/${id}/keys`,
    { token: inv[0].token }), 200);
  expect('GET /v1/jobs/{id}/aggregations/0 (done)', await call(S, 'GET',
    `/v1/jobs/${id}/aggregations/0`, { token: inv[0].token }), 200);
  for (let i = 0; i < 3; i++) {
    const p = await waitPart(A[i], parts[i], 30);
    const want = i === 2 ? 'failed' : 'done';
    if (p && p.state === want) {
      ok(`participation of party ${i + 1} ${want}`);
    } else {
      fail(`participation of party ${i + 1}: ${p && p.state}, expected ${want}`);
    }
  }
  expect('GET /v1/participations/{id}/result', await call(A[0], 'GET',
    `/v1/participations/${parts[0]}/result`, { token: op }), 200);
  const pf = await call(A[0], 'GET', `/v1/participations/${parts[0]}/result/sum.npy`, { token: op });
  if (expect('GET /v1/participations/{id}/result/sum.npy', pf, 200)) {
    fs.writeFileSync(`${cfg.out}/agent-sum.npy`, pf.buf);
  }
  expect('GET /v1/participations/{id}/result/other.npy', await call(A[0], 'GET',
    `/v1/participations/${parts[0]}/result/other.npy`, { token: op }), 404);
  expect('GET /v1/participations/{failed}/result', await call(A[2], 'GET',
    `/v1/participations/${parts[2]}/result`, { token: op }), 409);
  expect('DELETE /v1/jobs/{done}', await call(S, 'DELETE', `/v1/jobs/${id}`, { token: admin }), 409,
    'conflict');
}

async function cancelPath(inv2) {
  const id = inv2.job.id;
  const r = await call(A[0], 'POST', '/v1/participations', {
    token: op, json: { invitation: inv2.invitations[0], dataset: { path: cfg.parties[0] } },
  });
  expect('POST /v1/participations (job to cancel)', r, 201);
  if (r.json) {
    const d = await call(A[0], 'DELETE', `/v1/participations/${r.json.id}`, { token: op });
    if (expect('DELETE /v1/participations/{id}', d, 200) && d.json.state !== 'failed') {
      fail(`stopped participation is '${d.json.state}', expected failed`);
    }
  }
  expect('DELETE /v1/jobs/{id} with a party token', await call(S, 'DELETE', `/v1/jobs/${id}`,
    { token: inv2.invitations[1].token }), 403);
  const c = await call(S, 'DELETE', `/v1/jobs/${id}`, { token: admin });
  if (expect('DELETE /v1/jobs/{id}', c, 200) && c.json.phase !== 'failed') {
    fail(`cancelled job is in phase '${c.json.phase}', expected failed`);
  }
  expect('GET /v1/jobs/{cancelled}/result', await call(S, 'GET', `/v1/jobs/${id}/result`,
    { token: admin }), 409, 'aborted');
  expect('DELETE /v1/jobs/{unknown}', await call(S, 'DELETE', `/v1/jobs/${NOJOB}`, { token: admin }),
    404);
}

// A fedsvd/fedpca job of 3 parties holding the rows of cfg.parties, with its
// mask set on the masking server merged into the invitations.
async function createFedJob(algorithm, extra) {
  const spec = {
    algorithm, name: `contract ${algorithm}`, parties: 3, threshold: 3,
    shape: [3 * cfg.shape[0], cfg.shape[1]], partition: 'samples',
    party_sizes: [cfg.shape[0], cfg.shape[0], cfg.shape[0]], round_timeout_s: 30, server_url: S,
    party_keys: pins.slice(0, 3), ...extra,
  };
  const r = await call(S, 'POST', '/v1/jobs', { token: admin, json: spec });
  if (!expect(`POST /v1/jobs (${algorithm})`, r, 201)) {
    return null;
  }
  const m = await fetch(`${cfg.masking}/v1/masksets`, {
    method: 'POST',
    headers: { authorization: `Bearer ${cfg.maskingToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      job_id: r.json.job.id, partition: 'samples', cols: cfg.shape[1],
      parties: [1, 2, 3].map((p) => ({ party: p, rows: cfg.shape[0], identity: pins[p - 1] })),
    }),
  });
  const mj = await m.json();
  if (m.status !== 201) {
    fail(`POST /v1/masksets: ${m.status} ${JSON.stringify(mj).slice(0, 300)}`);
    return null;
  }
  for (const inv of r.json.invitations) {
    Object.assign(inv, { masking_url: cfg.masking, maskset: mj.maskset.id });
  }
  // the end token goes to the aggregation server, which ends the mask set with the job
  expect(`PUT /v1/jobs/{id}/maskset (${algorithm})`, await call(S, 'PUT',
    `/v1/jobs/${r.json.job.id}/maskset`, {
      token: admin, json: { masking_url: cfg.masking, maskset: mj.maskset.id, end_token: mj.end_token },
    }), 204);
  expect(`PUT /v1/jobs/{id}/maskset again, same values (${algorithm})`, await call(S, 'PUT',
    `/v1/jobs/${r.json.job.id}/maskset`, {
      token: admin, json: { masking_url: cfg.masking, maskset: mj.maskset.id, end_token: mj.end_token },
    }), 204);
  expect(`PUT /v1/jobs/{id}/maskset with another mask set (${algorithm})`, await call(S, 'PUT',
    `/v1/jobs/${r.json.job.id}/maskset`, {
      token: admin, json: { masking_url: cfg.masking, maskset: 'm-0', end_token: mj.end_token },
    }), 409, 'conflict');
  expect(`PUT /v1/jobs/{id}/maskset with a party token (${algorithm})`, await call(S, 'PUT',
    `/v1/jobs/${r.json.job.id}/maskset`, {
      token: r.json.invitations[0].token,
      json: { masking_url: cfg.masking, maskset: mj.maskset.id, end_token: mj.end_token },
    }), 403);
  return r.json;
}

async function fedErrors(job) {
  const id = job.job.id;
  const inv = job.invitations;
  expect('POST /v1/jobs fedsvd, party_sizes not adding up', await call(S, 'POST', '/v1/jobs', {
    token: admin,
    json: { algorithm: 'fedsvd', parties: 2, shape: [10, 4], party_sizes: [4, 5] },
  }), 422, 'invalid');
  expect('POST /v1/jobs secure-sum with party_sizes', await call(S, 'POST', '/v1/jobs', {
    token: admin,
    json: { algorithm: 'secure-sum', parties: 2, shape: [10, 4], party_sizes: [5, 5] },
  }), 422, 'invalid');
  expect('POST …/aggregations/0/exponent before the round', await call(S, 'POST',
    `/v1/jobs/${id}/aggregations/0/exponent`, { token: inv[0].token, json: { sealed: 'A'.repeat(43) } }),
  409, 'not_ready');
  expect('POST …/aggregations/0/public-exponent before the round', await call(S, 'POST',
    `/v1/jobs/${id}/aggregations/0/public-exponent`, { token: inv[0].token, json: { exponent: 3 } }),
  409, 'not_ready');
  expect('POST …/aggregations/0/exponent, malformed', await call(S, 'POST',
    `/v1/jobs/${id}/aggregations/0/exponent`, {
      token: inv[0].token, direct: true, json: { sealed: 'AAAA' },
    }), 422, 'invalid');
  expect('POST …/aggregations/0/exponent with the admin token', await call(S, 'POST',
    `/v1/jobs/${id}/aggregations/0/exponent`, { token: admin, json: { sealed: 'A'.repeat(43) } }),
  403, 'forbidden');
  expect('GET …/aggregations/0/sum.npy of an svd aggregation', await call(S, 'GET',
    `/v1/jobs/${id}/aggregations/0/sum.npy`, { token: inv[0].token }), 404, 'not_found');
  expect('POST …/aggregations/5/exponent (no such aggregation)', await call(S, 'POST',
    `/v1/jobs/${id}/aggregations/5/exponent`, { token: inv[0].token, json: { sealed: 'A'.repeat(43) } }),
  404, 'not_found');
}

// Join the 3 agents, wait, fetch the results; files go to cfg.out/<tag>-*.
async function fedRun(tag, job, files) {
  const id = job.job.id;
  const parts = [];
  for (let i = 0; i < 3; i++) {
    const r = await call(A[i], 'POST', '/v1/participations', {
      token: op, json: { invitation: job.invitations[i], dataset: { path: cfg.parties[i] } },
    });
    expect(`POST /v1/participations ${tag} party ${i + 1}`, r, 201);
    parts.push(r.json ? r.json.id : null);
  }
  const done = await waitJob(id, admin, 120);
  if (!done || done.state !== 'done') {
    fail(`${tag} job ended ${done && done.state}: ${done && done.error}`);
    return;
  }
  ok(`${tag} job done (${done.aggregations} aggregations; timings ${Object.keys(done.timings).join(',')})`);
  for (let r = 0; r < done.aggregations; r++) {
    const a = await call(S, 'GET', `/v1/jobs/${id}/aggregations/${r}`, { token: job.invitations[0].token });
    if (expect(`GET …/aggregations/${r} (${a.json && a.json.kind})`, a, 200) && a.json.kind === 'stats') {
      const sum = await call(S, 'GET', `/v1/jobs/${id}/aggregations/${r}/sum.npy`, { token: admin });
      expect(`GET …/aggregations/${r}/sum.npy`, sum, 200);
    }
  }
  const m = await call(S, 'GET', `/v1/jobs/${id}/result`, { token: admin });
  if (expect(`GET /v1/jobs/{id}/result (${tag})`, m, 200)) {
    const names = m.json.files.map((f) => f.name).sort();
    if (JSON.stringify(names) === JSON.stringify(['s.npy', 'vprime.npy'])) {
      ok(`${tag}: the server's result is S and V' only (rank ${m.json.rank})`);
    } else {
      fail(`${tag}: server files ${names}`);
    }
    for (const n of names) {
      const f = await call(S, 'GET', `/v1/jobs/${id}/result/${n}`, { token: job.invitations[1].token });
      if (expect(`GET /v1/jobs/{id}/result/${n}`, f, 200)) {
        fs.writeFileSync(`${cfg.out}/${tag}-server-${n}`, f.buf);
      }
    }
  }
  for (let i = 0; i < 3; i++) {
    const p = await waitPart(A[i], parts[i], 60);
    if (!p || p.state !== 'done') {
      fail(`${tag} participation of party ${i + 1}: ${p && p.state} ${p && p.error}`);
      continue;
    }
    const pm = await call(A[i], 'GET', `/v1/participations/${parts[i]}/result`, { token: op });
    expect(`GET /v1/participations/{id}/result (${tag}, party ${i + 1})`, pm, 200);
    for (const n of files) {
      const f = await call(A[i], 'GET', `/v1/participations/${parts[i]}/result/${n}`, { token: op });
      if (expect(`GET /v1/participations/{id}/result/${n} (party ${i + 1})`, f, 200)) {
        fs.writeFileSync(`${cfg.out}/${tag}-p${i + 1}-${n}`, f.buf);
      }
    }
  }
}

try {
  await health();
  await identities();
  const job = await createJob(3, 2, 3);
  const inv = job.invitations;
  fs.writeFileSync(`${cfg.out}/job-id`, job.job.id);
  fs.writeFileSync(`${cfg.out}/party1.token`, inv[0].token + '\n', { mode: 0o600 });
  await serverErrors(job, inv);
  const parts = await join(inv);
  await agentReads(parts);
  expect('GET /v1/jobs/{id} as party 1', await call(S, 'GET', `/v1/jobs/${job.job.id}`,
    { token: inv[0].token }), 200);
  expect('GET /v1/jobs', await call(S, 'GET', '/v1/jobs', { token: admin }), 200);
  await results(job, inv, parts);
  await cancelPath(await createJob(2, 2, 30));
  if (cfg.masking) {
    const fj = await createFedJob('fedsvd', {});
    if (fj) {
      await fedErrors(fj);
      await fedRun('fedsvd', fj, ['S.npy', 'V.npy', 'U.npy']);
    }
    const pj = await createFedJob('fedpca', { k: 4, standardize: true });
    if (pj) {
      await fedRun('fedpca', pj, ['components.npy', 'singular_values.npy', 'scores.npy', 'mean.npy']);
    }
  }
} catch (e) {
  fail(`scenario aborted: ${e.stack || e}`);
}
console.log(`scenario: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
