// Signed masking-server key requests for the shell tests (the scheme of
// lib/crypto/reqsig.h, written independently with Node's Ed25519):
//
//   node reqsig.mjs keygen FILE          a fresh 32-byte identity seed into FILE (0600)
//   node reqsig.mjs fpr FILE             the fingerprint (64 hex) of the seed in FILE
//   node reqsig.mjs header FILE METHOD PATH MASKSET PARTY [TS]
//                                        the Authorization value "Fedsvd-Sig party=..,ts=..,
//                                        nonce=..,sig=.." (TS default: now); PATH without query
import crypto from 'node:crypto';
import fs from 'node:fs';

const PKCS8_PREFIX = Buffer.from('302e020100300506032b657004220420', 'hex');

function keyOf(file) {
  const seed = fs.readFileSync(file);
  if (seed.length !== 32) throw new Error(`${file}: expected 32 bytes`);
  return crypto.createPrivateKey({ key: Buffer.concat([PKCS8_PREFIX, seed]), format: 'der', type: 'pkcs8' });
}

function fpr(key) {
  return crypto.createPublicKey(key).export({ format: 'der', type: 'spki' }).subarray(12).toString('hex');
}

const [cmd, file, ...rest] = process.argv.slice(2);
if (cmd === 'keygen') {
  fs.writeFileSync(file, crypto.randomBytes(32), { mode: 0o600 });
} else if (cmd === 'fpr') {
  console.log(fpr(keyOf(file)));
} else if (cmd === 'header') {
  const [method, path, maskset, party, ts] = rest;
  const t = ts ?? String(Math.floor(Date.now() / 1000));
  const nonce = crypto.randomBytes(8).toString('hex');
  const msg = ['fedsvd-mask-request-v1', method, path.split('?')[0], maskset, party, t, nonce].join('\n');
  const sig = crypto.sign(null, Buffer.from(msg), keyOf(file)).toString('hex');
  console.log(`Fedsvd-Sig party=${party},ts=${t},nonce=${nonce},sig=${sig}`);
} else {
  console.error('usage: reqsig.mjs keygen|fpr|header ...');
  process.exit(2);
}
