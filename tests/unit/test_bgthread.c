/* fs_bgthread (lib/core/bgthread.h): a thread that sleeps long is woken
 * and stopped promptly and sees the stop flag; a wait without a wake lasts
 * its time; a wake before the wait is kept for it and consumed; a thread
 * that never started is released; on the owner's mutex and condition
 * variable the owner's broadcast ends the wait and stop leaves them alive. */
#include <time.h>

#include "core/bgthread.h"
#include "test.h"

#define LONG_MS 60000 /* a sleep no case waits out */
#define PROMPT  2.0   /* s: "at once", with room for a loaded machine and ASan */

static double mono_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct sleeper {
    struct fs_bgthread bt;
    pthread_mutex_t mu; /* the counters; bt's too in test_shared */
    pthread_cond_t cv;  /* bt's in test_shared */
    int rounds;         /* waits that returned 0 */
    int saw_stop;       /* a wait returned 1 */
};

static void *sleeper_main(void *arg)
{
    struct sleeper *s = arg;

    while (!fs_bgthread_wait(&s->bt, LONG_MS)) {
        pthread_mutex_lock(&s->mu);
        s->rounds++;
        pthread_mutex_unlock(&s->mu);
    }
    pthread_mutex_lock(&s->mu);
    s->saw_stop = 1;
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

static int rounds_of(struct sleeper *s)
{
    int n;

    pthread_mutex_lock(&s->mu);
    n = s->rounds;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* Start, wake twice, stop: each within PROMPT although the thread sleeps LONG_MS. */
static void test_wake_and_stop_prompt(void)
{
    struct sleeper s = {0};
    struct fs_err err = {0};
    double t0;

    pthread_mutex_init(&s.mu, NULL);
    fs_bgthread_init(&s.bt);
    CHECK(!fs_bgthread_started(&s.bt));
    CHECK_OK(fs_bgthread_start(&s.bt, sleeper_main, &s, &err), &err);
    CHECK(fs_bgthread_started(&s.bt));
    CHECK(!fs_bgthread_stopping(&s.bt));
    for (int want = 1; want <= 2; want++) {
        t0 = mono_s();
        fs_bgthread_wake(&s.bt);
        while (rounds_of(&s) < want && mono_s() - t0 < PROMPT) {
            nanosleep(&(struct timespec){0, 1000000}, NULL);
        }
        CHECK_MSG(rounds_of(&s) == want, "round %d: %d rounds after %.3f s", want, rounds_of(&s),
                  mono_s() - t0);
    }
    t0 = mono_s();
    fs_bgthread_stop(&s.bt);
    CHECK_MSG(mono_s() - t0 < PROMPT, "stop took %.3f s", mono_s() - t0);
    CHECK(!fs_bgthread_started(&s.bt));
    CHECK(s.saw_stop == 1);
    CHECK(s.rounds == 2); /* stop is no round of work */
    pthread_mutex_destroy(&s.mu);
}

/* Nobody wakes it: the wait lasts its time (spurious wakeups included) and returns 0. */
static void test_wait_lasts(void)
{
    struct fs_bgthread bt;
    double t0;
    int stop;

    fs_bgthread_init(&bt);
    t0 = mono_s();
    stop = fs_bgthread_wait(&bt, 150);
    CHECK(stop == 0);
    CHECK_MSG(mono_s() - t0 >= 0.145, "waited %.3f s of 0.150", mono_s() - t0);
    fs_bgthread_stop(&bt);
}

/* A wake before the wait is kept (no lost wakeup) and consumed by one wait. */
static void test_wake_kept_then_consumed(void)
{
    struct fs_bgthread bt;
    double t0;

    fs_bgthread_init(&bt);
    fs_bgthread_wake(&bt);
    t0 = mono_s();
    CHECK(fs_bgthread_wait(&bt, LONG_MS) == 0);
    CHECK_MSG(mono_s() - t0 < PROMPT, "woken wait took %.3f s", mono_s() - t0);
    t0 = mono_s();
    CHECK(fs_bgthread_wait(&bt, 100) == 0);
    CHECK_MSG(mono_s() - t0 >= 0.095, "the wake counted twice: %.3f s", mono_s() - t0);
    fs_bgthread_stop(&bt);
}

/* Stop of a thread that never started (a failed start's clean-up): no join, released. */
static void test_stop_unstarted(void)
{
    struct fs_bgthread bt;

    fs_bgthread_init(&bt);
    fs_bgthread_stop(&bt);
    CHECK(!fs_bgthread_started(&bt));
}

/* On the owner's mutex and condition variable: the owner's own broadcast ends the wait,
 * stop is prompt, and the owner's mutex and condition variable stay usable after it. */
static void test_shared(void)
{
    struct sleeper o = {0};
    struct fs_err err = {0};
    double t0;
    int n = 0;

    pthread_mutex_init(&o.mu, NULL);
    pthread_cond_init(&o.cv, NULL);
    fs_bgthread_init_shared(&o.bt, &o.mu, &o.cv);
    CHECK_OK(fs_bgthread_start(&o.bt, sleeper_main, &o, &err), &err);
    t0 = mono_s();
    while (n == 0 && mono_s() - t0 < PROMPT) {
        pthread_mutex_lock(&o.mu);
        pthread_cond_broadcast(&o.cv); /* the owner's event, no fs_bgthread_wake */
        n = o.rounds;
        pthread_mutex_unlock(&o.mu);
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    }
    CHECK_MSG(n >= 1, "the owner's broadcast did not end the wait");
    t0 = mono_s();
    fs_bgthread_stop(&o.bt);
    CHECK_MSG(mono_s() - t0 < PROMPT, "stop took %.3f s", mono_s() - t0);
    CHECK(o.saw_stop == 1);
    CHECK(pthread_mutex_lock(&o.mu) == 0); /* not destroyed by stop */
    CHECK(pthread_mutex_unlock(&o.mu) == 0);
    CHECK(pthread_cond_destroy(&o.cv) == 0);
    CHECK(pthread_mutex_destroy(&o.mu) == 0);
}

int main(void)
{
    RUN(test_wake_and_stop_prompt);
    RUN(test_wait_lasts);
    RUN(test_wake_kept_then_consumed);
    RUN(test_stop_unstarted);
    RUN(test_shared);
    return TEST_END("test_bgthread");
}
