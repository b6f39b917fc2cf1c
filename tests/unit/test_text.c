/* lib/text: the UTF-8 decoder, the tokenizer, word lists, a party's corpus,
 * keyed feature hashing, document frequencies, IDF and TF-IDF rows. */
#include "test.h"
#include "text/text.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int decodes(const char *s, size_t n, uint32_t want, size_t want_len)
{
    size_t pos = 0;
    uint32_t cp = 0;

    return fs_utf8_next((const unsigned char *)s, n, &pos, &cp) == 0 && cp == want &&
           pos == want_len;
}

static int rejects(const char *s, size_t n)
{
    size_t pos = 0;
    uint32_t cp = 0;

    return fs_utf8_next((const unsigned char *)s, n, &pos, &cp) != 0 && pos == 0;
}

static void test_utf8(void)
{
    unsigned char b[4];

    CHECK(decodes("A", 1, 'A', 1));
    CHECK(decodes("\xC3\xA9", 2, 0xE9, 2));
    CHECK(decodes("\xE2\x82\xAC", 3, 0x20AC, 3));
    CHECK(decodes("\xF0\x9F\x98\x80", 4, 0x1F600, 4));
    CHECK(decodes("\xF4\x8F\xBF\xBF", 4, 0x10FFFF, 4));
    CHECK(rejects("\x80", 1));             /* a lone continuation byte */
    CHECK(rejects("\xC0\x80", 2));         /* overlong NUL */
    CHECK(rejects("\xC1\xBF", 2));         /* overlong */
    CHECK(rejects("\xE0\x80\x80", 3));     /* overlong 3-byte */
    CHECK(rejects("\xF0\x80\x80\x80", 4)); /* overlong 4-byte */
    CHECK(rejects("\xED\xA0\x80", 3));     /* a surrogate */
    CHECK(rejects("\xF4\x90\x80\x80", 4)); /* above U+10FFFF */
    CHECK(rejects("\xF5\x80\x80\x80", 4)); /* no such lead */
    CHECK(rejects("\xE2\x82", 2));         /* truncated */
    CHECK(rejects("\xC3\x28", 2));         /* bad continuation */
    CHECK(fs_utf8_put(0x20AC, b) == 3 && memcmp(b, "\xE2\x82\xAC", 3) == 0);
    CHECK(fs_utf8_put(0x1F600, b) == 4 && memcmp(b, "\xF0\x9F\x98\x80", 4) == 0);
}

struct toks {
    char buf[512];
    size_t n;
};

static int collect(void *ctx, const char *tok, size_t len)
{
    struct toks *t = ctx;

    if (t->n + len + 2 < sizeof t->buf) {
        if (t->n > 0) {
            t->buf[t->n++] = '|';
        }
        memcpy(t->buf + t->n, tok, len);
        t->n += len;
        t->buf[t->n] = '\0';
    }
    return 0;
}

static void test_tokens(void)
{
    const char *s = "\xC3\x9C"
                    "ber CAF\xC3\x89, na\xC3\xAF"
                    "ve 42 x-ray \xCE\x9A\xCE\xB1\xCE\xBB\xCE\xB7"
                    "\xCE\xBC\xCE\xAD\xCF\x81\xCE\xB1 don't";
    struct fs_text_opts o;
    struct fs_text_set *stop = fs_text_set_new();
    struct toks t;
    struct fs_err err;

    memset(&o, 0, sizeof o);
    memset(&t, 0, sizeof t);
    fs_err_clear(&err);
    CHECK_OK(fs_text_tokens(s, strlen(s), &o, collect, &t, &err), &err);
    /* letters only, lower-cased (also outside ASCII); digits and
     * punctuation separate */
    CHECK_MSG(strcmp(t.buf, "\xC3\xBC"
                            "ber|caf\xC3\xA9|na\xC3\xAF"
                            "ve|x|ray|\xCE\xBA\xCE\xB1\xCE\xBB"
                            "\xCE\xB7\xCE\xBC\xCE\xAD\xCF\x81\xCE\xB1|don|t") == 0,
              "got %s", t.buf);
    memset(&t, 0, sizeof t);
    o.min_len = 3; /* code points, not bytes: "üb" would be 3 bytes */
    CHECK(stop != NULL);
    CHECK_OK(fs_text_set_add(stop, "ray", 3, NULL, NULL, &err), &err);
    o.stop = stop;
    CHECK_OK(fs_text_tokens(s, strlen(s), &o, collect, &t, &err), &err);
    CHECK_MSG(strcmp(t.buf, "\xC3\xBC"
                            "ber|caf\xC3\xA9|na\xC3\xAF"
                            "ve|\xCE\xBA\xCE\xB1\xCE\xBB"
                            "\xCE\xB7\xCE\xBC\xCE\xAD\xCF\x81\xCE\xB1|don") == 0,
              "got %s", t.buf);
    memset(&t, 0, sizeof t);
    CHECK(fs_text_tokens("ok \xFF bad", 8, &o, collect, &t, &err) == FS_EFORMAT);
    CHECK(strstr(err.msg, "byte 3") != NULL);
    fs_text_set_free(stop);
}

