/* Shared client pieces of `fedsvd job` and `fedsvd local`: see orch.h. */
#include "orch.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_docs.h"
#include "core/hex.h"
#include "crypto/ct.h"
#include "crypto/ed25519.h"
#include "crypto/sha256.h"
#include "jobdoc.h"
#include "net/auth.h"

int orch_client(fs_httpc **out, const char *base_url, const char *token, long timeout_ms,
                unsigned retries, const struct orch_tls *tls, struct fs_err *err)
{
    struct fs_httpc_config cfg;

    fs_httpc_config_default(&cfg);
    cfg.base_url = base_url;
    cfg.token = token;
    cfg.connect_timeout_ms = 2000;
    cfg.timeout_ms = timeout_ms;
    cfg.max_retries = retries;
    cfg.backoff_base_ms = 100;
    cfg.backoff_max_ms = 1000;
    cfg.retry_after_max_ms = 2000;
    cfg.user_agent = "fedsvd";
    if (tls != NULL) {
        cfg.insecure = tls->insecure;
        cfg.ca_file = tls->ca_file;
        cfg.allow_insecure_http = tls->insecure_http;
    }
    return fs_httpc_new(out, &cfg, err);
}

void orch_agent_help(void)
{
    printf(
        "  --agent URL            the client-agent's operator API, e.g. https://agent:8080\n"
        "  --token-file F         file holding the agent's operator token (mode 0600)\n"
        "  --ca-file FILE         verify the agent with this PEM bundle\n"
        "  --insecure             do not verify the agent's TLS certificate\n"
        "  --insecure-http        allow an http:// --agent URL to a host that is not loopback\n");
}

int orch_agent_connect(const char *cmd, struct orch_agent_opts *o, long timeout_ms,
                       unsigned retries, fs_httpc **out)
{
    char *token = NULL;
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    *out = NULL;
    if ((rc = cli_parse_format(cmd, o->format, &o->json)) != CLI_OK) {
        return rc;
    }
    if (o->url == NULL) {
        return cli_usage_error(cmd, "--agent URL is required (the client-agent's operator API)");
    }
    if (!orch_url_ok(o->url)) {
        return cli_usage_error(cmd, "--agent: expected an http:// or https:// URL, got '%s'",
                               o->url);
    }
    if (o->token_file == NULL) {
        return cli_usage_error(cmd, "--agent needs --token-file (the agent's operator token)");
    }
    o->tls.ca_file = o->ca_file;
    if (fs_auth_token_load(o->token_file, &token, &err) != 0) {
        return cli_fs_error(cmd, &err);
    }
    rc = orch_client(out, o->url, token, timeout_ms, retries, &o->tls, &err);
    fs_auth_token_free(token);
    return rc != 0 ? cli_fs_error(cmd, &err) : CLI_OK;
}

int orch_agent_identity(fs_httpc *c, char fpr[ORCH_FPR_LEN + 1], struct fs_err *err)
{
    uint8_t pk[FS_ED25519_KEY_LEN];
    json_t *r = NULL;
    int rc = fs_httpc_json(c, "GET", "/v1/identity", NULL, &r, NULL, err);

    if (rc == 0 && (rc = fs_identity_decode(r, pk, err)) != 0) {
        fs_err_prefix(err, "GET /v1/identity: ");
    } else if (rc == 0) {
        fs_ed25519_fpr_format(pk, fpr);
    }
    json_decref(r);
    return rc;
}

int orch_party_keys(const char *cmd, const char *const *items, size_t parties, int allow_unpinned,
                    struct fs_job_spec *spec)
{
    unsigned char *seen = NULL;
    size_t given = 0;
    int rc = CLI_OK;

