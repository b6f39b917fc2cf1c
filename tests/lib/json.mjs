// Shared Node helpers for the shell test suites (tests/agent, tests/masking):
// the project's tests need no Python. Node is already a test dependency
// (tests/contract); only `schema` needs npm packages (js-yaml and ajv, pinned
// in tests/contract/package.json, installed by `make contract-deps`), every
// other command uses Node's standard library alone.
//
// Command line (node tests/lib/json.mjs COMMAND ...):
//
//   get FILE PATH        print the value at PATH of the JSON document in FILE
//                        ("-": stdin). PATH is a chain of .name, [N] and [*]
//                        (every element: maps the rest of the path over an
//                        array), e.g. .parties[0].identity,
//                        .maskset.parties[*].cols, .participations.length
//                        (an array's or string's length). Strings print raw,
//                        anything else as compact JSON ([1,1,0], true, null).
//                        Exit 1 (nothing on stdout) when PATH is not there,
//                        2 when FILE is not JSON.
//   lines FILE           exit 0 when every line of FILE is one JSON document
//   schema OPENAPI NAME FILE
//                        exit 0 when the JSON in FILE matches
//                        components/schemas/NAME of OPENAPI (JSON Schema
//                        2020-12, as OpenAPI 3.1 says; "list:NAME" is
//                        {"masksets": [NAME]}); 1 with the first errors when
//                        not; 3 when js-yaml/ajv are not installed.
//   sumcheck NPY CSV...  exit 0 when the float64 .npy NPY is the entry-wise sum
//                        of the CSV matrices to within 1e-14 of their largest
//                        entry (absolute); prints the error
//   wait-done OUT TIMEOUT_S TOKEN URL...
//                        GET every URL (Bearer TOKEN) every 0.2 s until no
//                        response has "state": "running" or TIMEOUT_S passed;
//                        write the last responses to OUT as a JSON array. A
//                        status of 400 or more is an error (exit 1, no OUT)
//   free-port            print a free TCP port on 127.0.0.1
//
// As a module: readJson, jget, show, request, getBytes, getJson, postJson,
// sleep, waitDone, readNpy, readCsv, sumCheck, freePort, validateSchema, Rng
// (a seeded generator).
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const NODE_MODULES = path.resolve(HERE, '../contract/node_modules');

export function readJson(file) {
  return JSON.parse(fs.readFileSync(file === '-' ? 0 : file, 'utf8'));
}

// PATH -> tokens: {key}, {index}, {all}
function parsePath(p) {
  const toks = [];
  const re = /\.([A-Za-z_$][\w$-]*)|\[(\d+)\]|\[\*\]|\["((?:[^"\\]|\\.)*)"\]/y;
  let i = 0;
  while (i < p.length) {
    re.lastIndex = i;
    const m = re.exec(p);
    if (!m) throw new Error(`bad path ${JSON.stringify(p)} at ${i}`);
    if (m[1] !== undefined) toks.push({ key: m[1] });
    else if (m[2] !== undefined) toks.push({ index: Number(m[2]) });
    else if (m[3] !== undefined) toks.push({ key: JSON.parse(`"${m[3]}"`) });
    else toks.push({ all: true });
    i = re.lastIndex;
  }
  return toks;
}

const MISSING = Symbol('missing');

function walk(v, toks, k) {
  for (; k < toks.length; k++) {
    const t = toks[k];
    if (t.all) {
      if (!Array.isArray(v)) return MISSING;
      const out = [];
      for (const e of v) {
        const r = walk(e, toks, k + 1);
        if (r === MISSING) return MISSING;
        out.push(r);
      }
      return out;
    }
    if (t.index !== undefined) {
      if (!Array.isArray(v) || t.index >= v.length) return MISSING;
      v = v[t.index];
    } else if (v !== null && typeof v === 'object' && !Array.isArray(v) &&
               Object.prototype.hasOwnProperty.call(v, t.key)) {
      v = v[t.key];
    } else if (t.key === 'length' && (Array.isArray(v) || typeof v === 'string')) {
      v = v.length;
    } else {
      return MISSING;
    }
  }
  return v;
}

// the value at PATH, or undefined when it is not there
export function jget(doc, p) {
  const v = walk(doc, parsePath(p), 0);
  return v === MISSING ? undefined : v;
}

export function show(v) {
  return typeof v === 'string' ? v : JSON.stringify(v);
}