static void test_set(void)
{
    struct fs_text_set *s = fs_text_set_new();
    struct fs_err err;
    char w[16];
    size_t idx = 0;
    int added = 0;

    fs_err_clear(&err);
    CHECK(s != NULL);
    for (int i = 0; i < 5000; i++) { /* several growths */
        snprintf(w, sizeof w, "w%d", i);
        CHECK_OK(fs_text_set_add(s, w, strlen(w), &idx, &added, &err), &err);
        CHECK(added && idx == (size_t)i);
    }
    CHECK_OK(fs_text_set_add(s, "w77", 3, &idx, &added, &err), &err);
    CHECK(!added && idx == 77);
    CHECK(fs_text_set_find(s, "w4999", 5) == 4999);
    CHECK(fs_text_set_find(s, "w5000", 5) == SIZE_MAX);
    CHECK(strcmp(fs_text_set_get(s, 12, NULL), "w12") == 0);
    CHECK(fs_text_set_size(s) == 5000);
    fs_text_set_free(s);
}

static char g_dir[64];

static void write_file(const char *name, const char *text)
{
    size_t n = strlen(text);
    char path[128];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    f = fopen(path, "wb");
    if (f != NULL) {
        fwrite(text, 1, n, f);
        fclose(f);
    }
}

static void test_words(void)
{
    struct fs_text_set *s = NULL;
    struct fs_err err;
    char path[128];

    fs_err_clear(&err);
    snprintf(path, sizeof path, "%s/words.txt", g_dir);
    write_file("words.txt", "# a comment\nThe\n\n  and \r\nOF\n");
    CHECK_OK(fs_text_read_words(path, 1, &s, &err), &err);
    CHECK(s != NULL && fs_text_set_size(s) == 3 && fs_text_set_find(s, "the", 3) == 0 &&
          fs_text_set_find(s, "of", 2) == 2);
    fs_text_set_free(s);
    s = NULL;
    write_file("words.txt", "the\nThe\n");
    CHECK(fs_text_read_words(path, 1, &s, &err) == FS_EFORMAT && s == NULL);
    CHECK(strstr(err.msg, ":2:") != NULL);
    CHECK_OK(fs_text_read_words(path, 0, &s, &err), &err); /* stop words: duplicates are fine */
    fs_text_set_free(s);
    s = NULL;
    write_file("words.txt", "two words\n");
    CHECK(fs_text_read_words(path, 0, &s, &err) == FS_EFORMAT && s == NULL);
    CHECK(strstr(err.msg, "more than one word") != NULL);
}

