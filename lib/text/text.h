/* Text for latent semantic analysis: a UTF-8 decoder, a tokenizer (Unicode
 * letters, lower-cased), a string set (stop words, a vocabulary, a party's
 * own terms), the documents of one party (a corpus), keyed feature hashing,
 * document frequencies, IDF and TF-IDF rows. No network, no protocol: the
 * CLI moves the aggregate counts through a secure sum.
 *
 * Letters and case: glibc's iswalpha_l and towlower_l under the built-in
 * C.UTF-8 locale (newlocale, never the process's own locale), so what is a
 * letter follows the C library's Unicode tables, the same on every party
 * that runs the same glibc. A token is a maximal run of letters; every other
 * code point (digits, punctuation, spaces, marks) separates tokens.
 *
 * Feature hashing: term t goes to bucket
 *   LE64(HMAC-SHA256(key, "fedsvd-lsa-term-v1" || 0x00 || t)[0..8]) mod D
 * with a 32-byte key the parties share and the servers never see, so nobody
 * without the key can tell which words fall in which bucket. */
#ifndef FS_TEXT_TEXT_H
#define FS_TEXT_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "../core/err.h"
#include "../la/mat.h"

#define FS_TEXT_KEY_LEN   32
#define FS_TEXT_TOKEN_MAX 256         /* bytes of one token; longer runs are cut */
#define FS_TEXT_DOC_MAX   (64u << 20) /* bytes of one document */

/* ---- UTF-8 ---- */

/**
 * Decode the code point at s[*pos] (n bytes in all) and advance *pos.
 * Rejects overlong forms, surrogates, values above U+10FFFF and truncated
 * sequences. @return 0, or -1 (then *pos is unchanged).
 */
int fs_utf8_next(const unsigned char *s, size_t n, size_t *pos, uint32_t *cp);

/** Encode cp (a valid scalar value) into out (4 bytes room); returns the length. */
size_t fs_utf8_put(uint32_t cp, unsigned char *out);

/* ---- a set of strings (interned: each gets an index 0, 1, ...) ---- */

struct fs_text_set;

struct fs_text_set *fs_text_set_new(void);
void fs_text_set_free(struct fs_text_set *s);
size_t fs_text_set_size(const struct fs_text_set *s);

/** Add (if new) and return its index in *index (may be NULL); *added (may be NULL) 1 if new. */
FS_WUR int fs_text_set_add(struct fs_text_set *s, const char *str, size_t len, size_t *index,
                           int *added, struct fs_err *err);

/** The index of str, or SIZE_MAX. */
size_t fs_text_set_find(const struct fs_text_set *s, const char *str, size_t len);

/** The string with index i (NUL-terminated), its length in *len (may be NULL). */
const char *fs_text_set_get(const struct fs_text_set *s, size_t i, size_t *len);

/* ---- tokens ---- */

struct fs_text_opts {
    size_t min_len;                 /* tokens of fewer code points are dropped (0, 1: none) */
    const struct fs_text_set *stop; /* stop words (lower-cased), or NULL */
    int skip_invalid;               /* 1: a document that is not UTF-8 is skipped and
                                       counted; 0: it is an error naming it */
};

/**
 * Call fn for every token of s (n bytes): lower-cased UTF-8, at least
 * o->min_len code points, not a stop word. A token longer than
 * FS_TEXT_TOKEN_MAX bytes is cut at a code point boundary.
 * @return 0; FS_EFORMAT for invalid UTF-8 (the message gives the byte
 *         offset); fn's non-zero return; FS_EINTERNAL if C.UTF-8 is missing.
 */
FS_WUR int fs_text_tokens(const char *s, size_t n, const struct fs_text_opts *o,
                          int (*fn)(void *ctx, const char *tok, size_t len), void *ctx,
                          struct fs_err *err);

/**
 * A word list, one entry per line (a stop-word list or a vocabulary): each
 * line is tokenized as a document; a line must give exactly one token (blank
 * lines and lines starting with '#' are ignored). Duplicates are an error
 * when unique is set, else ignored.
 */
