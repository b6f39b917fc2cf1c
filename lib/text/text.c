/* Tokens, terms, feature hashing and TF-IDF (text.h). */
#include "text.h"

#include <dirent.h>
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <wctype.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "../crypto/ct.h"

/* ---- UTF-8 ---- */

int fs_utf8_next(const unsigned char *s, size_t n, size_t *pos, uint32_t *cp)
{
    size_t i = *pos;
    uint32_t c, min;
    size_t len;

    if (i >= n) {
        return -1;
    }
    c = s[i];
    if (c < 0x80) {
        *cp = c;
        *pos = i + 1;
        return 0;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
        c &= 0x1F;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        c &= 0x0F;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        c &= 0x07;
        min = 0x10000;
    } else {
        return -1; /* a continuation byte, an overlong 2-byte lead, or 0xF5.. */
    }
    if (n - i < len) {
        return -1;
    }
    for (size_t k = 1; k < len; k++) {
        if ((s[i + k] & 0xC0) != 0x80) {
            return -1;
        }
        c = (c << 6) | (s[i + k] & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
        return -1;
    }
    *cp = c;
    *pos = i + len;
    return 0;
}

size_t fs_utf8_put(uint32_t cp, unsigned char *out)
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- the string set: open addressing on FNV-1a (local tables only) ---- */

struct fs_text_set {
    char **str;
    size_t *len;
    size_t n, cap; /* strings */
    size_t *slot;  /* index + 1, 0 empty */
    size_t nslots; /* power of two */
};

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;

    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    return h;
}

struct fs_text_set *fs_text_set_new(void)
{
    struct fs_text_set *s = calloc(1, sizeof *s);

    if (s == NULL) {
        return NULL;
    }
    s->nslots = 64;
    s->slot = calloc(s->nslots, sizeof *s->slot);
    if (s->slot == NULL) {
        free(s);
        return NULL;
    }
    return s;
}

void fs_text_set_free(struct fs_text_set *s)
{
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < s->n; i++) {
        free(s->str[i]);
    }
    free(s->str);
    free(s->len);
    free(s->slot);
    free(s);
}

size_t fs_text_set_size(const struct fs_text_set *s)
{
    return s != NULL ? s->n : 0;
}

const char *fs_text_set_get(const struct fs_text_set *s, size_t i, size_t *len)
{
    if (s == NULL || i >= s->n) {
        return NULL;
    }
    if (len != NULL) {
        *len = s->len[i];
    }
    return s->str[i];
}

static size_t set_probe(const struct fs_text_set *s, const char *str, size_t len)
{
    size_t m = s->nslots - 1;
    size_t i = (size_t)fnv1a(str, len) & m;

    for (;;) {
        size_t v = s->slot[i];
        if (v == 0 || (s->len[v - 1] == len && memcmp(s->str[v - 1], str, len) == 0)) {
            return i;
        }
        i = (i + 1) & m;
    }
}

size_t fs_text_set_find(const struct fs_text_set *s, const char *str, size_t len)
{
    size_t v;

    if (s == NULL) {
        return SIZE_MAX;
    }
    v = s->slot[set_probe(s, str, len)];
    return v == 0 ? SIZE_MAX : v - 1;
}

static int set_grow(struct fs_text_set *s)
{
    size_t ns = s->nslots * 2;
    size_t *slot = calloc(ns, sizeof *slot);

    if (slot == NULL) {
        return -1;
    }
    for (size_t i = 0; i < s->n; i++) {
        size_t j = (size_t)fnv1a(s->str[i], s->len[i]) & (ns - 1);
        while (slot[j] != 0) {
            j = (j + 1) & (ns - 1);
        }
        slot[j] = i + 1;
    }
    free(s->slot);
    s->slot = slot;
    s->nslots = ns;
    return 0;
}

int fs_text_set_add(struct fs_text_set *s, const char *str, size_t len, size_t *index, int *added,
                    struct fs_err *err)
{
    size_t p;
    char *copy;

