/* A background thread's start, sleep and stop (see bgthread.h). */
#include "bgthread.h"

#include <string.h>
#include <time.h>

void fs_bgthread_init(struct fs_bgthread *t)
{
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->own_mu, NULL);
    pthread_cond_init(&t->own_cv, NULL);
    t->mu = &t->own_mu;
    t->cv = &t->own_cv;
}

void fs_bgthread_init_shared(struct fs_bgthread *t, pthread_mutex_t *mu, pthread_cond_t *cv)
{
    memset(t, 0, sizeof *t);
    t->mu = mu;
    t->cv = cv;
}

int fs_bgthread_start(struct fs_bgthread *t, void *(*fn)(void *), void *arg, struct fs_err *err)
{
    int rc = pthread_create(&t->th, NULL, fn, arg);

    if (rc != 0) {
        return fs_err_set(err, FS_EIO, "cannot start a thread: %s", strerror(rc));
    }
    t->started = 1;
    return 0;
}

int fs_bgthread_started(const struct fs_bgthread *t)
{
    return t->started;
}

int fs_bgthread_wait(struct fs_bgthread *t, unsigned ms)
{
    struct timespec until;
    long long ns;
    int stop;

    clock_gettime(CLOCK_REALTIME, &until);
    ns = (long long)until.tv_nsec + (long long)(ms % 1000) * 1000000LL;
    until.tv_sec += (time_t)(ms / 1000) + (time_t)(ns / 1000000000LL);
    until.tv_nsec = (long)(ns % 1000000000LL);
    pthread_mutex_lock(t->mu);
    while (!t->stop && !t->woken) {
        /* the time is up, or the owner's broadcast (init_shared); t's own
         * condition variable is broadcast only by stop and wake, so a
         * wakeup without either is spurious and the sleep goes on */
        if (pthread_cond_timedwait(t->cv, t->mu, &until) != 0 || t->cv != &t->own_cv) {
            break;
        }
    }
    t->woken = 0;
    stop = t->stop;
    pthread_mutex_unlock(t->mu);
    return stop;
}

int fs_bgthread_stopping(struct fs_bgthread *t)
{
    int stop;

    pthread_mutex_lock(t->mu);
    stop = t->stop;
    pthread_mutex_unlock(t->mu);
    return stop;
}

void fs_bgthread_wake(struct fs_bgthread *t)
{
    pthread_mutex_lock(t->mu);
    t->woken = 1;
    pthread_cond_broadcast(t->cv);
    pthread_mutex_unlock(t->mu);
}

void fs_bgthread_stop(struct fs_bgthread *t)
{
    pthread_mutex_lock(t->mu);
    t->stop = 1;
    pthread_cond_broadcast(t->cv);
    pthread_mutex_unlock(t->mu);
    if (t->started) {
        pthread_join(t->th, NULL);
        t->started = 0;
    }
    if (t->mu == &t->own_mu) {
        pthread_cond_destroy(&t->own_cv);
        pthread_mutex_destroy(&t->own_mu);
    }
}
