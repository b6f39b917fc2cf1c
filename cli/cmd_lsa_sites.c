/* fedsvd lsa across sites: the coordinator's `fedsvd job create --algorithm
 * lsa` and each site's `fedsvd lsa count|df|rows|terms`, around the partner
 * commands (`fedsvd join`, `fedsvd participation result`).
 *
 * An lsa job is two jobs on the aggregation server, created by one command:
 * a secure sum of every site's row [df_1 .. df_D, n_i] (its document
 * frequencies over the D features and its number of documents with a token),
 * then an exact top-k fedsvd of the sites' TF-IDF rows, documents as the
 * samples (N x D: every feature is a column; a feature that the aggregate
 * counts drop is a zero column, a document without a token a zero row, so
 * the job's shape is fixed before any count is known). Each site receives
 * one invitation file holding both jobs' invitations and the settings every
 * site must share: the features (D hashed buckets and the hashing key, or a
 * public vocabulary), the tokenizer's settings, --min-df/--max-df and k.
 *
 * The hashing key is drawn here, by the coordinator, from the OS CSPRNG (or
 * read from --key-file) and written only into the sites' invitation files,
 * which travel to the sites out of band. No request to either server holds
 * it. With --no-key the files hold no key: the sites agree on one among
 * themselves and give it to every step with --key-file. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_lsa.h"
#include "core/hex.h"
#include "crypto/ct.h"
#include "crypto/rand.h"
#include "io/matio.h"
#include "text/text.h"

#define NOPTS(a)           (sizeof(a) / sizeof((a)[0]))
#define LSA_FORMAT         "fedsvd-lsa-invitation"
#define LSA_FORMAT_VERSION 1
#define LSA_D_DEFAULT      4096
#define LSA_D_MAX          ((size_t)1 << 20)
#define LSA_MAX_PARTIES    1000
#define LSA_BUNDLE_MAX     (64u << 20) /* bytes of an invitation file (a vocabulary inside) */
#define LSA_WORDS_MAX      ((size_t)1 << 20)
#define LSA_TOP_DEFAULT    10
#define LSA_PATH           4096

/* ---- the settings every site shares (the invitation's "settings") ---- */

struct lsa_settings {
    size_t d, k, min_length, parties;
    double min_df, max_df;
    int has_key;
    uint8_t key[FS_TEXT_KEY_LEN];
    struct fs_text_set *vocab; /* NULL: hashing */
    struct fs_text_set *stop;  /* may be NULL */
    size_t documents[LSA_MAX_PARTIES];
};

static void settings_clear(struct lsa_settings *s)
{
    fs_text_set_free(s->vocab);
    fs_text_set_free(s->stop);
    fs_wipe(s->key, sizeof s->key);
    memset(s, 0, sizeof *s);
}

static json_t *set_json(const struct fs_text_set *set)
{
    json_t *a = json_array();

    for (size_t i = 0; a != NULL && set != NULL && i < fs_text_set_size(set); i++) {
        if (json_array_append_new(a, json_string(fs_text_set_get(set, i, NULL))) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* The settings as JSON (new reference; holds the key). */
static json_t *settings_json(const struct lsa_settings *s)
{
    json_t *docs = json_array(), *o;
    char hex[2 * FS_TEXT_KEY_LEN + 1];

    for (size_t i = 0; docs != NULL && i < s->parties; i++) {
        json_array_append_new(docs, json_integer((json_int_t)s->documents[i]));
    }
    o = json_pack("{s:s, s:I, s:I, s:I, s:f, s:f, s:o, s:o}", "features",
                  s->vocab != NULL ? "vocabulary" : "hashing", "d", (json_int_t)s->d, "k",
                  (json_int_t)s->k, "min_length", (json_int_t)s->min_length, "min_df", s->min_df,
                  "max_df", s->max_df, "stop_words", set_json(s->stop), "documents", docs);
    if (o == NULL) {
        return NULL;
    }
    if (s->vocab != NULL) {
        json_object_set_new(o, "vocabulary", set_json(s->vocab));
    } else if (s->has_key) {
        fs_hex_encode(s->key, FS_TEXT_KEY_LEN, hex);
        json_object_set_new(o, "key", json_string(hex));
        fs_wipe(hex, sizeof hex);
    }
    return o;
}

static int words_from_json(const char *cmd, const char *file, const char *what, const json_t *a,
                           struct fs_text_set **out)
{
    struct fs_err err;
    size_t i;
    json_t *w;

    fs_err_clear(&err);
    if (!json_is_array(a) || json_array_size(a) > LSA_WORDS_MAX) {
        return cli_runtime_error(cmd, "%s: settings.%s: expected a list of at most %zu words", file,
                                 what, LSA_WORDS_MAX);
    }
    *out = fs_text_set_new();
    if (*out == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    json_array_foreach(a, i, w)
    {
        int added = 0;
        if (!json_is_string(w) || json_string_length(w) == 0 || json_string_length(w) > 1024) {
            return cli_runtime_error(cmd, "%s: settings.%s[%zu]: not a word", file, what, i);
        }
        if (fs_text_set_add(*out, json_string_value(w), json_string_length(w), NULL, &added,
                            &err) != 0) {
            return cli_fs_error(cmd, &err);
        }
        if (!added) {
            return cli_runtime_error(cmd, "%s: settings.%s: '%s' listed twice", file, what,
                                     json_string_value(w));
        }
    }
    return CLI_OK;
}

static int get_size(const char *cmd, const char *file, const json_t *o, const char *name, size_t lo,
                    size_t hi, size_t *out)
{
    const json_t *v = json_object_get(o, name);

    if (!json_is_integer(v) || json_integer_value(v) < (json_int_t)lo ||
        (uint64_t)json_integer_value(v) > (uint64_t)hi) {
        return cli_runtime_error(cmd, "%s: settings.%s: expected an integer in [%zu, %zu]", file,
                                 name, lo, hi);
    }
    *out = (size_t)json_integer_value(v);
    return CLI_OK;
}

static int settings_decode(const char *cmd, const char *file, const json_t *o,
                           struct lsa_settings *s)
{
    const char *features = json_string_value(json_object_get(o, "features"));
    const json_t *docs = json_object_get(o, "documents"), *key = json_object_get(o, "key");
    const json_t *stop = json_object_get(o, "stop_words");
    int rc;

    if (!json_is_object(o) || features == NULL ||
        (strcmp(features, "hashing") != 0 && strcmp(features, "vocabulary") != 0)) {
        return cli_runtime_error(cmd, "%s: settings.features: expected hashing or vocabulary",
                                 file);
    }
    if ((rc = get_size(cmd, file, o, "d", 1, LSA_D_MAX, &s->d)) != CLI_OK ||
        (rc = get_size(cmd, file, o, "k", 1, 100000, &s->k)) != CLI_OK ||
        (rc = get_size(cmd, file, o, "min_length", 0, 1000, &s->min_length)) != CLI_OK) {
        return rc;
    }
    s->min_df = json_number_value(json_object_get(o, "min_df"));
    s->max_df = json_number_value(json_object_get(o, "max_df"));
    if (!json_is_number(json_object_get(o, "min_df")) || !(s->min_df >= 1) ||
        !json_is_number(json_object_get(o, "max_df")) || !(s->max_df > 0 && s->max_df <= 1)) {
        return cli_runtime_error(cmd, "%s: settings.min_df (>= 1) or max_df (in (0, 1]) invalid",
                                 file);
    }
    if (!json_is_array(docs) || json_array_size(docs) < 1 ||
        json_array_size(docs) > LSA_MAX_PARTIES) {
        return cli_runtime_error(cmd, "%s: settings.documents: expected one count per site", file);
    }
    s->parties = json_array_size(docs);
    for (size_t i = 0; i < s->parties; i++) {
        const json_t *v = json_array_get(docs, i);
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
            return cli_runtime_error(cmd, "%s: settings.documents[%zu]: not a count", file, i);
        }
        s->documents[i] = (size_t)json_integer_value(v);
    }
    if (stop != NULL && json_array_size(stop) > 0 &&
        (rc = words_from_json(cmd, file, "stop_words", stop, &s->stop)) != CLI_OK) {
        return rc;
    }
    if (strcmp(features, "vocabulary") == 0) {
        if ((rc = words_from_json(cmd, file, "vocabulary", json_object_get(o, "vocabulary"),
                                  &s->vocab)) != CLI_OK) {
            return rc;
        }
        if (fs_text_set_size(s->vocab) != s->d) {
            return cli_runtime_error(cmd, "%s: settings: the vocabulary has %zu words, d is %zu",
                                     file, fs_text_set_size(s->vocab), s->d);
        }
        return CLI_OK;
    }
    if (key != NULL) {
        if (!json_is_string(key) || json_string_length(key) != 2 * FS_TEXT_KEY_LEN ||
            fs_hex_decode(json_string_value(key), s->key, FS_TEXT_KEY_LEN) != 0) {
            return cli_runtime_error(cmd, "%s: settings.key: expected 64 hex digits", file);
        }
        s->has_key = 1;
    }
    return CLI_OK;
}

/* A hashing key file: 64 hex digits (and a newline). */
static int read_key(const char *cmd, const char *path, uint8_t key[FS_TEXT_KEY_LEN])
{
    char buf[160];
    FILE *f = fopen(path, "r");
    size_t n;

    if (f == NULL) {
        return cli_runtime_error(cmd, "--key-file %s: %s", path, strerror(errno));
    }
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) {
        buf[--n] = '\0';
    }
    if (n != 2 * FS_TEXT_KEY_LEN || fs_hex_decode(buf, key, FS_TEXT_KEY_LEN) != 0) {
        fs_wipe(buf, sizeof buf);
        return cli_runtime_error(cmd, "--key-file %s: expected 64 hex digits", path);
    }
    fs_wipe(buf, sizeof buf);
    return CLI_OK;
}

/* Write a JSON document that holds a secret: 0600 from the start, then renamed into place. */
static int write_secret(const char *cmd, const char *path, const json_t *doc)
{
    char tmp[LSA_PATH + 32];
    int fd, rc = CLI_OK;

    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp) {
        return cli_runtime_error(cmd, "%s: path too long", path);
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        return cli_runtime_error(cmd, "%s: cannot create: %s", tmp, strerror(errno));
    }
    if (json_dumpfd(doc, fd, JSON_INDENT(2) | JSON_REAL_PRECISION(17)) != 0 ||
        write(fd, "\n", 1) != 1 || fsync(fd) != 0) {
        rc = cli_runtime_error(cmd, "%s: write failed: %s", tmp, strerror(errno));
    }
    if (close(fd) != 0 && rc == CLI_OK) {
        rc = cli_runtime_error(cmd, "%s: write failed: %s", tmp, strerror(errno));
    }
    if (rc == CLI_OK && rename(tmp, path) != 0) {
        rc = cli_runtime_error(cmd, "%s: cannot rename into place: %s", path, strerror(errno));
    }
    if (rc != CLI_OK) {
        unlink(tmp);
    }
    return rc;
}

/* ---- the coordinator: fedsvd job create --algorithm lsa ---- */

int cmd_lsa_job_requested(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            break;
        }
        if ((strcmp(argv[i], "--algorithm") == 0 && i + 1 < argc &&
             strcmp(argv[i + 1], "lsa") == 0) ||
            strcmp(argv[i], "--algorithm=lsa") == 0) {
            return 1;
        }
    }
    return 0;
}