    if (added != NULL) {
        *added = 0;
    }
    p = set_probe(s, str, len);
    if (s->slot[p] != 0) {
        if (index != NULL) {
            *index = s->slot[p] - 1;
        }
        return 0;
    }
    if (s->n == UINT32_MAX - 1) {
        return fs_err_set(err, FS_ERANGE, "more than %u distinct terms", UINT32_MAX - 1);
    }
    if (s->n == s->cap) {
        size_t nc = s->cap == 0 ? 64 : s->cap * 2;
        char **ns = realloc(s->str, nc * sizeof *ns);
        size_t *nl;
        if (ns == NULL) {
            return fs_err_set(err, FS_ENOMEM, "out of memory for the terms");
        }
        s->str = ns;
        nl = realloc(s->len, nc * sizeof *nl);
        if (nl == NULL) {
            return fs_err_set(err, FS_ENOMEM, "out of memory for the terms");
        }
        s->len = nl;
        s->cap = nc;
    }
    copy = malloc(len + 1);
    if (copy == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory for the terms");
    }
    memcpy(copy, str, len);
    copy[len] = '\0';
    s->str[s->n] = copy;
    s->len[s->n] = len;
    s->slot[p] = s->n + 1;
    s->n++;
    if (index != NULL) {
        *index = s->n - 1;
    }
    if (added != NULL) {
        *added = 1;
    }
    if (s->n * 2 > s->nslots && set_grow(s) != 0) {
        return fs_err_set(err, FS_ENOMEM, "out of memory for the terms");
    }
    return 0;
}

/* ---- tokens ---- */

static pthread_once_t g_loc_once = PTHREAD_ONCE_INIT;
static locale_t g_loc = (locale_t)0;

