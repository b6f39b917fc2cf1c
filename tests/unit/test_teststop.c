/* The services' testing stop points, their shared part (lib/net/teststop.h):
 * unset, nothing is armed; a value that is not NAME[:N] or that the service
 * does not take is refused with a message naming the variable; a value
 * taken arms it once per data directory (not again once its marker is
 * there); one caller only fires it; the marker is the service's JSON with
 * the process id; a held thread goes on once released. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "net/teststop.h"
#include "test.h"

#define PROMPT 2.0 /* s: "at once", with room for a loaded machine and ASan */

static char g_name[64];
static long g_n;
static int g_calls;

/* Takes "keys" with any N but 0 (as the masking server does). */
static int accept_keys(const char *name, long n)
{
    g_calls++;
    snprintf(g_name, sizeof g_name, "%s", name);
    g_n = n;
    return strcmp(name, "keys") != 0 || n == 0;
}

static const struct fs_teststop_kind KIND = {"the test's", "keys[:P]", "keys or keys:P",
                                             accept_keys};

static double mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_unset(void)
{
    struct fs_err err = {0};
    int armed = 7;

    unsetenv(FS_TESTSTOP_ENV);
    g_calls = 0;
    CHECK_OK(fs_teststop_arm("/nonexistent", &KIND, &armed, &err), &err);
    CHECK(armed == 0 && g_calls == 0);
    setenv(FS_TESTSTOP_ENV, "", 1);
    CHECK_OK(fs_teststop_arm("/nonexistent", &KIND, &armed, &err), &err);
    CHECK(armed == 0 && g_calls == 0);
}

static void test_refused(void)
{
    static const char *const bad[] = {
        ":1",    "keys:",   "keys:x",   "keys:-1", "keys:0", "keys:1x", "keys:99999999999",
        "bogus", "bogus:1", "keys:1:2", ":"};

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct fs_err err = {0};
        int armed = 7;
        int rc;

        setenv(FS_TESTSTOP_ENV, bad[i], 1);
        rc = fs_teststop_arm("/nonexistent", &KIND, &armed, &err);
        CHECK_MSG(rc == FS_EFORMAT, "'%s' gave %d", bad[i], rc);
        CHECK_MSG(armed == 0, "'%s' armed it", bad[i]);
        CHECK_MSG(strncmp(err.msg, FS_TESTSTOP_ENV ": ", strlen(FS_TESTSTOP_ENV) + 2) == 0,
                  "'%s': %s", bad[i], err.msg);
    }
}

static void test_arm_mark_once(void)
{
    char dir[] = "/tmp/test_teststop.XXXXXX";
    char path[128];
    struct fs_err err = {0};
    json_t *m;
    int armed = 0;

    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/%s", dir, FS_TESTSTOP_MARKER);
    setenv(FS_TESTSTOP_ENV, "keys:2", 1);
    CHECK_OK(fs_teststop_arm(dir, &KIND, &armed, &err), &err);
    CHECK(armed == 1 && strcmp(g_name, "keys") == 0 && g_n == 2);
    setenv(FS_TESTSTOP_ENV, "keys", 1);
    CHECK_OK(fs_teststop_arm(dir, &KIND, &armed, &err), &err);
    CHECK(armed == 1 && g_n == -1);
    CHECK(fs_teststop_claim() == 1);
    CHECK(fs_teststop_claim() == 0);
    CHECK(access(path, F_OK) != 0);
    fs_teststop_mark(json_pack("{s:s, s:i}", "phase", "keys", "party", 2), "test stop point");
    m = json_load_file(path, 0, NULL);
    CHECK(json_is_object(m));
    CHECK(json_integer_value(json_object_get(m, "pid")) == (json_int_t)getpid());
    CHECK(json_integer_value(json_object_get(m, "party")) == 2);
    CHECK(strcmp(json_string_value(json_object_get(m, "phase")), "keys") == 0);
    json_decref(m);
    /* the marker is there: the data directory is not stopped in again */
    CHECK_OK(fs_teststop_arm(dir, &KIND, &armed, &err), &err);
    CHECK(armed == 0);
    unlink(path);
    rmdir(dir);
}

static void *holder(void *arg)
{
    int *done = arg;

    fs_teststop_hold();
    __atomic_store_n(done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* last: a release is for good */
static void test_hold_release(void)
{
    pthread_t t;
    int done = 0;
    double t0;

    CHECK(pthread_create(&t, NULL, holder, &done) == 0);
    nanosleep(&(struct timespec){0, 50000000}, NULL);
    CHECK_MSG(__atomic_load_n(&done, __ATOMIC_SEQ_CST) == 0, "the thread was not held");
    t0 = mono_s();
    fs_teststop_release();
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(done == 1 && mono_s() - t0 < PROMPT);
    fs_teststop_hold(); /* released: no wait */
}

int main(void)
{
    RUN(test_unset);
    RUN(test_refused);
    RUN(test_arm_mark_once);
    RUN(test_hold_release);
    return TEST_END("test_teststop");
}