static void job_help(void)
{
    printf("Usage: fedsvd job create --algorithm lsa --server URL --admin-token-file F\n"
           "                         --masking-server URL --masking-token-file F\n"
           "                         --party-sizes N1,N2,... --party-key I:FPR [...] --k K\n"
           "                         --out-dir DIR [--hash-features D [--key-file F | --no-key]\n"
           "                         | --vocabulary FILE] [--stop-words FILE] [--min-length N]\n"
           "                         [--min-df N] [--max-df F] [--join-timeout S]\n"
           "                         [--round-timeout S] [--name LABEL] [--public-url URL]\n"
           "                         [--masking-public-url URL] [--block-size C] [--ca-file F]\n"
           "                         [--insecure] [--insecure-http] [--format text|json]\n"
           "\n"
           "Create a federated latent semantic analysis (LSA) of the documents of several\n"
           "sites: two jobs on the aggregation server, run one after the other by every\n"
           "site's client-agent (see docs/lsa.md, \"Across sites\"):\n"
           "\n"
           "  1. a secure-sum job of shape 1 x (D + 1): each site's document frequencies\n"
           "     over the D features and its number of documents with a token;\n"
           "  2. an exact top-K fedsvd job of shape N x D (N: the sum of --party-sizes,\n"
           "     documents are the samples) over the sites' TF-IDF rows; its mask set is\n"
           "     created on the masking server, each site pinned to its --party-key.\n"
           "\n"
           "Writes DIR/invitation-<i>.json (mode 0600) for site i: both jobs' invitations\n"
           "for site i (its secret tokens) and the settings every site must share (the\n"
           "features, the tokenizer, --min-df/--max-df, K and the hashing key). Send file i\n"
           "to site i only, out of band, like any invitation. The hashing key is drawn here\n"
           "from the OS CSPRNG and goes into these files only: no request to the\n"
           "aggregation server or the masking server holds it. Each site then runs\n"
           "'fedsvd lsa df', 'fedsvd join', 'fedsvd lsa rows', 'fedsvd join' and 'fedsvd lsa\n"
           "terms' ('fedsvd lsa --help').\n"
           "\n"
           "Options:\n"
           "  --server URL, --admin-token-file F, --masking-server URL,\n"
           "  --masking-token-file F, --masking-public-url URL, --party-key I:FPR,\n"
           "  --join-timeout S, --round-timeout S, --name LABEL, --public-url URL,\n"
           "  --block-size C, --ca-file F, --insecure, --insecure-http\n"
           "                       as for 'fedsvd job create --algorithm fedsvd' (both jobs)\n"
           "  --party-sizes LIST   the number of documents of each site, in site order: what\n"
           "                       'fedsvd lsa count' prints at each site (public, as the\n"
           "                       party sizes of any fedsvd job)\n"
           "  --k K                the number of components (required)\n"
           "  --out-dir DIR        where the invitation files go (required; created)\n"
           "  --hash-features D    keyed feature hashing into D buckets (default %d; 1..%zu)\n"
           "  --key-file F         the hashing key, 64 hex digits (default: a fresh one)\n"
           "  --no-key             put no key in the invitation files: the sites agree on one\n"
           "                       among themselves and give it to each 'fedsvd lsa' step with\n"
           "                       --key-file (when the coordinator must not know it)\n"
           "  --vocabulary FILE    a public vocabulary (one word per line) instead of hashing;\n"
           "                       it goes into the invitation files\n"
           "  --stop-words FILE    words every site drops (one per line; into the files)\n"
           "  --min-length N       every site drops tokens of fewer than N letters (default 1)\n"
           "  --min-df N, --max-df F\n"
           "                       keep the features in at least N and at most F x N_docs\n"
           "                       documents (defaults 1 and 1), decided by every site from\n"
           "                       the secure sum's aggregate counts alone\n"
           "  --format F           text (default) or json ({\"document_frequencies\": job,\n"
           "                       \"fedsvd\": job, \"invitations\": [files]})\n"
           "  -h, --help           show this text\n",
           LSA_D_DEFAULT, LSA_D_MAX);
}

