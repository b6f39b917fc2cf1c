/* The noise-exchange messages of fedpower-utility (lib/proto/noise_exchange.c)
 * in the modes seed and elementwise, on one small fixed Paillier key (the
 * smallest size a seed fits in: every modular operation is cheap, and the
 * corpus stays valid from run to run), and ot, on a fixed secret. The first
 * input byte b picks the message, the rest is its bytes (b in 240..248:
 * ot mode, (b - 240) % 3 picks the message as b % 6 / 2 does below, with
 * parties 2 and 3 when (b - 240) / 3 is even; other b:
 *   b % 6 = 0 / 1  a public key the party imports (fs_noisex_client_new), seed / elementwise;
 *   b % 6 = 2 / 3  a selector the party answers (respond_seed / respond_noise);
 *   b % 6 = 4 / 5  party 1's response in a fresh round the server closes
 *                  (add_response, then finish); with honest parties 2 and 3
 *                  when (b / 6) is even, with party 2 only when it is odd.
 *                  A response the server rejects ends the round there.
 * Set FUZZ_NOISEX_SEEDS=DIR to write one valid message of each kind
 * there as seed inputs. */
#include "fuzz.h"

#include "lib/proto/noise_exchange.h"

#define NX_PARTIES 3
#define NX_LEN     8

/* A 264-bit Paillier private key (fs_noisex_server_sk_export: the size in
 * bits, then the primes); made for this harness, protects nothing. */
static const uint8_t g_sk[] = {
    0x01, 0x08, 0x0c, 0xcc, 0x23, 0xd8, 0xb4, 0xd4, 0x0c, 0x73, 0xb7, 0x66,
    0x93, 0x2b, 0x1c, 0xbe, 0x90, 0x68, 0x45, 0x0e, 0x37, 0x59, 0x46, 0xdb,
    0xee, 0x4e, 0xc1, 0x8f, 0xfe, 0x96, 0x0e, 0xf9, 0xa6, 0x1a, 0x9e, 0xb1,
};

struct nx {
    struct fs_noisex_params p;
    fs_noisex_server *s;
    fs_noisex_client *c;
    uint8_t *pk;
    size_t pk_len, ct_len, resp_len;
    uint32_t round;
};

/* The ot server's secret (32 bytes; protects nothing). */
static const uint8_t g_ot_sk[32] = {0x6f, 0x74, 0x2d, 0x66, 0x75, 0x7a, 0x7a, 1,
                                    2,    3,    4,    5,    6,    7,    8,    9};

static struct nx g_nx[3];
static uint8_t g_seed[FS_NOISEX_SEED_LEN] = {1, 2, 3};
static int64_t g_noise[NX_LEN] = {1, -1, 500, -500, 0, 77, -77, 3};

static void die(const char *what, const struct fs_err *err)
{
    fprintf(stderr, "fuzz_noisex: %s: %s\n", what, err->msg);
    abort();
}

static int respond(struct nx *x, const uint8_t *sel, size_t sel_len, uint8_t *out,
                   struct fs_err *err)
{
    if (x->p.mode != FS_NOISEX_ELEMENTWISE) {
        return fs_noisex_client_respond_seed(x->c, sel, sel_len, g_seed, out, x->resp_len, err);
    }
    return fs_noisex_client_respond_noise(x->c, sel, sel_len, g_noise, NX_LEN, out, x->resp_len,
                                          err);
}