// One HTTP request (http: URLs). Resolves {status, headers, body: Buffer}.
export function request(method, url, { token, json, headers = {}, timeoutMs = 30000 } = {}) {
  return new Promise((resolve, reject) => {
    const h = { ...headers };
    if (token) h.Authorization = `Bearer ${token}`;
    let data = null;
    if (json !== undefined) {
      data = Buffer.from(JSON.stringify(json));
      h['Content-Type'] = 'application/json';
      h['Content-Length'] = data.length;
    }
    const rq = http.request(url, { method, headers: h, timeout: timeoutMs }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    rq.on('timeout', () => rq.destroy(new Error(`${method} ${url}: timed out`)));
    rq.on('error', reject);
    if (data) rq.write(data);
    rq.end();
  });
}

// Like Python's urllib.request.urlopen: a status of 400 or more is an error.
async function ok(method, url, opts) {
  const r = await request(method, url, opts);
  if (r.status >= 400) {
    throw new Error(`${method} ${url}: HTTP ${r.status}: ${r.body.toString('utf8').slice(0, 300)}`);
  }
  return r;
}
export async function getBytes(url, token) {
  return (await ok('GET', url, { token })).body;
}
export async function getJson(url, token) {
  return JSON.parse((await ok('GET', url, { token })).body.toString('utf8'));
}
export async function postJson(url, token, json) {
  return JSON.parse((await ok('POST', url, { token, json })).body.toString('utf8'));
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// GET every URL (JSON with a "state") every 0.2 s until none is "running" or
// timeoutS seconds have passed; resolves the last responses.
export async function waitDone(urls, token, timeoutS) {
  const t0 = Date.now();
  for (;;) {
    const ps = [];
    for (const u of urls) ps.push(await getJson(u, token));
    if (ps.every((p) => p.state !== 'running') || Date.now() - t0 >= timeoutS * 1000) return ps;
    await sleep(200);
  }
}

// A .npy file: {descr, fortranOrder, shape, data: Float64Array} (only <f8).
export function readNpy(file) {
  const b = fs.readFileSync(file);
  if (b.length < 10 || !b.subarray(0, 6).equals(Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]))) {
    throw new Error(`${file}: not a .npy file`);
  }
  const major = b[6];
  const hl = major === 1 ? b.readUInt16LE(8) : b.readUInt32LE(8);
  const off = (major === 1 ? 10 : 12) + hl;
  const hdr = b.subarray(off - hl, off).toString('latin1');
  const descr = /'descr'\s*:\s*'([^']*)'/.exec(hdr);
  const fo = /'fortran_order'\s*:\s*(True|False)/.exec(hdr);
  const shape = /'shape'\s*:\s*\(([^)]*)\)/.exec(hdr);
  if (!descr || !fo || !shape) throw new Error(`${file}: bad .npy header ${hdr}`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s !== '').map(Number);
  const n = dims.reduce((a, d) => a * d, 1);
  if (descr[1] !== '<f8') {
    return { descr: descr[1], fortranOrder: fo[1] === 'True', shape: dims, data: null };
  }
  if (b.length < off + 8 * n) throw new Error(`${file}: ${b.length - off} data bytes for ${n} values`);
  const data = new Float64Array(n);
  for (let i = 0; i < n; i++) data[i] = b.readDoubleLE(off + 8 * i);
  return { descr: descr[1], fortranOrder: fo[1] === 'True', shape: dims, data };
}

// A CSV of numbers: an array of rows (a final newline ends the last row).
export function readCsv(file) {
  let text = fs.readFileSync(file, 'utf8');
  if (text.endsWith('\n')) text = text.slice(0, -1);
  return text.split('\n').map((line) => line.split(',').map((v) => {
    const x = Number(v);
    if (v.trim() === '' || Number.isNaN(x)) throw new Error(`${file}: not a number: ${JSON.stringify(v)}`);
    return x;
  }));
}