struct job_args {
    const char *server, *tok, *alg, *msrv, *mtok, *mpub, *sizes, *k, *outdir, *d, *key_file;
    const char *vocab, *stop, *minlen, *mindf, *maxdf, *jt, *rt, *name, *pub, *block, *ca;
    const char *format;
    int no_key, insecure, insecure_http;
    const char *pkeys[CLI_LIST_MAX + 1];
};

/* An argv for job create, grown by push. */
struct argvec {
    char *v[64 + 2 * CLI_LIST_MAX];
    char own[16][64]; /* numbers formatted here */
    int n, nown;
};

static void push(struct argvec *a, const char *opt, const char *val)
{
    if (val == NULL) {
        return;
    }
    a->v[a->n++] = (char *)opt;
    if (val[0] != '\0') {
        a->v[a->n++] = (char *)val;
    }
    a->v[a->n] = NULL;
}

static const char *num(struct argvec *a, const char *fmt, size_t x, size_t y)
{
    char *s = a->own[a->nown++];

    snprintf(s, sizeof a->own[0], fmt, x, y);
    return s;
}

/* The options both jobs share. */
static void push_common(struct argvec *a, const struct job_args *j, const char *alg,
                        const char *name)
{
    a->n = 0;
    a->v[a->n++] = (char *)"create";
    push(a, "--server", j->server);
    push(a, "--admin-token-file", j->tok);
    push(a, "--algorithm", alg);
    push(a, "--join-timeout", j->jt);
    push(a, "--round-timeout", j->rt);
    push(a, "--name", name);
    push(a, "--public-url", j->pub);
    push(a, "--ca-file", j->ca);
    if (j->insecure) {
        push(a, "--insecure", "");
    }
    if (j->insecure_http) {
        push(a, "--insecure-http", "");
    }
    for (size_t i = 0; j->pkeys[i] != NULL; i++) {
        push(a, "--party-key", j->pkeys[i]);
    }
}

static int cancel_job(const struct job_args *j, const char *id)
{
    struct argvec a;

    memset(&a, 0, sizeof a);
    a.v[a.n++] = (char *)"job";
    a.v[a.n++] = (char *)"cancel";
    push(&a, "--server", j->server);
    push(&a, "--admin-token-file", j->tok);
    push(&a, "--job", id);
    push(&a, "--ca-file", j->ca);
    if (j->insecure) {
        push(&a, "--insecure", "");
    }
    if (j->insecure_http) {
        push(&a, "--insecure-http", "");
    }
    return cmd_job(a.n, a.v);
}

/* The settings from the command line (vocabulary, stop words, key). */
static int job_settings(const char *cmd, const struct job_args *j, const size_t *sizes,
                        size_t nsizes, struct lsa_settings *s)
{
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    s->d = LSA_D_DEFAULT;
    s->min_length = 1;
    s->max_df = 1.0;
    s->parties = nsizes;
    memcpy(s->documents, sizes, nsizes * sizeof *sizes);
    if ((rc = cli_parse_size(cmd, "--k", j->k, 1, 100000, &s->k)) != CLI_OK ||
        (j->d != NULL &&
         (rc = cli_parse_size(cmd, "--hash-features", j->d, 1, LSA_D_MAX, &s->d)) != CLI_OK) ||
        (j->minlen != NULL && (rc = cli_parse_size(cmd, "--min-length", j->minlen, 1, 1000,
                                                   &s->min_length)) != CLI_OK) ||
        (j->mindf != NULL && (rc = cli_parse_double(cmd, "--min-df", j->mindf, 1, CLI_CLOSED, 0,
                                                    CLI_NONE, &s->min_df)) != CLI_OK) ||
        (j->maxdf != NULL && (rc = cli_parse_double(cmd, "--max-df", j->maxdf, 0, CLI_OPEN, 1,
                                                    CLI_CLOSED, &s->max_df)) != CLI_OK)) {
        return rc;
    }
    if (j->mindf == NULL) {
        s->min_df = 1;
    }
    if (j->stop != NULL && fs_text_read_words(j->stop, 0, &s->stop, &err) != 0) {
        return cli_runtime_error(cmd, "--stop-words %s", err.msg);
    }
    if (j->vocab != NULL) {
        if (fs_text_read_words(j->vocab, 1, &s->vocab, &err) != 0) {
            return cli_runtime_error(cmd, "--vocabulary %s", err.msg);
        }
        s->d = fs_text_set_size(s->vocab);
        if (s->d == 0) {
            return cli_runtime_error(cmd, "--vocabulary %s: no word", j->vocab);
        }
    } else if (j->key_file != NULL) {
        if ((rc = read_key(cmd, j->key_file, s->key)) != CLI_OK) {
            return rc;
        }
        s->has_key = 1;
    } else if (!j->no_key) {
        if (fs_rand_bytes(s->key, sizeof s->key, &err) != 0) {
            return cli_fs_error(cmd, &err);
        }
        s->has_key = 1;
    }
    return CLI_OK;
}