static void loc_init(void)
{
    g_loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

int fs_text_tokens(const char *s, size_t n, const struct fs_text_opts *o,
                   int (*fn)(void *ctx, const char *tok, size_t len), void *ctx, struct fs_err *err)
{
    const unsigned char *u = (const unsigned char *)s;
    unsigned char tok[FS_TEXT_TOKEN_MAX + 4];
    size_t pos = 0, tlen = 0, ncp = 0;
    int rc;

    pthread_once(&g_loc_once, loc_init);
    if (g_loc == (locale_t)0) {
        return fs_err_set(err, FS_EINTERNAL,
                          "the C.UTF-8 locale is not available (needed for Unicode letters)");
    }
    for (;;) {
        uint32_t cp = 0;
        int letter = 0;
        int end = pos >= n;

        if (!end) {
            if (fs_utf8_next(u, n, &pos, &cp) != 0) {
                return fs_err_set(err, FS_EFORMAT, "not UTF-8 at byte %zu", pos);
            }
            letter = iswalpha_l((wint_t)cp, g_loc) != 0;
        }
        if (letter) {
            uint32_t lc = (uint32_t)towlower_l((wint_t)cp, g_loc);
            unsigned char b[4];
            size_t bl;

            if (lc > 0x10FFFF || (lc >= 0xD800 && lc <= 0xDFFF)) {
                lc = cp;
            }
            bl = fs_utf8_put(lc, b);
            if (tlen + bl <= FS_TEXT_TOKEN_MAX) {
                memcpy(tok + tlen, b, bl);
                tlen += bl;
                ncp++;
            }
            continue;
        }
        if (tlen > 0) {
            int keep = ncp >= (o != NULL ? o->min_len : 0);
            if (keep && o != NULL && o->stop != NULL &&
                fs_text_set_find(o->stop, (const char *)tok, tlen) != SIZE_MAX) {
                keep = 0;
            }
            if (keep && (rc = fn(ctx, (const char *)tok, tlen)) != 0) {
                return rc;
            }
            tlen = 0;
            ncp = 0;
        }
        if (end) {
            return 0;
        }
    }
}

/* Read a whole file (at most FS_TEXT_DOC_MAX bytes). */
static int slurp(const char *path, char **buf, size_t *n, struct fs_err *err)
{
    FILE *f = fopen(path, "rb");
    size_t cap = 0, len = 0;
    char *b = NULL;

    *buf = NULL;
    *n = 0;
    if (f == NULL) {
        return fs_err_set(err, FS_EIO, "%s: %s", path, strerror(errno));
    }
    for (;;) {
        size_t r;
        if (len == cap) {
            size_t nc = cap == 0 ? 4096 : cap * 2;
            char *nb;
            if (cap >= FS_TEXT_DOC_MAX) {
                free(b);
                fclose(f);
                return fs_err_set(err, FS_ERANGE, "%s: larger than %u MiB", path,
                                  FS_TEXT_DOC_MAX >> 20);
            }
            nb = realloc(b, nc + 1);
            if (nb == NULL) {
                free(b);
                fclose(f);
                return fs_err_set(err, FS_ENOMEM, "%s: out of memory", path);
            }
            b = nb;
            cap = nc;
        }
        r = fread(b + len, 1, cap - len, f);
        len += r;
        if (r == 0) {
            break;
        }
    }
    if (ferror(f)) {
        free(b);
        fclose(f);
        return fs_err_set(err, FS_EIO, "%s: read error", path);
    }
    fclose(f);
    b[len] = '\0';
    *buf = b;
    *n = len;
    return 0;
}

struct words_ctx {
    size_t ntok;
    char first[FS_TEXT_TOKEN_MAX + 1];
    size_t flen;
};

static int words_tok(void *ctx, const char *tok, size_t len)
{
    struct words_ctx *w = ctx;

    if (w->ntok++ == 0) {
        memcpy(w->first, tok, len);
        w->flen = len;
    }
    return 0;
}

int fs_text_read_words(const char *path, int unique, struct fs_text_set **out, struct fs_err *err)
{
    char *buf = NULL;
    size_t n = 0, line = 0, start = 0;
    struct fs_text_set *s = NULL;
    int rc;

    *out = NULL;
    if ((rc = slurp(path, &buf, &n, err)) != 0) {
        return rc;
    }
    s = fs_text_set_new();
    if (s == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        goto out;
    }
    while (start < n) {
        char *nl = memchr(buf + start, '\n', n - start);
        size_t end = nl != NULL ? (size_t)(nl - buf) : n;
        size_t len = end - start;
        struct words_ctx w;
        int added;

        line++;
        memset(&w, 0, sizeof w);
        if (len > 0 && buf[start + len - 1] == '\r') {
            len--;
        }
        if (len > 0 && buf[start] != '#') {
            if ((rc = fs_text_tokens(buf + start, len, NULL, words_tok, &w, err)) != 0) {
                fs_err_prefix(err, "%s:%zu: ", path, line);
                goto out;
            }
            if (w.ntok > 1) {
                rc = fs_err_set(err, FS_EFORMAT, "%s:%zu: more than one word on the line", path,
                                line);
                goto out;
            }
            if (w.ntok == 1) {
                if ((rc = fs_text_set_add(s, w.first, w.flen, NULL, &added, err)) != 0) {
                    goto out;
                }
                if (!added && unique) {
                    rc = fs_err_set(err, FS_EFORMAT, "%s:%zu: '%s' is listed twice", path, line,
                                    w.first);
                    goto out;
                }
            }
        }
        start = end + 1;
    }
    *out = s;
    s = NULL;
out:
    fs_text_set_free(s);
    free(buf);
    return rc;
}

/* ---- a party's documents ---- */

int fs_text_corpus_init(struct fs_text_corpus *c, struct fs_err *err)
{
    memset(c, 0, sizeof *c);
    c->terms = fs_text_set_new();
    if (c->terms == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    return 0;
}

void fs_text_corpus_clear(struct fs_text_corpus *c)
{
    for (size_t i = 0; i < c->ndocs; i++) {
        free(c->docs[i].term);
        free(c->docs[i].count);
        free(c->source[i]);
    }
    free(c->docs);
    free(c->source);
    free(c->term_total);
    fs_text_set_free(c->terms);
    memset(c, 0, sizeof *c);
}

struct doc_ctx {
    struct fs_text_corpus *c;
    uint32_t *ids;
    size_t n, cap;
    struct fs_err *err;
};

static int doc_tok(void *ctx, const char *tok, size_t len)
{
    struct doc_ctx *d = ctx;
    struct fs_text_corpus *c = d->c;
    size_t idx;
    int rc;

    if ((rc = fs_text_set_add(c->terms, tok, len, &idx, NULL, d->err)) != 0) {
        return rc;
    }
    if (idx >= c->term_cap) {
        size_t nc = c->term_cap == 0 ? 1024 : c->term_cap * 2;
        uint64_t *nt = realloc(c->term_total, nc * sizeof *nt);
        if (nt == NULL) {
            return fs_err_set(d->err, FS_ENOMEM, "out of memory");
        }
        memset(nt + c->term_cap, 0, (nc - c->term_cap) * sizeof *nt);
        c->term_total = nt;
        c->term_cap = nc;
    }
    c->term_total[idx]++;
    if (d->n == d->cap) {
        size_t nc = d->cap == 0 ? 256 : d->cap * 2;
        uint32_t *ni = realloc(d->ids, nc * sizeof *ni);
        if (ni == NULL) {
            return fs_err_set(d->err, FS_ENOMEM, "out of memory");
        }
        d->ids = ni;
        d->cap = nc;
    }
    d->ids[d->n++] = (uint32_t)idx;
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

int fs_text_corpus_add(struct fs_text_corpus *c, const char *text, size_t n, const char *source,
                       const struct fs_text_opts *o, struct fs_err *err)
{
    struct doc_ctx d;
    struct fs_text_doc doc;
    int rc;

    memset(&d, 0, sizeof d);
    memset(&doc, 0, sizeof doc);
    d.c = c;
    d.err = err;
    /* validate first: an invalid document must leave no term behind */
    for (size_t pos = 0; pos < n;) {
        uint32_t cp;
        if (fs_utf8_next((const unsigned char *)text, n, &pos, &cp) != 0) {
            if (o != NULL && o->skip_invalid) {
                c->skipped_invalid++;
                return 0;
            }
            return fs_err_set(err, FS_EFORMAT, "%s: not UTF-8 at byte %zu", source, pos);
        }
    }
    if ((rc = fs_text_tokens(text, n, o, doc_tok, &d, err)) != 0) {
        goto out;
    }
    if (d.n == 0) {
        c->skipped_empty++;
        goto out;
    }
    qsort(d.ids, d.n, sizeof *d.ids, cmp_u32);
    doc.term = malloc(d.n * sizeof *doc.term);
    doc.count = malloc(d.n * sizeof *doc.count);
    if (doc.term == NULL || doc.count == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < d.n; i++) {
        if (doc.nnz > 0 && doc.term[doc.nnz - 1] == d.ids[i]) {
            doc.count[doc.nnz - 1]++;
        } else {
            doc.term[doc.nnz] = d.ids[i];
            doc.count[doc.nnz] = 1;
            doc.nnz++;
        }
    }
    if (c->ndocs == c->cap) {
        size_t nc = c->cap == 0 ? 256 : c->cap * 2;
        struct fs_text_doc *nd = realloc(c->docs, nc * sizeof *nd);
        char **ns;
        if (nd == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
            goto out;
        }
        c->docs = nd;
        ns = realloc(c->source, nc * sizeof *ns);
        if (ns == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
            goto out;
        }
        c->source = ns;
        c->cap = nc;
    }
    c->source[c->ndocs] = strdup(source);
    if (c->source[c->ndocs] == NULL) {
        rc = fs_err_set(err, FS_ENOMEM, "out of memory");
        goto out;
    }
    c->docs[c->ndocs++] = doc;
    c->tokens += d.n;
    memset(&doc, 0, sizeof doc);
out:
    free(doc.term);
    free(doc.count);
    free(d.ids);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int fs_text_corpus_read_dir(struct fs_text_corpus *c, const char *dir, const struct fs_text_opts *o,
                            struct fs_err *err)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;

    if (d == NULL) {
        return fs_err_set(err, FS_EIO, "%s: %s", dir, strerror(errno));
    }
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') {
            continue;
        }
        if (n == cap) {
            size_t nc = cap == 0 ? 256 : cap * 2;
            char **nn = realloc(names, nc * sizeof *nn);
            if (nn == NULL) {
                rc = fs_err_set(err, FS_ENOMEM, "out of memory");
                goto out;
            }
            names = nn;
            cap = nc;
        }
        names[n] = strdup(e->d_name);
        if (names[n] == NULL) {
            rc = fs_err_set(err, FS_ENOMEM, "out of memory");
            goto out;
        }
        n++;
    }
    if (n > 0) {
        qsort(names, n, sizeof *names, cmp_str);
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        char path[4096];
        struct stat st;
        char *buf = NULL;
        size_t len = 0;

        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= sizeof path) {
            rc = fs_err_set(err, FS_ERANGE, "%s/%s: path too long", dir, names[i]);
            break;
        }
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            continue; /* subdirectories and special files are not documents */
        }
        if ((rc = slurp(path, &buf, &len, err)) == 0) {
            rc = fs_text_corpus_add(c, buf, len, names[i], o, err);
            if (rc != 0 && err != NULL && strncmp(err->msg, names[i], strlen(names[i])) == 0) {
                fs_err_prefix(err, "%s/", dir);
            }
        }
        free(buf);
    }
