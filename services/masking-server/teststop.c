/* The masking server's testing stop point (see teststop.h). */
#include "teststop.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include <jansson.h>

#include "net/teststop.h"

static struct {
    int armed;
    long party; /* -1: any party */
} g_stop;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static const fs_http_req *g_req; /* the response that fires it, while on its way */
static json_t *g_mark;           /* its marker, written once it was sent */
static atomic_int g_closed;      /* 1: hold every key request from now on */

/* keys[:P] into g_stop. */
static int accept(const char *name, long party)
{
    g_stop.party = party;
    return strcmp(name, MASK_TESTSTOP_KEYS) != 0 || party == 0;
}

static const struct fs_teststop_kind KIND = {"the masking server's", "keys[:P]",
                                             "keys or keys:P, P a party number, 1-based", accept};

int mask_teststop_arm(const char *data_dir, struct fs_err *err)
{
    return fs_teststop_arm(data_dir, &KIND, &g_stop.armed, err);
}

void mask_teststop_gate(void)
{
    if (atomic_load(&g_closed)) {
        fs_teststop_hold();
    }
}

void mask_teststop_served(const fs_http_req *req, const char *maskset, const char *job,
                          uint32_t party, int all)
{
    if (!g_stop.armed || !all || (g_stop.party >= 0 && (long)party != g_stop.party) ||
        !fs_teststop_claim()) {
        return;
    }
    pthread_mutex_lock(&g_mu);
    g_req = req;
    g_mark = json_pack("{s:s, s:s, s:s, s:I}", "maskset", maskset, "job", job, "phase",
                       MASK_TESTSTOP_KEYS, "party", (json_int_t)party);
    atomic_store(&g_closed, 1);
    pthread_mutex_unlock(&g_mu);
}

void mask_teststop_sent(const fs_http_req *req)
{
    json_t *m = NULL;
    int mine = 0;

    if (!g_stop.armed) {
        return;
    }
    pthread_mutex_lock(&g_mu);
    if (g_req != NULL && g_req == req) {
        mine = 1;
        m = g_mark;
        g_mark = NULL;
        g_req = NULL;
    }
    pthread_mutex_unlock(&g_mu);
    if (mine) {
        fs_teststop_mark(m, "test stop point reached: a party's masks were sent, holding every "
                            "later key request until the process is killed");
    }
}

void mask_teststop_release(void)
{
    fs_teststop_release();
}