/* Both jobs; *df and *svd their {"job", "invitations"}. */
static int create_jobs(const char *cmd, const struct job_args *j, const struct lsa_settings *s,
                       json_t **df, json_t **svd)
{
    struct argvec *a = calloc(1, sizeof *a);
    char name[300];
    size_t n = 0;
    int rc;

    if (a == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    for (size_t i = 0; i < s->parties; i++) {
        n += s->documents[i];
    }
    snprintf(name, sizeof name, "%s: document frequencies", j->name != NULL ? j->name : "lsa");
    push_common(a, j, "secure-sum", name);
    push(a, "--parties", num(a, "%zu", s->parties, 0));
    push(a, "--shape", num(a, "1,%zu", s->d + 1, 0));
    /* every site's counts or no sum: a sum without a site would not be the corpus's */
    push(a, "--threshold", num(a, "%zu", s->parties, 0));
    rc = cli_job_create_capture(a->n, a->v, df);
    if (rc != CLI_OK) {
        goto out;
    }
    snprintf(name, sizeof name, "%s: fedsvd", j->name != NULL ? j->name : "lsa");
    a->nown = 0;
    push_common(a, j, "fedsvd", name);
    push(a, "--shape", num(a, "%zu,%zu", n, s->d));
    push(a, "--party-sizes", j->sizes);
    push(a, "--k", num(a, "%zu", s->k, 0));
    push(a, "--masking-server", j->msrv);
    push(a, "--masking-token-file", j->mtok);
    push(a, "--masking-public-url", j->mpub);
    push(a, "--block-size", j->block);
    rc = cli_job_create_capture(a->n, a->v, svd);
    if (rc != CLI_OK) {
        const char *id = json_string_value(json_object_get(json_object_get(*df, "job"), "id"));
        if (id != NULL && cancel_job(j, id) == CLI_OK) {
            fprintf(stderr, "fedsvd %s: the document-frequency job %s is cancelled\n", cmd, id);
        }
    }
out:
    free(a);
    return rc;
}

/* DIR/invitation-<i>.json for every site. */
static int write_bundles(const char *cmd, const struct job_args *j, const struct lsa_settings *s,
                         const json_t *df, const json_t *svd, json_t *files)
{
    json_t *settings = settings_json(s);
    int rc = CLI_OK;

    if (settings == NULL) {
        return cli_runtime_error(cmd, "out of memory");
    }
    for (size_t i = 0; i < s->parties && rc == CLI_OK; i++) {
        char fname[64], path[LSA_PATH];
        json_t *b = json_pack(
            "{s:s, s:i, s:I, s:I, s:s, s:s, s:O, s:O, s:O}", "format", LSA_FORMAT, "version",
            LSA_FORMAT_VERSION, "party", (json_int_t)(i + 1), "parties", (json_int_t)s->parties,
            "document_frequencies_job",
            json_string_value(json_object_get(json_object_get(df, "job"), "id")), "fedsvd_job",
            json_string_value(json_object_get(json_object_get(svd, "job"), "id")), "settings",
            settings, "document_frequencies", json_array_get(json_object_get(df, "invitations"), i),
            "fedsvd", json_array_get(json_object_get(svd, "invitations"), i));

        snprintf(fname, sizeof fname, "invitation-%zu.json", i + 1);
        if (b == NULL) {
            rc = cli_runtime_error(cmd, "out of memory");
        } else if ((rc = cli_path_join(cmd, path, sizeof path, j->outdir, fname)) == CLI_OK &&
                   (rc = write_secret(cmd, path, b)) == CLI_OK) {
            json_array_append_new(files, json_string(path));
        }
        json_decref(b);
    }
    json_decref(settings);
    return rc;
}

/* What job create --algorithm lsa prints. */
static int print_created(const char *cmd, const struct job_args *j, const struct lsa_settings *s,
                         const json_t *df, const json_t *svd, json_t *files, int json)
{
    const char *df_id = json_string_value(json_object_get(json_object_get(df, "job"), "id"));
    const char *svd_id = json_string_value(json_object_get(json_object_get(svd, "job"), "id"));

    if (json) {
        return cli_print_json(cmd, json_pack("{s:O, s:O, s:O}", "document_frequencies",
                                             json_object_get(df, "job"), "fedsvd",
                                             json_object_get(svd, "job"), "invitations", files));
    }
    printf("lsa jobs created: document frequencies %s (secure-sum, 1 x %zu), fedsvd %s (%zu "
           "sites, k %zu, %s); wrote %s/invitation-1..%zu.json\n",
           df_id != NULL ? df_id : "?", s->d + 1, svd_id != NULL ? svd_id : "?", s->parties, s->k,
           s->vocab != NULL ? "a public vocabulary"
           : s->has_key     ? "keyed hashing, the key in the invitation files only"
                            : "keyed hashing, the sites' own key",
           j->outdir, s->parties);
    return CLI_OK;
}

int cmd_lsa_job_create(int argc, char **argv)
{
    const char *cmd = "job create --algorithm lsa";
    struct job_args j;
    struct cli_opt opts[] = {
        {"server", CLI_OPT_VALUE, &j.server, NULL},
        {"admin-token-file", CLI_OPT_VALUE, &j.tok, NULL},
        {"algorithm", CLI_OPT_VALUE, &j.alg, NULL},
        {"masking-server", CLI_OPT_VALUE, &j.msrv, NULL},
        {"masking-token-file", CLI_OPT_VALUE, &j.mtok, NULL},
        {"masking-public-url", CLI_OPT_VALUE, &j.mpub, NULL},
        {"party-sizes", CLI_OPT_VALUE, &j.sizes, NULL},
        {"party-key", CLI_OPT_LIST, j.pkeys, NULL},
        {"k", CLI_OPT_VALUE, &j.k, NULL},
        {"out-dir", CLI_OPT_DIR, &j.outdir, NULL},
        {"hash-features", CLI_OPT_VALUE, &j.d, NULL},
        {"key-file", CLI_OPT_VALUE, &j.key_file, NULL},
        {"no-key", CLI_OPT_FLAG, NULL, &j.no_key},
        {"vocabulary", CLI_OPT_VALUE, &j.vocab, NULL},
        {"stop-words", CLI_OPT_VALUE, &j.stop, NULL},
        {"min-length", CLI_OPT_VALUE, &j.minlen, NULL},
        {"min-df", CLI_OPT_VALUE, &j.mindf, NULL},
        {"max-df", CLI_OPT_VALUE, &j.maxdf, NULL},
        {"join-timeout", CLI_OPT_VALUE, &j.jt, NULL},
        {"round-timeout", CLI_OPT_VALUE, &j.rt, NULL},
        {"name", CLI_OPT_VALUE, &j.name, NULL},
        {"public-url", CLI_OPT_VALUE, &j.pub, NULL},
        {"block-size", CLI_OPT_VALUE, &j.block, NULL},
        {"ca-file", CLI_OPT_VALUE, &j.ca, NULL},
        {"insecure", CLI_OPT_FLAG, NULL, &j.insecure},
        {"insecure-http", CLI_OPT_FLAG, NULL, &j.insecure_http},
        {"format", CLI_OPT_VALUE, &j.format, NULL},
    };
    struct lsa_settings *s = calloc(1, sizeof *s);
    const char *pos[1];
    size_t npos = 0, *sizes = NULL, nsizes = 0, npkeys = 0;
    json_t *df = NULL, *svd = NULL, *files = json_array();
    int help = 0, json = 0, rc;

    memset(&j, 0, sizeof j);
    if (s == NULL || files == NULL) {
        rc = cli_runtime_error(cmd, "out of memory");
        goto out;
    }
    rc = cli_parse(cmd, argc, argv, opts, NOPTS(opts), pos, 0, &npos, &help);
    if (rc != CLI_OK) {
        goto out;
    }
    if (help) {
        job_help();
        goto out;
    }
    while (j.pkeys[npkeys] != NULL) {
        npkeys++;
    }
    if (j.server == NULL || j.tok == NULL || j.msrv == NULL || j.mtok == NULL || j.sizes == NULL ||
        j.k == NULL || j.outdir == NULL) {
        rc = cli_usage_error(cmd, "--algorithm lsa needs --server, --admin-token-file, "
                                  "--masking-server, --masking-token-file, --party-sizes, --k "
                                  "and --out-dir");
        goto out;
    }
    if (j.vocab != NULL && (j.d != NULL || j.key_file != NULL || j.no_key)) {
        rc = cli_usage_error(cmd, "--vocabulary replaces hashing: no --hash-features, --key-file "
                                  "or --no-key");
        goto out;
    }
    if (j.key_file != NULL && j.no_key) {
        rc = cli_usage_error(cmd, "--key-file and --no-key exclude each other");
        goto out;
    }
    if ((rc = cli_parse_format(cmd, j.format, &json)) != CLI_OK ||
        (rc = cli_parse_size_list(cmd, "--party-sizes", j.sizes, LSA_MAX_PARTIES, &sizes,
                                  &nsizes)) != CLI_OK) {
        goto out;
    }
    if (npkeys != nsizes) {
        rc = cli_usage_error(cmd,
                             "--party-key I:FINGERPRINT is needed for each of the %zu sites "
                             "(the masking server gives a site's keys only to its pinned agent)",
                             nsizes);
        goto out;
    }
    if ((rc = job_settings(cmd, &j, sizes, nsizes, s)) != CLI_OK) {
        goto out;
    }
    if (s->k > s->d) {
        rc = cli_usage_error(cmd, "--k %zu is more than the %zu features", s->k, s->d);
        goto out;
    }
    if ((rc = cli_mkdir_p(cmd, j.outdir)) != CLI_OK ||
        (rc = create_jobs(cmd, &j, s, &df, &svd)) != CLI_OK ||
        (rc = write_bundles(cmd, &j, s, df, svd, files)) != CLI_OK) {
        goto out;
    }
    rc = print_created(cmd, &j, s, df, svd, files, json);
out:
    if (s != NULL) {
        settings_clear(s);
    }
    free(s);
    free(sizes);
    json_decref(df);
    json_decref(svd);
    json_decref(files);
    return rc;
}

/* ---- a site: fedsvd lsa count|df|rows|terms ---- */

struct site {
    const char *cmd, *inv_file, *input, *key_file, *sum_file, *result, *out, *top_s, *format;
    int lines, skip_invalid, json;
    size_t party, top;
    json_t *bundle;
    struct lsa_settings s;
    struct fs_text_opts topt;
    struct fs_text_corpus c;
    int have_corpus;
    uint32_t *feat;
    size_t total; /* documents, with the ones skipped */
    double *df;   /* d, from the sum */
    double ndocs;
    long *col; /* d */
    size_t ncols;
};

static void site_free(struct site *S)
{
    json_decref(S->bundle);
    settings_clear(&S->s);
    if (S->have_corpus) {
        fs_text_corpus_clear(&S->c);
    }
    free(S->feat);
    free(S->df);
    free(S->col);
}

static int load_bundle(struct site *S)
{
    json_error_t jerr;
    struct stat sb;
    const json_t *fmt;
    int rc;

    if (stat(S->inv_file, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > LSA_BUNDLE_MAX) {
        return cli_runtime_error(S->cmd, "--invitation %s: not a readable file of at most %u bytes",
                                 S->inv_file, LSA_BUNDLE_MAX);
    }
    S->bundle = json_load_file(S->inv_file, JSON_REJECT_DUPLICATES, &jerr);
    if (S->bundle == NULL) {
        return cli_runtime_error(S->cmd, "--invitation %s: not JSON (line %d: %s)", S->inv_file,
                                 jerr.line, jerr.text);
    }
    fmt = json_object_get(S->bundle, "format");
    if (!json_is_string(fmt) || strcmp(json_string_value(fmt), LSA_FORMAT) != 0) {
        return cli_runtime_error(S->cmd,
                                 "--invitation %s: not an lsa invitation (the files 'fedsvd job "
                                 "create --algorithm lsa' writes)",
                                 S->inv_file);
    }
    if (json_integer_value(json_object_get(S->bundle, "version")) != LSA_FORMAT_VERSION) {
        return cli_runtime_error(
            S->cmd, "--invitation %s: version %lld, this fedsvd reads %d", S->inv_file,
            (long long)json_integer_value(json_object_get(S->bundle, "version")),
            LSA_FORMAT_VERSION);
    }
    if ((rc = settings_decode(S->cmd, S->inv_file, json_object_get(S->bundle, "settings"),
                              &S->s)) != CLI_OK) {
        return rc;
    }
    S->party = (size_t)json_integer_value(json_object_get(S->bundle, "party"));
    if (S->party < 1 || S->party > S->s.parties ||
        !json_is_object(json_object_get(S->bundle, "document_frequencies")) ||
        !json_is_object(json_object_get(S->bundle, "fedsvd"))) {
        return cli_runtime_error(S->cmd, "--invitation %s: no party number or job invitations",
                                 S->inv_file);
    }
    if (json_integer_value(json_object_get(json_object_get(S->bundle, "document_frequencies"),
                                           "party")) != (json_int_t)S->party ||
        json_integer_value(json_object_get(json_object_get(S->bundle, "fedsvd"), "party")) !=
            (json_int_t)S->party) {
        return cli_runtime_error(S->cmd, "--invitation %s: the job invitations are not party %zu's",
                                 S->inv_file, S->party);
    }
    if (S->s.vocab == NULL && !S->s.has_key && S->key_file == NULL) {
        return cli_usage_error(S->cmd, "the invitation holds no hashing key: give the key the "
                                       "sites agreed on with --key-file");
    }
    if (S->key_file != NULL) {
        if (S->s.vocab != NULL || S->s.has_key) {
            return cli_usage_error(S->cmd, "--key-file: the invitation has its %s already",
                                   S->s.vocab != NULL ? "vocabulary" : "key");
        }
        if ((rc = read_key(S->cmd, S->key_file, S->s.key)) != CLI_OK) {
            return rc;
        }
        S->s.has_key = 1;
    }
    S->topt.min_len = S->s.min_length;
    S->topt.stop = S->s.stop;
    S->topt.skip_invalid = S->skip_invalid;
    return CLI_OK;
}

/* The site's documents (and, with the bundle, their features). */
static int load_corpus(struct site *S)
{
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    if (fs_text_corpus_init(&S->c, &err) != 0) {
        return cli_fs_error(S->cmd, &err);
    }
    S->have_corpus = 1;
    rc = S->lines ? fs_text_corpus_read_lines(&S->c, S->input, &S->topt, &err)
                  : fs_text_corpus_read_dir(&S->c, S->input, &S->topt, &err);
    if (rc != 0) {
        return cli_runtime_error(S->cmd, "%s", err.msg);
    }
    S->total = S->c.ndocs + S->c.skipped_empty + S->c.skipped_invalid;
    if (S->bundle == NULL) {
        return CLI_OK;
    }
    if (S->total != S->s.documents[S->party - 1]) {
        return cli_runtime_error(S->cmd,
                                 "--party %s: %zu documents, but the job was created for %zu (the "
                                 "coordinator's --party-sizes, from 'fedsvd lsa count')",
                                 S->input, S->total, S->s.documents[S->party - 1]);
    }
    if (S->c.ndocs == 0) {
        return cli_runtime_error(S->cmd,
                                 "--party %s: no document with a token (%zu empty, %zu "
                                 "not UTF-8)",
                                 S->input, S->c.skipped_empty, S->c.skipped_invalid);
    }
    if (fs_text_features(&S->c, S->s.vocab != NULL ? NULL : S->s.key, S->s.vocab, S->s.d, &S->feat,
                         &err) != 0) {
        return cli_fs_error(S->cmd, &err);
    }
    return CLI_OK;
}

/* The secure sum (--sum): the aggregate df, N, and the kept columns. */
static int load_sum(struct site *S)
{
    struct fs_err err;
    fs_mat *sum = NULL;
    int rc = CLI_OK;

    fs_err_clear(&err);
    if (fs_io_load_dense(S->sum_file, FS_FMT_NPY, NULL, &sum, &err) != 0) {
        return cli_fs_error(S->cmd, &err);
    }
    if (sum->rows * sum->cols != S->s.d + 1) {
        rc = cli_runtime_error(S->cmd,
                               "--sum %s: %zu values, the document-frequency job sums %zu (is it "
                               "this job's sum.npy?)",
                               S->sum_file, sum->rows * sum->cols, S->s.d + 1);
        goto out;
    }
    S->df = calloc(S->s.d, sizeof *S->df);
    S->col = calloc(S->s.d, sizeof *S->col);
    if (S->df == NULL || S->col == NULL) {
        rc = cli_runtime_error(S->cmd, "out of memory");
        goto out;
    }
    for (size_t f = 0; f <= S->s.d; f++) {
        double v = nearbyint(sum->data[f]);
        if (!(fabs(sum->data[f] - v) <= 1e-6) || v < 0) {
            rc = cli_runtime_error(S->cmd, "--sum %s: value %zu is not a count", S->sum_file, f);
            goto out;
        }
        if (f < S->s.d) {
            S->df[f] = v;
        } else {
            S->ndocs = v;
        }
    }
    if (S->ndocs < (double)S->c.ndocs) {
        rc =
            cli_runtime_error(S->cmd, "--sum %s: %.0f documents in all, fewer than this site's %zu",
                              S->sum_file, S->ndocs, S->c.ndocs);
        goto out;
    }
    fs_text_select(S->df, S->s.d, S->ndocs, S->s.min_df, S->s.max_df, S->col, &S->ncols);
    if (S->ncols < S->s.k) {
        rc = cli_runtime_error(S->cmd,
                               "%zu features kept (--min-df %g, --max-df %g of %.0f documents), "
                               "fewer than k = %zu",
                               S->ncols, S->s.min_df, S->s.max_df, S->ndocs, S->s.k);
    }
out:
    fs_mat_free(sum);
    return rc;
}

/* DIR/NAME: the job invitation of this site (a secret: 0600). */
static int write_job_invitation(struct site *S, const char *which, const char *name, char *path,
                                size_t cap)
{
    int rc = cli_path_join(S->cmd, path, cap, S->out, name);

    return rc != CLI_OK ? rc : write_secret(S->cmd, path, json_object_get(S->bundle, which));
}

static int step_count(struct site *S)
{
    int rc = load_corpus(S);

    if (rc != CLI_OK) {
        return rc;
    }
    if (S->json) {
        return cli_print_json(S->cmd,
                              json_pack("{s:I, s:I, s:I}", "documents", (json_int_t)S->total,
                                        "empty", (json_int_t)S->c.skipped_empty, "invalid",
                                        (json_int_t)S->c.skipped_invalid));
    }
    printf("%zu\n", S->total);
    return CLI_OK;
}

static int step_df(struct site *S)
{
    char path[LSA_PATH], inv[LSA_PATH];
    struct fs_err err;
    fs_mat *row = NULL;
    int rc;

    fs_err_clear(&err);
    if ((rc = load_corpus(S)) != CLI_OK || (rc = cli_mkdir_p(S->cmd, S->out)) != CLI_OK) {
        return rc;
    }
    row = fs_mat_new(1, S->s.d + 1);
    if (row == NULL) {
        return cli_runtime_error(S->cmd, "out of memory");
    }
    fs_text_df_add(&S->c, S->feat, S->s.d, row->data);
    row->data[S->s.d] = (double)S->c.ndocs;
    if ((rc = cli_path_join(S->cmd, path, sizeof path, S->out, "df.npy")) != CLI_OK) {
        goto out;
    }
    if (fs_npy_write_mat(path, row, &err) != 0) {
        rc = cli_fs_error(S->cmd, &err);
        goto out;
    }
    if ((rc = write_job_invitation(S, "document_frequencies", "df-invitation.json", inv,
                                   sizeof inv)) != CLI_OK) {
        goto out;
    }
    if (S->json) {
        rc = cli_print_json(S->cmd, json_pack("{s:I, s:s, s:s, s:I, s:I, s:I, s:I}", "party",
                                              (json_int_t)S->party, "data", path, "invitation", inv,
                                              "documents", (json_int_t)S->total, "with_tokens",
                                              (json_int_t)S->c.ndocs, "skipped_empty",
                                              (json_int_t)S->c.skipped_empty, "skipped_invalid",
                                              (json_int_t)S->c.skipped_invalid));
    } else {
        printf("site %zu: %zu documents (%zu with a token, %zu empty, %zu not UTF-8); wrote %s "
               "(1 x %zu: document frequencies and count) and %s\n"
               "next: fedsvd join --invitation %s --data %s --wait\n",
               S->party, S->total, S->c.ndocs, S->c.skipped_empty, S->c.skipped_invalid, path,
               S->s.d + 1, inv, inv, path);
    }
out:
    fs_mat_free(row);
    return rc;
}

static int step_rows(struct site *S)
{
    char path[LSA_PATH], inv[LSA_PATH];
    struct fs_err err;
    fs_mat *x = NULL, *rows = NULL;
    double *idf = NULL;
    size_t zero_rows = 0;
    int rc;

    fs_err_clear(&err);
    if ((rc = load_corpus(S)) != CLI_OK || (rc = load_sum(S)) != CLI_OK ||
        (rc = cli_mkdir_p(S->cmd, S->out)) != CLI_OK) {
        return rc;
    }
    idf = calloc(S->ncols, sizeof *idf);
    x = fs_mat_new(S->c.ndocs, S->ncols);
    rows = fs_mat_new(S->total, S->s.d); /* zero: pruned features, documents without a token */
    if (idf == NULL || x == NULL || rows == NULL) {
        rc = cli_runtime_error(S->cmd, "out of memory");
        goto out;
    }
    fs_text_idf(S->df, S->s.d, S->col, S->ndocs, idf);
    fs_text_tfidf(&S->c, S->feat, S->col, idf, x, 0, &zero_rows);
    for (size_t f = 0; f < S->s.d; f++) {
        for (size_t r = 0; S->col[f] >= 0 && r < S->c.ndocs; r++) {
            FS_MAT_AT(rows, r, f) = FS_MAT_AT(x, r, S->col[f]);
        }
    }
    if ((rc = cli_path_join(S->cmd, path, sizeof path, S->out, "tfidf.npy")) != CLI_OK) {
        goto out;
    }
    if (fs_npy_write_mat(path, rows, &err) != 0) {
        rc = cli_fs_error(S->cmd, &err);
        goto out;
    }
    if ((rc = write_job_invitation(S, "fedsvd", "fedsvd-invitation.json", inv, sizeof inv)) !=
        CLI_OK) {
        goto out;
    }
    if (S->json) {
        rc = cli_print_json(
            S->cmd, json_pack("{s:I, s:s, s:s, s:I, s:I, s:I, s:I}", "party", (json_int_t)S->party,
                              "data", path, "invitation", inv, "documents", (json_int_t)S->ndocs,
                              "kept_features", (json_int_t)S->ncols, "rows", (json_int_t)S->total,
                              "zero_rows", (json_int_t)(zero_rows + S->total - S->c.ndocs)));
    } else {
        printf("site %zu: %zu of %zu features kept by the aggregate counts of %.0f documents; "
               "wrote %s (%zu x %zu TF-IDF rows) and %s\n"
               "next: fedsvd join --invitation %s --data %s --wait\n",
               S->party, S->ncols, S->s.d, S->ndocs, path, S->total, S->s.d, inv, inv, path);
    }
out:
    free(idf);
    fs_mat_free(x);
    fs_mat_free(rows);
    return rc;
}

/* The site's most frequent own term in feature f, or NULL. */
static const char *own_term(const struct site *S, size_t f)
{
    size_t n = fs_text_set_size(S->c.terms), best = SIZE_MAX;

    if (S->s.vocab != NULL) {
        return fs_text_set_get(S->s.vocab, f, NULL);
    }
    for (size_t t = 0; t < n; t++) {
        if (S->feat[t] == f && (best == SIZE_MAX || S->c.term_total[t] > S->c.term_total[best])) {
            best = t;
        }
    }
    return best == SIZE_MAX ? NULL : fs_text_set_get(S->c.terms, best, NULL);
}

static int load_result(struct site *S, const char *name, fs_mat **m)
{
    char path[LSA_PATH];
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    if ((rc = cli_path_join(S->cmd, path, sizeof path, S->result, name)) != CLI_OK) {
        return rc;
    }
    if (fs_io_load_dense(path, FS_FMT_NPY, NULL, m, &err) != 0) {
        return cli_runtime_error(S->cmd,
                                 "%s (the fedsvd job's result: 'fedsvd participation "
                                 "result ... --out %s')",
                                 err.msg, S->result);
    }
    return CLI_OK;
}

/* OUT/top_terms.txt and its JSON (new reference in *out). */
static int write_top_terms(struct site *S, const fs_mat *v, const double *sv, json_t **out)
{
    unsigned char *keep = malloc(S->s.d);
    size_t *ids = malloc(S->top * sizeof *ids);
    char path[LSA_PATH];
    json_t *comps = json_array();
    FILE *fp = NULL;
    int rc = CLI_OK;

    *out = NULL;
    if (keep == NULL || ids == NULL || comps == NULL) {
        rc = cli_runtime_error(S->cmd, "out of memory");
        goto done;
    }
    for (size_t f = 0; f < S->s.d; f++) {
        keep[f] = S->col[f] >= 0;
    }
    if ((rc = cli_path_join(S->cmd, path, sizeof path, S->out, "top_terms.txt")) != CLI_OK) {
        goto done;
    }
    fp = fopen(path, "w");
    if (fp == NULL) {
        rc = cli_runtime_error(S->cmd, "%s: %s", path, strerror(errno));
        goto done;
    }
    for (size_t j = 0; j < S->s.k; j++) {
        size_t n = lsa_top_rows(v, j, keep, S->top, ids);
        json_t *terms = json_array();

        fprintf(fp, "%zu\t%.6g\t", j + 1, sv[j]);
        for (size_t q = 0; q < n; q++) {
            const char *t = own_term(S, ids[q]);
            fprintf(fp, "%s%s", q > 0 ? " " : "", t != NULL ? t : "-");
            json_array_append_new(terms, t != NULL ? json_string(t) : json_null());
        }
        fprintf(fp, "\n");
        json_array_append_new(comps, terms);
    }
    if (fclose(fp) != 0) {
        rc = cli_runtime_error(S->cmd, "%s: write failed", path);
        goto done;
    }
    *out = comps;
    comps = NULL;
done:
    json_decref(comps);
    free(keep);
    free(ids);
    return rc;
}

static int write_npy(struct site *S, const char *name, const fs_mat *m)
{
    char path[LSA_PATH];
    struct fs_err err;
    int rc;

    fs_err_clear(&err);
    if ((rc = cli_path_join(S->cmd, path, sizeof path, S->out, name)) != CLI_OK) {
        return rc;
    }
    return fs_npy_write_mat(path, m, &err) == 0 ? CLI_OK : cli_fs_error(S->cmd, &err);
}

/* Term vectors (pruned features zero), oriented, and this site's document vectors. */
static int shape_result(struct site *S, fs_mat *v, const fs_mat *u, fs_mat **tv, fs_mat **uo)
{
    *tv = fs_mat_new(S->s.d, S->s.k);
    *uo = fs_mat_new(S->c.ndocs, S->s.k);
    if (*tv == NULL || *uo == NULL) {
        return cli_runtime_error(S->cmd, "out of memory");
    }
    for (size_t j = 0; j < S->s.k; j++) {
        double sg;
        for (size_t f = 0; f < S->s.d; f++) {
            FS_MAT_AT(*tv, f, j) = S->col[f] >= 0 ? FS_MAT_AT(v, f, j) : 0.0;
        }
        sg = lsa_orient(*tv, j);
        for (size_t f = 0; f < S->s.d; f++) {
            FS_MAT_AT(*tv, f, j) *= sg;
        }
        /* the rows of documents with a token come first; the zero rows after */
        for (size_t r = 0; r < S->c.ndocs; r++) {
            FS_MAT_AT(*uo, r, j) = sg * FS_MAT_AT(u, r, j);
        }
    }
    return CLI_OK;
}

static int step_terms(struct site *S)
{
    fs_mat *s = NULL, *v = NULL, *u = NULL, *tv = NULL, *uo = NULL, *sm = NULL;
    char path[LSA_PATH];
    json_t *terms = NULL, *summary = NULL;
    struct fs_err err;
    FILE *fp;
    int rc;

    fs_err_clear(&err);
    if ((rc = load_corpus(S)) != CLI_OK || (rc = load_sum(S)) != CLI_OK ||
        (rc = load_result(S, "S.npy", &s)) != CLI_OK ||
        (rc = load_result(S, "V.npy", &v)) != CLI_OK ||
        (rc = load_result(S, "U.npy", &u)) != CLI_OK) {
        goto out;
    }
    if (s->rows * s->cols < S->s.k || v->rows != S->s.d || v->cols < S->s.k ||
        u->rows != S->total || u->cols < S->s.k) {
        rc = cli_runtime_error(S->cmd,
                               "--result %s: S %zu, V %zu x %zu, U %zu x %zu; expected %zu "
                               "values, %zu x %zu and %zu x %zu (this site's fedsvd job?)",
                               S->result, s->rows * s->cols, v->rows, v->cols, u->rows, u->cols,
                               S->s.k, S->s.d, S->s.k, S->total, S->s.k);
        goto out;
    }
    if ((rc = cli_mkdir_p(S->cmd, S->out)) != CLI_OK ||
        (rc = shape_result(S, v, u, &tv, &uo)) != CLI_OK) {
        goto out;
    }
    sm = fs_mat_new(S->s.k, 1);
    if (sm == NULL) {
        rc = cli_runtime_error(S->cmd, "out of memory");
        goto out;
    }
    memcpy(sm->data, s->data, S->s.k * sizeof *sm->data);
    if ((rc = write_npy(S, "S.npy", sm)) != CLI_OK ||
        (rc = write_npy(S, "term_vectors.npy", tv)) != CLI_OK ||
        (rc = write_npy(S, "U.npy", uo)) != CLI_OK ||
        (rc = write_top_terms(S, tv, s->data, &terms)) != CLI_OK ||
        (rc = cli_path_join(S->cmd, path, sizeof path, S->out, "df.npy")) != CLI_OK) {
        goto out;
    }
    if (fs_npy_write_vec(path, S->df, S->s.d, &err) != 0) {
        rc = cli_fs_error(S->cmd, &err);
        goto out;
    }
    if ((rc = cli_path_join(S->cmd, path, sizeof path, S->out, "documents.txt")) != CLI_OK) {
        goto out;
    }
    fp = fopen(path, "w");
    if (fp == NULL) {
        rc = cli_runtime_error(S->cmd, "%s: %s", path, strerror(errno));
        goto out;
    }
    for (size_t r = 0; r < S->c.ndocs; r++) {
        fprintf(fp, "%s\n", S->c.source[r]);
    }
    if (fclose(fp) != 0) {
        rc = cli_runtime_error(S->cmd, "%s: write failed", path);
        goto out;
    }
    summary = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:o}", "algorithm", "lsa",
                        "party", (json_int_t)S->party, "k", (json_int_t)S->s.k, "d",
                        (json_int_t)S->s.d, "kept_features", (json_int_t)S->ncols, "documents",
                        (json_int_t)S->c.ndocs, "skipped", (json_int_t)(S->total - S->c.ndocs),
                        "all_documents", S->ndocs, "top_terms", json_incref(terms));
    if (summary == NULL ||
        (rc = cli_path_join(S->cmd, path, sizeof path, S->out, "summary.json")) != CLI_OK ||
        (rc = cli_write_json_file(S->cmd, path, json_incref(summary))) != CLI_OK) {
        rc = rc != CLI_OK ? rc : cli_runtime_error(S->cmd, "out of memory");
        goto out;
    }
    if (S->json) {
        rc = cli_print_json(S->cmd, json_incref(summary));
        goto out;
    }
    for (size_t j = 0; j < S->s.k; j++) {
        size_t q;
        json_t *t;
        printf("component %zu (s = %.4g):", j + 1, s->data[j]);
        json_array_foreach(json_array_get(terms, j), q, t)
        {
            printf(" %s", json_is_string(t) ? json_string_value(t) : "-");
        }
        printf("\n");
    }
    printf("  %s/{S,term_vectors,df}.npy (shared), %s/{U.npy,documents.txt,top_terms.txt} (this "
           "site's own)\n",
           S->out, S->out);
out:
    json_decref(terms);
    json_decref(summary);
    fs_mat_free(s);
    fs_mat_free(v);
    fs_mat_free(u);
    fs_mat_free(tv);
    fs_mat_free(uo);
    fs_mat_free(sm);
    return rc;
}

