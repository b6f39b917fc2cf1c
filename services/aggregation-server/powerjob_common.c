/* Small helpers of the power-method jobs that powerjob.c and
 * powerjob_exchange.c share (see powerjob_internal.h). */
#include <pthread.h>
#include <string.h>

#include "../../api/phase.h"
#include "jobmgr_internal.h"
#include "powerjob_internal.h"

int pj_is_plain(const agg_job *j)
{
    return j->pw != NULL && j->pw->cfg.alg == FS_FEDPOWER_PLAIN;
}

int pj_is_utility(const agg_job *j)
{
    return j->pw != NULL && j->pw->cfg.alg == FS_FEDPOWER_UTILITY;
}

/* sm_mu held: party's answer of the open round is in. */
void pj_mark_sent(agg_job *j, uint32_t party)
{
    struct fs_jobsm_msg msg;

    memset(&msg, 0, sizeof msg);
    msg.kind = pj_is_plain(j) ? FS_JOBSM_PLAIN : FS_JOBSM_NOISE;
    msg.party = party;
    pthread_mutex_lock(&j->mu);
    fs_jobsm_accepted(&j->st, j->sm, &msg);
    pthread_mutex_unlock(&j->mu);
}

int pj_need_power(const agg_job *j, int utility_only, int plain_only, struct fs_err *err)
{
    if (j->pw == NULL) {
        return fs_err_set(err, FS_ENOTFOUND, "only power-method jobs have this resource");
    }
    if (utility_only && !pj_is_utility(j)) {
        return fs_err_set(err, FS_ENOTFOUND, "only fedpower-utility jobs exchange noise");
    }
    if (plain_only && !pj_is_plain(j)) {
        return fs_err_set(err, FS_ENOTFOUND, "only fedpower jobs take plain uploads");
    }
    return 0;
}

/* Check that ev belongs to the open round r of phase ph. */
int pj_replay_in_round(const agg_job *j, const struct agg_event *ev, enum fs_job_phase ph,
                       struct fs_err *err)
{
    if (j->st.phase != ph || ev->idx != j->st.r || ev->party < 1 || ev->party > j->n) {
        return fs_err_set(err, FS_EFORMAT, "not a message of the open %s round",
                          fs_job_phase_name(ph));
    }
    return 0;
}
