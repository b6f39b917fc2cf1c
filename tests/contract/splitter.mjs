// A reverse proxy in front of one fedsvd service for the contract tests.
//
// JSON and text traffic goes to a Prism validating proxy (which forwards it
// to the service and checks every request and response against
// openapi.yaml). Binary traffic (.npy bodies: masked-chunk uploads and
// result downloads) cannot go through Prism 5: its proxy reads every body as
// UTF-8 text, so bytes that are not valid UTF-8 are replaced and the body is
// corrupted. Binary requests therefore go straight to the service, byte for
// byte, and this proxy checks them against the same openapi.yaml itself:
// the operation exists for the method and path, the request's media type is
// one the operation takes, the response status is one it lists, the
// response's media type is the one listed for that status, .npy bodies start
// with the .npy magic and problem+json bodies carry type/title/status/code.
//
// Requests marked "x-contract-direct: 1" (the scenario's deliberately invalid
// requests, which Prism would refuse before the service sees them) also go
// straight to the service; only their responses are checked.
//
// Every violation is logged as one line starting with "VIOLATION" to --log
// (run.sh counts them) and the exchange is otherwise left alone.
//
// usage: node splitter.mjs --listen PORT --prism URL --upstream URL --spec FILE --log FILE
import fs from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const yaml = require('js-yaml');

function args() {
  const a = {};
  for (let i = 2; i < process.argv.length; i += 2) {
    a[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
  }
  for (const k of ['listen', 'prism', 'upstream', 'spec', 'log']) {
    if (!a[k]) {
      console.error(`splitter: --${k} is required`);
      process.exit(2);
    }
  }
  return a;
}

const opt = args();
const spec = yaml.load(fs.readFileSync(opt.spec, 'utf8'));
const logFd = fs.openSync(opt.log, 'a');
const NPY_MAGIC = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]); // \x93NUMPY

function log(line) {
  fs.writeSync(logFd, `${new Date().toISOString()} ${line}\n`);
}

