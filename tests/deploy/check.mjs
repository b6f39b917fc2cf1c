// Offline consistency checks of the deployment files against each other and
// against the code: docker/Dockerfile, docker/docker-compose.yml, the rendered
// kustomize output of docker/k8s, .dockerignore, the Makefile's DEB_BUILD, and
// every service binary's --help (so a flag or FEDSVD_* variable used in a
// deployment file must exist in the binary it is given to).
//
// Usage: node check.mjs --bin DIR [--k8s RENDERED.yaml | --k8s-src DIR]
//                       [--dockerfile F] [--compose F [--compose-dir DIR]]
// Prints one line per check: "ok   ...", "FAIL ..." or "skip ..." (run.sh counts them).

import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import yaml from 'js-yaml';
import dockerignore from '@balena/dockerignore';

const HERE = dirname(fileURLToPath(import.meta.url));
const ROOT = resolve(HERE, '../..');

const argv = process.argv.slice(2);
function arg(name, def) {
    const i = argv.lastIndexOf(name); // the last occurrence wins
    return i >= 0 && i + 1 < argv.length ? argv[i + 1] : def;
}
const BIN = resolve(arg('--bin', join(ROOT, 'build/bin')));
const DOCKERFILE = resolve(arg('--dockerfile', join(ROOT, 'docker/Dockerfile')));
const COMPOSE = resolve(arg('--compose', join(ROOT, 'docker/docker-compose.yml')));
const COMPOSE_DIR = resolve(arg('--compose-dir', dirname(COMPOSE))); // what relative paths in it are relative to
// The per-role compose files of docker/compose/ (one organisation each);
// --compose-ROLE replaces one of them (relative paths in it still resolve
// from docker/compose/).
const ROLE_DIR = join(ROOT, 'docker/compose');
const ROLE_FILES = {
    masking: resolve(arg('--compose-masking', join(ROLE_DIR, 'masking.yml'))),
    aggregation: resolve(arg('--compose-aggregation', join(ROLE_DIR, 'aggregation.yml'))),
    site: resolve(arg('--compose-site', join(ROLE_DIR, 'site.yml'))),
};
// The aggregation organisation's host with shard peers (docs/sharding.md).
const SHARDED_FILE = resolve(arg('--compose-sharded', join(ROLE_DIR, 'sharded.yml')));
const K8S_RENDERED = arg('--k8s', null);
const K8S_SRC = arg('--k8s-src', null);

const SERVICES = ['masking-server', 'aggregation-server', 'client-agent'];
const BASE_IMAGE = 'debian:12-slim';
const UID = 10001;

// ------------------------------------------------------------------ reporting
function ok(msg) {
    console.log(`ok   ${msg}`);
}
function fail(msg) {
    console.log(`FAIL ${msg}`);
}
function skip(msg) {
    console.log(`skip ${msg}`);
}
function check(cond, msg, detail = '') {
    if (cond) ok(msg);
    else fail(detail ? `${msg}: ${detail}` : msg);
    return !!cond;
}
function eqSet(a, b) {
    const sa = new Set(a);
    const sb = new Set(b);
    return sa.size === sb.size && [...sa].every((x) => sb.has(x));
}