FS_WUR int fs_text_read_words(const char *path, int unique, struct fs_text_set **out,
                              struct fs_err *err);

/* ---- a party's documents ---- */

struct fs_text_doc {
    size_t nnz;      /* distinct terms */
    uint32_t *term;  /* indices into the corpus's terms, ascending */
    uint32_t *count; /* occurrences of each */
};

struct fs_text_corpus {
    size_t ndocs, cap;
    struct fs_text_doc *docs;
    char **source;             /* where each document came from ("file", "file:line") */
    struct fs_text_set *terms; /* the party's own distinct terms */
    uint64_t *term_total;      /* occurrences of each term over the corpus */
    size_t term_cap;
    size_t skipped_empty;   /* documents without a token, skipped */
    size_t skipped_invalid; /* documents not UTF-8, skipped (skip_invalid) */
    uint64_t tokens;        /* tokens kept */
};

FS_WUR int fs_text_corpus_init(struct fs_text_corpus *c, struct fs_err *err);
void fs_text_corpus_clear(struct fs_text_corpus *c);

/**
 * Tokenize one document and add it (an empty one is skipped and counted).
 * Invalid UTF-8: skipped and counted with o->skip_invalid, else FS_EFORMAT
 * naming source and the byte offset.
 */
FS_WUR int fs_text_corpus_add(struct fs_text_corpus *c, const char *text, size_t n,
                              const char *source, const struct fs_text_opts *o, struct fs_err *err);

/** Every regular file of dir (sorted by name, hidden files skipped) is one document. */
FS_WUR int fs_text_corpus_read_dir(struct fs_text_corpus *c, const char *dir,
                                   const struct fs_text_opts *o, struct fs_err *err);

/** Every line of path (LF or CRLF) is one document. */
FS_WUR int fs_text_corpus_read_lines(struct fs_text_corpus *c, const char *path,
                                     const struct fs_text_opts *o, struct fs_err *err);

/* ---- features ---- */

/** The bucket of one term under key, in [0, d). d > 0. */
FS_WUR int fs_text_hash_bucket(const uint8_t key[FS_TEXT_KEY_LEN], const char *term, size_t len,
                               size_t d, uint32_t *bucket, struct fs_err *err);

/**
 * The feature of each of the corpus's terms (a new array of
 * fs_text_set_size(c->terms) entries): its bucket under key (vocab NULL, d
 * buckets), or its index in vocab (UINT32_MAX when not in it; d is then the
 * vocabulary's size).
 */
FS_WUR int fs_text_features(const struct fs_text_corpus *c, const uint8_t *key,
                            const struct fs_text_set *vocab, size_t d, uint32_t **feat,
                            struct fs_err *err);

/** df[f] += the number of documents with a term of feature f (df has d entries). */
void fs_text_df_add(const struct fs_text_corpus *c, const uint32_t *feat, size_t d, double *df);

/**
 * The kept features: df >= max(min_df, 1) and df <= max_df_frac * ndocs.
 * col[f] receives the column of feature f (ascending f), or -1; *ncols the count.
 */
void fs_text_select(const double *df, size_t d, double ndocs, double min_df, double max_df_frac,
                    long *col, size_t *ncols);

/** Smooth IDF of each column: log((1 + N) / (1 + df)) + 1. */
void fs_text_idf(const double *df, size_t d, const long *col, double ndocs, double *idf);

/**
 * TF-IDF rows of the corpus into x (ndocs x ncols, zeroed here), starting
 * at row `row0`: raw term counts times idf, then each row scaled to unit l2
 * norm (a row without a kept feature stays zero; *zero_rows counts them).
 */
void fs_text_tfidf(const struct fs_text_corpus *c, const uint32_t *feat, const long *col,
                   const double *idf, fs_mat *x, size_t row0, size_t *zero_rows);

#endif
