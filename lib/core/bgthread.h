/* fs_bgthread: a background thread that does a round of work, sleeps a
 * while (or until woken), and stops on request. It holds the one copy of
 * the stop sequence every such thread needs: set the stop flag under the
 * mutex, broadcast the condition variable, join the thread, destroy the
 * mutex and condition variable.
 *
 * The owner embeds a struct fs_bgthread, calls fs_bgthread_init (or
 * fs_bgthread_init_shared), fs_bgthread_start, and at the end
 * fs_bgthread_stop, whether or not the start succeeded. The thread's
 * function loops on fs_bgthread_wait, which returns 1 once the thread is to
 * stop:
 *
 *     while (!fs_bgthread_wait(&o->bt, 1000)) {
 *         do_work(o);
 *     }
 *
 * Deadlines are on CLOCK_REALTIME (pthread_cond_timedwait's default). */
#ifndef FS_CORE_BGTHREAD_H
#define FS_CORE_BGTHREAD_H

#include <pthread.h>

#include "err.h"

/* Fields are private to lib/core/bgthread.c; the struct is public only so
 * that owners can embed it. */
struct fs_bgthread {
    pthread_mutex_t own_mu;
    pthread_cond_t own_cv;
    pthread_mutex_t *mu; /* &own_mu, or the owner's (fs_bgthread_init_shared) */
    pthread_cond_t *cv;  /* &own_cv, or the owner's */
    pthread_t th;
    int stop;    /* mu */
    int woken;   /* mu: fs_bgthread_wake since the last fs_bgthread_wait returned */
    int started; /* the thread runs (joined by fs_bgthread_stop) */
};

/** Initialise t with its own mutex and condition variable: only
 * fs_bgthread_stop and fs_bgthread_wake end a wait early. */
void fs_bgthread_init(struct fs_bgthread *t);

/**
 * Initialise t on the owner's mutex and condition variable (borrowed: they
 * must outlive t, and fs_bgthread_stop does not destroy them). A wait then
 * also ends on every broadcast of cv by the owner, so that the thread can
 * react to the owner's other events; the owner must not hold mu when it
 * calls the functions below.
 */
void fs_bgthread_init_shared(struct fs_bgthread *t, pthread_mutex_t *mu, pthread_cond_t *cv);

/**
 * Start fn(arg) on a new thread. On failure t stays initialised, not
 * started (fs_bgthread_stop still releases it).
 * @return 0, or FS_EIO when the thread cannot be created.
 */
FS_WUR int fs_bgthread_start(struct fs_bgthread *t, void *(*fn)(void *), void *arg,
                             struct fs_err *err);

/** 1 when t's thread was started (and is not stopped yet). */
int fs_bgthread_started(const struct fs_bgthread *t);

/**
 * Sleep up to ms milliseconds: until fs_bgthread_stop, an fs_bgthread_wake
 * since the last wait returned (it is then consumed), the time is up, or
 * (fs_bgthread_init_shared) a broadcast of the owner's condition variable.
 * Returns at once when one of the first two already happened.
 * @return 1 when the thread is to stop, else 0.
 */
int fs_bgthread_wait(struct fs_bgthread *t, unsigned ms);

/** 1 when fs_bgthread_stop was called (for long work to check between steps). */
int fs_bgthread_stopping(struct fs_bgthread *t);

/** End the current (or the next) wait early: another round of work is due. */
void fs_bgthread_wake(struct fs_bgthread *t);

/**
 * Stop: set the stop flag under the mutex, broadcast, join the thread (when
 * started; its current round of work finishes first), then destroy the
 * mutex and condition variable when they are t's own. t is then unusable
 * until initialised again.
 */
void fs_bgthread_stop(struct fs_bgthread *t);

#endif