static void site_help(void)
{
    printf("Usage: fedsvd lsa count --party INPUT [--lines] [--format text|json]\n"
           "       fedsvd lsa df    --invitation FILE --party INPUT --out DIR [common]\n"
           "       fedsvd lsa rows  --invitation FILE --party INPUT --sum FILE --out DIR [common]\n"
           "       fedsvd lsa terms --invitation FILE --party INPUT --sum FILE --result DIR\n"
           "                        --out DIR [--top N] [common]\n"
           "  common: [--lines] [--skip-invalid] [--key-file F] [--format text|json]\n"
           "\n"
           "A site's steps of an LSA across sites (the coordinator creates it with 'fedsvd job\n"
           "create --algorithm lsa'; docs/lsa.md, \"Across sites\"). Every step reads the\n"
           "site's documents again, on the site's machine; no text leaves it.\n"
           "\n"
           "  count  print the site's number of documents (what the coordinator needs for\n"
           "         --party-sizes; every file or line counts, also one without a token)\n"
           "  df     write DIR/df.npy, the site's document frequencies over the job's\n"
           "         features and its number of documents with a token (1 x (D + 1)), and\n"
           "         DIR/df-invitation.json; then: fedsvd join --invitation\n"
           "         DIR/df-invitation.json --data DIR/df.npy --wait, and fetch the sum with\n"
           "         fedsvd participation result ... --out DIR/sum\n"
           "  rows   from the aggregate counts (--sum DIR/sum/sum.npy) alone: the kept\n"
           "         features (--min-df, --max-df) and the smooth IDF log((1 + N) / (1 + df))\n"
           "         + 1; writes DIR/tfidf.npy (one l2-normalised TF-IDF row per document, D\n"
           "         columns, zero for dropped features; documents without a token are zero\n"
           "         rows at the end) and DIR/fedsvd-invitation.json; then: fedsvd join\n"
           "         --invitation DIR/fedsvd-invitation.json --data DIR/tfidf.npy --wait, and\n"
           "         fedsvd participation result ... --out DIR/svd\n"
           "  terms  from the fedsvd result (--result DIR/svd): OUT/S.npy (singular values),\n"
           "         OUT/term_vectors.npy (D x K, shared by all sites), OUT/U.npy (this\n"
           "         site's document vectors, one row per document with a token, named in\n"
           "         OUT/documents.txt), OUT/top_terms.txt (each component's heaviest\n"
           "         features resolved through this site's own words, or the vocabulary),\n"
           "         OUT/df.npy and OUT/summary.json. Each component is oriented so that its\n"
           "         largest-magnitude term weight is positive (as 'fedsvd lsa --central')\n"
           "\n"
           "Options:\n"
           "  --invitation FILE    this site's invitation-<i>.json from the coordinator\n"
           "  --party INPUT        the site's documents: a directory (one document per regular\n"
           "                       file, in name order) or with --lines one per line\n"
           "  --lines              INPUT is a file with one document per line\n"
           "  --skip-invalid       a document that is not UTF-8 counts as one without a token\n"
           "                       (default: an error naming it)\n"
           "  --key-file F         the hashing key, when the invitation holds none\n"
           "  --sum FILE           the document-frequency job's sum.npy\n"
           "  --result DIR         the fedsvd job's result files (S.npy, V.npy, U.npy)\n"
           "  --out DIR            where this step writes (created)\n"
           "  --top N              top terms per component (default %d)\n"
           "  --format F           text (default) or json\n"
           "  -h, --help           show this text\n",
           LSA_TOP_DEFAULT);
}