function deref(obj) {
  let o = obj;
  while (o && o.$ref) {
    const parts = o.$ref.replace(/^#\//, '').split('/');
    o = parts.reduce((x, p) => x[p.replace(/~1/g, '/').replace(/~0/g, '~')], spec);
  }
  return o;
}

// [regex, pathItem] for every path of the spec; literal segments first wins.
const routes = Object.entries(spec.paths).map(([p, item]) => {
  const re = new RegExp(
    '^' +
      p
        .split('/')
        .map((seg) => seg.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+'))
        .join('/') +
      '$',
  );
  return { path: p, re, item, literal: (p.match(/\{/g) || []).length };
});
routes.sort((a, b) => a.literal - b.literal);

function findOperation(method, pathname) {
  for (const r of routes) {
    if (r.re.test(pathname)) {
      const op = r.item[method.toLowerCase()] || (method === 'HEAD' ? r.item.get : undefined);
      return { route: r.path, op };
    }
  }
  return { route: null, op: null };
}

function mediaType(h) {
  return (h || '').split(';')[0].trim().toLowerCase();
}

function isBinary(req, pathname) {
  return mediaType(req.headers['content-type']) === 'application/x-npy' ||
    ((req.method === 'GET' || req.method === 'HEAD') && pathname.endsWith('.npy'));
}

// Validate one exchange that bypassed Prism against the spec; returns a list
// of problems. direct: a deliberately invalid request, only the response counts.
function check(req, pathname, reqHead, res, resBody, direct) {
  const problems = [];
  const { route, op } = findOperation(req.method, pathname);
  if (!op) {
    problems.push(`no operation ${req.method} ${route || pathname} in the spec`);
    return problems;
  }
  if (direct) {
    // the request is wrong on purpose
  } else if (op.requestBody) {
    const rb = deref(op.requestBody);
    const mt = mediaType(req.headers['content-type']);
    if (!rb.content || !rb.content[mt]) {
      problems.push(`request media type '${mt}' not in ${Object.keys(rb.content || {})}`);
    } else if (mt === 'application/x-npy' && !reqHead.subarray(0, 6).equals(NPY_MAGIC)) {
      problems.push('request body is not a .npy file');
    }
  } else if (reqHead.length > 0) {
    problems.push('request has a body but the operation takes none');
  }
  const status = String(res.statusCode);
  const resp = deref(op.responses[status] || op.responses.default);
  if (!resp) {
    problems.push(`status ${status} not listed (listed: ${Object.keys(op.responses)})`);
    return problems;
  }
  const mt = mediaType(res.headers['content-type']);
  if (!resp.content) {
    if (resBody.length > 0) {
      problems.push(`status ${status} has no documented body but ${resBody.length} bytes came`);
    }
    return problems;
  }
  if (!resp.content[mt]) {
    problems.push(`status ${status}: media type '${mt}' not in ${Object.keys(resp.content)}`);
    return problems;
  }
  if (req.method === 'HEAD') {
    return problems;
  }
  if (mt === 'application/x-npy' && !resBody.subarray(0, 6).equals(NPY_MAGIC)) {
    problems.push(`status ${status}: body is not a .npy file`);
  }
  if (mt === 'application/problem+json') {
    try {
      const p = JSON.parse(resBody.toString('utf8'));
      for (const k of ['type', 'title', 'status', 'code']) {
        if (!(k in p)) {
          problems.push(`problem+json lacks '${k}'`);
        }
      }
      if (p.status !== res.statusCode) {
        problems.push(`problem+json status ${p.status} != HTTP ${res.statusCode}`);
      }
    } catch (e) {
      problems.push(`problem+json is not JSON: ${e.message}`);
    }
  }
  return problems;
}

function forward(target, req, res, onDone) {
  const url = new URL(req.url, target);
  const up = http.request(
    url,
    { method: req.method, headers: { ...req.headers, host: url.host } },
    (ur) => {
      res.writeHead(ur.statusCode, ur.headers);
      const keep = [];
      let kept = 0;
      ur.on('data', (d) => {
        if (kept < 65536) {
          keep.push(d);
          kept += d.length;
        }
        res.write(d);
      });
      ur.on('end', () => {
        res.end();
        if (onDone) {
          onDone(ur, Buffer.concat(keep));
        }
      });
    },
  );
  up.on('error', (e) => {
    log(`ERROR ${req.method} ${req.url}: upstream ${target}: ${e.message}`);
    if (!res.headersSent) {
      res.writeHead(502, { 'content-type': 'text/plain' });
    }
    res.end();
  });
  return up;
}

const server = http.createServer((req, res) => {
  const pathname = new URL(req.url, 'http://x').pathname;
  const direct = req.headers['x-contract-direct'] === '1';
  delete req.headers['x-contract-direct'];
  if (!direct && !isBinary(req, pathname)) {
    req.pipe(forward(opt.prism, req, res, null));
    return;
  }
  const head = [];
  let got = 0;
  let up = null;
  up = forward(opt.upstream, req, res, (ur, body) => {
    const problems = check(req, pathname, Buffer.concat(head), ur, body, direct);
    for (const p of problems) {
      log(`VIOLATION ${req.method} ${pathname} -> ${ur.statusCode}: ${p}`);
    }
    log(`${direct ? 'direct' : 'binary'} ${req.method} ${pathname} -> ${ur.statusCode} ` +
      `(${got} bytes in, checked)`);
  });
  req.on('data', (d) => {
    if (got < 64) {
      head.push(d);
    }
    got += d.length;
    up.write(d);
  });
  req.on('end', () => up.end());
});

server.keepAliveTimeout = 30000;
server.listen(Number(opt.listen), '127.0.0.1', () => {
  log(`listening on 127.0.0.1:${opt.listen}: binary -> ${opt.upstream}, the rest -> ${opt.prism}`);
});
process.on('SIGTERM', () => {
  server.close();
  process.exit(0);
});