// The .npy at NPY vs the entry-wise sum of the CSVs (in their order):
// {ok, err, rel, msg}; ok when the largest absolute error is below 1e-14 of
// the largest absolute input entry.
export function sumCheck(npy, csvs) {
  const mats = csvs.map(readCsv);
  const R = mats[0].length;
  const C = mats[0][0].length;
  for (const [k, m] of mats.entries()) {
    if (m.length !== R || m.some((row) => row.length !== C)) {
      return { ok: false, msg: `${csvs[k]} is not ${R} x ${C}` };
    }
  }
  const a = readNpy(npy);
  if (a.descr !== '<f8' || a.shape.length !== 2 || a.shape[0] !== R || a.shape[1] !== C) {
    return { ok: false, msg: `${npy}: descr ${a.descr} shape (${a.shape}), expected <f8 (${R}, ${C})` };
  }
  const at = a.fortranOrder ? (r, c) => a.data[c * R + r] : (r, c) => a.data[r * C + c];
  let big = 0;
  let err = 0;
  for (let r = 0; r < R; r++) {
    for (let c = 0; c < C; c++) {
      let s = 0;
      for (const m of mats) {
        s += m[r][c];
        big = Math.max(big, Math.abs(m[r][c]));
      }
      const e = Math.abs(at(r, c) - s);
      err = Number.isNaN(e) || Number.isNaN(err) ? NaN : Math.max(err, e);
    }
  }
  const rel = err / big;
  return { ok: rel < 1e-14, err, rel, msg: `max abs error ${err} relative to the largest entry ${rel}` };
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// JSON in DOC vs components/schemas/NAME of the OpenAPI document at SPEC.
// {ok, errors: [string]}; throws code 'NO_PACKAGES' without js-yaml/ajv.
export function validateSchema(specFile, name, doc) {
  let yaml;
  let Ajv2020;
  try {
    const req = createRequire(pathToFileURL(path.join(NODE_MODULES, 'noop.js')));
    yaml = req('js-yaml');
    Ajv2020 = req('ajv/dist/2020').default;
  } catch (e) {
    const err = new Error(`js-yaml/ajv not installed in ${NODE_MODULES} (make contract-deps): ${e.message}`);
    err.code = 'NO_PACKAGES';
    throw err;
  }
  const spec = yaml.load(fs.readFileSync(specFile, 'utf8'));
  const target = name.startsWith('list:')
    ? {
        type: 'object',
        additionalProperties: false,
        required: ['masksets'],
        properties: { masksets: { type: 'array', items: { $ref: `#/components/schemas/${name.slice(5)}` } } },
      }
    : { $ref: `#/components/schemas/${name}` };
  if (!name.startsWith('list:') && !(spec.components?.schemas && name in spec.components.schemas)) {
    return { ok: false, errors: [`no schema ${name} in ${specFile}`] };
  }
  // OpenAPI keywords (example, discriminator, ...) are annotations, and
  // "format" is not asserted (as JSON Schema 2020-12 says by default).
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  const validate = ajv.compile({ ...target, components: spec.components });
  if (validate(doc)) return { ok: true, errors: [] };
  return {
    ok: false,
    errors: validate.errors.map((e) => `${e.message} at ${e.instancePath || '/'} (${e.schemaPath})`),
  };
}

// A small seeded generator (mulberry32) with 53-bit uniform doubles.
export class Rng {
  constructor(seed) {
    this.s = seed >>> 0;
  }
  u32() {
    this.s = (this.s + 0x6d2b79f5) >>> 0;
    let t = this.s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  }
  random() { // [0, 1), 53 random bits
    return ((this.u32() >>> 5) * 67108864 + (this.u32() >>> 6)) / 9007199254740992;
  }
  int(lo, hi) { // lo..hi inclusive
    return lo + Math.floor(this.random() * (hi - lo + 1));
  }
}

async function main(argv) {
  const [cmd, ...a] = argv;
  const usage = (u) => {
    console.error(`usage: node json.mjs ${u}`);
    return 2;
  };
  switch (cmd) {
    case 'get': {
      if (a.length !== 2) return usage('get FILE PATH');
      let doc;
      try {
        doc = readJson(a[0]);
      } catch (e) {
        console.error(`json get: ${a[0]}: ${e.message}`);
        return 2;
      }
      let toks;
      try {
        toks = parsePath(a[1]);
      } catch (e) {
        console.error(`json get: ${e.message}`);
        return 2;
      }
      const v = walk(doc, toks, 0);
      if (v === MISSING) {
        console.error(`json get: no ${a[1]} in ${a[0]}`);
        return 1;
      }
      process.stdout.write(`${show(v)}\n`);
      return 0;
    }
    case 'lines': {
      if (a.length !== 1) return usage('lines FILE');
      const text = fs.readFileSync(a[0], 'utf8');
      const lines = text === '' ? [] : text.split('\n');
      if (text.endsWith('\n')) lines.pop(); // no line after the last newline
      let bad = 0;
      lines.forEach((line, i) => {
        try {
          JSON.parse(line);
        } catch (e) {
          if (bad++ < 3) console.error(`     ${a[0]}:${i + 1} is not JSON: ${line.slice(0, 200)}`);
        }
      });
      return bad ? 1 : 0;
    }
    case 'schema': {
      if (a.length !== 3) return usage('schema OPENAPI NAME FILE');
      let r;
      try {
        r = validateSchema(a[0], a[1], readJson(a[2]));
      } catch (e) {
        console.error(`     schema ${a[1]}: ${e.message}`);
        return e.code === 'NO_PACKAGES' ? 3 : 1;
      }
      for (const e of r.errors.slice(0, 5)) console.log(`     schema ${a[1]}: ${e.slice(0, 300)}`);
      return r.ok ? 0 : 1;
    }
    case 'sumcheck': {
      if (a.length < 2) return usage('sumcheck NPY CSV...');
      const r = sumCheck(a[0], a.slice(1));
      console.log(r.msg);
      return r.ok ? 0 : 1;
    }
    case 'wait-done': {
      if (a.length < 4) return usage('wait-done OUT TIMEOUT_S TOKEN URL...');
      const ps = await waitDone(a.slice(3), a[2], Number(a[1]));
      fs.writeFileSync(a[0], JSON.stringify(ps, null, 1));
      return 0;
    }
    case 'free-port': {
      console.log(await freePort());
      return 0;
    }
    default:
      return usage('get|lines|schema|sumcheck|wait-done|free-port ...');
  }
}

// run as a command (also through a symlinked path), not when imported
function isMain() {
  try {
    return fs.realpathSync(process.argv[1]) === fs.realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isMain()) {
  main(process.argv.slice(2)).then(
    (rc) => process.exit(rc),
    (e) => {
      console.error(`json.mjs: ${e.stack || e}`);
      process.exit(1);
    },
  );
}