int cmd_lsa_is_site_step(int argc, char **argv)
{
    return argc >= 2 && (strcmp(argv[1], "count") == 0 || strcmp(argv[1], "df") == 0 ||
                         strcmp(argv[1], "rows") == 0 || strcmp(argv[1], "terms") == 0);
}

int cmd_lsa_site(int argc, char **argv)
{
    char cmd[32];
    struct site S;
    struct cli_opt opts[] = {
        {"invitation", CLI_OPT_VALUE, &S.inv_file, NULL},
        {"party", CLI_OPT_VALUE, &S.input, NULL},
        {"lines", CLI_OPT_FLAG, NULL, &S.lines},
        {"skip-invalid", CLI_OPT_FLAG, NULL, &S.skip_invalid},
        {"key-file", CLI_OPT_VALUE, &S.key_file, NULL},
        {"sum", CLI_OPT_VALUE, &S.sum_file, NULL},
        {"result", CLI_OPT_DIR, &S.result, NULL},
        {"out", CLI_OPT_DIR, &S.out, NULL},
        {"top", CLI_OPT_VALUE, &S.top_s, NULL},
        {"format", CLI_OPT_VALUE, &S.format, NULL},
    };
    const char *step = argv[1], *pos[1];
    size_t npos = 0;
    int help = 0, rc;
    int is_count = strcmp(step, "count") == 0, is_terms = strcmp(step, "terms") == 0;
    int needs_sum = strcmp(step, "rows") == 0 || is_terms;

    memset(&S, 0, sizeof S);
    snprintf(cmd, sizeof cmd, "lsa %s", step);
    S.cmd = cmd;
    S.top = LSA_TOP_DEFAULT;
    rc = cli_parse(cmd, argc - 1, argv + 1, opts, NOPTS(opts), pos, 0, &npos, &help);
    if (rc != CLI_OK) {
        return rc;
    }
    if (help) {
        site_help();
        return CLI_OK;
    }
    if ((rc = cli_parse_format(cmd, S.format, &S.json)) != CLI_OK ||
        (S.top_s != NULL && (rc = cli_parse_size(cmd, "--top", S.top_s, 1, 1000, &S.top)) != 0)) {
        return rc;
    }
    if (S.input == NULL) {
        return cli_usage_error(cmd, "--party INPUT is required");
    }
    if (is_count) {
        if (S.inv_file != NULL || S.sum_file != NULL || S.result != NULL || S.out != NULL ||
            S.key_file != NULL) {
            return cli_usage_error(cmd, "count takes --party, --lines and --format only");
        }
        S.topt.skip_invalid = 1; /* every document counts */
        rc = step_count(&S);
        site_free(&S);
        return rc;
    }
    if (S.inv_file == NULL || S.out == NULL || (needs_sum && S.sum_file == NULL) ||
        (is_terms && S.result == NULL)) {
        return cli_usage_error(cmd, "%s needs --invitation, --party, --out%s%s", step,
                               needs_sum ? ", --sum" : "", is_terms ? ", --result" : "");
    }
    if ((!needs_sum && S.sum_file != NULL) || (!is_terms && (S.result != NULL || S.top_s))) {
        return cli_usage_error(cmd, "--sum is for rows and terms, --result and --top for terms");
    }
    if ((rc = load_bundle(&S)) == CLI_OK) {
        rc = strcmp(step, "df") == 0 ? step_df(&S) : is_terms ? step_terms(&S) : step_rows(&S);
    }
    site_free(&S);
    return rc;
}