out:
    for (size_t i = 0; i < n; i++) {
        free(names[i]);
    }
    free(names);
    closedir(d);
    return rc;
}

int fs_text_corpus_read_lines(struct fs_text_corpus *c, const char *path,
                              const struct fs_text_opts *o, struct fs_err *err)
{
    FILE *f = fopen(path, "rb");
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t len;
    int rc = 0;

    if (f == NULL) {
        return fs_err_set(err, FS_EIO, "%s: %s", path, strerror(errno));
    }
    while ((len = getline(&line, &cap, f)) >= 0) {
        char src[4200];

        lineno++;
        if ((size_t)len > FS_TEXT_DOC_MAX) {
            rc = fs_err_set(err, FS_ERANGE, "%s:%zu: a line longer than %u MiB", path, lineno,
                            FS_TEXT_DOC_MAX >> 20);
            break;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) {
            len--;
        }
        snprintf(src, sizeof src, "%s:%zu", path, lineno);
        if ((rc = fs_text_corpus_add(c, line, (size_t)len, src, o, err)) != 0) {
            break;
        }
    }
    if (rc == 0 && ferror(f)) {
        rc = fs_err_set(err, FS_EIO, "%s: read error", path);
    }
    free(line);
    fclose(f);
    return rc;
}

/* ---- features ---- */