    while (items != NULL && items[given] != NULL) {
        given++;
    }
    if (given == 0) {
        if (!allow_unpinned) {
            return cli_usage_error(cmd,
                                   "pin every party's identity with --party-key I:FINGERPRINT "
                                   "(its operator prints it with 'fedsvd agent identity'), or "
                                   "give --allow-unpinned to trust the keys the server relays");
        }
        spec->allow_unpinned = 1;
        return CLI_OK;
    }
    seen = calloc(parties, 1);
    if (seen == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    for (size_t i = 0; i < given && rc == CLI_OK; i++) {
        const char *colon = strchr(items[i], ':');
        char num[16];
        size_t party = 0;
        uint8_t pk[FS_ED25519_KEY_LEN];
        if (colon == NULL || colon == items[i] || (size_t)(colon - items[i]) >= sizeof num) {
            rc = cli_usage_error(cmd, "--party-key: expected I:FINGERPRINT, got '%s'", items[i]);
            break;
        }
        memcpy(num, items[i], (size_t)(colon - items[i]));
        num[colon - items[i]] = '\0';
        if ((rc = cli_parse_size(cmd, "--party-key", num, 1, parties, &party)) != CLI_OK) {
            break;
        }
        if (fs_ed25519_fpr_parse(colon + 1, pk, NULL) != 0) {
            rc = cli_usage_error(cmd,
                                 "--party-key %zu: expected 64 hex digits (the fingerprint "
                                 "'fedsvd agent identity' prints), got '%s'",
                                 party, colon + 1);
            break;
        }
        if (seen[party - 1]) {
            rc = cli_usage_error(cmd, "--party-key: party %zu given twice", party);
            break;
        }
        seen[party - 1] = 1;
        memcpy(spec->party_keys[party - 1], pk, sizeof pk);
    }
    for (size_t p = 0; p < parties && rc == CLI_OK; p++) {
        if (!seen[p]) {
            rc = cli_usage_error(cmd,
                                 "--party-key: party %zu has no key (pin all %zu parties, or "
                                 "none with --allow-unpinned)",
                                 p + 1, parties);
        }
    }
    spec->has_pins = rc == CLI_OK;
    free(seen);
    return rc;
}

int orch_job_spec_json(const char *cmd, const struct fs_job_spec *spec, json_t **out)
{
    *out = fs_job_spec_encode(spec);
    if (*out == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    return CLI_OK;
}

int orch_check_invitation_pins(const struct fs_job_spec *spec, const json_t *invs,
                               struct fs_err *err)
{
    uint8_t(*keys)[FS_JOB_KEY_LEN] = calloc(spec->parties > 0 ? spec->parties : 1, sizeof *keys);
    struct fs_err derr;
    size_t i;
    json_t *inv;
    int rc = 0;

    if (keys == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    json_array_foreach(invs, i, inv)
    {
        int has = 0;

        fs_err_clear(&derr);
        if (fs_job_party_keys_decode(inv, spec->parties, &has, keys, &derr) != 0 ||
            has != spec->has_pins ||
            (has && memcmp(keys, spec->party_keys, spec->parties * sizeof *keys) != 0)) {
            rc = fs_err_set(err, FS_EAUTH,
                            "POST /v1/jobs: invitation %zu does not carry the party keys this "
                            "job pins: the server altered them; do not hand the invitations "
                            "out",
                            i + 1);
            break;
        }
    }
    free(keys);
    return rc;
}

int orch_id_ok(const char *s)
{
    size_t n = 0;

    if (s == NULL || s[0] == '\0' || s[0] == '.') {
        return 0;
    }
    for (; s[n] != '\0'; n++) {
        char c = s[n];
        int good = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '-' || c == '_' || c == '.';
        if (!good || n + 1 >= ORCH_ID_MAX) {
            return 0;
        }
    }
    return 1;
}

int orch_url_ok(const char *s)
{
    const char *rest;

    if (s == NULL) {
        return 0;
    }
    if (strncmp(s, "http://", 7) == 0) {
        rest = s + 7;
    } else if (strncmp(s, "https://", 8) == 0) {
        rest = s + 8;
    } else {
        return 0;
    }
    if (rest[0] == '\0' || rest[0] == '/') {
        return 0;
    }
    for (; *rest != '\0'; rest++) {
        if ((unsigned char)*rest <= 0x20 || *rest == 0x7f) {
            return 0;
        }
    }
    return 1;
}

int orch_url_trim(const char *base_url, char *buf, size_t cap, struct fs_err *err)
{
    size_t n = strlen(base_url);

    while (n > 0 && base_url[n - 1] == '/') {
        n--;
    }
    if (n + 1 > cap) {
        return fs_err_set(err, FS_ERANGE, "URL too long");
    }
    memcpy(buf, base_url, n);
    buf[n] = '\0';
    return 0;
}

int orch_job_set_maskset(fs_httpc *c, const char *job_id, const char *masking_url,
                         const char *maskset, const char *end_token, struct fs_err *err)
{
    char path[64 + ORCH_ID_MAX];
    struct fs_job_maskset m;
    json_t *body;
    int rc;

    if (strlen(masking_url) >= sizeof m.masking_url || strlen(maskset) >= sizeof m.maskset ||
        strlen(end_token) >= sizeof m.end_token) {
        return fs_err_set(err, FS_EINVAL, "mask set: a field is too long");
    }
    snprintf(m.masking_url, sizeof m.masking_url, "%s", masking_url);
    snprintf(m.maskset, sizeof m.maskset, "%s", maskset);
    snprintf(m.end_token, sizeof m.end_token, "%s", end_token);
    body = fs_job_maskset_encode(&m);
    fs_wipe(&m, sizeof m);
    if (body == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    snprintf(path, sizeof path, "/v1/jobs/%s/maskset", job_id);
    rc = fs_httpc_json(c, "PUT", path, body, NULL, NULL, err);
    json_decref(body);
    return rc;
}

int orch_job_get(fs_httpc *c, const char *job_id, json_t **out, struct fs_err *err)
{
    char path[64 + ORCH_ID_MAX];
    int rc;

    *out = NULL;
    snprintf(path, sizeof path, "/v1/jobs/%s", job_id);
    rc = fs_httpc_json(c, "GET", path, NULL, out, NULL, err);
    if (rc == 0 && !json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        rc = fs_err_set(err, FS_EFORMAT, "GET %s: expected a JSON object", path);
    }
    return rc;
}

int orch_job_poll(fs_httpc *c, const char *job_id, json_t **out, struct fs_job_status *st,
                  struct fs_err *err)
{
    int rc = orch_job_get(c, job_id, out, err);

    if (rc == 0 && (rc = fs_job_status_decode(*out, st, err)) != 0) {
        json_decref(*out);
        *out = NULL;
    }
    return rc;
}

const char *orch_job_state(const json_t *job)
{
    struct fs_job_status st;
    struct fs_err err;

    fs_err_clear(&err);
    return fs_job_status_decode(job, &st, &err) == 0 ? fs_job_state_name(st.state) : "";
}

size_t orch_count(const json_t *obj, const char *key)
{
    const json_t *a = json_object_get(obj, key);

    return json_is_array(a) ? json_array_size(a) : 0;
}

int orch_sha256_file(const char *path, char hex[65], struct fs_err *err)
{
    fs_sha256_ctx *ctx = NULL;
    uint8_t d[FS_SHA256_LEN];
    unsigned char *buf = NULL;
    FILE *f = NULL;
    size_t n;
    int rc = 0;

    hex[0] = '\0';
    buf = malloc(1 << 16);
    if (buf == NULL) {
        return fs_err_set(err, FS_ENOMEM, "%s: out of memory", path);
    }
    f = fopen(path, "rb");
    if (f == NULL) {
        rc = fs_err_set(err, FS_EIO, "%s: cannot open: %s", path, strerror(errno));
        goto out;
    }
    if ((rc = fs_sha256_new(&ctx, err)) != 0) {
        goto out;
    }
    while ((n = fread(buf, 1, 1 << 16, f)) > 0) {
        if ((rc = fs_sha256_update(ctx, buf, n, err)) != 0) {
            goto out;
        }
    }
    if (ferror(f) != 0) {
        rc = fs_err_set(err, FS_EIO, "%s: read failed", path);
        goto out;
    }
    if ((rc = fs_sha256_final(ctx, d, err)) != 0) {
        goto out;
    }
    fs_hex_encode(d, FS_SHA256_LEN, hex);
out:
    fs_sha256_free(ctx);
    if (f != NULL) {
        fclose(f);
    }
    free(buf);
    return rc;
}

int orch_download_verified(fs_httpc *c, const char *path, const char *dest, const char *want_sha,
                           uint64_t *bytes, struct fs_err *err)
{
    char hex[65];
    int rc;

    rc = fs_httpc_download(c, path, dest, bytes, err);
    if (rc != 0 || want_sha == NULL) {
        return rc;
    }
    if ((rc = orch_sha256_file(dest, hex, err)) != 0) {
        return rc;
    }
    if (strcmp(hex, want_sha) != 0) {
        unlink(dest);
        return fs_err_set(err, FS_ECRYPTO, "GET %s: sha256 %s does not match the manifest's %s",
                          path, hex, want_sha);
    }
    return 0;
}

const char *orch_duration(double s, char *buf, size_t cap)
{
    long long m = s > 0 ? (long long)(s / 60) : 0;

    if (m < 60) {
        snprintf(buf, cap, "%.1f s", s);
    } else {
        snprintf(buf, cap, "%.1f s (%lld h %02lld min)", s, m / 60, m % 60);
    }
    return buf;
}

const char *orch_bytes(double n, char *buf, size_t cap)
{
    if (n < 1e3) {
        snprintf(buf, cap, "%.0f B", n);
    } else if (n < 1e6) {
        snprintf(buf, cap, "%.1f kB", n / 1e3);
    } else if (n < 1e9) {
        snprintf(buf, cap, "%.1f MB", n / 1e6);
    } else {
        snprintf(buf, cap, "%.2f GB", n / 1e9);
    }
    return buf;
}

/* ---- progress ---- */

void orch_progress_init(struct orch_progress *p, FILE *f, const char *who)
{
    memset(p, 0, sizeof *p);
    p->f = f;
    p->tty = isatty(fileno(f));
    p->t0 = cli_now();
    p->who = who;
}

/* "[3, 7]" (at most a few ids, then "…"), or "none". */
static void id_list(const uint32_t *ids, size_t n, char *buf, size_t cap)
{
    size_t used = 0;

    if (n == 0) {
        snprintf(buf, cap, "none");
        return;
    }
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        int w;

        if (i >= 12) {
            snprintf(buf + used, cap - used, ",...");
            return;
        }
        w = snprintf(buf + used, cap - used, "%s%lu", i > 0 ? "," : "", (unsigned long)ids[i]);
        if (w < 0 || (size_t)w >= cap - used) {
            return;
        }
        used += (size_t)w;
    }
}

static void emit(struct orch_progress *p, const char *key, const char *line)
{
    if (p->tty) {
        fprintf(p->f, "\r\033[Kfedsvd %s: %s", p->who, line);
        fflush(p->f);
        p->open = 1;
        return;
    }
    /* Not a terminal (a log, a CI run): one line per change of state only. */
    if (strcmp(key, p->last) == 0) {
        return;
    }
    snprintf(p->last, sizeof p->last, "%s", key);
    fprintf(p->f, "fedsvd %s: %s\n", p->who, line);
    fflush(p->f);
}

void orch_progress_job(struct orch_progress *p, const struct fs_job_status *st)
{
    char dropped[96], in[32], outb[32], dl[80], key[256], line[512];

    id_list(st->dropped, st->ndropped, dropped, sizeof dropped);
    orch_bytes((double)st->bytes_in, in, sizeof in);
    orch_bytes((double)st->bytes_out, outb, sizeof outb);
    dl[0] = '\0';
    if (st->has_deadline && st->state == FS_JOB_STATE_RUNNING) {
        char dur[40];
        snprintf(dl, sizeof dl, ", %s closes in %s",
                 strcmp(st->phase, "waiting_for_parties") == 0 ? "join" : "round",
                 orch_duration(st->deadline_in_s, dur, sizeof dur));
    }
    snprintf(key, sizeof key, "%s|%lu|%zu|%s", st->phase, (unsigned long)st->aggregation,
             st->npresent, dropped);
    snprintf(line, sizeof line,
             "[%6.1fs] %-19s aggregation %lu/%lu, parties %zu/%lu present, dropped: %s, "
             "server in %s out %s%s",
             cli_now() - p->t0, st->phase,
             (unsigned long)(st->aggregations > 0 ? st->aggregation + 1 : 0),
             (unsigned long)st->aggregations, st->npresent, (unsigned long)st->parties, dropped, in,
             outb, dl);
    emit(p, key, line);
}

void orch_progress_text(struct orch_progress *p, const char *text)
{
    char line[512];

    snprintf(line, sizeof line, "[%6.1fs] %s", cli_now() - p->t0, text);
    emit(p, text, line);
}

void orch_progress_done(struct orch_progress *p)
{
    if (p->tty && p->open) {
        fputc('\n', p->f);
        fflush(p->f);
        p->open = 0;
    }
}

void orch_sleep_ms(long ms)
{
    struct timespec ts;

    ts.tv_sec = ms / 1000;
    ts.tv_nsec = (ms % 1000) * 1000000L;
    nanosleep(&ts, NULL);
}