static void write_seed(const char *dir, const char *name, uint8_t op, const uint8_t *b, size_t n)
{
    char path[4096];
    FILE *f = NULL;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "wb");
    if (f == NULL || fwrite(&op, 1, 1, f) != 1 || fwrite(b, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

static void setup(void)
{
    static int done = 0;
    struct fs_err err = {0};
    const char *dir = getenv("FUZZ_NOISEX_SEEDS");

    if (done) {
        return;
    }
    done = 1;
    for (int m = 0; m < 3; m++) {
        static const char *names[3] = {"seed", "elementwise", "ot"};
        static const uint8_t ops[3][3] = {{0, 2, 4}, {1, 3, 5}, {240, 241, 242}};
        struct nx *x = &g_nx[m];
        uint32_t ids[NX_PARTIES] = {1, 2, 3};
        char name[64];
        x->p.mode = m == 0 ? FS_NOISEX_SEED : m == 1 ? FS_NOISEX_ELEMENTWISE : FS_NOISEX_OT;
        x->p.parties = NX_PARTIES;
        x->p.noise_len = NX_LEN;
        x->p.value_bits = 20;
        if (fs_noisex_server_new_from_key(&x->p, m == 2 ? g_ot_sk : g_sk,
                                          m == 2 ? sizeof g_ot_sk : sizeof g_sk, &x->s,
                                          &err) != 0) {
            die("server", &err);
        }
        x->pk_len = fs_noisex_server_pk_size(x->s);
        x->ct_len = fs_noisex_server_ct_size(x->s);
        x->resp_len = fs_noisex_server_response_size(x->s);
        x->pk = malloc(x->pk_len);
        if (x->pk == NULL || fs_noisex_server_pk_export(x->s, x->pk, x->pk_len, &err) != 0 ||
            fs_noisex_client_new(&x->p, x->pk, x->pk_len, &x->c, &err) != 0) {
            die("key", &err);
        }
        if (dir != NULL) {
            uint8_t *sel = malloc(x->ct_len);
            uint8_t *resp = malloc(x->resp_len);
            x->round++;
            if (sel == NULL || resp == NULL ||
                fs_noisex_server_begin(x->s, x->round, ids, NX_PARTIES, &err) != 0 ||
                fs_noisex_server_selector(x->s, 1, sel, x->ct_len, &err) != 0 ||
                respond(x, sel, x->ct_len, resp, &err) != 0) {
                die("seed", &err);
            }
            snprintf(name, sizeof name, "pk-%s", names[m]);
            write_seed(dir, name, ops[m][0], x->pk, x->pk_len);
            snprintf(name, sizeof name, "selector-%s", names[m]);
            write_seed(dir, name, ops[m][1], sel, x->ct_len);
            snprintf(name, sizeof name, "response-%s", names[m]);
            write_seed(dir, name, ops[m][2], resp, x->resp_len);
            free(sel);
            free(resp);
        }
    }
}

static void import_pk(struct nx *x, const uint8_t *b, size_t n)
{
    struct fs_err err = {0};
    fs_noisex_client *c = NULL;

    if (fs_noisex_client_new(&x->p, b, n, &c, &err) == 0) {
        FUZZ_CHECK(fs_noisex_client_ct_size(c) > 0);
    } else {
        FUZZ_CHECK(c == NULL && err.msg[0] != '\0');
    }
    fs_noisex_client_free(c);
}

static void answer(struct nx *x, const uint8_t *b, size_t n)
{
    struct fs_err err = {0};
    uint8_t *out = malloc(x->resp_len);

    FUZZ_CHECK(out != NULL);
    (void)respond(x, b, n, out, &err);
    free(out);
}

/* A round of parties 1..k in which party 1 sends b; the others answer
 * honestly. */
static void round_with(struct nx *x, uint32_t k, const uint8_t *b, size_t n)
{
    struct fs_err err = {0};
    struct fs_noisex_result res;
    uint32_t ids[NX_PARTIES] = {1, 2, 3};
    uint8_t *sel = malloc(x->ct_len);
    uint8_t *resp = malloc(x->resp_len);
    int rc = 0;

    FUZZ_CHECK(sel != NULL && resp != NULL);
    memset(&res, 0, sizeof res);
    x->round++;
    if (fs_noisex_server_begin(x->s, x->round, ids, k, &err) != 0) {
        die("begin", &err);
    }
    rc = fs_noisex_server_add_response(x->s, 1, b, n, &err);
    FUZZ_CHECK(rc == 0 || fs_noisex_server_has_response(x->s, 1) == 0);
    if (rc != 0) {
        /* rejected: the rest of the round would not depend on b (the
         * next begin drops the open round) */
        free(sel);
        free(resp);
        return;
    }
    /* the same bytes again are accepted */
    FUZZ_CHECK(fs_noisex_server_add_response(x->s, 1, b, n, &err) == 0);
    for (uint32_t id = 2; id <= k; id++) {
        if (fs_noisex_server_selector(x->s, id, sel, x->ct_len, &err) != 0 ||
            respond(x, sel, x->ct_len, resp, &err) != 0 ||
            fs_noisex_server_add_response(x->s, id, resp, x->resp_len, &err) != 0) {
            die("honest party", &err);
        }
    }
    rc = fs_noisex_server_finish(x->s, &res, &err);
    if (rc == 0) {
        FUZZ_CHECK(res.removed <= k - 1);
        for (size_t q = 0; q < res.removed; q++) {
            FUZZ_CHECK(res.ids[q] >= 1 && res.ids[q] <= k && res.ids[q] != res.chosen);
        }
    }
    fs_noisex_result_clear(&res);
    free(sel);
    free(resp);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > FUZZ_MAX_INPUT) {
        return 0;
    }
    setup();
    if (data[0] >= 240 && data[0] <= 248) {
        unsigned b = data[0] - 240u;
        if (b % 3 == 0) {
            import_pk(&g_nx[2], data + 1, size - 1);
        } else if (b % 3 == 1) {
            answer(&g_nx[2], data + 1, size - 1);
        } else {
            round_with(&g_nx[2], NX_PARTIES - (uint32_t)(b / 3 % 2), data + 1, size - 1);
        }
        return 0;
    }
    switch (data[0] % 6) {
    case 0:
    case 1:
        import_pk(&g_nx[data[0] % 2], data + 1, size - 1);
        break;
    case 2:
    case 3:
        answer(&g_nx[data[0] % 2], data + 1, size - 1);
        break;
    default:
        round_with(&g_nx[data[0] % 2], NX_PARTIES - (uint32_t)(data[0] / 6 % 2), data + 1,
                   size - 1);
        break;
    }
    return 0;
}