static const char k_domain[] = "fedsvd-lsa-term-v1";

int fs_text_hash_bucket(const uint8_t key[FS_TEXT_KEY_LEN], const char *term, size_t len, size_t d,
                        uint32_t *bucket, struct fs_err *err)
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int maclen = 0;
    unsigned char msg[sizeof k_domain + FS_TEXT_TOKEN_MAX + 4];
    uint64_t h = 0;

    if (d == 0 || d > UINT32_MAX || len > FS_TEXT_TOKEN_MAX + 4) {
        return fs_err_set(err, FS_EINVAL, "hash: bad bucket count or term length");
    }
    memcpy(msg, k_domain, sizeof k_domain); /* with its NUL: the separator */
    memcpy(msg + sizeof k_domain, term, len);
    if (HMAC(EVP_sha256(), key, FS_TEXT_KEY_LEN, msg, sizeof k_domain + len, mac, &maclen) ==
            NULL ||
        maclen < 8) {
        return fs_err_set(err, FS_ECRYPTO, "HMAC-SHA256 failed");
    }
    for (int i = 7; i >= 0; i--) {
        h = (h << 8) | mac[i];
    }
    fs_wipe(mac, sizeof mac);
    *bucket = (uint32_t)(h % d);
    return 0;
}

int fs_text_features(const struct fs_text_corpus *c, const uint8_t *key,
                     const struct fs_text_set *vocab, size_t d, uint32_t **feat, struct fs_err *err)
{
    size_t n = fs_text_set_size(c->terms);
    uint32_t *f = malloc((n > 0 ? n : 1) * sizeof *f);
    int rc;

    *feat = NULL;
    if (f == NULL) {
        return fs_err_set(err, FS_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        const char *t = fs_text_set_get(c->terms, i, &len);

        if (vocab != NULL) {
            size_t v = fs_text_set_find(vocab, t, len);
            f[i] = v == SIZE_MAX ? UINT32_MAX : (uint32_t)v;
        } else if ((rc = fs_text_hash_bucket(key, t, len, d, &f[i], err)) != 0) {
            free(f);
            return rc;
        }
    }
    *feat = f;
    return 0;
}

void fs_text_df_add(const struct fs_text_corpus *c, const uint32_t *feat, size_t d, double *df)
{
    /* stamp[f] = the last document (+1) that counted feature f */
    size_t *stamp = calloc(d > 0 ? d : 1, sizeof *stamp);

    for (size_t i = 0; stamp != NULL && i < c->ndocs; i++) {
        const struct fs_text_doc *doc = &c->docs[i];
        for (size_t q = 0; q < doc->nnz; q++) {
            uint32_t f = feat[doc->term[q]];
            if (f < d && stamp[f] != i + 1) {
                stamp[f] = i + 1;
                df[f] += 1.0;
            }
        }
    }
    if (stamp == NULL) {
        /* no scratch: a quadratic scan per document, same counts */
        for (size_t i = 0; i < c->ndocs; i++) {
            const struct fs_text_doc *doc = &c->docs[i];
            for (size_t q = 0; q < doc->nnz; q++) {
                uint32_t f = feat[doc->term[q]];
                int seen = 0;
                for (size_t p = 0; p < q && !seen; p++) {
                    seen = feat[doc->term[p]] == f;
                }
                if (f < d && !seen) {
                    df[f] += 1.0;
                }
            }
        }
    }
    free(stamp);
}

void fs_text_select(const double *df, size_t d, double ndocs, double min_df, double max_df_frac,
                    long *col, size_t *ncols)
{
    double lo = min_df > 1.0 ? min_df : 1.0;
    double hi = max_df_frac * ndocs;
    size_t n = 0;

    for (size_t f = 0; f < d; f++) {
        col[f] = df[f] >= lo && df[f] <= hi ? (long)n++ : -1;
    }
    *ncols = n;
}

void fs_text_idf(const double *df, size_t d, const long *col, double ndocs, double *idf)
{
    for (size_t f = 0; f < d; f++) {
        if (col[f] >= 0) {
            idf[col[f]] = log((1.0 + ndocs) / (1.0 + df[f])) + 1.0;
        }
    }
}

void fs_text_tfidf(const struct fs_text_corpus *c, const uint32_t *feat, const long *col,
                   const double *idf, fs_mat *x, size_t row0, size_t *zero_rows)
{
    size_t zr = 0;

    for (size_t j = 0; j < x->cols; j++) {
        for (size_t i = 0; i < c->ndocs; i++) {
            FS_MAT_AT(x, row0 + i, j) = 0.0;
        }
    }
    for (size_t i = 0; i < c->ndocs; i++) {
        const struct fs_text_doc *doc = &c->docs[i];
        double ss = 0.0;

        for (size_t q = 0; q < doc->nnz; q++) {
            uint32_t f = feat[doc->term[q]];
            if (f != UINT32_MAX && col[f] >= 0) {
                FS_MAT_AT(x, row0 + i, col[f]) += (double)doc->count[q];
            }
        }
        /* counts first (a bucket adds up its terms), then the weights, in
         * column order: the same bits whoever builds the row */
        for (size_t j = 0; j < x->cols; j++) {
            double v = FS_MAT_AT(x, row0 + i, j);
            if (v != 0.0) {
                v *= idf[j];
                FS_MAT_AT(x, row0 + i, j) = v;
                ss += v * v;
            }
        }
        if (ss == 0.0) {
            zr++;
            continue;
        }
        ss = 1.0 / sqrt(ss);
        for (size_t j = 0; j < x->cols; j++) {
            FS_MAT_AT(x, row0 + i, j) *= ss;
        }
    }
    if (zero_rows != NULL) {
        *zero_rows = zr;
    }
}