static void test_corpus_bad_and_empty(void)
{
    struct fs_text_corpus c;
    struct fs_text_opts o;
    struct fs_err err;
    char sub[128], path[160];

    fs_err_clear(&err);
    memset(&o, 0, sizeof o);
    snprintf(sub, sizeof sub, "%s/docs", g_dir);
    CHECK(mkdir(sub, 0700) == 0);
    write_file("docs/1.txt", "Hello world");
    write_file("docs/2.txt", "42 -- !!"); /* no letter: empty */
    write_file("docs/3.txt", "caf\xE9 latin-1");
    write_file("docs/.hidden", "not a document");
    write_file("docs/4.txt", "world peace");
    CHECK_OK(fs_text_corpus_init(&c, &err), &err);
    CHECK(fs_text_corpus_read_dir(&c, sub, &o, &err) == FS_EFORMAT);
    CHECK_MSG(strstr(err.msg, "3.txt") != NULL && strstr(err.msg, "byte 3") != NULL, "%s", err.msg);
    fs_text_corpus_clear(&c);
    o.skip_invalid = 1;
    CHECK_OK(fs_text_corpus_init(&c, &err), &err);
    CHECK_OK(fs_text_corpus_read_dir(&c, sub, &o, &err), &err);
    CHECK(c.ndocs == 2 && c.skipped_empty == 1 && c.skipped_invalid == 1);
    CHECK(c.ndocs == 2 && strcmp(c.source[0], "1.txt") == 0 && strcmp(c.source[1], "4.txt") == 0);
    /* the skipped document left no term behind */
    CHECK(fs_text_set_size(c.terms) == 3 && fs_text_set_find(c.terms, "latin", 5) == SIZE_MAX);
    CHECK(c.term_total[fs_text_set_find(c.terms, "world", 5)] == 2);
    fs_text_corpus_clear(&c);
    /* one document per line; CRLF; an empty line is an empty document */
    snprintf(path, sizeof path, "%s/lines.txt", g_dir);
    write_file("lines.txt", "a b b\r\n\nb c\n");
    CHECK_OK(fs_text_corpus_init(&c, &err), &err);
    CHECK_OK(fs_text_corpus_read_lines(&c, path, &o, &err), &err);
    CHECK(c.ndocs == 2 && c.skipped_empty == 1 && c.docs[0].nnz == 2 && c.docs[0].count[1] == 2);
    CHECK(c.ndocs == 2 && strstr(c.source[1], "lines.txt:3") != NULL);
    fs_text_corpus_clear(&c);
}

static void test_hash(void)
{
    uint8_t k1[FS_TEXT_KEY_LEN], k2[FS_TEXT_KEY_LEN];
    struct fs_err err;
    size_t differ = 0;
    char w[16];

    fs_err_clear(&err);
    memset(k1, 0x11, sizeof k1);
    memset(k2, 0x11, sizeof k2);
    k2[31] ^= 1;
    for (int i = 0; i < 200; i++) {
        uint32_t a = 0, a2 = 0, b = 0;
        snprintf(w, sizeof w, "term%d", i);
        CHECK_OK(fs_text_hash_bucket(k1, w, strlen(w), 1000, &a, &err), &err);
        CHECK_OK(fs_text_hash_bucket(k1, w, strlen(w), 1000, &a2, &err), &err);
        CHECK_OK(fs_text_hash_bucket(k2, w, strlen(w), 1000, &b, &err), &err);
        CHECK(a == a2 && a < 1000 && b < 1000);
        differ += a != b;
    }
    /* another key, another assignment (by chance at most a few agree) */
    CHECK_MSG(differ > 190, "%zu of 200 differ", differ);
    {
        /* a known answer, computed with Python's hmac module:
         * LE64(HMAC-SHA256(0x11 * 32, "fedsvd-lsa-term-v1\0cat")[:8]) mod D */
        uint32_t v = 0;
        CHECK_OK(fs_text_hash_bucket(k1, "cat", 3, (size_t)1 << 31, &v, &err), &err);
        CHECK(v == 608545623u);
        CHECK_OK(fs_text_hash_bucket(k1, "cat", 3, 4096, &v, &err), &err);
        CHECK(v == 2903u);
    }
    CHECK(fs_text_hash_bucket(k1, "x", 1, 0, (uint32_t[1]){0}, &err) == FS_EINVAL);
}