// --------------------------------------------------------------- binaries' --help
const helpCache = new Map();
function help(service) {
    if (helpCache.has(service)) return helpCache.get(service);
    const bin = join(BIN, service);
    let text = null;
    if (existsSync(bin)) {
        try {
            text = execFileSync(bin, ['--help'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
        } catch (e) {
            // Some programs print usage and exit non-zero; take what they printed.
            text = `${e.stdout || ''}${e.stderr || ''}`;
            if (text.trim() === '') text = null;
        }
    }
    helpCache.set(service, text);
    return text;
}
// A service whose sources are here must have been built (make all): its flags
// cannot be checked otherwise. One not written yet is skipped.
const reportedMissing = new Set();
function missingBinary(service, what) {
    if (!existsSync(join(ROOT, 'services', service)) && service !== 'fedsvd') {
        skip(`${service} not written yet (no services/${service}): ${what}`);
    } else if (!reportedMissing.has(service)) {
        reportedMissing.add(service);
        fail(`${service} is not built in ${BIN} (run make all): ${what}`);
    }
}
function esc(s) {
    return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
function helpHasFlag(text, flag) {
    return new RegExp(`(^|[\\s,(\\[])${esc(flag)}(?=[\\s=,)\\]]|$)`, 'm').test(text);
}
function helpHasEnv(text, name) {
    return new RegExp(`\\b${esc(name)}\\b`).test(text);
}
// Check every --flag in args and every FEDSVD_* name in env against SERVICE --help.
function checkAgainstHelp(where, service, flags, envNames) {
    const text = help(service);
    if (text === null) {
        missingBinary(service, `${where}: its flags are not checked against --help`);
        return;
    }
    for (const f of flags) check(helpHasFlag(text, f), `${where}: ${service} --help lists ${f}`);
    for (const e of envNames) check(helpHasEnv(text, e), `${where}: ${service} --help lists ${e}`);
}
function flagsOf(args) {
    return (args || []).filter((a) => typeof a === 'string' && a.startsWith('--')).map((a) => a.split('=')[0]);
}
function flagValue(args, flag) {
    for (let i = 0; i < args.length; i++) {
        if (args[i] === flag && i + 1 < args.length) return args[i + 1];
        if (args[i].startsWith(`${flag}=`)) return args[i].slice(flag.length + 1);
    }
    return null;
}

// ------------------------------------------------------------------ Dockerfile
function parseDockerfile(text) {
    const out = [];
    let cur = '';
    let start = 0;
    text.split(/\r?\n/).forEach((raw, i) => {
        const line = raw.trim();
        if (line === '' || line.startsWith('#')) return;
        if (cur === '') start = i + 1;
        if (line.endsWith('\\')) {
            cur += `${line.slice(0, -1)} `;
            return;
        }
        cur += line;
        const m = /^(\S+)\s*(.*)$/s.exec(cur);
        out.push({ cmd: m[1].toUpperCase(), args: m[2], line: start });
        cur = '';
    });
    const stages = [];
    const global = [];
    for (const ins of out) {
        if (ins.cmd === 'FROM') {
            const m = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args.trim());
            stages.push({ base: m[1], name: m[2] || null, ins: [], line: ins.line });
        } else if (stages.length === 0) {
            global.push(ins);
        } else {
            stages[stages.length - 1].ins.push(ins);
        }
    }
    return { global, stages };
}
function aptPackages(stage) {
    const pkgs = [];
    for (const ins of stage.ins.filter((i) => i.cmd === 'RUN')) {
        for (const part of ins.args.split(/&&|;/)) {
            const m = /apt-get\s+install\s+(.*)$/.exec(part.trim());
            if (!m) continue;
            for (const w of m[1].split(/\s+/)) if (w && !w.startsWith('-')) pkgs.push(w);
        }
    }
    return pkgs;
}
function execForm(ins) {
    try {
        const v = JSON.parse(ins.args.replace(/^CMD\s+/i, ''));
        return Array.isArray(v) && v.every((x) => typeof x === 'string') ? v : null;
    } catch {
        return null;
    }
}

function checkDockerfile() {
    const text = readFileSync(DOCKERFILE, 'utf8');
    const df = parseDockerfile(text);
    const names = new Set(df.stages.map((s) => s.name).filter(Boolean));
    const info = { services: {} };

    // Base images: every FROM that is not a stage (nor the final FROM ${SERVICE}).
    for (const s of df.stages) {
        if (names.has(s.base) || s.base === '${SERVICE}') continue;
        check(s.base === BASE_IMAGE, `Dockerfile:${s.line}: base image is ${BASE_IMAGE}`, `FROM ${s.base}`);
    }
    const build = df.stages.find((s) => s.name === 'build');
    const runtime = df.stages.find((s) => s.name === 'runtime');
    if (!check(build && runtime, 'Dockerfile has stages "build" and "runtime"')) return info;

    // Build dependencies equal the Makefile's DEB_BUILD.
    const mk = readFileSync(join(ROOT, 'Makefile'), 'utf8');
    const m = /^DEB_BUILD\s*:?=\s*((?:.*\\\n)*.*)$/m.exec(mk);
    const debBuild = m ? m[1].replace(/\\\n/g, ' ').trim().split(/\s+/) : [];
    const buildPkgs = aptPackages(build);
    check(debBuild.length > 0 && eqSet(buildPkgs, debBuild), 'Dockerfile build stage installs exactly the Makefile DEB_BUILD packages',
        `Dockerfile [${buildPkgs.join(' ')}] vs Makefile [${debBuild.join(' ')}]`);
    const makeRun = build.ins.find((i) => i.cmd === 'RUN' && /\bmake\b/.test(i.args));
    check(makeRun && /\bmake\b[^&]*\ball\b/.test(makeRun.args) && !/\b(test|check)\b/.test(makeRun.args),
        'Dockerfile build stage runs `make all` (binaries only, no tests)');

    // Runtime: packages, user, /data, openapi.yaml.
    const rtPkgs = aptPackages(runtime);
    info.runtimePkgs = rtPkgs;
    check(!rtPkgs.some((p) => p.endsWith('-dev') || p === 'build-essential'), 'Dockerfile runtime stage installs no -dev packages',
        rtPkgs.filter((p) => p.endsWith('-dev')).join(' '));
    check(rtPkgs.includes('curl'), 'Dockerfile runtime stage installs curl (the HEALTHCHECK command)');
    const rtRun = runtime.ins.filter((i) => i.cmd === 'RUN').map((i) => i.args).join(' ');
    check(new RegExp(`useradd\\b.*--uid ${UID}\\b`).test(rtRun), `Dockerfile runtime stage creates a user with uid ${UID}`);
    const user = runtime.ins.filter((i) => i.cmd === 'USER').pop();
    check(user && new RegExp(`^${UID}(:${UID})?$`).test(user.args.trim()), `Dockerfile runtime stage runs as USER ${UID} (numeric, non-root)`,
        user ? user.args : 'no USER');
    const vol = runtime.ins.find((i) => i.cmd === 'VOLUME');
    check(vol && /["\s[]\/data["\s\]]|^\/data$/.test(vol.args.trim()), 'Dockerfile declares VOLUME /data');
    const openapiCopy = runtime.ins.find((i) => i.cmd === 'COPY' && /openapi\.yaml/.test(i.args));
    const openapiPath = openapiCopy ? openapiCopy.args.trim().split(/\s+/).pop() : null;
    check(openapiPath, 'Dockerfile copies openapi.yaml into the runtime image');

    // Service stages.
    const svcDirs = existsSync(join(ROOT, 'services'))
        ? execFileSync('ls', [join(ROOT, 'services')], { encoding: 'utf8' }).split('\n').filter(Boolean)
        : [];
    for (const d of svcDirs) check(names.has(d), `Dockerfile has a stage for services/${d}`);
    for (const svc of SERVICES) {
        const st = df.stages.find((s) => s.name === svc);
        if (!check(st, `Dockerfile has a stage "${svc}"`)) continue;
        check(st.base === 'runtime', `Dockerfile stage ${svc} is FROM runtime`);
        const ep = st.ins.filter((i) => i.cmd === 'ENTRYPOINT').pop();
        const epArgs = ep ? execForm(ep) : null;
        if (!check(epArgs, `Dockerfile stage ${svc}: exec-form ENTRYPOINT`)) continue;
        check(epArgs[0] === `/usr/local/bin/${svc}`, `Dockerfile stage ${svc}: ENTRYPOINT runs /usr/local/bin/${svc}`, epArgs[0]);
        const args = epArgs.slice(1);
        const listen = flagValue(args, '--listen') || '';
        const port = Number((/^0\.0\.0\.0:(\d+)$/.exec(listen) || [])[1]);
        check(port > 0, `Dockerfile stage ${svc}: --listen 0.0.0.0:PORT`, listen);
        check(flagValue(args, '--data-dir') === '/data', `Dockerfile stage ${svc}: --data-dir /data`);
        const tokenFlag = svc === 'client-agent' ? '--operator-token-file' : '--admin-token-file';
        const tokenPath = flagValue(args, tokenFlag);
        check(tokenPath && tokenPath.startsWith('/run/secrets/'), `Dockerfile stage ${svc}: ${tokenFlag} under /run/secrets`, String(tokenPath));
        const oa = flagValue(args, '--openapi');
        if (oa !== null) check(oa === openapiPath, `Dockerfile stage ${svc}: --openapi is where openapi.yaml is copied`, `${oa} vs ${openapiPath}`);
        const expose = st.ins.find((i) => i.cmd === 'EXPOSE');
        check(expose && Number(expose.args.trim()) === port, `Dockerfile stage ${svc}: EXPOSE ${port}`);
        const hc = st.ins.find((i) => i.cmd === 'HEALTHCHECK');
        const hcCmd = hc ? execForm({ args: hc.args.replace(/^(--\S+\s+)*/, '') }) : null;
        check(hcCmd && hcCmd[0] === 'curl' && hcCmd.includes(`http://127.0.0.1:${port}/readyz`),
            `Dockerfile stage ${svc}: exec-form HEALTHCHECK curl http://127.0.0.1:${port}/readyz`, hc ? hc.args : 'none');
        checkAgainstHelp(`Dockerfile ENTRYPOINT of ${svc}`, svc, flagsOf(args), []);
        info.services[svc] = { port, tokenPath, args };
    }
    // Environment set in the image applies to every service.
    const envNames = [];
    for (const s of [runtime, ...SERVICES.map((n) => df.stages.find((x) => x.name === n)).filter(Boolean)]) {
        for (const i of s.ins.filter((x) => x.cmd === 'ENV')) {
            for (const m2 of i.args.matchAll(/(FEDSVD_[A-Z0-9_]+)=/g)) envNames.push([s.name, m2[1]]);
        }
    }
    for (const [stage, name] of envNames) {
        for (const svc of stage === 'runtime' ? SERVICES : [stage]) checkAgainstHelp(`Dockerfile ENV in ${stage}`, svc, [], [name]);
    }

    // The final stage: FROM ${SERVICE} and the selected binary.
    const last = df.stages[df.stages.length - 1];
    const defArg = df.global.find((i) => i.cmd === 'ARG' && /^SERVICE=/.test(i.args.trim()));
    check(last.base === '${SERVICE}', 'Dockerfile final stage is FROM ${SERVICE}');
    check(defArg && names.has(defArg.args.trim().split('=')[1]), 'Dockerfile: the default ARG SERVICE names a service stage');
    check(last.ins.some((i) => i.cmd === 'COPY' && /\/build\/bin\/\$\{SERVICE\}\s+\/usr\/local\/bin\/\$\{SERVICE\}$/.test(i.args.trim())),
        'Dockerfile final stage copies build/bin/${SERVICE} to /usr/local/bin/${SERVICE}');
    return info;
}

// ------------------------------------------- runtime libraries of the binaries
// Owners of files, in one dpkg -S call (each path also in its merged-/usr spelling).
function dpkgOwners(paths) {
    const variants = new Map();
    for (const p of paths) {
        const real = realpathSync(p);
        variants.set(p, [real, real.replace(/^\/usr\/lib\//, '/lib/'), real.replace(/^\/lib\//, '/usr/lib/')]);
    }
    const all = [...new Set([...variants.values()].flat())];
    const r = spawnSync('dpkg', ['-S', ...all], { encoding: 'utf8' });
    const owner = new Map();
    for (const line of (r.stdout || '').split('\n')) {
        const m = /^([^:,\s]+)(?::\S+)?(?:, [^:]+)*: (\/.*)$/.exec(line);
        if (m) owner.set(m[2], m[1]);
    }
    const out = new Map();
    for (const [p, vs] of variants) out.set(p, vs.map((v) => owner.get(v)).find(Boolean) || null);
    return out;
}
function parseDeps(d) {
    return d.split(',').map((x) => x.split('|').map((y) => y.trim().split(/[\s:(]/)[0]).filter(Boolean)).filter((a) => a.length);
}
// Depends and Pre-Depends of packages as lists of alternatives: from dpkg for the
// packages installed here (one call), else from apt's lists.
let installedDeps = null;
function depends(pkg) {
    if (installedDeps === null) {
        installedDeps = new Map();
        const r = spawnSync('dpkg-query', ['-W', '-f=${Package}\t${Status}\t${Depends},${Pre-Depends}\n'], { encoding: 'utf8', maxBuffer: 64 << 20 });
        for (const line of (r.stdout || '').split('\n')) {
            const [name, status, deps] = line.split('\t');
            if (name && /install ok installed/.test(status)) installedDeps.set(name, parseDeps(deps || ''));
        }
    }
    if (installedDeps.has(pkg)) return installedDeps.get(pkg);
    try {
        const out = execFileSync('apt-cache', ['depends', pkg], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
        const groups = [];
        let cur = [];
        for (const line of out.split('\n').slice(1)) {
            const m = /^\s*(\|)?(?:Pre)?Depends:\s*<?([^\s>:]+)/.exec(line);
            if (!m) continue;
            cur.push(m[2]);
            if (!m[1]) {
                groups.push(cur);
                cur = [];
            }
        }
        return groups;
    } catch {
        return [];
    }
}
function closure(pkgs) {
    const seen = new Set();
    const todo = [...pkgs];
    while (todo.length) {
        const p = todo.pop();
        if (seen.has(p)) continue;
        seen.add(p);
        for (const alts of depends(p)) {
            // Follow the installed alternatives when there are any (apt-cache is slow).
            const inst = alts.filter((a) => installedDeps.has(a));
            for (const a of inst.length ? inst : alts) if (!seen.has(a)) todo.push(a);
        }
    }
    return seen;
}
function checkRuntimeLibs(info) {
    if (!info.runtimePkgs) return;
    const avail = closure(info.runtimePkgs);
    // In debian:12-slim already (Essential: yes, or required by them).
    for (const p of ['libc6', 'libgcc-s1']) avail.add(p);
    for (const name of ['fedsvd', ...SERVICES]) {
        const bin = join(BIN, name);
        if (!existsSync(bin)) {
            missingBinary(name, 'its shared libraries are not checked');
            continue;
        }
        let ldd;
        try {
            ldd = execFileSync('ldd', [bin], { encoding: 'utf8' });
        } catch (e) {
            fail(`ldd ${bin}: ${e.message}`);
            continue;
        }
        const missing = [];
        const libs = [...ldd.matchAll(/^\s*(\S+) => (\/\S+)/gm)].map((m) => [m[1], m[2]]);
        const owners = dpkgOwners(libs.map(([, p]) => p));
        for (const [soname, path] of libs) {
            const owner = owners.get(path);
            if (owner === null) missing.push(`${soname} (no package owns ${path})`);
            else if (!avail.has(owner)) missing.push(`${soname} from ${owner}`);
        }
        check(missing.length === 0, `runtime image has every shared library ${name} loads`, missing.join(', '));
    }
}

// ------------------------------------------------------------------ compose
function parsePort(p) {
    if (typeof p === 'object') return { ip: p.host_ip || '', host: String(p.published || ''), target: Number(p.target) };
    const parts = String(p).replace(/\/tcp$/, '').split(':');
    if (parts.length === 3) return { ip: parts[0], host: parts[1], target: Number(parts[2]) };
    if (parts.length === 2) return { ip: '', host: parts[0], target: Number(parts[1]) };
    return { ip: '', host: '', target: Number(parts[0]) };
}
function parseVolume(v) {
    if (typeof v === 'object') return { source: v.source, target: v.target, ro: !!v.read_only, type: v.type };
    const parts = String(v).split(':');
    return { source: parts[0], target: parts[1], ro: parts[2] === 'ro', type: /^[./~]/.test(parts[0]) ? 'bind' : 'volume' };
}

function checkCompose(info) {
    const c = yaml.load(readFileSync(COMPOSE, 'utf8'));
    const svcs = c.services || {};
    const want = ['masking-server', 'aggregation-server', 'client-agent-1', 'client-agent-2', 'client-agent-3'];
    check(eqSet(Object.keys(svcs), want), `compose: services are ${want.join(', ')}`, Object.keys(svcs).join(', '));
    const composeDir = COMPOSE_DIR;
    const usedSecrets = [];
    const hostPorts = [];
    for (const [name, s] of Object.entries(svcs)) {
        const svc = s.build && s.build.args ? s.build.args.SERVICE : null;
        if (!check(SERVICES.includes(svc), `compose ${name}: build arg SERVICE is a service`, String(svc))) continue;
        check(resolve(composeDir, s.build.context || '.') === ROOT && resolve(ROOT, s.build.dockerfile || 'Dockerfile') === join(ROOT, 'docker/Dockerfile'),
            `compose ${name}: builds docker/Dockerfile with the repository root as context`);
        const img = info.services[svc];
        if (!img) continue;
        // Health check against the port the image listens on.
        const hc = s.healthcheck;
        const test = hc && Array.isArray(hc.test) ? hc.test : [];
        check(test[0] === 'CMD' && test.includes(`http://127.0.0.1:${img.port}/readyz`) && hc.interval && hc.retries,
            `compose ${name}: healthcheck GETs /readyz on ${img.port}`, JSON.stringify(test));
        // Volumes: a named volume on /data.
        const vols = (s.volumes || []).map(parseVolume);
        const data = vols.find((v) => v.target === '/data');
        check(data && data.type === 'volume' && c.volumes && data.source in c.volumes, `compose ${name}: named volume on /data`);
        for (const v of vols.filter((x) => x.type === 'bind')) check(v.ro, `compose ${name}: bind mount ${v.source} is read-only`);
        // Secrets: mounted at the token path of the image's entrypoint.
        const secs = (s.secrets || []).map((x) => (typeof x === 'string' ? { source: x, target: x } : x));
        const targets = secs.map((x) => (String(x.target || x.source).startsWith('/') ? x.target : `/run/secrets/${x.target || x.source}`));
        check(targets.includes(img.tokenPath), `compose ${name}: a secret is mounted at ${img.tokenPath}`, targets.join(', '));
        for (const x of secs) {
            usedSecrets.push(x.source);
            const def = c.secrets && c.secrets[x.source];
            if (!check(def && def.file, `compose ${name}: secret ${x.source} is defined from a file`)) continue;
            const f = resolve(composeDir, def.file);
            check(dirname(f) === join(composeDir, 'secrets'), `compose secret ${x.source}: file under docker/secrets/`, def.file);
            let ignored = false;
            try {
                execFileSync('git', ['-C', ROOT, 'check-ignore', '-q', f], { stdio: 'ignore' });
                ignored = true;
            } catch {
                ignored = false;
            }
            check(ignored, `compose secret ${x.source}: ${def.file} is git-ignored (never committed)`);
        }
        // Ports: on loopback, to the port the image listens on.
        for (const p of (s.ports || []).map(parsePort)) {
            check(p.ip === '127.0.0.1', `compose ${name}: published port ${p.host} is bound to 127.0.0.1`, p.ip || '(all interfaces)');
            check(p.target === img.port, `compose ${name}: published port targets ${img.port}`, String(p.target));
            hostPorts.push(p.host);
        }
        // depends_on: only on healthy services that have a health check.
        const deps = s.depends_on || {};
        for (const [dep, cond] of Object.entries(Array.isArray(deps) ? Object.fromEntries(deps.map((d) => [d, {}])) : deps)) {
            check(cond && cond.condition === 'service_healthy' && svcs[dep] && svcs[dep].healthcheck,
                `compose ${name}: depends_on ${dep} with condition service_healthy`);
        }
        if (svc === 'client-agent') check('aggregation-server' in deps, `compose ${name}: waits for aggregation-server`);
        check(s.read_only === true && (s.cap_drop || []).includes('ALL'), `compose ${name}: read-only root filesystem, all capabilities dropped`);
        // Flags and FEDSVD_* variables given here exist in the binary.
        const cmd = typeof s.command === 'string' ? s.command.split(/\s+/) : s.command || [];
        const env = Array.isArray(s.environment) ? s.environment.map((e) => e.split('=')[0]) : Object.keys(s.environment || {});
        if (s.entrypoint) fail(`compose ${name}: overrides the image's entrypoint`);
        checkAgainstHelp(`compose ${name}`, svc, flagsOf(cmd), env.filter((e) => e.startsWith('FEDSVD_')));
    }
    check(new Set(usedSecrets).size === usedSecrets.length, 'compose: every service has its own token (no secret shared)');
    check(new Set(hostPorts).size === hostPorts.length, 'compose: published host ports are distinct');
}

// ------------------------------------------------------- compose, per role
// docker/compose/{masking,aggregation,site}.yml: each organisation runs its
// own file on its own host, so each holds exactly one service, serves TLS in
// the process (no FEDSVD_INSECURE_HTTP), and verifies its peers with a CA
// mounted as a secret. The servers publish their port on every interface
// (other organisations reach them); the agent publishes its operator API on
// the host's loopback only (it makes outbound connections only).
const ROLE_SPEC = {
    masking: { svc: 'masking-server', tls: ['FEDSVD_TLS_CERT', 'FEDSVD_TLS_KEY'], ca: null, public: true },
    aggregation: { svc: 'aggregation-server', tls: ['FEDSVD_TLS_CERT', 'FEDSVD_TLS_KEY'], ca: 'FEDSVD_MASKING_CA_FILE', public: true },
    site: { svc: 'client-agent', tls: ['FEDSVD_TLS_CERT_FILE', 'FEDSVD_TLS_KEY_FILE'], ca: 'FEDSVD_CA_FILE', public: false },
};
function checkRoleCompose(info) {
    const seen = new Set();
    for (const [role, file] of Object.entries(ROLE_FILES)) {
        const spec = ROLE_SPEC[role];
        const where = `compose/${role}.yml`;
        let c;
        try {
            c = yaml.load(readFileSync(file, 'utf8'));
        } catch (e) {
            fail(`${where}: cannot load: ${e.message}`);
            continue;
        }
        const svcs = c.services || {};
        const names = Object.keys(svcs);
        if (!check(names.length === 1 && names[0] === spec.svc, `${where}: runs ${spec.svc} and nothing else (one organisation, one service)`, names.join(', '))) continue;
        const s = svcs[spec.svc];
        const svc = s.build && s.build.args ? s.build.args.SERVICE : null;
        check(svc === spec.svc, `${where}: build arg SERVICE is ${spec.svc}`, String(svc));
        check(resolve(ROLE_DIR, s.build?.context || '.') === ROOT && resolve(ROOT, s.build?.dockerfile || 'Dockerfile') === join(ROOT, 'docker/Dockerfile'),
            `${where}: builds docker/Dockerfile with the repository root as context`);
        seen.add(spec.svc);
        const img = info.services[spec.svc];
        if (!img) continue;
        const env = Array.isArray(s.environment)
            ? Object.fromEntries(s.environment.map((e) => [e.split('=')[0], e.split('=').slice(1).join('=')]))
            : { ...(s.environment || {}) };
        // Secrets: the token where the entrypoint reads it; every file git-ignored.
        const secs = (s.secrets || []).map((x) => (typeof x === 'string' ? { source: x, target: x } : x));
        const target = (x) => (String(x.target || x.source).startsWith('/') ? x.target : `/run/secrets/${x.target || x.source}`);
        const mounted = new Set(secs.map(target));
        check(mounted.has(img.tokenPath), `${where}: a secret is mounted at ${img.tokenPath}`, [...mounted].join(', '));
        for (const x of secs) {
            const def = c.secrets && c.secrets[x.source];
            if (!check(def && def.file, `${where}: secret ${x.source} is defined from a file`)) continue;
            const f = resolve(ROLE_DIR, def.file);
            let ignored = false;
            try {
                execFileSync('git', ['-C', ROOT, 'check-ignore', '-q', f], { stdio: 'ignore' });
                ignored = true;
            } catch {
                ignored = false;
            }
            check(dirname(f) === join(ROLE_DIR, 'secrets') && ignored, `${where}: secret ${x.source}: ${def.file} is under docker/compose/secrets/ and git-ignored`);
        }
        // TLS in the process, from mounted secrets; never plain HTTP.
        check(!('FEDSVD_INSECURE_HTTP' in env) && !(Array.isArray(s.command) && s.command.includes('--insecure-http')),
            `${where}: no FEDSVD_INSECURE_HTTP / --insecure-http (TLS on every connection)`);
        for (const v of spec.tls) check(env[v] && mounted.has(env[v]), `${where}: ${v} names a mounted secret`, String(env[v]));
        if (spec.ca) check(env[spec.ca] && mounted.has(env[spec.ca]), `${where}: ${spec.ca} names a mounted secret (the consortium CA)`, String(env[spec.ca]));
        // Ports: the image's port; servers on every interface, the agent on loopback.
        const ports = (s.ports || []).map(parsePort);
        check(ports.length === 1 && ports[0].target === img.port, `${where}: publishes the image's port ${img.port}`, JSON.stringify(ports));
        for (const p of ports) {
            if (spec.public) check(p.ip === '' || p.ip === '0.0.0.0', `${where}: port ${p.host} published on every interface (reached from other organisations)`, p.ip);
            else check(p.ip === '127.0.0.1' || p.ip === '::1', `${where}: operator API published on the host's loopback only`, p.ip || '(all interfaces)');
        }
        // Health check over HTTPS on the image's port.
        const test = Array.isArray(s.healthcheck?.test) ? s.healthcheck.test : [];
        check(test[0] === 'CMD' && test.some((a) => a === `https://127.0.0.1:${img.port}/readyz`) && s.healthcheck.interval && s.healthcheck.retries,
            `${where}: healthcheck GETs https://…:${img.port}/readyz`, JSON.stringify(test));
        // State and hardening.
        const vols = (s.volumes || []).map(parseVolume);
        const data = vols.find((v) => v.target === '/data');
        check(data && data.type === 'volume' && c.volumes && data.source in c.volumes, `${where}: named volume on /data`);
        for (const v of vols.filter((x) => x.type === 'bind')) check(v.ro, `${where}: bind mount ${v.source} is read-only`);
        check(s.read_only === true && (s.cap_drop || []).includes('ALL'), `${where}: read-only root filesystem, all capabilities dropped`);
        if (s.entrypoint) fail(`${where}: overrides the image's entrypoint`);
        const cmd = typeof s.command === 'string' ? s.command.split(/\s+/) : s.command || [];
        checkAgainstHelp(where, spec.svc, flagsOf(cmd), Object.keys(env).filter((e) => e.startsWith('FEDSVD_')));
    }
    check(seen.size === 3, 'docker/compose: one file per role (masking, aggregation, site)', [...seen].join(', '));
}

// --------------------------------------------------------------- kubernetes
function loadK8s() {
    if (K8S_RENDERED) return yaml.loadAll(readFileSync(K8S_RENDERED, 'utf8')).filter(Boolean);
    // Without kubectl: the resources listed by the kustomizations, generators
    // expanded by hand (names without the hash suffix).
    const docs = [];
    const walk = (dir) => {
        const k = yaml.load(readFileSync(join(dir, 'kustomization.yaml'), 'utf8'));
        for (const r of k.resources || []) {
            const p = join(dir, r);
            if (existsSync(join(p, 'kustomization.yaml'))) walk(p);
            else docs.push(...yaml.loadAll(readFileSync(p, 'utf8')).filter(Boolean));
        }
        for (const g of k.secretGenerator || []) {
            const data = {};
            for (const f of g.files || []) {
                const [key, file] = f.includes('=') ? f.split('=') : [basename(f), f];
                data[key] = Buffer.from(readFileSync(join(dir, file))).toString('base64');
            }
            docs.push({ apiVersion: 'v1', kind: 'Secret', metadata: { name: g.name }, data });
        }
        for (const im of k.images || []) {
            for (const d of docs) {
                for (const ct of d.spec?.template?.spec?.containers || []) {
                    if (ct.image === im.name) ct.image = `${im.newName || im.name}:${im.newTag || 'latest'}`;
                }
            }
        }
    };
    walk(resolve(K8S_SRC));
    return docs;
}

function checkK8s(info) {
    let docs;
    try {
        docs = loadK8s();
    } catch (e) {
        fail(`k8s: cannot load manifests: ${e.message}`);
        return;
    }
    const secrets = new Map(docs.filter((d) => d.kind === 'Secret').map((d) => [d.metadata.name, d]));
    const services = docs.filter((d) => d.kind === 'Service');
    const workloads = docs.filter((d) => ['StatefulSet', 'Deployment'].includes(d.kind));
    const pvcs = new Set(docs.filter((d) => d.kind === 'PersistentVolumeClaim').map((d) => d.metadata.name));
    for (const svc of SERVICES) {
        // the workload named after the service (aggregation-shard runs the same image)
        const runs = (x) => (x.spec.template.spec.containers || []).some((ct) => new RegExp(`^(.*/)?${svc}(:[^/]+)?$`).test(ct.image));
        const w = workloads.find((x) => runs(x) && x.metadata.name === svc) || workloads.find(runs);
        if (!check(w, `k8s: a workload runs the ${svc} image`)) continue;
        const where = `k8s ${w.kind}/${w.metadata.name}`;
        const img = info.services[svc];
        const pod = w.spec.template.spec;
        const ct = pod.containers.find((x) => new RegExp(`^(.*/)?${svc}(:[^/]+)?$`).test(x.image));
        check(w.kind === 'StatefulSet' && (w.spec.volumeClaimTemplates || []).some((v) => v.metadata.name === 'data'),
            `${where}: StatefulSet with a PVC template "data"`);
        check(w.spec.replicas === 1, `${where}: one replica (its state is one SQLite database)`);
        if (!img) continue;
        // Ports and probes.
        const ports = ct.ports || [];
        const cport = ports.find((p) => p.containerPort === img.port);
        check(cport, `${where}: containerPort ${img.port} (the image's --listen)`, JSON.stringify(ports));
        const probePort = (pr) => {
            const p = pr && pr.httpGet && pr.httpGet.port;
            return typeof p === 'number' ? p : (ports.find((x) => x.name === p) || {}).containerPort;
        };
        check(ct.readinessProbe?.httpGet?.path === '/readyz' && probePort(ct.readinessProbe) === img.port, `${where}: readinessProbe GET /readyz on ${img.port}`);
        check(ct.livenessProbe?.httpGet?.path === '/healthz' && probePort(ct.livenessProbe) === img.port, `${where}: livenessProbe GET /healthz on ${img.port}`);
        // Non-root, read-only root filesystem.
        const psc = pod.securityContext || {};
        const csc = ct.securityContext || {};
        check((psc.runAsNonRoot || csc.runAsNonRoot) && (csc.runAsUser ?? psc.runAsUser) === UID, `${where}: runs as non-root uid ${UID}`);
        check(csc.readOnlyRootFilesystem === true && csc.allowPrivilegeEscalation === false && (csc.capabilities?.drop || []).includes('ALL'),
            `${where}: readOnlyRootFilesystem, no privilege escalation, all capabilities dropped`);
        // Mounts: /data, /tmp, the token at the entrypoint's path from a Secret that exists.
        const mounts = ct.volumeMounts || [];
        const vols = new Map((pod.volumes || []).map((v) => [v.name, v]));
        check(mounts.some((m) => m.mountPath === '/data' && (w.spec.volumeClaimTemplates || []).some((t) => t.metadata.name === m.name)),
            `${where}: /data on the PVC`);
        check(mounts.some((m) => m.mountPath === '/tmp'), `${where}: a writable /tmp (the root filesystem is read-only)`);
        const tm = mounts.find((m) => m.mountPath === img.tokenPath);
        const tv = tm && vols.get(tm.name);
        check(tv && tv.secret && secrets.has(tv.secret.secretName) && (!tm.subPath || (tv.secret.items ? tv.secret.items.some((i) => i.path === tm.subPath) : tm.subPath in (secrets.get(tv.secret.secretName).data || {}))),
            `${where}: token mounted at ${img.tokenPath} from a generated Secret`, tv && tv.secret ? tv.secret.secretName : 'no secret volume');
        for (const [n, v] of vols) {
            if (v.persistentVolumeClaim) check(pvcs.has(v.persistentVolumeClaim.claimName), `${where}: volume ${n} uses a PVC defined here`);
        }
        // A Service selects the pods and targets the port.
        const labels = w.spec.template.metadata.labels || {};
        const s = services.find((x) => x.spec.selector && Object.entries(x.spec.selector).every(([k, v]) => labels[k] === v));
        check(s && s.spec.ports.some((p) => p.targetPort === img.port || p.targetPort === cport?.name), `${where}: a Service selects it and targets port ${img.port}`);
        // Args and FEDSVD_* variables given here exist in the binary.
        if (ct.command) fail(`${where}: overrides the image's entrypoint (command)`);
        checkAgainstHelp(where, svc, flagsOf(ct.args), (ct.env || []).map((e) => e.name).filter((e) => e.startsWith('FEDSVD_')));
    }
}

// ------------------------------------------------ kubernetes: the shard peers
// docker/k8s/servers/aggregation-shards.yaml: a StatefulSet of aggregation
// servers behind a headless Service; the coordinator lists pod o as shard
// o + 1 (--shard-peer in ordinal order) and both sides read the same peer
// token Secret.
function mountedSecret(pod, ct, path) {
    const m = (ct.volumeMounts || []).find((x) => x.mountPath === path);
    const v = m && (pod.volumes || []).find((x) => x.name === m.name);
    return v && v.secret ? v.secret.secretName : null;
}
function checkK8sShards(info) {
    let docs;
    try {
        docs = loadK8s();
    } catch (e) {
        fail(`k8s: cannot load manifests: ${e.message}`);
        return;
    }
    const sts = docs.find((d) => d.kind === 'StatefulSet' && d.metadata.name === 'aggregation-shard');
    const coord = docs.find((d) => d.kind === 'StatefulSet' && d.metadata.name === 'aggregation-server');
    if (!check(sts && coord, 'k8s: StatefulSets aggregation-server (the coordinator) and aggregation-shard (its peers)')) return;
    const img = info.services['aggregation-server'];
    const pod = sts.spec.template.spec;
    const ct = pod.containers[0];
    const where = 'k8s StatefulSet/aggregation-shard';
    check(/^(.*\/)?aggregation-server(:[^/]+)?$/.test(ct.image), `${where}: runs the aggregation-server image`, ct.image);
    const n = sts.spec.replicas;
    check(Number.isInteger(n) && n >= 1 && n <= 15, `${where}: 1..15 replicas (shards 1..n)`, String(n));
    const svc = docs.find((d) => d.kind === 'Service' && d.metadata.name === sts.spec.serviceName);
    const labels = sts.spec.template.metadata.labels || {};
    check(svc && svc.spec.clusterIP === 'None' && Object.entries(svc.spec.selector || {}).every(([k, v]) => labels[k] === v),
        `${where}: its serviceName is a headless Service that selects its pods`);
    const port = img ? img.port : 8443;
    check(svc && svc.spec.ports.some((p) => p.port === port), `${where}: the headless Service has port ${port}`);
    check(ct.readinessProbe?.httpGet?.path === '/readyz' && ct.livenessProbe?.httpGet?.path === '/healthz', `${where}: readiness /readyz, liveness /healthz`);
    const csc = ct.securityContext || {};
    check((pod.securityContext?.runAsNonRoot || csc.runAsNonRoot) && csc.readOnlyRootFilesystem === true && csc.allowPrivilegeEscalation === false,
        `${where}: non-root, readOnlyRootFilesystem, no privilege escalation`);
    if (img) check((ct.volumeMounts || []).some((m) => m.mountPath === img.tokenPath) && mountedSecret(pod, ct, img.tokenPath), `${where}: an admin token at ${img.tokenPath} from a Secret`);
    // The peer token: one Secret, mounted where each side's --peer-token-file points.
    const cpod = coord.spec.template.spec;
    const cct = cpod.containers.find((x) => x.name === 'aggregation-server') || cpod.containers[0];
    const sPath = flagValue(ct.args || [], '--peer-token-file');
    const cPath = flagValue(cct.args || [], '--peer-token-file');
    const sSec = sPath && mountedSecret(pod, ct, sPath);
    const cSec = cPath && mountedSecret(cpod, cct, cPath);
    const secrets = new Set(docs.filter((d) => d.kind === 'Secret').map((d) => d.metadata.name));
    check(sSec && cSec && sSec === cSec && secrets.has(sSec), 'k8s: the coordinator and its peers read --peer-token-file from the same Secret',
        `${cSec} vs ${sSec}`);
    check(!img || (sSec !== mountedSecret(pod, ct, img.tokenPath)), 'k8s: the peer token is not the admin token');
    // --shard-peer: pod o of the StatefulSet is shard o + 1, in order.
    const peers = [];
    const a = cct.args || [];
    for (let i = 0; i < a.length; i++) if (a[i] === '--shard-peer' && i + 1 < a.length) peers.push(a[i + 1]);
    const want = Array.from({ length: n || 0 }, (_, o) => `${sts.metadata.name}-${o}.${sts.spec.serviceName}:${port}`);
    check(peers.length === want.length && peers.every((u, i) => new RegExp(`^https?://${esc(want[i])}(/|$)`).test(u)),
        'k8s: the coordinator lists every peer pod with --shard-peer, in ordinal order', `${peers.join(' ')} vs ${want.join(' ')}`);
    checkAgainstHelp(where, 'aggregation-server', flagsOf(ct.args), (ct.env || []).map((e) => e.name).filter((e) => e.startsWith('FEDSVD_')));
}

// ------------------------------------------------------ compose: sharded.yml
// The coordinator and three peers on one host: every service the
// aggregation-server image with TLS in the process, the peer token mounted
// where FEDSVD_PEER_TOKEN_FILE points, and FEDSVD_SHARD_PEERS naming the
// peers' published ports in the order of their names.
function checkShardedCompose(info) {
    const where = 'compose/sharded.yml';
    let c;
    try {
        c = yaml.load(readFileSync(SHARDED_FILE, 'utf8'));
    } catch (e) {
        fail(`${where}: cannot load: ${e.message}`);
        return;
    }
    const svcs = c.services || {};
    const want = ['aggregation-server', 'aggregation-shard-1', 'aggregation-shard-2', 'aggregation-shard-3'];
    if (!check(eqSet(Object.keys(svcs), want), `${where}: services are ${want.join(', ')}`, Object.keys(svcs).join(', '))) return;
    const img = info.services['aggregation-server'];
    if (!img) return;
    const hostPorts = {};
    for (const [name, s] of Object.entries(svcs)) {
        check(s.build?.args?.SERVICE === 'aggregation-server', `${where} ${name}: build arg SERVICE is aggregation-server`);
        const env = Array.isArray(s.environment)
            ? Object.fromEntries(s.environment.map((e) => [e.split('=')[0], e.split('=').slice(1).join('=')]))
            : { ...(s.environment || {}) };
        const secs = (s.secrets || []).map((x) => (typeof x === 'string' ? { source: x, target: x } : x));
        const mounted = new Map(secs.map((x) => [String(x.target || x.source).startsWith('/') ? x.target : `/run/secrets/${x.target || x.source}`, x.source]));
        check(mounted.has(img.tokenPath), `${where} ${name}: a secret is mounted at ${img.tokenPath}`);
        check(env.FEDSVD_PEER_TOKEN_FILE && mounted.get(env.FEDSVD_PEER_TOKEN_FILE) === 'peer-token', `${where} ${name}: FEDSVD_PEER_TOKEN_FILE names the mounted peer-token secret`, String(env.FEDSVD_PEER_TOKEN_FILE));
        check(mounted.get(env.FEDSVD_PEER_TOKEN_FILE) !== mounted.get(img.tokenPath), `${where} ${name}: the peer token is not the admin token`);
        for (const v of ['FEDSVD_TLS_CERT', 'FEDSVD_TLS_KEY']) check(env[v] && mounted.has(env[v]), `${where} ${name}: ${v} names a mounted secret`);
        check(!('FEDSVD_INSECURE_HTTP' in env), `${where} ${name}: no FEDSVD_INSECURE_HTTP (TLS between the coordinator and its peers)`);
        const test = Array.isArray(s.healthcheck?.test) ? s.healthcheck.test : [];
        check(test.includes(`https://127.0.0.1:${img.port}/readyz`), `${where} ${name}: healthcheck GETs https://…:${img.port}/readyz`);
        check(s.read_only === true && (s.cap_drop || []).includes('ALL'), `${where} ${name}: read-only root filesystem, all capabilities dropped`);
        const vols = (s.volumes || []).map(parseVolume);
        check(vols.some((v) => v.target === '/data' && v.type === 'volume' && c.volumes && v.source in c.volumes), `${where} ${name}: its own named volume on /data`);
        const ports = (s.ports || []).map(parsePort);
        check(ports.length === 1 && ports[0].target === img.port, `${where} ${name}: publishes the image's port ${img.port}`);
        if (ports.length === 1) hostPorts[name] = ports[0].host;
        checkAgainstHelp(`${where} ${name}`, 'aggregation-server', [], Object.keys(env).filter((e) => e.startsWith('FEDSVD_')));
    }
    const data = Object.values(svcs).map((s) => (s.volumes || []).map(parseVolume).find((v) => v.target === '/data')?.source);
    check(new Set(data).size === data.length, `${where}: every server has its own /data volume`);
    check(new Set(Object.values(hostPorts)).size === want.length, `${where}: published host ports are distinct`);
    const coordEnv = svcs['aggregation-server'].environment || {};
    const peers = String(coordEnv.FEDSVD_SHARD_PEERS || '').split(',').filter(Boolean);
    check(peers.length === 3 && peers.every((u, i) => u.startsWith('https://') && new RegExp(`:${hostPorts[`aggregation-shard-${i + 1}`]}(/|$)`).test(u)),
        `${where}: FEDSVD_SHARD_PEERS lists https URLs of shards 1, 2, 3 on their published ports, in order`, peers.join(' '));
    for (const name of want.slice(1)) {
        check(!('FEDSVD_SHARD_PEERS' in (svcs[name].environment || {})), `${where} ${name}: a peer lists no peers of its own`);
    }
    const deps = svcs['aggregation-server'].depends_on || {};
    check(want.slice(1).every((d) => deps[d]?.condition === 'service_healthy'), `${where}: the coordinator waits for its peers (service_healthy)`);
}

// --------------------------------------------------------------- .dockerignore
function checkDockerignore() {
    const ig = dockerignore().add(readFileSync(join(ROOT, '.dockerignore'), 'utf8').split('\n'));
    const needed = ['Makefile', 'openapi.yaml', 'VERSION', 'LICENSE', 'NOTICE', 'lib/la/mat.c', 'api/wire.c', 'cli/main.c', 'services/aggregation-server/main.c', 'services/client-agent/main.c'];
    const kept = needed.filter((f) => ig.ignores(f));
    check(kept.length === 0, '.dockerignore keeps what `make all` reads', kept.join(', '));
    const secret = ['docker/secrets/aggregation-admin-token', 'docker/compose/secrets/masking.key', 'docker/compose/datasets/data.npy', 'docker/datasets/agent-1/party-1.npy', 'docker/k8s/servers/secrets/masking-admin-token',
        '.git/config', 'build/bin/fedsvd', 'build-asan/lib/libfedsvd.a', 'tests/contract/node_modules/x.js', 'lib/la/mat.o', 'out/demo/train.npy'];
    const leaked = secret.filter((f) => !ig.ignores(f));
    check(leaked.length === 0, '.dockerignore keeps tokens, datasets, build trees, .git and node_modules out of the build context', leaked.join(', '));
}

const info = checkDockerfile();
checkRuntimeLibs(info);
checkCompose(info);
checkRoleCompose(info);
checkShardedCompose(info);
if (K8S_RENDERED || K8S_SRC) {
    checkK8s(info);
    checkK8sShards(info);
}
checkDockerignore();