/* df, IDF and TF-IDF of a hand-checked example with a vocabulary. */
static void test_tfidf(void)
{
    struct fs_text_corpus c;
    struct fs_text_set *vocab = fs_text_set_new();
    struct fs_err err;
    uint32_t *feat = NULL;
    double df[4] = {0}, idf[4] = {0};
    long col[4];
    size_t ncols = 0, zr = 0;
    fs_mat *x = NULL;

    fs_err_clear(&err);
    CHECK_OK(fs_text_corpus_init(&c, &err), &err);
    CHECK_OK(fs_text_corpus_add(&c, "a b b", 5, "1", NULL, &err), &err);
    CHECK_OK(fs_text_corpus_add(&c, "b c z", 5, "2", NULL, &err), &err);
    CHECK_OK(fs_text_corpus_add(&c, "z z", 3, "3", NULL, &err), &err); /* nothing in vocab */
    CHECK_OK(fs_text_set_add(vocab, "a", 1, NULL, NULL, &err), &err);
    CHECK_OK(fs_text_set_add(vocab, "b", 1, NULL, NULL, &err), &err);
    CHECK_OK(fs_text_set_add(vocab, "c", 1, NULL, NULL, &err), &err);
    CHECK_OK(fs_text_set_add(vocab, "d", 1, NULL, NULL, &err), &err);
    CHECK_OK(fs_text_features(&c, NULL, vocab, 4, &feat, &err), &err);
    fs_text_df_add(&c, feat, 4, df);
    CHECK(df[0] == 1 && df[1] == 2 && df[2] == 1 && df[3] == 0);
    fs_text_select(df, 4, 3, 1, 1.0, col, &ncols); /* d (df 0) dropped */
    CHECK(ncols == 3 && col[0] == 0 && col[1] == 1 && col[2] == 2 && col[3] == -1);
    fs_text_idf(df, 4, col, 3, idf);
    CHECK_NEAR(idf[0], log(4.0 / 2.0) + 1.0, 1e-15);
    CHECK_NEAR(idf[1], log(4.0 / 3.0) + 1.0, 1e-15);
    x = fs_mat_new(3, ncols);
    CHECK(x != NULL);
    if (x != NULL) {
        double a = idf[0], b = 2 * idf[1], n1 = sqrt(a * a + b * b);
        double b2 = idf[1], c2 = idf[2], n2 = sqrt(b2 * b2 + c2 * c2);
        FS_MAT_AT(x, 2, 2) = 7; /* overwritten: zeroed first */
        fs_text_tfidf(&c, feat, col, idf, x, 0, &zr);
        CHECK_NEAR(FS_MAT_AT(x, 0, 0), a / n1, 1e-15);
        CHECK_NEAR(FS_MAT_AT(x, 0, 1), b / n1, 1e-15);
        CHECK_NEAR(FS_MAT_AT(x, 0, 2), 0.0, 0);
        CHECK_NEAR(FS_MAT_AT(x, 1, 1), b2 / n2, 1e-15);
        CHECK_NEAR(FS_MAT_AT(x, 1, 2), c2 / n2, 1e-15);
        CHECK(zr == 1 && FS_MAT_AT(x, 2, 0) == 0 && FS_MAT_AT(x, 2, 2) == 0);
    }
    /* pruning by the aggregate counts: min_df 2 keeps b only; max_df 0.5
     * of 3 documents drops b (df 2 > 1.5) */
    fs_text_select(df, 4, 3, 2, 1.0, col, &ncols);
    CHECK(ncols == 1 && col[1] == 0 && col[0] == -1);
    fs_text_select(df, 4, 3, 1, 0.5, col, &ncols);
    CHECK(ncols == 2 && col[1] == -1 && col[0] == 0 && col[2] == 1);
    fs_mat_free(x);
    free(feat);
    fs_text_set_free(vocab);
    fs_text_corpus_clear(&c);
}

/* Hashing merges a bucket's terms: counts add up, df counts a document once. */
static void test_hashed_df(void)
{
    struct fs_text_corpus c;
    struct fs_err err;
    uint8_t key[FS_TEXT_KEY_LEN];
    uint32_t *feat = NULL;
    double df[1] = {0};

    fs_err_clear(&err);
    memset(key, 7, sizeof key);
    CHECK_OK(fs_text_corpus_init(&c, &err), &err);
    CHECK_OK(fs_text_corpus_add(&c, "x y y", 5, "1", NULL, &err), &err);
    CHECK_OK(fs_text_corpus_add(&c, "y", 1, "2", NULL, &err), &err);
    CHECK_OK(fs_text_features(&c, key, NULL, 1, &feat, &err), &err); /* one bucket */
    fs_text_df_add(&c, feat, 1, df);
    CHECK(df[0] == 2);
    free(feat);
    fs_text_corpus_clear(&c);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "/tmp/fs-test-text-XXXXXX");
    if (mkdtemp(g_dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_utf8);
    RUN(test_tokens);
    RUN(test_set);
    RUN(test_words);
    RUN(test_corpus_bad_and_empty);
    RUN(test_hash);
    RUN(test_tfidf);
    RUN(test_hashed_df);
    {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        if (system(cmd) != 0) {
            fprintf(stderr, "could not remove %s\n", g_dir);
        }
    }
    return TEST_END("test_text");
}
